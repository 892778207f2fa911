"""The DVC pipeline, generated: ``python -m isogclr pipeline`` writes ``dvc.yaml`` from ``params.yaml``.

``dvc.yaml`` and ``pipelines/<family>/dvc.yaml`` (one file per family of training runs, each with its own
small ``dvc.lock``: :func:`pipeline_files`) are outputs of this module, never edited by hand;
``python -m isogclr pipeline --check`` (run by the tests) fails when a committed file differs from what
``params.yaml`` and the code give.

What it writes, one stage family per kind of work:

* the generated data sets (``synthetic``, ``synthetic_pairs``, ``fashion_mnist_mini``);
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
* one papermill stage per report (:data:`REPORTS`), and the index.

**Code dependencies are derived, not listed.** A stage's code is the transitive closure of the
``isogclr`` modules that its entry modules import (every ``import`` statement of a module, at any
depth, including the imports inside functions, but not those under ``if TYPE_CHECKING:``, which never run;
a package's ``__init__.py`` whenever one of its modules is imported; the module behind a name a package
imports on first access), read from the source with :mod:`ast` (:func:`module_closure`), plus the modules a
run imports by name: its methods' losses and its datasets' loaders (:func:`run_modules`, from the registries);
the image-text config, which the selection code imports by name for ``bimodal_tuning`` only, is among the
image-text stages' entry modules (:data:`BIMODAL_ENTRY`). An edit anywhere on a run's path therefore
reruns it, and an edit elsewhere (an image-text loss, for a unimodal run) does not. The command-line
dispatcher (``cli.py``) is left out on purpose: it only parses arguments and calls the entry modules named
here, and listing it would make every stage depend on every command; so is the validation of the whole
params.yaml, which can refuse a run but not change it. A run's losses and datasets are read from params.yaml
when the pipeline is generated: after changing a method's ``loss`` or a section's methods or datasets,
regenerate it (``python -m isogclr pipeline``; ``make repro`` does).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "isogclr"
SRC = Path("src")

# The modules each kind of stage runs (its entry points: the trainer and the config readers its command calls);
# everything they import follows. The validation of the whole params.yaml (isogclr.config.validate) is left out:
# every command runs it first, and it can refuse a run but not change its numbers.
TRAIN_ENTRY = ("isogclr.train.loop", "isogclr.config.core", "isogclr.config.studies", "isogclr.config.tuning")
BIMODAL_ENTRY = ("isogclr.train.bimodal", "isogclr.config.core", "isogclr.config.bimodal", "isogclr.config.tuning")
REFERENCES_ENTRY = ("isogclr.train.references", "isogclr.config.core", "isogclr.config.reports")
CONVERGENCE_ENTRY = ("isogclr.train.convergence", "isogclr.config.core")
REPORT_ENTRY = ("isogclr.analysis.report", "isogclr.analysis.notebooks")  # `python -m isogclr report <name>`

RUN_PARAMS = ("data.root", "methods.${item.method}", "model", "augment", "train", "probe")
BIMODAL_PARAMS = ("methods.${item.method}", "bimodal")
# the table sections of params.yaml that are grids of unimodal runs, and their stage names
GRID_STAGES = {"table1": "train", "table1_real": "train_real", "table3": "train_table3",
               "references": "train_references", "pretrain": "train_pretrain"}
# sections whose first seed's encoder is exported (artifacts/encoder.pt): Table 1's (the t-SNE figures read it) and
# the pre-training of the image-text runs' image encoder (bimodal.image_encoder.init reads it)
EXPORT_SECTIONS = ("table1", "pretrain")
# a generated dataset's stage output, by the prefix of the dataset names it provides
# (a generated folder is a local cache rebuilt from its manifest, data/<name>.json, which is what stages track:
# isogclr.data.manifest)
GENERATED_DATA = {"synth": "data/synthetic.json", "fashion_mnist_mini": "data/fashion_mnist_mini.json"}
# a selection stage runs the selection and its modality's trainer (the CLI passes it)
TUNE_ENTRY = {"tuning": ("isogclr.train.tuning", *TRAIN_ENTRY),
              "bimodal_tuning": ("isogclr.train.tuning", *BIMODAL_ENTRY)}
TUNE_STAGES = {"tuning": "tune", "bimodal_tuning": "tune_bimodal"}


@dataclass(frozen=True)
class Report:
    """A report notebook: what it is given (papermill ``-p``), what it reads and what it writes.

    Code dependencies are not listed: they are the ``isogclr`` imports of ``notebooks/src/<name>.py``.
    Studies are not listed either: a study names its report (``studies.<name>.report``). Nor are its tables and
    figures: they are read from the notebook's own ``write_table`` / ``save_figure`` calls (:func:`report_outputs`).
    """

    comment: str
    papermill: dict[str, str]
    reads: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    paper: tuple[str, ...] = ()  # transcribed paper tables (src/isogclr/analysis/paper/<name>.csv)
    selection: str | None = None  # the selection section it shows (tuning/<m>/ of its methods), if params has it


_RUNS = {"params_path": "params.yaml", "runs_dir": "runs", "reports_dir": "reports"}
REPORTS: dict[str, Report] = {
    "table1_unimodal": Report(
        "iSogCLR Tables 1, 3/4, 10; Table 1 on Fashion-MNIST",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),
        params=("profile", "table1", "table1_real", "table3", "references", "train.epochs", "train.epochs_by_dataset"),
        paper=("isogclr_table1", "isogclr_table34")),
    "temperature_vs_frequency": Report(
        "iSogCLR Sec. 6.3, Figure 5: learned tau vs semantic frequency", _RUNS, reads=("runs",),
        params=("profile", "temperatures", "table1.seeds")),
    "feature_tsne": Report(
        "iSogCLR Figures 4-5: t-SNE of frozen features (first Table 1 seed)", _RUNS, reads=("runs",),
        params=("profile", "table1.datasets", "table1.seeds", "temperatures.datasets")),
    "rgcl_analysis": Report(
        "iSogCLR Figures 2-3, computed exactly (no training)",
        {"reports_dir": "reports", "params_path": "params.yaml"},  # rho and tau of the untuned runs
        params=("methods.isogclr", "methods.simclr")),
    "ablations": Report(
        "iSogCLR Tables 8/9, Figures 7-9; SogCLR Table 8",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),  # Table 1's seed spread is the noise yardstick
        params=("profile", "table1", "methods.isogclr", "methods.sogclr"),
        paper=("isogclr_table8", "isogclr_table9", "sogclr_table8")),
    "small_batch": Report(
        "SogCLR Tables 2/3/6; EMC2 curves and burn-in",
        {"params_path": "params.yaml", "studies_dir": "studies", "reports_dir": "reports"},
        params=("profile",), paper=("sogclr_batch",)),
    "emc2_convergence": Report(
        "EMC2 Fig. 7 (exact gradient norm) and Fig. 3 (pre-computed views): reads emc2_convergence_runs",
        {"params_path": "params.yaml", "runs_dir": "runs_convergence", "reports_dir": "reports"},
        reads=("runs_convergence",), params=("profile", "emc2_convergence")),
    "budget_ladder": Report(
        "iSogCLR Table 1 and Sec. 6.3 against the budget: the ladders (studies with report: budget_ladder), "
        "and the selection on the validation split",
        {**_RUNS, "studies_dir": "studies", "tuning_dir": "tuning"}, reads=("runs",), selection="tuning",
        params=("profile", "table1", "table1_real", "references", "methods", "train.epochs",
                "train.epochs_by_dataset"),
        paper=("isogclr_table1",)),
    "bimodal": Report(
        "iSogCLR Tables 2/5-7, Figures 1 (right), 6/10/11, appendix C.3; SogCLR Table 4",
        {"params_path": "params.yaml", "runs_dir": "runs_bimodal", "studies_dir": "studies", "reports_dir": "reports",
         "tuning_dir": "tuning"},
        reads=("runs_bimodal", "data/synthetic_pairs.json"),  # the images of the tau-extremes figure
        selection="bimodal_tuning",
        params=("profile", "bimodal", "methods.clip_individual_tau", "methods.clip_large_tau"),
        paper=("isogclr_table2", "sogclr_table4")),
    "testbed": Report(
        "How much the mini runs learn (reference rows, the calibration's thresholds) and the central verdicts "
        "before and after the calibration, SogCLR/iSogCLR at SimCLR's gradient scale, 9 seeds for Table 1, and the "
        "runs that left for the hour",
        {**_RUNS, "studies_dir": "studies"},
        reads=("runs", "studies", "reports/benchmarks/calibration.csv", "reports/testbed/verdicts_de3cb0e.csv",
               "reports/testbed/verdicts_0a8d8bf.csv", "reports/testbed/verdicts_fdc1988.csv",
               "reports/testbed/verdicts_ef22ab9.csv", "reports/testbed/verdicts_022cafd.csv",
               "reports/testbed/verdicts_621e4fa.csv",
               *(f"reports/verdicts/{name}.csv" for name in ("table1_unimodal", "temperature_vs_frequency",
                                                              "budget_ladder", "bimodal"))),
        params=("profile", "references", "table1", "table1_real", "studies")),
}


def _literal_name(node: ast.expr) -> str | None:
    """The last string constant of a path expression (``Path(reports_dir) / "tables" / "x"`` -> ``"x"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _literal_name(node.right)
    return None


def report_outputs(name: str, root: Path = Path(".")) -> tuple[list[str], list[str]]:
    """``(tables, figures)`` that the report source ``notebooks/src/<name>.py`` writes, relative to ``reports/``:
    ``tables/<stem>.md`` and ``tables/<stem>.csv`` per ``write_table(table, <path ending in "<stem>">, ...)``
    (:func:`isogclr.analysis.tables.write_table` writes both) and ``figures/<stem>.png`` per
    ``save_figure(fig, reports_dir, "<stem>")``, in the order of the source. The notebook is the one
    declaration of a report's outputs; a name that is not a literal string is an error naming the line."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    tables, figures = [], []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("write_table", "save_figure")):
            continue
        position = 1 if node.func.id == "write_table" else 2
        stem = _literal_name(node.args[position]) if len(node.args) > position else None
        if stem is None:
            raise ValueError(f"{path}:{node.lineno}: {node.func.id}(...) must name its output with a literal string "
                             "(the pipeline reads a report's outputs from its source)")
        if node.func.id == "write_table":
            tables += [(node.lineno, f"tables/{stem}.md"), (node.lineno, f"tables/{stem}.csv")]
        else:
            figures.append((node.lineno, f"figures/{stem}.png"))
    return ([out for _, out in sorted(tables, key=lambda p: p[0])],
            [out for _, out in sorted(figures, key=lambda p: p[0])])


# --- code dependencies -------------------------------------------------------------------------------


def _module_file(module: str, root: Path) -> Path | None:
    """The source file of ``module`` (``a.b`` -> src/a/b.py or src/a/b/__init__.py), if it is ours."""
    base = root / SRC / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations, never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def module_imports(path: Path, module: str) -> set[str]:
    """Every ``isogclr`` module that ``path`` (module ``module``) imports, anywhere in its body, except in an
    ``if TYPE_CHECKING:`` block (an import for annotations, which never runs)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            # `from .pkg import name`: name may be a submodule
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def _lazy_module(name: str, root: Path) -> list[str]:
    """The module that defines ``pkg.name`` when the package ``pkg`` imports its names on first access (a
    module-level ``__getattr__`` reading ``_LAZY``, name -> module: :mod:`isogclr.config`, :mod:`isogclr.losses`);
    ``[]`` for any other name. ``from pkg import name`` then depends on that module, as an eager import would."""
    package, _, attr = name.rpartition(".")
    init = _module_file(package, root) if package else None
    if init is None or init.name != "__init__.py" or "def __getattr__" not in init.read_text():
        return []
    table = getattr(importlib.import_module(package), "_LAZY", {})
    return [table[attr]] if attr in table else []


def module_closure(entries: tuple[str, ...] | list[str], root: Path = Path(".")) -> list[str]:
    """The source files (relative to ``root``) of ``entries`` and of every ``isogclr`` module they import.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so those are included.
    """
    root = Path(root)
    todo, seen, files = list(entries), set(), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the parent packages
        path = _module_file(module, root)
        if path is None:  # an attribute imported with `from pkg import name`, not a module
            todo += _lazy_module(module, root)  # unless the package imports it from a module on first access
            continue
        files.add(path.relative_to(root).as_posix())
        todo += sorted(module_imports(path, module) - seen)
    return sorted(files)


def run_modules(params: dict[str, Any], methods: list[str] | tuple[str, ...],
                datasets: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The modules that runs of ``methods`` on ``datasets`` import by name: each method's loss
    (``methods.<m>.loss``, its row of :data:`isogclr.losses.registry.REGISTRY`) and each dataset's loader
    (:data:`isogclr.data.base.REGISTRY`). :func:`build_loss` and :func:`load_dataset` import them when a run
    builds them, which :func:`module_imports` cannot see; these are what a stage adds to its entry modules.

    Validation of the whole params.yaml (every command's first step) also builds each method's loss once to
    check its arguments; that can refuse a run but not change its numbers, so it adds no dependency."""
    from .data.base import dataset_module
    from .losses.registry import loss_module

    losses = {((params.get("methods") or {}).get(m) or {}).get("loss", m) for m in methods}
    return sorted({loss_module(loss) for loss in losses} | {dataset_module(d) for d in datasets})


def notebook_modules(name: str, root: Path = Path(".")) -> list[str]:
    """The ``isogclr`` modules that the report source ``notebooks/src/<name>.py`` imports."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    found = module_imports(path, "__notebook__")
    return sorted({m for m in found if _module_file(m, Path(root)) or "." not in m}
                  | {lazy for m in found for lazy in _lazy_module(m, Path(root))})


# --- stages --------------------------------------------------------------------------------------------


def _run_outputs(run_dirs: list[str]) -> dict[str, list]:
    """Runs' outputs, all in git (``cache: false``, so a fresh clone has them and ``dvc status`` is clean):
    ``artifacts/`` (config, temperatures; the first Table 1 seed's float16 encoder and test features),
    the log and curves, one metrics file. Each run's float32 weights and features stay in its ``local/``
    folder, which neither git nor DVC tracks (``.dvcignore``)."""
    return {
        "outs": [{f"{d}/{name}": {"cache": False}} for d in run_dirs for name in ("artifacts", "train_log.csv",
                                                                                   "dvclive")],
        "metrics": [{f"{d}/metrics.json": {"cache": False}} for d in run_dirs],
    }


def _data_deps(datasets: list[str]) -> list[str]:
    return sorted({out for d in datasets for prefix, out in GENERATED_DATA.items() if d.startswith(prefix)})


def _tuned(section: dict[str, Any]) -> tuple[str, list[str]]:
    """A tuned section's extra command flag and dependency: the method's selection on the validation split."""
    return (" --tuned", ["tuning/${item.method}/selected.json"]) if section.get("tuned") else ("", [])


def _grid_stage(section: str, params: dict[str, Any], code: list[str]) -> dict[str, Any]:
    """One stage per (method, dataset) of a table section, its seeds run one after the other in one process
    (a process start and DVC's bookkeeping cost ~6 s a stage). The seeds are written out here: after
    changing a section's ``seeds``, regenerate the pipeline (``python -m isogclr pipeline``; ``make repro``
    does)."""
    seeds = params[section]["seeds"]
    flag, selection = _tuned(params[section])
    export = f" --export-seed {seeds[0]}" if section in EXPORT_SECTIONS else ""
    return {
        "matrix": {"method": f"${{{section}.methods}}", "dataset": f"${{{section}.datasets}}"},
        "cmd": "${launcher} -m isogclr train --method ${item.method} --dataset ${item.dataset} --seed "
               + " ".join(map(str, seeds)) + flag + export,
        "deps": _data_deps(params[section]["datasets"]) + selection + code,
        "params": [*RUN_PARAMS, f"{section}.seeds"],
        **_run_outputs([f"runs/${{item.method}}-${{item.dataset}}-s{seed}" for seed in seeds]),
    }


def _study_stage(name: str, spec: dict[str, Any], bimodal: bool, code: list[str],
                 bimodal_inputs: list[str]) -> dict[str, Any]:
    """One stage per method of a unimodal study, running its seeds and values in one process (a process start
    and DVC's bookkeeping cost ~6 s a stage, measured: a third of a side study's 2-epoch run); one per
    (method, value, seed) of an image-text study. The seeds and values are written out here: after changing a
    study's ``seeds`` or ``values``, regenerate the pipeline (``python -m isogclr pipeline``; ``make repro`` does)."""
    section = "bimodal_studies" if bimodal else "studies"
    base = BIMODAL_PARAMS if bimodal else RUN_PARAMS
    flag, selection = _tuned(spec)
    if bimodal:
        return {
            "matrix": {"method": f"${{{section}.{name}.methods}}", "value": f"${{{section}.{name}.values}}",
                       "seed": f"${{{section}.{name}.seeds}}"},
            "cmd": f"${{launcher}} -m isogclr train-bimodal --study {name} --method ${{item.method}} "
                   "--value ${item.value} --seed ${item.seed}" + flag,
            "deps": [*bimodal_inputs, *selection, *code],
            "params": [*base, f"{section}.{name}"],
            **_run_outputs([f"studies/{name}/${{item.method}}-${{item.value}}-s${{item.seed}}"]),
        }
    return {
        "matrix": {"method": f"${{{section}.{name}.methods}}"},
        "cmd": f"${{launcher}} -m isogclr train --study {name} --method ${{item.method}} --seed "
               + " ".join(map(str, spec["seeds"])) + flag,
        "deps": _data_deps([spec["dataset"]]) + selection + code,
        "params": [*base, f"{section}.{name}"],
        **_run_outputs([f"studies/{name}/${{item.method}}-{value}-s{seed}" for seed in spec["seeds"]
                        for value in spec["values"]]),
    }


def _tune_stage(section: str, params: dict[str, Any], code: list[str]) -> dict[str, Any]:
    """One stage per method of a selection section (``tuning``: unimodal; ``bimodal_tuning``: image-text)."""
    spec = params[section]
    data = _data_deps([spec["dataset"]]) if section == "tuning" else _bimodal_inputs(params)
    return {
        "matrix": {"method": list(spec["methods"])},
        "cmd": "${launcher} -m isogclr tune --method ${item.method}",
        "deps": data + code,
        "params": [*(RUN_PARAMS if section == "tuning" else BIMODAL_PARAMS),  # the space: methods.<m>.search
                   *(f"{section}.{key}" for key in spec if key != "methods")],
        "outs": [{f"tuning/${{item.method}}/{name}": {"cache": False}} for name in ("candidates.csv",
                                                                                   "selected.json")],
    }


def _bimodal_inputs(params: dict[str, Any]) -> list[str]:
    """What every image-text run reads: the generated pairs, and the pre-trained image encoder when it starts from
    one (``bimodal.image_encoder.init``, written by the ``pretrain`` grid)."""
    init = ((params.get("bimodal") or {}).get("image_encoder") or {}).get("init")
    return ["data/synthetic_pairs.json", *([init] if init else [])]


def _bimodal_stage(key: str, seeds: list[int], tuned: bool, code: list[str], inputs: list[str]) -> dict[str, Any]:
    """One stage per method of ``bimodal.<key>`` (the central methods, or the side methods), its seeds run one
    after the other in one process (written out here, as a table's)."""
    flag, selection = _tuned({"tuned": tuned})
    return {
        "matrix": {"method": f"${{bimodal.{key}}}"},
        "cmd": ("${launcher} -m isogclr train-bimodal --method ${item.method} --seed " + " ".join(map(str, seeds))
                + flag + (" --untrained-baseline" if key == "methods" else "")),
        "deps": [*inputs, *selection, *code],
        "params": list(BIMODAL_PARAMS),
        **_run_outputs([f"runs_bimodal/${{item.method}}-s{seed}" for seed in seeds]),
    }


def _report_stage(name: str, report: Report, studies: list[tuple[str, str]], root: Path,
                  params: dict[str, Any]) -> dict[str, Any]:
    papermill = " ".join(f"-p {key} {value}" for key, value in report.papermill.items())
    tables, figures = report_outputs(name, root)
    outs = [f"reports/{name}.ipynb", *(f"reports/{t}" for t in tables), *(f"reports/{f}" for f in figures),
            f"reports/verdicts/{name}.csv"]
    code = module_closure([*REPORT_ENTRY, *notebook_modules(name, root)], root)
    selection = report.selection if report.selection in params else None  # a profile may not tune
    tuned = list((params[selection] or {}).get("methods") or {}) if selection else []
    return {
        "cmd": f"python -m isogclr report {name} {papermill}",
        "deps": [f"notebooks/{name}.ipynb", f"notebooks/src/{name}.py", *code,
                 *(f"src/isogclr/analysis/paper/{p}.csv" for p in report.paper), *report.reads,
                 *(f"tuning/{m}/{f}" for m in tuned for f in ("candidates.csv", "selected.json")),
                 *(f"studies/{study}" for study, _ in studies)],
        # a section the profile does not have (the references of a profile without them) is not a parameter
        "params": [*(p for p in report.params if p.split(".")[0] in params), *([selection] if selection else []),
                   *(f"{section}.{study}" for study, section in studies)],
        "outs": [{out: {"cache": False}} for out in outs],
    }


def build_pipeline(params: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    """The ``dvc.yaml`` document for ``params`` (a dict, as read from params.yaml)."""
    root = Path(root)

    def code(entry: tuple[str, ...], methods: list[str], datasets: list[str] = ()) -> list[str]:
        return module_closure([*entry, *run_modules(params, methods, datasets)], root)

    stages: dict[str, Any] = {
        "synthetic": {"cmd": "python -m isogclr synthetic --out data/synthetic",
                      "deps": module_closure(("isogclr.data.synthetic",), root),
                      "params": ["data.synthetic"], "outs": [{"data/synthetic.json": {"cache": False}}]},
        "synthetic_pairs": {"cmd": "python -m isogclr synthetic-pairs --out data/synthetic_pairs",
                            "deps": module_closure(("isogclr.data.synthetic_pairs",), root),
                            "params": ["data.synthetic_pairs"],
                            "outs": [{"data/synthetic_pairs.json": {"cache": False}}]},
        "fashion_mnist_mini": {"cmd": "python -m isogclr fashion-mnist-mini --out data/fashion_mnist_mini",
                               "deps": module_closure(("isogclr.data.fashion_mnist",), root),
                               "params": ["data.root", "data.fashion_mnist_mini"],
                               "outs": [{"data/fashion_mnist_mini.json": {"cache": False}}]},
    }
    for section, stage in TUNE_STAGES.items():
        if section in params:
            spec = params[section]
            datasets = [spec["dataset"]] if section == "tuning" else []
            stages[stage] = _tune_stage(section, params, code(TUNE_ENTRY[section], list(spec["methods"]), datasets))
    for section, stage in GRID_STAGES.items():
        if section in params:
            table = params[section]
            stages[stage] = _grid_stage(section, params, code(TRAIN_ENTRY, table["methods"], table["datasets"]))
    if "references" in params:  # the no-learning rows of each dataset (the supervised one is a grid run above)
        datasets = params["references"]["datasets"]
        stages["references"] = {
            "matrix": {"dataset": "${references.datasets}"},
            "cmd": "${launcher} -m isogclr references --dataset ${item.dataset}",
            "deps": _data_deps(datasets) + code(REFERENCES_ENTRY, params["references"]["methods"], datasets),
            "params": [p for p in RUN_PARAMS if "${item.method}" not in p] + ["references.random_inits"],
            "metrics": [{"runs/references/${item.dataset}/metrics.json": {"cache": False}}],
        }
    if "bimodal" in params:
        bimodal, inputs = params["bimodal"], _bimodal_inputs(params)
        stages["train_bimodal"] = _bimodal_stage("methods", bimodal["seeds"], bool(bimodal.get("tuned")),
                                                 code(BIMODAL_ENTRY, bimodal["methods"]), inputs)
        if bimodal.get("side_methods"):
            side_seeds = bimodal.get("side_seeds") or bimodal["seeds"][:1]
            stages["train_bimodal_side"] = _bimodal_stage("side_methods", side_seeds, False,
                                                          code(BIMODAL_ENTRY, bimodal["side_methods"]), inputs)
    from .config import study_reports

    reads_study: dict[str, list[tuple[str, str]]] = {}
    for section, bimodal in (("studies", False), ("bimodal_studies", True)):
        for name, spec in (params.get(section) or {}).items():
            entry, datasets = (BIMODAL_ENTRY, []) if bimodal else (TRAIN_ENTRY, [spec["dataset"]])
            stages[f"study_{name}"] = _study_stage(name, spec, bimodal, code(entry, spec["methods"], datasets),
                                                   _bimodal_inputs(params))
            for report in study_reports(spec.get("report")):
                reads_study.setdefault(report, []).append((name, section))
    if "emc2_convergence" in params:
        from .config.convergence import CONVERGENCE_METHODS, convergence_config

        stages["emc2_convergence_runs"] = {
            "cmd": "python -m isogclr convergence --out runs_convergence",
            "deps": ["data/synthetic.json", *code(CONVERGENCE_ENTRY, list(CONVERGENCE_METHODS),
                                                  [convergence_config(params).dataset])],
            "params": ["data.root", "model", "augment", "methods.simclr", "methods.sogclr", "methods.emc2.beta",
                       "emc2_convergence"],
            "outs": [{"runs_convergence": {"cache": False}}],
        }
    unknown = sorted(set(reads_study) - set(REPORTS))
    if unknown:
        from .config import ConfigError

        raise ConfigError(f"studies.*.report: unknown report(s) {unknown} (reports: {sorted(REPORTS)})")
    for name, report in REPORTS.items():
        stages[name] = _report_stage(name, report, reads_study.get(name, []), root, params)
    stages["index"] = {
        "cmd": "python -m isogclr report-index " + " ".join(REPORTS),
        "deps": [*module_closure(("isogclr.analysis.index",), root),
                 *(f"reports/{name}.ipynb" for name in REPORTS), "reports/verdicts"],
        "params": ["profile"],
        "outs": [{out: {"cache": False}} for out in ("reports/index.html", "reports/README.md", "reports/html")],
    }
    return {"stages": stages, "plots": comparison_plots(params)}


def comparison_plots(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level plots that compare runs: Table 1's methods' loss curves (first dataset and seed, one
    chart), and the batch-size study's 1-NN accuracy against samples seen (one chart)."""
    plots = []
    table = params.get("table1")
    if table:
        dataset, seed = table["datasets"][0], table["seeds"][0]
        plots.append({f"table1_loss_{dataset}": {
            "x": "epoch", "title": f"Table 1 methods on {dataset}, seed {seed}: training loss",
            "y": {f"runs/{m}-{dataset}-s{seed}/train_log.csv": "loss" for m in table["methods"]}}})
    study = (params.get("studies") or {}).get("batch_size")
    if study:
        plots.append({"batch_size_knn": {
            "x": "samples_seen", "title": "Batch-size study: 1-NN test accuracy against samples seen",
            "y": {f"studies/batch_size/{m}-{v}-s{study['seeds'][0]}/train_log.csv": "knn1_top1"
                  for m in study["methods"] for v in study["values"]}}})
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
            files[f"{FAMILY_DIR}/{name}/dvc.yaml"] = {
                "vars": ["../../params.yaml"], "stages": {name: {"wdir": "../..", **stage}}}
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
    from .config import load_params, validate_params

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
