"""Command line: ``python -m isogclr <command> --help``.

The DVC stages call these commands; a researcher can call them by hand too. Only the standard library is
imported at the top, so ``--help`` answers at once; a command imports what it needs (torch, DVC,
papermill) when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from . import __version__


def _validate(args: argparse.Namespace) -> int:
    from .config import load_params, missing_datasets, validate_params

    params = load_params(args.params)
    validate_params(params)
    missing = [] if args.skip_data else missing_datasets(params)
    for line in missing:
        print(f"error in {args.params}: {line}", file=sys.stderr)
    for line in _device_warnings(params):
        print(f"warning: {args.params}: {line}", file=sys.stderr)
    if missing:
        return 1
    print(f"{args.params}: valid" + ("" if args.skip_data else "; its datasets are on disk or made by the pipeline"))
    return 0


def _device_warnings(params: dict) -> list[str]:
    """The paper profile on a machine without a GPU, where ``device: auto`` would quietly train on the CPU."""
    devices = {s: (params.get(s) or {}).get("device", "auto") for s in ("train", "bimodal") if s in params}
    if params.get("profile") != "paper" or "cpu" in devices.values():
        return []
    import torch

    if torch.cuda.is_available():
        return []
    return [f"{s}.device is {d!r} and no GPU is visible: the paper profile would "
            + ("train on the CPU (weeks of compute)" if d == "auto" else "fail") + "; run it on a GPU machine"
            for s, d in devices.items()]


def _profile(args: argparse.Namespace) -> int:
    from .config import load_params, profile_text, validate_params
    from .io import save_text

    source = Path(args.profiles) / f"{args.name}.yaml"
    validate_params(load_params(source))
    save_text(profile_text(source), Path(args.out))
    print(f"{args.out} <- {source}" + ("" if args.name == "mini" else " (merged onto its base profile)"))
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    from .config import load_params, synthetic_spec
    from .data.manifest import SYNTHETIC, manifest_path, spec_dict, write_manifest
    from .data.synthetic import write_synthetic

    params = load_params(args.params)
    spec = synthetic_spec(params)
    t0 = time.perf_counter()
    write_synthetic(spec, Path(args.out))
    manifest = write_manifest(Path(args.out).name, args.out, spec_dict(spec), manifest_path(args.out), SYNTHETIC)
    print(f"wrote {args.out} and its manifest {manifest_path(args.out)} ({manifest['files']} files) in "
          f"{time.perf_counter() - t0:.1f}s ({spec})")
    return 0


def _fashion_mnist_mini(args: argparse.Namespace) -> int:
    from .config import fashion_mnist_mini_spec, load_params
    from .data.fashion_mnist import write_fashion_mnist_mini
    from .data.manifest import FASHION_MNIST_MINI, manifest_path, spec_dict, write_manifest

    params = load_params(args.params)
    spec = fashion_mnist_mini_spec(params)
    t0 = time.perf_counter()
    counts = write_fashion_mnist_mini(spec, Path((params.get("data") or {}).get("root", "data")), Path(args.out))
    write_manifest(Path(args.out).name, args.out, spec_dict(spec), manifest_path(args.out), FASHION_MNIST_MINI)
    print(f"wrote {args.out} and its manifest {manifest_path(args.out)} in {time.perf_counter() - t0:.1f}s "
          f"({counts}, {spec})")
    return 0


def _synthetic_pairs(args: argparse.Namespace) -> int:
    from .config import load_params, pair_spec
    from .data.manifest import SYNTHETIC_PAIRS, manifest_path, spec_dict, write_manifest
    from .data.synthetic_pairs import write_synthetic_pairs

    spec = pair_spec(load_params(args.params))
    t0 = time.perf_counter()
    write_synthetic_pairs(spec, Path(args.out))
    manifest = write_manifest(Path(args.out).name, args.out, spec_dict(spec), manifest_path(args.out),
                              SYNTHETIC_PAIRS)
    print(f"wrote {args.out} and its manifest {manifest_path(args.out)} ({manifest['files']} files) in "
          f"{time.perf_counter() - t0:.1f}s ({spec})")
    return 0


def _restore_data(args: argparse.Namespace) -> int:
    from .data.manifest import restore

    t0 = time.perf_counter()
    done = restore(args.root, verify=args.verify)
    if not done:
        print(f"no dataset manifest {Path(args.root)}/*.json: nothing to restore (the data stages write them)")
        return 0
    for name, state, seconds in done:
        print(f"{Path(args.root) / name}: {state} ({seconds:.1f}s)")
    print(f"restored {len(done)} generated dataset(s) from their manifests in {time.perf_counter() - t0:.1f}s")
    return 0


def _train(args: argparse.Namespace) -> int:
    """One run, or several in one process (a grid run at several seeds; a study's values x seeds)."""
    import yaml

    from .config import (
        ConfigError,
        load_params,
        run_config,
        study_run_config,
        study_spec,
        validate_params,
        with_selection,
    )
    from .train.loop import train_run

    params = load_params(args.params)
    validate_params(params)
    if args.tuned:  # the method's knobs selected on the validation split (tuning/<method>/selected.json)
        params = with_selection(params, args.method)
    if args.study is None:
        if args.dataset is None or args.value is not None or not args.seed:
            raise ConfigError("train: give --dataset and --seed (a grid run), or --study (a study's runs)")
        configs, out = [run_config(params, args.method, args.dataset, seed) for seed in args.seed], Path(args.out)
    else:
        if args.dataset is not None:
            raise ConfigError(f"studies.{args.study}: the study sets its own dataset (no --dataset)")
        spec = study_spec(params, args.study)
        if spec.tuned and not args.tuned:
            raise ConfigError(f"studies.{args.study}.tuned: its runs use the selection; add --tuned")
        values = spec.values if args.value is None else [yaml.safe_load(args.value)]
        configs = [study_run_config(params, args.study, args.method, value, seed)
                   for value in values for seed in (args.seed or spec.seeds)]
        out = Path("studies")
    for cfg in configs:
        train_run(cfg, out / cfg.run_id, Path(args.checkpoints) / cfg.run_id,
                  random_init_baseline=args.random_init_baseline, export=cfg.seed == args.export_seed)
    return 0


def _references(args: argparse.Namespace) -> int:
    """The no-learning rows of a dataset (chance, raw pixels, random-init encoders): <out>/<dataset>/metrics.json."""
    from .config import load_params, references_spec, run_config, validate_params
    from .train.references import no_learning

    params = load_params(args.params)
    validate_params(params)
    spec = references_spec(params)
    cfg = run_config(params, spec.methods[0], args.dataset, spec.seeds[0])
    metrics = no_learning(cfg, spec.random_inits, Path(args.out) / args.dataset)
    print(f"[{args.dataset}] " + ", ".join(f"{key} {value:.2f}" for key, value in metrics.items()))
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .config import load_params, tuning_section, validate_params
    from .train.tuning import tune_method

    params = load_params(args.params)
    validate_params(params)
    if tuning_section(params, args.method) == "bimodal_tuning":
        from .train.bimodal import train_bimodal_run as train
    else:
        from .train.loop import train_run as train
    tune_method(params, args.method, train, Path(args.out), Path(args.checkpoints))
    return 0


def _train_bimodal(args: argparse.Namespace) -> int:
    """Image-text runs: a method at several seeds one after the other in one process, or one study run."""
    import yaml

    from .config import (
        ConfigError,
        bimodal_run_config,
        bimodal_study_run_config,
        bimodal_study_spec,
        load_params,
        validate_params,
        with_selection,
    )
    from .train.bimodal import train_bimodal_run

    params = load_params(args.params)
    validate_params(params)
    if args.tuned:  # the method's knobs selected on held-out training pairs (tuning/<method>/selected.json)
        params = with_selection(params, args.method)
    if (args.study is None) != (args.value is None):
        raise ConfigError("train-bimodal: give both --study and --value (a study run) or neither")
    if args.study is None:
        configs, out = [bimodal_run_config(params, args.method, seed) for seed in args.seed], Path(args.out)
    else:
        if bimodal_study_spec(params, args.study).tuned and not args.tuned:
            raise ConfigError(f"bimodal_studies.{args.study}.tuned: its runs use the selection; add --tuned")
        configs = [bimodal_study_run_config(params, args.study, args.method, yaml.safe_load(args.value), seed)
                   for seed in args.seed]
        out = Path("studies")
    for cfg in configs:
        train_bimodal_run(cfg, out / cfg.run_id, Path(args.checkpoints) / f"bimodal-{cfg.run_id}",
                          untrained_baseline=args.untrained_baseline)
    return 0


def _notebooks(args: argparse.Namespace) -> int:
    from .analysis.notebooks import build_notebooks

    stale = build_notebooks(Path(args.source), Path(args.dest), check=args.check)
    if args.check and stale:
        print("out of sync with their sources (run `python -m isogclr notebooks`):", *stale, sep="\n  ")
        return 1
    return 0


def _report(args: argparse.Namespace) -> int:
    from .analysis.notebooks import notebook_text
    from .analysis.report import execute_report, typed_parameters

    notebook, source = Path(args.notebooks) / f"{args.name}.ipynb", Path(args.notebooks) / "src" / f"{args.name}.py"
    if not source.exists():
        print(f"error: {source} not found (a report is built from notebooks/src/<name>.py)", file=sys.stderr)
        return 2
    if not notebook.exists() or notebook.read_text() != notebook_text(source):
        print(f"error: {notebook} is out of sync with {source}: run `python -m isogclr notebooks`", file=sys.stderr)
        return 1
    for folder in ("tables", "figures", "verdicts"):
        (Path(args.reports) / folder).mkdir(parents=True, exist_ok=True)
    from papermill.exceptions import PapermillExecutionError

    output = Path(args.reports) / f"{args.name}.ipynb"
    try:
        execute_report(notebook, output, typed_parameters(args.parameter))
    except PapermillExecutionError as err:
        print(f"error: {output}: cell {err.exec_count} raised {err.ename}: {err.evalue} (the traceback is in the "
              f"notebook)", file=sys.stderr)
        return 1
    print(f"wrote {output}")
    return 0


def _report_index(args: argparse.Namespace) -> int:
    from .analysis.index import build_index
    from .config import load_params

    build_index(Path(args.reports), args.names, profile=str(load_params(args.params).get("profile", "?")))
    print(f"wrote {args.reports}/index.html and {args.reports}/README.md ({len(args.names)} reports)")
    return 0


def _pipeline(args: argparse.Namespace) -> int:
    from .pipeline import main as write_pipeline

    return write_pipeline(args.params, args.out, check=args.check)


def _convergence(args: argparse.Namespace) -> int:
    from .config import load_params
    from .train.convergence import write_study

    study = write_study(load_params(args.params), Path(args.out), Path(args.checkpoints) / "convergence")
    print(f"wrote {args.out} in {study.seconds:.0f}s")
    return 0


def _repro(args: argparse.Namespace) -> int:
    from .repro import repro

    return repro(Path(args.root), args.jobs, force=args.force)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that shows each option's default, except the uninformative None and False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default in (None, False) else super()._get_help_string(action)


def _add_params(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", default="params.yaml", help="the parameters (params.yaml or a profile)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m isogclr", description=__doc__.splitlines()[0],
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"isogclr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check params.yaml (every error names its key), that the datasets it "
                                        "reads are on disk, and warn when the paper profile has no GPU")
    _add_params(p)
    p.add_argument("--skip-data", action="store_true", help="check the parameters only, not the datasets on disk")
    p.set_defaults(func=_validate)

    p = sub.add_parser("profile", help="write params.yaml as the full profile <name> (profiles/<name>.yaml, "
                                       "merged onto the profile it extends), validated")
    p.add_argument("name", help="a profile: mini, smoke, paper (profiles/<name>.yaml)")
    p.add_argument("--profiles", default="profiles", help="the folder of the profiles")
    p.add_argument("--out", default="params.yaml", help="the file written")
    p.set_defaults(func=_profile)

    p = sub.add_parser("synthetic", help="generate the synthetic image datasets (data.synthetic)")
    _add_params(p)
    p.add_argument("--out", default="data/synthetic", help="output folder")
    p.set_defaults(func=_synthetic)

    p = sub.add_parser("fashion-mnist-mini", help="write the mini Fashion-MNIST subset as an image folder "
                                                  "(data.fashion_mnist_mini)")
    _add_params(p)
    p.add_argument("--out", default="data/fashion_mnist_mini", help="output folder")
    p.set_defaults(func=_fashion_mnist_mini)

    p = sub.add_parser("synthetic-pairs", help="generate image-text pairs, retrieval and zero-shot sets "
                                               "(data.synthetic_pairs)")
    _add_params(p)
    p.add_argument("--out", default="data/synthetic_pairs", help="output folder")
    p.set_defaults(func=_synthetic_pairs)

    p = sub.add_parser("restore-data", help="rebuild every generated dataset <root>/<name>/ from its manifest "
                                            "<root>/<name>.json (git-tracked) where missing or stale; seconds")
    p.add_argument("--root", default="data", help="the folder holding the manifests")
    p.add_argument("--verify", action="store_true", help="hash every folder's bytes too (without it, an up-to-date "
                                                         "folder's file names and sizes are checked, no bytes)")
    p.set_defaults(func=_restore_data)

    p = sub.add_parser("train", help="one training run + linear probe, written to <out>/<method>-<dataset>-s<seed> "
                                       "(or a study run, see --study)")
    p.add_argument("--method", required=True, help="a key of `methods` in params.yaml")
    p.add_argument("--dataset", help="a registered dataset name, e.g. synth10 (grid runs)")
    p.add_argument("--seed", type=int, nargs="+", help="the seed(s): one run per seed, one after the other "
                                                       "(a study: default all of studies.<study>.seeds)")
    p.add_argument("--study", help="a key of `studies`: runs are written to studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value (one of studies.<study>.values; default: every value)")
    p.add_argument("--tuned", action="store_true", help="use the method's knobs selected on the validation split "
                                                        "(tuning/<method>/selected.json, written by `tune`)")
    _add_params(p)
    p.add_argument("--out", default="runs", help="where grid runs are written")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.add_argument("--random-init-baseline", action="store_true",
                   help="also probe the randomly initialised encoder (metrics: random_init_top1)")
    p.add_argument("--export-seed", type=int, metavar="N",
                   help="export (artifacts/encoder.pt and artifacts/features.pt, float16) for the run whose seed is N")
    p.set_defaults(func=_train)

    p = sub.add_parser("references", help="the no-learning rows of a dataset (chance, a linear probe on raw pixels "
                                          "and on random-init encoders), written to <out>/<dataset>/metrics.json")
    p.add_argument("--dataset", required=True, help="a registered dataset name, e.g. synth10_lt")
    _add_params(p)
    p.add_argument("--out", default="runs/references", help="where the rows are written")
    p.set_defaults(func=_references)

    p = sub.add_parser("tune", help="select a method's knobs on a validation split (tuning, bimodal_tuning): "
                                     "tuning/<method>/{candidates.csv,selected.json}")
    p.add_argument("--method", required=True, help="a key of tuning.methods or bimodal_tuning.methods")
    _add_params(p)
    p.add_argument("--out", default="tuning", help="where the selection is written")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.set_defaults(func=_tune)

    p = sub.add_parser("train-bimodal", help="one image-text run + zero-shot evaluation (bimodal section), "
                                             "written to <out>/<method>-s<seed>")
    p.add_argument("--method", required=True, help="a key of `methods` with a bimodal loss (see bimodal.methods)")
    p.add_argument("--seed", type=int, nargs="+", required=True, help="the seed(s): one run per seed, one after "
                                                                      "the other")
    p.add_argument("--tuned", action="store_true", help="use the method's knobs selected on held-out training pairs "
                                                        "(tuning/<method>/selected.json, written by `tune`)")
    p.add_argument("--study", help="a key of `bimodal_studies`: the run is written to "
                                   "studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value for this run (one of bimodal_studies.<study>.values)")
    _add_params(p)
    p.add_argument("--out", default="runs_bimodal", help="where the runs are written")
    p.add_argument("--untrained-baseline", action="store_true",
                   help="also the no-learning rows: metrics chance_<metric> and untrained_<metric> (the pair before "
                        "any image-text step)")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.set_defaults(func=_train_bimodal)

    p = sub.add_parser("notebooks", help="build notebooks/*.ipynb from notebooks/src/*.py (or --check they match)")
    p.add_argument("--source", default="notebooks/src", help="the percent-format scripts (jupytext)")
    p.add_argument("--dest", default="notebooks", help="where the notebooks are written")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook differs from its source")
    p.set_defaults(func=_notebooks)

    p = sub.add_parser("report", help="execute notebooks/<name>.ipynb with papermill into reports/<name>.ipynb, "
                                      "without execution timestamps")
    p.add_argument("name", help="the report, e.g. table1_unimodal")
    p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="a value for the notebook's parameters cell (repeatable), typed as papermill's -p types it")
    p.add_argument("--notebooks", default="notebooks", help="the notebooks (and their sources in <notebooks>/src)")
    p.add_argument("--reports", default="reports", help="where the executed notebook is written")
    p.set_defaults(func=_report)

    p = sub.add_parser("report-index", help="render reports/<name>.ipynb to HTML; write reports/index.html + README.md")
    p.add_argument("names", nargs="+", help="report names, in the order shown")
    _add_params(p)
    p.add_argument("--reports", default="reports", help="the reports folder")
    p.set_defaults(func=_report_index)

    p = sub.add_parser("pipeline", help="write dvc.yaml from params.yaml and the code's imports (or --check it)")
    _add_params(p)
    p.add_argument("--out", default="dvc.yaml", help="the pipeline file")
    p.add_argument("--check", action="store_true", help="exit 1 if the file differs from what would be written")
    p.set_defaults(func=_pipeline)

    p = sub.add_parser("convergence", help="EMC2's convergence and augmentation studies (emc2_convergence), "
                                           "written to <out>/{convergence,augmentations}.csv")
    _add_params(p)
    p.add_argument("--out", default="runs_convergence", help="output folder")
    p.add_argument("--checkpoints", default="checkpoints",
                   help="where each run's resumable checkpoint lives while training (<checkpoints>/convergence/)")
    p.set_defaults(func=_convergence)

    p = sub.add_parser("repro", help="`dvc repro` with up to --jobs stages at a time (see isogclr.repro)")
    p.add_argument("--jobs", type=int, default=2, help="stages at a time; 1 = plain `dvc repro` order")
    p.add_argument("--root", default=".", help="the DVC project")
    p.add_argument("--force", action="store_true",
                   help="rerun every stage, up to date or not (verifies the replication from scratch)")
    p.set_defaults(func=_repro)
    for command in sub.choices.values():
        command.formatter_class = _HelpFormatter
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as err:
        config = sys.modules.get(f"{__package__}.config")  # a ConfigError was raised by the module, so it is loaded
        if config is None or not isinstance(err, config.ConfigError):
            raise
        source = str(getattr(args, "params", "params.yaml"))
        print(f"error: {err}" if str(err).startswith(source) else f"error in {source}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
