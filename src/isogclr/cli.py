"""Command line: ``python -m isogclr <command> --help``.

The DVC stages call these commands; a researcher can call them by hand too. Only the standard library is
imported at the top, so ``--help`` answers at once; a command imports what it needs (torch, DVC,
papermill) when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from .commands import (
    cmd_convergence,
    cmd_generate,
    cmd_notebooks,
    cmd_pipeline,
    cmd_plan,
    cmd_profile,
    cmd_references,
    cmd_report,
    cmd_report_index,
    cmd_repro,
    cmd_restore_data,
    cmd_train,
    cmd_train_bimodal,
    cmd_tune,
    cmd_validate,
    name_arg,
    seed_arg,
)
from .dataset_specs import GENERATED


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
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("profile", help="write params.yaml as the full profile <name> (profiles/<name>.yaml, "
                                       "merged onto the profile it extends), validated")
    p.add_argument("name", nargs="?", help="a profile: mini, smoke, paper (profiles/<name>.yaml)")
    p.add_argument("--profiles", default="profiles", help="the folder of the profiles")
    p.add_argument("--out", default="params.yaml", help="the file written (with --check: the file compared)")
    p.add_argument("--check", action="store_true", help="write nothing: check that every profile merges, validates "
                   "and changes only what its overlay names, and say where --out differs from the mini profile")
    p.set_defaults(func=cmd_profile)

    for generator in GENERATED.values():  # the data commands: one per generated folder
        p = sub.add_parser(generator.command, help=generator.help)
        _add_params(p)
        p.add_argument("--out", default=f"data/{generator.name}", help="output folder")
        p.set_defaults(func=cmd_generate, generator=generator.name)

    p = sub.add_parser("restore-data", help="rebuild every generated dataset <root>/<name>/ from its manifest "
                                            "<root>/<name>.json (git-tracked) where missing or stale; seconds")
    p.add_argument("--root", default="data", help="the folder holding the manifests")
    p.add_argument("--verify", action="store_true", help="hash every folder's bytes and check its decoded splits' "
                                                         "hashes too (without it, an up-to-date folder's listing, "
                                                         "its names, sizes and change times, is checked, no bytes)")
    p.set_defaults(func=cmd_restore_data)

    p = sub.add_parser("train", help="one training run + linear probe, written to <out>/<method>-<dataset>-s<seed> "
                                       "(or a study run, see --study)")
    p.add_argument("--method", required=True, type=name_arg, help="a key of `methods` in params.yaml")
    p.add_argument("--dataset", type=name_arg, help="a registered dataset name, e.g. synth10 (grid runs)")
    p.add_argument("--seed", type=seed_arg, nargs="+", help="the seed(s): one run per seed, one after the other "
                                                       "(a study: default all of studies.<study>.seeds)")
    p.add_argument("--study", type=name_arg,
                   help="a key of `studies`: runs are written to studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value (one of studies.<study>.values; default: every value)")
    p.add_argument("--tuned", action="store_true", help="use the method's knobs selected on the validation split "
                                                        "(tuning/<method>/selected.json, written by `tune`)")
    _add_params(p)
    p.add_argument("--out", default="runs", help="where grid runs are written")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.add_argument("--random-init-baseline", action="store_true",
                   help="also probe the randomly initialised encoder (metrics: random_init_top1)")
    p.add_argument("--export-seed", type=seed_arg, metavar="N", nargs="+", default=[],
                   help="export (artifacts/encoder.pt and artifacts/features.pt, float16) for the runs of these seeds")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("references", help="the no-learning rows of a dataset (chance, a linear probe on raw pixels "
                                          "and on random-init encoders), written to <out>/<dataset>/metrics.json")
    p.add_argument("--dataset", required=True, type=name_arg, help="a registered dataset name, e.g. synth10_lt")
    _add_params(p)
    p.add_argument("--out", default="runs/references", help="where the rows are written")
    p.set_defaults(func=cmd_references)

    p = sub.add_parser("tune", help="select a method's knobs on a validation split (tuning, bimodal_tuning): "
                                     "tuning/<method>/{candidates.csv,selected.json}")
    p.add_argument("--method", required=True, type=name_arg, help="a key of tuning.methods or bimodal_tuning.methods")
    _add_params(p)
    p.add_argument("--out", default="tuning", help="where the selection is written")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("train-bimodal", help="one image-text run + zero-shot evaluation (bimodal section), "
                                             "written to <out>/<method>-s<seed>")
    p.add_argument("--method", required=True, type=name_arg, help="a key of `methods` with a bimodal loss (see "
                                                                 "bimodal.methods)")
    p.add_argument("--seed", type=seed_arg, nargs="+", required=True, help="the seed(s): one run per seed, one after "
                                                                      "the other")
    p.add_argument("--tuned", action="store_true", help="use the method's knobs selected on held-out training pairs "
                                                        "(tuning/<method>/selected.json, written by `tune`)")
    p.add_argument("--study", type=name_arg, help="a key of `bimodal_studies`: the run is written to "
                                   "studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value for this run (one of bimodal_studies.<study>.values)")
    _add_params(p)
    p.add_argument("--out", default="runs_bimodal", help="where the runs are written")
    p.add_argument("--untrained-baseline", action="store_true",
                   help="also the no-learning rows: metrics chance_<metric> and untrained_<metric> (the pair before "
                        "any image-text step)")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.set_defaults(func=cmd_train_bimodal)

    p = sub.add_parser("notebooks", help="build notebooks/*.ipynb from notebooks/src/*.py (or --check they match)")
    p.add_argument("--source", default="notebooks/src", help="the percent-format scripts (jupytext)")
    p.add_argument("--dest", default="notebooks", help="where the notebooks are written")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook differs from its source")
    p.set_defaults(func=cmd_notebooks)

    p = sub.add_parser("report", help="execute notebooks/<name>.ipynb with papermill into reports/<name>.ipynb, "
                                      "without execution timestamps")
    p.add_argument("name", help="the report, e.g. table1_unimodal")
    p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="a value for the notebook's parameters cell (repeatable), typed as papermill's -p types it")
    p.add_argument("--notebooks", default="notebooks", help="the notebooks (and their sources in <notebooks>/src)")
    p.add_argument("--reports", default="reports", help="where the executed notebook is written")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("report-index", help="render reports/<name>.ipynb to HTML; write reports/index.html + README.md")
    p.add_argument("names", nargs="+", help="report names, in the order shown")
    _add_params(p)
    p.add_argument("--reports", default="reports", help="the reports folder")
    p.set_defaults(func=cmd_report_index)

    p = sub.add_parser("plan", help="every run params.yaml defines, with its resolved method, dataset, epochs and "
                                    "knobs (tuned runs at their selection): what `make repro` trains")
    _add_params(p)
    p.add_argument("--tuning-dir", default="tuning", help="where the selections are (tuning/<method>/selected.json)")
    p.add_argument("--section", help="only the runs of this section (table1, tuning, studies, bimodal, ...)")
    p.add_argument("--cost", action="store_true",
                   help="instead, the schedule a forced repro of --params would take, per claim group, projected "
                        "from a record (isogclr.analysis.cost)")
    p.add_argument("--record", default="reports/repro_stages.csv",
                   help="with --cost: the stage log of a forced repro")
    p.add_argument("--record-params", default="params.yaml", help="with --cost: the params the record ran")
    p.add_argument("--slots", type=int, default=2, help="with --cost: stages at a time (make repro's JOBS)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("pipeline", help="write dvc.yaml from params.yaml and the code's imports (or --check it)")
    _add_params(p)
    p.add_argument("--out", default="dvc.yaml", help="the pipeline file")
    p.add_argument("--check", action="store_true", help="exit 1 if the file differs from what would be written")
    p.set_defaults(func=cmd_pipeline)

    p = sub.add_parser("convergence", help="EMC2's convergence and augmentation studies (emc2_convergence), "
                                           "written to <out>/{convergence,augmentations}.csv")
    _add_params(p)
    p.add_argument("--out", default="runs_convergence", help="output folder")
    p.add_argument("--checkpoints", default="checkpoints",
                   help="where each run's resumable checkpoint lives while training (<checkpoints>/convergence/)")
    p.set_defaults(func=cmd_convergence)

    p = sub.add_parser("repro", help="`dvc repro` with up to --jobs stages at a time (see isogclr.repro)")
    p.add_argument("--jobs", type=int, default=2, help="stages at a time; 1 = plain `dvc repro` order")
    p.add_argument("--root", default=".", help="the DVC project")
    p.add_argument("--force", action="store_true",
                   help="rerun every stage, up to date or not (verifies the replication from scratch)")
    p.set_defaults(func=cmd_repro)
    for command in sub.choices.values():
        command.formatter_class = _HelpFormatter
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as err:
        typed = sys.modules.get(f"{__package__}.config.typed")  # a ConfigError was raised, so its module is loaded
        if typed is None or not isinstance(err, typed.ConfigError):
            raise
        source = str(getattr(args, "params", "params.yaml"))
        print(f"error: {err}" if str(err).startswith(source) else f"error in {source}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
