"""The DVC pipeline, generated: ``python -m isogclr pipeline`` writes ``dvc.yaml`` from ``params.yaml``.

``dvc.yaml`` and ``pipelines/<family>/dvc.yaml`` (one file per family of training runs, each with its own
small ``dvc.lock``: :func:`pipeline_files`) are outputs of this module, never edited by hand;
``python -m isogclr pipeline --check`` (run by the tests) fails when a committed file differs from what
``params.yaml`` and the code give.

What it writes, one stage family per kind of work:

* the generated data sets, one stage per folder declared in :data:`isogclr.dataset_specs.GENERATED`
  (``synthetic``, ``synthetic_pairs``, ``fashion_mnist_mini``);
* the selection of each tuned method on a validation split (``tune``: ``tuning``; ``tune_bimodal``:
  ``bimodal_tuning``), one stage per method;
* the grid runs of each table section (``train``: ``table1``; ``train_real``: ``table1_real``;
  ``train_table3``: ``table3``; ``train_bimodal``: ``bimodal.methods``; ``train_bimodal_side``:
  ``bimodal.side_methods``), one DVC ``matrix`` each, so that every
  run depends only on its own method's parameters (``methods.${item.method}``): ``dvc exp run -S
  methods.isogclr.tau_min=0.02`` reruns the iSogCLR runs and the reports that read them;
* one stage per one-knob study, all from one template (``study_<name>``: ``studies.<name>`` or
  ``bimodal_studies.<name>`` of params.yaml); the report named by the study's ``report`` key reads it;
* the convergence study's runs (``emc2_convergence_runs``);
* one papermill stage per report (:data:`isogclr.reports.report_table.REPORTS`), and the index.

Each family's methods, datasets, values and seeds are those of its planned runs
(:func:`isogclr.config.plan.plan_keys`, the one list of a profile's runs, read without any selection).

**Code dependencies are derived, not listed.** A stage's code is the transitive closure of the
``isogclr`` modules that its entry modules import (every ``import`` statement of a module, at any
depth, including the imports inside functions, but not those under ``if TYPE_CHECKING:``, which never run;
a package's ``__init__.py`` whenever one of its modules is imported), from grimp's import graph
(:func:`~isogclr.code_deps.module_closure`), plus the
modules a run imports by name: its methods' losses and its datasets' loaders
(:func:`~isogclr.code_deps.run_modules`);
the image-text config, which the selection code imports by name for ``bimodal_tuning`` only, is among the
image-text stages' entry modules (:data:`BIMODAL_ENTRY`). An edit anywhere on a run's path therefore
reruns it, and an edit elsewhere (an image-text loss, for a unimodal run) does not. The command line
(``cli.py``, ``commands.py``) is left out on purpose: it only parses arguments and calls the entry modules named
here, and listing it would make every stage depend on every command; so is the validation of the whole
params.yaml, which can refuse a run but not change it. A run's losses and datasets are read from params.yaml
when the pipeline is generated: after changing a method's ``loss`` or a section's methods or datasets,
regenerate it (``python -m isogclr pipeline``; ``make repro`` does).
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .code_deps import by_method, module_closure, run_modules
from .config.convergence import CONVERGENCE_METHODS
from .config.plan import CONVERGENCE, SIDE, STUDY_SECTIONS, Axes, RunKey, plan_axes, plan_keys
from .config.studies import study_reports
from .config.typed import ConfigError
from .dataset_specs import GENERATED
from .pipeline_stages import (
    RUN_PARAMS,
    bimodal_inputs,
    bimodal_stage,
    data_deps,
    data_stage,
    foreach_by_method,
    grid_stage,
    report_stage,
    study_stage,
    tune_stage,
)
from .reports.report_table import REPORTS

# The modules each kind of stage runs (its entry points: the trainer and the config readers its command calls);
# everything they import follows. The validation of the whole params.yaml (isogclr.config.validate) is left out:
# every command runs it first, and it can refuse a run but not change its numbers.
# a grid section's runs (Table 1 and its kin: a run config, the selection when tuned: config.selection) and a
# study's runs (the same, resolved through the study's overrides); an image-text run (config.bimodal, which reads
# its selection through config.selection too)
GRID_ENTRY = ("isogclr.train.loop", "isogclr.config.core", "isogclr.config.selection")
TRAIN_ENTRY = (*GRID_ENTRY, "isogclr.config.studies")
BIMODAL_ENTRY = ("isogclr.train.bimodal", "isogclr.config.core", "isogclr.config.bimodal")
REFERENCES_ENTRY = ("isogclr.train.references", "isogclr.config.core", "isogclr.config.sections")
CONVERGENCE_ENTRY = ("isogclr.train.convergence", "isogclr.config.core")

# the table sections of params.yaml that are grids of unimodal runs, and their stage names
GRID_STAGES = {"table1": "train", "table1_real": "train_real", "table3": "train_table3",
               "references": "train_references", "pretrain": "train_pretrain"}
# a selection stage runs the selection and its modality's trainer (the CLI passes it)
TUNE_ENTRY = {"tuning": ("isogclr.train.tuning", *TRAIN_ENTRY),
              "bimodal_tuning": ("isogclr.train.tuning", *BIMODAL_ENTRY)}
TUNE_STAGES = {"tuning": "tune", "bimodal_tuning": "tune_bimodal"}


@dataclass(frozen=True)
class _Runs:
    """What every kind of stage reads: params.yaml, the project root, and the axes of the planned runs by group
    (:func:`~isogclr.config.plan.plan_axes`)."""

    params: dict[str, Any]
    root: Path
    axes: dict[str, Axes]

    def code(self, entry: tuple[str, ...], methods: tuple[str, ...], datasets: tuple[str, ...] = ()) -> list[str]:
        """The source files of ``entry`` and of the modules runs of ``methods`` on ``datasets`` import by name."""
        return module_closure([*entry, *run_modules(self.params, methods, datasets)], self.root)

    def per_method(self, stage: dict[str, Any], entry: tuple[str, ...], axes: dict[str, list],
                   datasets: tuple[str, ...] = ()) -> dict[str, Any]:
        """``stage`` with each method's runs depending on its own loss module (:func:`by_method`)."""
        if len(set(axes["method"])) < 2:  # one method: its code is the family's
            return stage
        split = by_method(self.params, axes["method"], lambda methods: self.code(entry, methods, datasets))
        return stage if split is None else foreach_by_method(stage, axes, split[1])


def build_pipeline(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    """The ``dvc.yaml`` document for ``params`` (a dict, as read from params.yaml): its stages kind by kind, each
    kind's runs those of the plan (:func:`~isogclr.config.plan.plan_keys`)."""
    keys = plan_keys(params)
    runs = _Runs(params, Path(root), plan_axes(keys))
    studies, reads_study = _study_stages(runs)
    stages = {**_data_stages(runs.root), **_tune_stages(runs), **_grid_stages(runs), **_references_stage(runs),
              **_bimodal_stages(runs), **studies, **_convergence_stage(runs), **_report_stages(runs, reads_study),
              "index": _index_stage(runs.root)}
    return {"stages": stages, "plots": comparison_plots(keys)}


def _data_stages(root: Path) -> dict[str, Any]:
    """One stage per generated folder (:data:`isogclr.dataset_specs.GENERATED`)."""
    return {g.stage: data_stage(g, root) for g in GENERATED.values()}


def _tune_stages(runs: _Runs) -> dict[str, Any]:
    """One family per selection section (``tune``, ``tune_bimodal``): a stage per method, running its candidates."""
    stages = {}
    for section, name in TUNE_STAGES.items():
        if section in runs.axes:
            axes, entry = runs.axes[section], TUNE_ENTRY[section]
            stage = tune_stage(section, runs.params, axes, runs.code(entry, axes.methods, axes.datasets))
            stages[name] = runs.per_method(stage, entry, {"method": list(axes.methods)}, axes.datasets)
    return stages


def _grid_stages(runs: _Runs) -> dict[str, Any]:
    """One family per table section (:data:`GRID_STAGES`): a stage per (method, dataset), running its seeds."""
    stages = {}
    for section, name in GRID_STAGES.items():
        if section in runs.axes:
            axes = runs.axes[section]
            stage = grid_stage(section, axes, bool(runs.params[section].get("tuned")),
                               runs.code(GRID_ENTRY, axes.methods, axes.datasets))
            stages[name] = runs.per_method(stage, GRID_ENTRY, {"method": list(axes.methods),
                                                               "dataset": list(axes.datasets)}, axes.datasets)
    return stages


def _references_stage(runs: _Runs) -> dict[str, Any]:
    """The no-learning rows of each dataset of ``references`` (the supervised one is a grid run)."""
    if "references" not in runs.axes:
        return {}
    axes = runs.axes["references"]
    return {"references": {
        "matrix": {"dataset": "${references.datasets}"},
        "cmd": "${launcher} -m isogclr references --dataset ${item.dataset}",
        "deps": data_deps(axes.datasets) + runs.code(REFERENCES_ENTRY, axes.methods, axes.datasets),
        "params": [p for p in RUN_PARAMS if "${item.method}" not in p] + ["references.random_inits"],
        "metrics": [{"runs/references/${item.dataset}/metrics.json": {"cache": False}}],
    }}


def _bimodal_stages(runs: _Runs) -> dict[str, Any]:
    """The image-text runs: a stage per central method (``train_bimodal``) and per side method
    (``train_bimodal_side``), each running its seeds."""
    stages, inputs = {}, bimodal_inputs(runs.params)
    tuned = bool((runs.params.get("bimodal") or {}).get("tuned"))  # the side methods are not tuned
    for group, key, name in (("bimodal", "methods", "train_bimodal"), (SIDE, "side_methods", "train_bimodal_side")):
        if group in runs.axes:
            axes = runs.axes[group]
            stages[name] = bimodal_stage(key, axes.seeds, tuned and key == "methods",
                                         runs.code(BIMODAL_ENTRY, axes.methods), inputs)
    return stages


def _study_stages(runs: _Runs) -> tuple[dict[str, Any], dict[str, list[tuple[str, str]]]]:
    """One family per study (``study_<name>``, all from one template), and the studies each report reads: report ->
    [(study, section)]."""
    stages: dict[str, Any] = {}
    reads_study: dict[str, list[tuple[str, str]]] = {}
    for section in STUDY_SECTIONS:
        bimodal = section == "bimodal_studies"
        entry = BIMODAL_ENTRY if bimodal else TRAIN_ENTRY
        for name, spec in (runs.params.get(section) or {}).items():
            axes = runs.axes[f"{section}.{name}"]
            code = runs.code(entry, axes.methods, axes.datasets)
            stage = study_stage(name, axes, bool(spec.get("tuned")), bimodal, code,
                                bimodal_inputs(runs.params, spec.get("overrides")))
            # an image-text study's runs are (method, value, seed): one list for all
            stages[f"study_{name}"] = stage if bimodal else runs.per_method(
                stage, entry, {"method": list(axes.methods)}, axes.datasets)
            for report in study_reports(spec.get("report")):
                reads_study.setdefault(report, []).append((name, section))
    return stages, reads_study


def _convergence_stage(runs: _Runs) -> dict[str, Any]:
    """EMC2's convergence study's runs, in one stage (``emc2_convergence_runs``)."""
    if CONVERGENCE not in runs.axes:
        return {}
    datasets = runs.axes[CONVERGENCE].datasets
    return {"emc2_convergence_runs": {
        "cmd": "python -m isogclr convergence --out runs_convergence",
        "deps": [*data_deps(datasets), *runs.code(CONVERGENCE_ENTRY, CONVERGENCE_METHODS, datasets)],
        "params": ["data.root", "model", "augment", "methods.simclr", "methods.sogclr", "methods.emc2.beta",
                   "emc2_convergence"],
        "outs": [{"runs_convergence": {"cache": False}}],
    }}


def _report_stages(runs: _Runs, reads_study: dict[str, list[tuple[str, str]]]) -> dict[str, Any]:
    """One papermill stage per report, each on the studies it reads (``reads_study``)."""
    unknown = sorted(set(reads_study) - set(REPORTS))
    if unknown:
        raise ConfigError(f"studies.*.report: unknown report(s) {unknown} (reports: {sorted(REPORTS)})")
    return {name: report_stage(name, report, reads_study.get(name, []), runs.root, runs.params)
            for name, report in REPORTS.items()}


def _index_stage(root: Path) -> dict[str, Any]:
    """The reports' index (``reports/index.html``, ``reports/README.md``)."""
    return {
        "cmd": "python -m isogclr report-index " + " ".join(REPORTS),
        "deps": [*module_closure(("isogclr.reports.index",), root),
                 *(f"reports/{name}.ipynb" for name in REPORTS), "reports/verdicts"],
        "params": ["profile"],
        "outs": [{out: {"cache": False}} for out in ("reports/index.html", "reports/README.md", "reports/html")],
    }


def comparison_plots(keys: list[RunKey]) -> list[dict[str, Any]]:
    """Top-level plots that compare planned runs (``keys``): Table 1's methods' loss curves (first dataset and
    seed, one chart), and the batch-size study's 1-NN accuracy against samples seen (first seed, one chart)."""
    plots = []
    table1 = [k for k in keys if k.group == "table1"]
    if table1:
        dataset, seed = table1[0].dataset, table1[0].seed
        plots.append({f"table1_loss_{dataset}": {
            "x": "epoch", "title": f"Table 1 methods on {dataset}, seed {seed}: training loss",
            "y": {f"{k.run_dir}/train_log.csv": "loss" for k in table1 if (k.dataset, k.seed) == (dataset, seed)}}})
    study = [k for k in keys if k.group == "studies.batch_size"]
    if study:
        plots.append({"batch_size_knn": {
            "x": "samples_seen", "title": "Batch-size study: 1-NN test accuracy against samples seen",
            "y": {f"{k.run_dir}/train_log.csv": "knn1_top1" for k in study if k.seed == study[0].seed}}})
    return plots


HEADER = """\
# Generated by `python -m isogclr pipeline` from params.yaml and the code's imports: do not edit by hand.
# Each training run depends only on its own method's parameters (`dvc exp run -S methods.isogclr.tau_min=0.02`
# reruns the iSogCLR runs and the reports that read them) and on every module on its import path.
"""
RUN_FAMILIES = ("tune", "train", "train_real", "train_table3", "train_references", "references",
                "train_bimodal", "study_")
FAMILY_DIR = "pipelines"


def pipeline_files(params: dict[str, Any], root: Path = Path(".")) -> dict[str, dict[str, Any]]:
    """The pipeline split by family: ``dvc.yaml`` (data, reports, index) and ``pipelines/<stage>/dvc.yaml``
    (one per family of training runs), each with its own ``dvc.lock``.

    Why: DVC reads and rewrites a stage's whole lock file around every stage it runs; with one
    ``dvc.lock`` for all ~85 stages (~300 KB) that cost ~9 s per stage more than a small one
    (measured with ``dvc repro --single-item`` of a one-line stage beside each lock file). A family's
    file runs from the project root (``wdir: ../..``) and reads params.yaml's values (``vars``), so
    ``dvc exp run -S`` and every path behave as in a single file; its stages are addressed as
    ``pipelines/<family>/dvc.yaml:<stage>@<item>``.
    """
    document = build_pipeline(params, root)
    files: dict[str, dict[str, Any]] = {}
    main: dict[str, Any] = {}
    for name, stage in document["stages"].items():
        if name.startswith(RUN_FAMILIES):
            if "foreach" in stage:  # a family per method: the working directory is its template's
                stage = {**stage, "do": {"wdir": "../..", **stage["do"]}}
            else:
                stage = {"wdir": "../..", **stage}
            files[f"{FAMILY_DIR}/{name}/dvc.yaml"] = {"vars": ["../../params.yaml"], "stages": {name: stage}}
        else:
            main[name] = stage
    return {"dvc.yaml": {"stages": main, "plots": document["plots"]}, **files}


def render(params: dict[str, Any], root: Path = Path(".")) -> dict[str, str]:
    """Each pipeline file's text, by its path relative to the project root."""
    return {path: HEADER + yaml.safe_dump(doc, sort_keys=False, width=120)
            for path, doc in pipeline_files(params, root).items()}


def main(params_path: str = "params.yaml", out: str = "dvc.yaml", check: bool = False) -> int:
    """Write the pipeline files beside ``out`` (or, with ``check``, report whether they differ);
    exit code 1 when one is stale. Family files of families no longer in params.yaml are removed."""
    from .config.profiles import load_params
    from .config.validate import validate_params

    params = load_params(params_path)
    validate_params(params)
    root = Path(out).resolve().parent
    texts = render(params, root)
    texts[Path(out).name] = texts.pop("dvc.yaml")
    stale = {path: text for path, text in texts.items()
             if not (root / path).exists() or (root / path).read_text() != text}
    extra = sorted(p.relative_to(root).as_posix() for p in (root / FAMILY_DIR).glob("*/dvc.yaml")
                   if p.relative_to(root).as_posix() not in texts)
    if not stale and not extra:
        print(f"{out} and {len(texts) - 1} family files: up to date with {params_path}")
        return 0
    if check:
        for path, text in stale.items():
            current = (root / path).read_text() if (root / path).exists() else ""
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), f"{path} (committed)",
                                        f"{path} (generated)", lineterm="", n=1)
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        for path in extra:
            print(f"{path}: not generated from {params_path} (a family that no longer exists)", file=sys.stderr)
        print(f"{out} is stale: run `python -m isogclr pipeline`", file=sys.stderr)
        return 1
    from .io import save_text

    for path, text in stale.items():
        save_text(text, root / path)
    for path in extra:  # a family removed from params.yaml: its file and lock go, its runs stay on disk
        for name in ("dvc.yaml", "dvc.lock"):
            (root / path).with_name(name).unlink(missing_ok=True)
        print(f"removed {path} and its lock file")
    print(f"wrote {', '.join(sorted(stale))}")
    return 0
