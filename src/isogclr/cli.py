"""Command line: ``python -m isogclr <command> --help``.

The DVC stages call these commands; a researcher can call them by hand too. Only the standard library is
imported at the top, so ``--help`` answers at once; a command imports what it needs (torch, DVC,
papermill) when it runs. Each command is one entry of :data:`COMMANDS` (its handler in :mod:`isogclr.commands`);
:func:`build_parser` makes the parser of them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
from .dataset_specs import GENERATED, Generator


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that shows each option's default, except the uninformative None and False."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default in (None, False) else super()._get_help_string(action)


Argument = tuple[tuple[str, ...], dict[str, Any]]  # the flags and keywords of one ``add_argument`` call


def _arg(*flags: str, **kwargs: Any) -> Argument:
    return flags, kwargs


@dataclass(frozen=True)
class Command:
    """A command: its name, help line, handler (:mod:`isogclr.commands`), arguments and fixed defaults."""

    name: str
    help: str
    func: Callable[[argparse.Namespace], int]
    args: tuple[Argument, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)


PARAMS = _arg("--params", default="params.yaml", help="the parameters (params.yaml or a profile)")
CHECKPOINTS = _arg("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")


def _data_command(generator: Generator) -> Command:
    """The command that writes a generated folder (:data:`isogclr.dataset_specs.GENERATED`)."""
    return Command(generator.command, generator.help, cmd_generate,
                   (PARAMS, _arg("--out", default=f"data/{generator.name}", help="output folder")),
                   {"generator": generator.name})


COMMANDS: tuple[Command, ...] = (
    Command("validate", "check params.yaml (every error names its key), that the datasets it reads are on disk, and "
            "warn when the paper profile has no GPU", cmd_validate, (
                PARAMS,
                _arg("--skip-data", action="store_true", help="check the parameters only, not the datasets on disk"))),
    Command("profile", "write params.yaml as the full profile <name> (profiles/<name>.yaml, merged onto the profile it "
            "extends), validated", cmd_profile, (
                _arg("name", nargs="?", help="a profile: mini, smoke, paper (profiles/<name>.yaml)"),
                _arg("--profiles", default="profiles", help="the folder of the profiles"),
                _arg("--out", default="params.yaml", help="the file written (with --check: the file compared)"),
                _arg("--check", action="store_true", help="write nothing: check that every profile merges, validates "
                     "and changes only what its overlay names, and say where --out differs from the mini profile"))),
    *(_data_command(generator) for generator in GENERATED.values()),  # one per generated folder
    Command("restore-data", "rebuild every generated dataset <root>/<name>/ from its manifest <root>/<name>.json "
            "(git-tracked) where missing or stale; seconds", cmd_restore_data, (
                _arg("--root", default="data", help="the folder holding the manifests"),
                _arg("--verify", action="store_true", help="hash every folder's bytes and check its decoded splits' "
                     "hashes too (without it, an up-to-date folder's listing, its names, sizes and change times, is "
                     "checked, no bytes)"))),
    Command("train", "one training run + linear probe, written to <out>/<method>-<dataset>-s<seed> (or a study run, "
            "see --study)", cmd_train, (
                _arg("--method", required=True, type=name_arg, help="a key of `methods` in params.yaml"),
                _arg("--dataset", type=name_arg, help="a registered dataset name, e.g. synth10 (grid runs)"),
                _arg("--seed", type=seed_arg, nargs="+", help="the seed(s): one run per seed, one after the other (a "
                     "study: default all of studies.<study>.seeds)"),
                _arg("--study", type=name_arg,
                     help="a key of `studies`: runs are written to studies/<study>/<method>-<value>-s<seed>"),
                _arg("--value", help="the study's knob value (one of studies.<study>.values; default: every value)"),
                _arg("--tuned", action="store_true", help="use the method's knobs selected on the validation split "
                     "(tuning/<method>/selected.json, written by `tune`)"),
                PARAMS,
                _arg("--out", default="runs", help="where grid runs are written"),
                CHECKPOINTS,
                _arg("--random-init-baseline", action="store_true",
                     help="also probe the randomly initialised encoder (metrics: random_init_top1)"),
                _arg("--export-seed", type=seed_arg, metavar="N", nargs="+", default=[], help="export "
                     "(artifacts/encoder.pt and artifacts/features.pt, float16) for the runs of these seeds"))),
    Command("references", "the no-learning rows of a dataset (chance, a linear probe on raw pixels and on random-init "
            "encoders), written to <out>/<dataset>/metrics.json", cmd_references, (
                _arg("--dataset", required=True, type=name_arg, help="a registered dataset name, e.g. synth10_lt"),
                PARAMS,
                _arg("--out", default="runs/references", help="where the rows are written"))),
    Command("tune", "select a method's knobs on a validation split (tuning, bimodal_tuning): "
            "tuning/<method>/{candidates.csv,selected.json}", cmd_tune, (
                _arg("--method", required=True, type=name_arg,
                     help="a key of tuning.methods or bimodal_tuning.methods"),
                PARAMS,
                _arg("--out", default="tuning", help="where the selection is written"),
                CHECKPOINTS)),
    Command("train-bimodal", "one image-text run + zero-shot evaluation (bimodal section), written to "
            "<out>/<method>-s<seed>", cmd_train_bimodal, (
                _arg("--method", required=True, type=name_arg,
                     help="a key of `methods` with a bimodal loss (see bimodal.methods)"),
                _arg("--seed", type=seed_arg, nargs="+", required=True,
                     help="the seed(s): one run per seed, one after the other"),
                _arg("--tuned", action="store_true", help="use the method's knobs selected on held-out training pairs "
                     "(tuning/<method>/selected.json, written by `tune`)"),
                _arg("--study", type=name_arg,
                     help="a key of `bimodal_studies`: the run is written to studies/<study>/<method>-<value>-s<seed>"),
                _arg("--value", help="the study's knob value for this run (one of bimodal_studies.<study>.values)"),
                PARAMS,
                _arg("--out", default="runs_bimodal", help="where the runs are written"),
                _arg("--untrained-baseline", action="store_true", help="also the no-learning rows: metrics "
                     "chance_<metric> and untrained_<metric> (the pair before any image-text step)"),
                CHECKPOINTS)),
    Command("notebooks", "build notebooks/*.ipynb from notebooks/src/*.py (or --check they match)", cmd_notebooks, (
        _arg("--source", default="notebooks/src", help="the percent-format scripts (jupytext)"),
        _arg("--dest", default="notebooks", help="where the notebooks are written"),
        _arg("--check", action="store_true", help="write nothing; exit 1 if a notebook differs from its source"))),
    Command("report", "execute notebooks/<name>.ipynb with papermill into reports/<name>.ipynb, without execution "
            "timestamps", cmd_report, (
                _arg("name", help="the report, e.g. table1_unimodal"),
                _arg("-p", "--parameter", nargs=2, action="append", metavar=("KEY", "VALUE"), help="a value for the "
                     "notebook's parameters cell (repeatable), typed as papermill's -p types it"),
                _arg("--notebooks", default="notebooks",
                     help="the notebooks (and their sources in <notebooks>/src)"),
                _arg("--reports", default="reports", help="where the executed notebook is written"))),
    Command("report-index", "render reports/<name>.ipynb to HTML; write reports/index.html + README.md",
            cmd_report_index, (
                _arg("names", nargs="+", help="report names, in the order shown"),
                PARAMS,
                _arg("--reports", default="reports", help="the reports folder"))),
    Command("plan", "every run params.yaml defines, with its resolved method, dataset, epochs and knobs (tuned runs at "
            "their selection): what `make repro` trains", cmd_plan, (
                PARAMS,
                _arg("--tuning-dir", default="tuning",
                     help="where the selections are (tuning/<method>/selected.json)"),
                _arg("--section", help="only the runs of this section (table1, tuning, studies, bimodal, ...)"),
                _arg("--cost", action="store_true", help="instead, the schedule a forced repro of --params would "
                     "take, per claim group, projected from a record (isogclr.analysis.cost)"),
                _arg("--record", default="reports/repro_stages.csv",
                     help="with --cost: the stage log of a forced repro"),
                _arg("--record-params", default="params.yaml", help="with --cost: the params the record ran"),
                _arg("--slots", type=int, default=2, help="with --cost: stages at a time (make repro's JOBS)"))),
    Command("pipeline", "write dvc.yaml from params.yaml and the code's imports (or --check it)", cmd_pipeline, (
        PARAMS,
        _arg("--out", default="dvc.yaml", help="the pipeline file"),
        _arg("--check", action="store_true", help="exit 1 if the file differs from what would be written"))),
    Command("convergence", "EMC2's convergence and augmentation studies (emc2_convergence), written to "
            "<out>/{convergence,augmentations}.csv", cmd_convergence, (
                PARAMS,
                _arg("--out", default="runs_convergence", help="output folder"),
                _arg("--checkpoints", default="checkpoints", help="where each run's resumable checkpoint lives "
                     "while training (<checkpoints>/convergence/)"))),
    Command("repro", "`dvc repro` with up to --jobs stages at a time (see isogclr.repro)", cmd_repro, (
        _arg("--jobs", type=int, default=2, help="stages at a time; 1 = plain `dvc repro` order"),
        _arg("--root", default=".", help="the DVC project"),
        _arg("--force", action="store_true",
             help="rerun every stage, up to date or not (verifies the replication from scratch)"))),
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of :data:`COMMANDS`, one sub-command each."""
    parser = argparse.ArgumentParser(prog="python -m isogclr", description=__doc__.splitlines()[0],
                                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"isogclr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, formatter_class=_HelpFormatter)
        for flags, kwargs in command.args:
            p.add_argument(*flags, **kwargs)
        p.set_defaults(func=command.func, **command.defaults)
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
