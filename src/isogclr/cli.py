"""Command line: ``python -m isogclr <command> --help``.

The DVC stages call these commands; a researcher can call them by hand too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

from .config import (
    ConfigError,
    fashion_mnist_mini_spec,
    load_params,
    pair_spec,
    run_config,
    study_run_config,
    synthetic_spec,
    validate_params,
)


def _validate(args: argparse.Namespace) -> int:
    validate_params(load_params(args.params))
    print(f"{args.params}: valid")
    return 0


def _synthetic(args: argparse.Namespace) -> int:
    from .data.synthetic import write_synthetic

    params = load_params(args.params)
    spec = synthetic_spec(params)
    t0 = time.perf_counter()
    write_synthetic(spec, Path(args.out))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f}s ({spec})")
    return 0


def _fashion_mnist_mini(args: argparse.Namespace) -> int:
    from .data.fashion_mnist import write_fashion_mnist_mini

    params = load_params(args.params)
    spec = fashion_mnist_mini_spec(params)
    t0 = time.perf_counter()
    counts = write_fashion_mnist_mini(spec, Path((params.get("data") or {}).get("root", "data")), Path(args.out))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f}s ({counts}, {spec})")
    return 0


def _synthetic_pairs(args: argparse.Namespace) -> int:
    from .data.synthetic_pairs import write_synthetic_pairs

    spec = pair_spec(load_params(args.params))
    t0 = time.perf_counter()
    write_synthetic_pairs(spec, Path(args.out))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f}s ({spec})")
    return 0


def _train(args: argparse.Namespace) -> int:
    from .train.loop import train_run

    params = load_params(args.params)
    validate_params(params)
    if args.study is None:
        if args.dataset is None or args.value is not None:
            raise ConfigError("train: give --dataset (a grid run), or --study and --value (a study run)")
        cfg, out = run_config(params, args.method, args.dataset, args.seed), Path(args.out)
    else:
        if args.value is None or args.dataset is not None:
            raise ConfigError(f"studies.{args.study}: give --value (the study sets its own dataset)")
        cfg = study_run_config(params, args.study, args.method, yaml.safe_load(args.value), args.seed)
        out = Path("studies")
    train_run(cfg, out / cfg.run_id, Path(args.checkpoints) / cfg.run_id,
              random_init_baseline=args.random_init_baseline)
    return 0


def _train_bimodal(args: argparse.Namespace) -> int:
    from .config import bimodal_run_config, bimodal_study_run_config
    from .train.bimodal import train_bimodal_run

    params = load_params(args.params)
    validate_params(params)
    if (args.study is None) != (args.value is None):
        raise ConfigError("train-bimodal: give both --study and --value (a study run) or neither")
    if args.study is None:
        cfg, out = bimodal_run_config(params, args.method, args.seed), Path(args.out)
    else:
        cfg = bimodal_study_run_config(params, args.study, args.method, yaml.safe_load(args.value), args.seed)
        out = Path("studies")
    train_bimodal_run(cfg, out / cfg.run_id, Path(args.checkpoints) / f"bimodal-{cfg.run_id}")
    return 0


def _notebooks(args: argparse.Namespace) -> int:
    from .analysis.notebooks import build_notebooks

    stale = build_notebooks(Path(args.source), Path(args.dest), check=args.check)
    if args.check and stale:
        print("out of sync with their sources (run `python -m isogclr notebooks`):", *stale, sep="\n  ")
        return 1
    return 0


def _report_index(args: argparse.Namespace) -> int:
    from .analysis.index import build_index

    build_index(Path(args.reports), args.names, profile=str(load_params(args.params).get("profile", "?")))
    print(f"wrote {args.reports}/index.html and {args.reports}/README.md ({len(args.names)} reports)")
    return 0


def _repro(args: argparse.Namespace) -> int:
    from .repro import repro

    return repro(Path(args.root), args.jobs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m isogclr", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check params.yaml; every error names its key")
    p.add_argument("--params", default="params.yaml")
    p.set_defaults(func=_validate)

    p = sub.add_parser("synthetic", help="generate the synthetic image datasets (data.synthetic)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--out", default="data/synthetic")
    p.set_defaults(func=_synthetic)

    p = sub.add_parser("fashion-mnist-mini", help="write the mini Fashion-MNIST subset as an image folder "
                                                  "(data.fashion_mnist_mini)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--out", default="data/fashion_mnist_mini")
    p.set_defaults(func=_fashion_mnist_mini)

    p = sub.add_parser("synthetic-pairs", help="generate image-text pairs, retrieval and zero-shot sets "
                                               "(data.synthetic_pairs)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--out", default="data/synthetic_pairs")
    p.set_defaults(func=_synthetic_pairs)

    p = sub.add_parser("train", help="one training run + linear probe, written to <out>/<method>-<dataset>-s<seed> "
                                       "(or a study run, see --study)")
    p.add_argument("--method", required=True, help="a key of `methods` in params.yaml")
    p.add_argument("--dataset", help="a registered dataset name, e.g. synth10 (grid runs)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--study", help="a key of `studies`: the run is written to studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value for this run (one of studies.<study>.values)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--out", default="runs", help="where grid runs are written")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.add_argument("--random-init-baseline", action="store_true",
                   help="also probe the randomly initialised encoder (metrics: random_init_top1)")
    p.set_defaults(func=_train)

    p = sub.add_parser("train-bimodal", help="one image-text run + zero-shot evaluation (bimodal section), "
                                             "written to <out>/<method>-s<seed>")
    p.add_argument("--method", required=True, help="a key of `methods` with a bimodal loss (see bimodal.methods)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--study", help="a key of `bimodal_studies`: the run is written to "
                                   "studies/<study>/<method>-<value>-s<seed>")
    p.add_argument("--value", help="the study's knob value for this run (one of bimodal_studies.<study>.values)")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--out", default="runs_bimodal")
    p.add_argument("--checkpoints", default="checkpoints", help="where the resumable checkpoint lives while training")
    p.set_defaults(func=_train_bimodal)

    p = sub.add_parser("notebooks", help="build notebooks/*.ipynb from notebooks/src/*.py (or --check they match)")
    p.add_argument("--source", default="notebooks/src")
    p.add_argument("--dest", default="notebooks")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=_notebooks)

    p = sub.add_parser("report-index", help="render reports/<name>.ipynb to HTML; write reports/index.html + README.md")
    p.add_argument("names", nargs="+", help="report names, in the order shown")
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--reports", default="reports")
    p.set_defaults(func=_report_index)

    p = sub.add_parser("repro", help="`dvc repro` with up to --jobs stages at a time (see isogclr.repro)")
    p.add_argument("--jobs", type=int, default=2, help="stages at a time; 1 = plain `dvc repro` order")
    p.add_argument("--root", default=".", help="the DVC project")
    p.set_defaults(func=_repro)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"error in {getattr(args, 'params', 'params.yaml')}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
