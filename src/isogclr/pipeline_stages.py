"""The templates of the pipeline's stages (:mod:`isogclr.pipeline` assembles them): a table section's grid of runs,
a study's runs, a selection, the image-text runs, a report; and the per-method form of a family of runs, in which each
method's runs depend on its own loss module (:func:`foreach_by_method`). A family's methods, datasets, values and
seeds are its planned runs' (:class:`~isogclr.config.plan.Axes`)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .code_deps import module_closure, notebook_modules
from .dataset_specs import GENERATED, Generator, source
from .reports.report_table import Report
from .reports.stage_minutes import STAGE_RECORD

if TYPE_CHECKING:
    from .config.plan import Axes

REPORT_ENTRY = ("isogclr.reports.notebook_run", "isogclr.reports.notebook_build")  # `python -m isogclr report <name>`
RUN_PARAMS = ("data.root", "data.long_tailed_order", "methods.${item.method}", "model", "augment", "train", "probe")
BIMODAL_PARAMS = ("methods.${item.method}", "bimodal")
# sections whose first seeds' encoders and features are exported (artifacts/encoder.pt, features.pt), and how many:
# Table 1's first 3 (the t-SNE report tests its claims over them) and the pre-training of the image-text runs' image
# encoder (bimodal.image_encoder.init reads the first)
EXPORT_SECTIONS = {"table1": 3, "pretrain": 1}


def run_outputs(run_dirs: list[str]) -> dict[str, list]:
    """Runs' outputs, all in git (``cache: false``, so a fresh clone has them and ``dvc status`` is clean):
    ``artifacts/`` (config, temperatures; the first Table 1 seeds' float16 encoders and test features),
    the log and curves, one metrics file, and the knobs the run used (``knobs.json``: its method's loss
    arguments after the selection, declared as metrics so that ``dvc exp show`` lists them beside its scores).
    Each run's float32 weights and features stay in its ``local/`` folder, which neither git nor DVC tracks
    (``.dvcignore``)."""
    return {
        "outs": [{f"{d}/{name}": {"cache": False}} for d in run_dirs for name in ("artifacts", "train_log.csv",
                                                                                   "dvclive")],
        "metrics": [{f"{d}/{name}": {"cache": False}} for d in run_dirs for name in ("metrics.json", "knobs.json")],
    }


def generated_output(generator: Generator) -> str:
    """A generated folder's stage output: its manifest ``data/<name>.json`` (the folder is a local cache rebuilt from
    it: :mod:`isogclr.data.manifest`)."""
    return f"data/{generator.name}.json"


def data_deps(datasets: list[str] | tuple[str, ...]) -> list[str]:
    """What runs on ``datasets`` read of the pipeline's outputs: the manifests of their generated folders."""
    return sorted({generated_output(GENERATED[spec.generator]) for spec in map(source, datasets) if spec.generator})


def data_stage(generator: Generator, root: Path) -> dict[str, Any]:
    """The stage of a generated folder: its data command, on the generator's module and params section."""
    return {"cmd": f"python -m isogclr {generator.command} --out data/{generator.name}",
            "deps": module_closure((generator.module,), root),
            "params": [*(["data.root"] if generator.needs_root else []), generator.section],
            "outs": [{generated_output(generator): {"cache": False}}]}


def selection_flag(tuned: bool) -> tuple[str, list[str]]:
    """A tuned family's extra command flag and dependency: the method's selection on the validation split."""
    return (" --tuned", ["tuning/${item.method}/selected.json"]) if tuned else ("", [])


def grid_stage(section: str, axes: Axes, tuned: bool, code: list[str]) -> dict[str, Any]:
    """One stage per (method, dataset) of a table section, its seeds run one after the other in one process
    (a process start and DVC's bookkeeping cost ~6 s a stage). The seeds are written out here: after
    changing a section's ``seeds``, regenerate the pipeline (``python -m isogclr pipeline``; ``make repro``
    does)."""
    seeds = axes.seeds
    flag, selection = selection_flag(tuned)
    export = f" --export-seed {' '.join(map(str, seeds[:EXPORT_SECTIONS[section]]))}" if section in EXPORT_SECTIONS \
        else ""
    return {
        "matrix": {"method": f"${{{section}.methods}}", "dataset": f"${{{section}.datasets}}"},
        "cmd": "${launcher} -m isogclr train --method ${item.method} --dataset ${item.dataset} --seed "
               + " ".join(map(str, seeds)) + flag + export,
        "deps": data_deps(axes.datasets) + selection + code,
        "params": [*RUN_PARAMS, f"{section}.seeds"],
        **run_outputs([f"runs/${{item.method}}-${{item.dataset}}-s{seed}" for seed in seeds]),
    }


def study_stage(name: str, axes: Axes, tuned: bool, bimodal: bool, code: list[str],
                 bimodal_inputs: list[str]) -> dict[str, Any]:
    """One stage per method of a unimodal study, running its seeds and values in one process (a process start
    and DVC's bookkeeping cost ~6 s a stage, measured: a third of a side study's 2-epoch run); one per
    (method, value, seed) of an image-text study. The seeds and values are written out here: after changing a
    study's ``seeds`` or ``values``, regenerate the pipeline (``python -m isogclr pipeline``; ``make repro`` does)."""
    section = "bimodal_studies" if bimodal else "studies"
    base = BIMODAL_PARAMS if bimodal else RUN_PARAMS
    flag, selection = selection_flag(tuned)
    if bimodal:
        return {
            "matrix": {"method": f"${{{section}.{name}.methods}}", "value": f"${{{section}.{name}.values}}",
                       "seed": f"${{{section}.{name}.seeds}}"},
            "cmd": f"${{launcher}} -m isogclr train-bimodal --study {name} --method ${{item.method}} "
                   "--value ${item.value} --seed ${item.seed}" + flag,
            "deps": [*bimodal_inputs, *selection, *code],
            "params": [*base, f"{section}.{name}"],
            **run_outputs([f"studies/{name}/${{item.method}}-${{item.value}}-s${{item.seed}}"]),
        }
    return {
        "matrix": {"method": f"${{{section}.{name}.methods}}"},
        "cmd": f"${{launcher}} -m isogclr train --study {name} --method ${{item.method}} --seed "
               + " ".join(map(str, axes.seeds)) + flag,
        "deps": data_deps(axes.datasets) + selection + code,
        "params": [*base, f"{section}.{name}"],
        **run_outputs([f"studies/{name}/${{item.method}}-{value}-s{seed}" for seed in axes.seeds
                        for value in axes.values]),
    }


def tune_stage(section: str, params: dict[str, Any], axes: Axes, code: list[str]) -> dict[str, Any]:
    """One stage per method of a selection section (``tuning``: unimodal; ``bimodal_tuning``: image-text)."""
    spec = params[section]
    data = data_deps(axes.datasets) if section == "tuning" else bimodal_inputs(params)
    return {
        "matrix": {"method": list(axes.methods)},
        "cmd": "${launcher} -m isogclr tune --method ${item.method}",
        "deps": data + code,
        "params": [*(RUN_PARAMS if section == "tuning" else BIMODAL_PARAMS),  # the space: methods.<m>.search
                   *(f"{section}.{key}" for key in spec if key != "methods")],
        "outs": [{f"tuning/${{item.method}}/{name}": {"cache": False}} for name in ("candidates.csv",
                                                                                   "selected.json")],
    }


def bimodal_inputs(params: dict[str, Any], overrides: dict[str, Any] | None = None) -> list[str]:
    """What an image-text run reads: the manifest of its pairs' generated folder (``bimodal.data``, or a study's
    override of it, when it names one of :data:`GENERATED`; the generated pairs otherwise), and the pre-trained
    image encoder when it starts from one (``bimodal.image_encoder.init``, written by the ``pretrain`` grid)."""
    bimodal = params.get("bimodal") or {}
    folder = Path((overrides or {}).get("bimodal.data") or bimodal.get("data") or "data/synthetic_pairs").name
    pairs = GENERATED[folder if folder in GENERATED else "synthetic_pairs"]
    init = (bimodal.get("image_encoder") or {}).get("init")
    return [generated_output(pairs), *([init] if init else [])]


def bimodal_stage(key: str, seeds: tuple[int, ...], tuned: bool, code: list[str], inputs: list[str]) -> dict[str, Any]:
    """One stage per method of ``bimodal.<key>`` (the central methods, or the side methods), its seeds run one
    after the other in one process (written out here, as a table's)."""
    flag, selection = selection_flag(tuned)
    return {
        "matrix": {"method": f"${{bimodal.{key}}}"},
        "cmd": ("${launcher} -m isogclr train-bimodal --method ${item.method} --seed " + " ".join(map(str, seeds))
                + flag + (" --untrained-baseline" if key == "methods" else "")),
        "deps": [*inputs, *selection, *code],
        "params": list(BIMODAL_PARAMS),
        **run_outputs([f"runs_bimodal/${{item.method}}-s{seed}" for seed in seeds]),
    }


def foreach_by_method(stage: dict[str, Any], axes: dict[str, list], own: dict[str, str]) -> dict[str, Any]:
    """A ``matrix`` stage over ``axes`` (``method`` first) as a ``foreach`` over the same names
    (``train@isogclr-synth10``), each item naming its method's loss module: the stage's deps are the methods'
    shared code and ``${item.loss}`` (:func:`~isogclr.code_deps.by_method`), so that editing one loss module makes
    only that method's runs stale. DVC interpolates a string, not a list, so one module per item."""
    items = {"-".join(map(str, values)): {**dict(zip(axes, values, strict=True)), "loss": own[values[0]]}
             for values in itertools.product(*axes.values())}
    do = {key: value for key, value in stage.items() if key != "matrix"}
    do["deps"] = [d for d in stage["deps"] if d not in own.values()] + ["${item.loss}"]
    return {"foreach": items, "do": do}


def report_stage(name: str, report: Report, studies: list[tuple[str, str]], root: Path,
                  params: dict[str, Any]) -> dict[str, Any]:
    papermill = " ".join(f"-p {key} {value}" for key, value in report.papermill.items())
    tables, figures = report.outputs()
    outs = [f"reports/{name}.ipynb", *(f"reports/{t}" for t in tables), *(f"reports/{f}" for f in figures),
            f"reports/verdicts/{name}.csv"]
    code = module_closure([*REPORT_ENTRY, *notebook_modules(name, root)], root)
    selection = report.selection if report.selection in params else None  # a profile may not tune
    tuned = list((params[selection] or {}).get("methods") or {}) if selection else []
    return {
        "cmd": f"python -m isogclr report {name} {papermill}",
        "deps": [f"notebooks/{name}.ipynb", f"notebooks/src/{name}.py", *code,
                 *(f"src/isogclr/analysis/paper/{p}.csv" for p in report.paper), *report.reads,
                 *([STAGE_RECORD.path] if report.trains and STAGE_RECORD.path not in report.reads else []),
                 *(f"tuning/{m}/{f}" for m in tuned for f in ("candidates.csv", "selected.json")),
                 *(f"studies/{study}" for study, _ in studies)],
        # a section the profile does not have (the references of a profile without them) is not a parameter
        "params": [*(p for p in report.params if p.split(".")[0] in params), *([selection] if selection else []),
                   *(f"{section}.{study}" for study, section in studies)],
        "outs": [{out: {"cache": False}} for out in outs],
    }
