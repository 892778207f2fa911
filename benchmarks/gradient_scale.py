"""SogCLR against SimCLR at the same optimizer: how much of the gap is the scale of the loss's gradient?

SogCLR's objective as the paper writes it, F = tau log g - z_a.z_a+ (eq. 5), has tau times the feature gradient of
SimCLR's cross-entropy (tests/test_losses.py::test_sogclr_gamma_one_is_simclr_without_positive_times_tau); the
authors' code sums the two views' terms, which doubles it. Every method of Table 1 runs with the same LARS
optimizer and learning rate, so at tau = 0.2 the paper form takes its steps from a gradient 5x smaller than
SimCLR's (2.5x for the official form). This script trains, on the selection's validation split (tuning: 20% of
synth10_lt's training images; the test split is never read) at Table 1's budget on synth10_lt, SimCLR and SogCLR
at one knob setting (tau 0.2, gamma 0.9) with the gradient at 0.2x, 0.4x and 1x of SimCLR's: the paper form, the
views' terms summed (``conventions.reduction: sum``), the official preset, and the loss divided by tau
(``conventions.loss_over_tau: true``), at the same seeds; it prints and writes each variant's validation top-1
and its paired difference from SimCLR with a 95% t interval.

The iSogCLR variants (not run by default: ``--variants simclr isogclr isogclr_over_tau --name
gradient_scale_isogclr``) do the same for iSogCLR at methods.isogclr's first candidate, its tau_i log g_i against
each term over its tau_i (``conventions.loss_over_tau: true``). ``--lr`` runs every variant at each learning rate
(the method knob ``lr``, which replaces train.optimizer.lr) and ``--epochs`` sets the budget: ``--variants simclr
sogclr --lr 2 8 16 --epochs 4 --seeds 0 --name learning_rate_4_epochs`` is the comparison of the selection's
budget with Table 1's (docs/losses.md, "The gradient's scale").

Usage: python benchmarks/gradient_scale.py [--seeds 0 1 2 3 4] [--variants ...] [--lr LR ...] [--epochs N]
       [--runs DIR] [--out reports/benchmarks] [--name gradient_scale]
Run folders (``--runs``, default a temporary folder) are reused when their config is unchanged.
"""

from __future__ import annotations

import argparse
import copy
import csv
import tempfile
from pathlib import Path

import torch

from isogclr.analysis.stats import paired_differences, t_interval
from isogclr.config.profiles import load_params
from isogclr.io import csv_text, save_text
from isogclr.losses.loss_table import build_loss
from isogclr.train.loop import train_run
from isogclr.train.tuning import tune_method

KNOBS = {"tau": 0.2, "gamma": 0.9}
# iSogCLR's knobs: methods.isogclr's first candidate (params.yaml)
ISOGCLR_KNOBS = {"rho": 0.3, "tau_init": 0.3, "eta": 0.01, "beta0": 0.9, "beta1": 0.9}
# name: (registered loss, its arguments beside its knobs, what it is)
VARIANTS = {
    "simclr": ("simclr", {}, "SimCLR"),
    "sogclr": ("sogclr", {}, "SogCLR, paper form (F = tau log g - pos)"),
    "sogclr_sum": ("sogclr", {"conventions": {"reduction": "sum"}}, "SogCLR, the two views' terms summed"),
    "sogclr_official": ("sogclr", {"convention": "official"}, "SogCLR, the official code's preset"),
    "sogclr_over_tau": ("sogclr", {"conventions": {"loss_over_tau": True}}, "SogCLR, F / tau"),
    "isogclr": ("isogclr", {}, "iSogCLR, paper form (tau_i log g_i)"),
    "isogclr_over_tau": ("isogclr", {"conventions": {"loss_over_tau": True}}, "iSogCLR, each term / tau_i"),
}
DEFAULT = ["simclr", "sogclr", "sogclr_sum", "sogclr_official", "sogclr_over_tau"]


def knobs_of(loss: str) -> dict:
    return {"simclr": {"tau": KNOBS["tau"]}, "isogclr": ISOGCLR_KNOBS}.get(loss, KNOBS)  # SimCLR has no gamma


def run_name(variant: str, lr: float | None) -> str:
    return variant if lr is None else f"{variant}_lr{lr:g}"


def variant_params(params: dict, seeds: list[int], variants: list[str], lrs: list[float | None],
                   epochs: int | None = None) -> dict:
    """params.yaml with one candidate per (variant, learning rate), selected on tuning's validation split at
    ``epochs`` (default: Table 1's synth10_lt budget)."""
    out = copy.deepcopy(params)
    out["methods"] = {}
    for name in variants:
        loss, args, _ = VARIANTS[name]
        for lr in lrs:
            own_rate = {} if lr is None else {"lr": lr}
            out["methods"][run_name(name, lr)] = {"loss": loss, **args, "search": [{**knobs_of(loss), **own_rate}]}
    out["tuning"].update(seeds=list(seeds), candidates=1, methods=list(out["methods"]),
                         epochs=epochs or params["train"]["epochs_by_dataset"][params["tuning"]["dataset"]])
    return out


def gradient_ratio(loss: str, args: dict, n: int = 128, dim: int = 64) -> float:
    """Norm of the feature gradient of ``loss`` over SimCLR's at tau 0.2 on one first-visit batch."""
    gen = torch.Generator().manual_seed(0)
    z1 = torch.nn.functional.normalize(torch.randn(n, dim, generator=gen), dim=1)
    z2 = torch.nn.functional.normalize(z1 + 0.5 * torch.randn(n, dim, generator=gen), dim=1)

    def norm(name: str, kwargs: dict) -> float:
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        fn = build_loss(name, n, **kwargs)
        (fn(a, b) if name == "simclr" else fn(a, b, torch.arange(n))).backward()
        return float(torch.cat([a.grad, b.grad]).norm())

    return norm(loss, {**knobs_of(loss), **args}) / norm("simclr", {"tau": KNOBS["tau"]})


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=DEFAULT)
    ap.add_argument("--lr", type=float, nargs="+", default=[None], help="learning rates (default: params.yaml's)")
    ap.add_argument("--epochs", type=int, default=None, help="default: Table 1's on synth10_lt")
    ap.add_argument("--runs", type=Path, default=None, help="run folders (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    ap.add_argument("--name", default="gradient_scale", help="the output files' name")
    return ap


def main() -> None:
    ap = build_parser()
    args = ap.parse_args()
    params = variant_params(load_params("params.yaml"), args.seeds, args.variants, args.lr, args.epochs)
    runs = args.runs or Path(tempfile.mkdtemp(prefix="gradient_scale-"))
    scores = {}
    for method in params["methods"]:
        tune_method(params, method, train_run, tuning_dir=runs, checkpoints=runs / "checkpoints")
        with open(runs / method / "candidates.csv") as f:
            scores[method] = {int(r["seed"]): float(r["val_top1"]) for r in csv.DictReader(f)}
    table = []
    for lr in args.lr:
        for name in args.variants:
            loss, loss_args, what = VARIANTS[name]
            method, reference = run_name(name, lr), run_name("simclr", lr)
            by_seed = scores[method]
            row = {"variant": name, "what": what,
                   "lr": lr or params["train"]["optimizer"]["lr"],
                   "gradient_vs_simclr": round(gradient_ratio(loss, loss_args), 3),
                   "val_top1_mean": round(sum(by_seed.values()) / len(by_seed), 2), "val_top1_by_seed": " ".join(
                       f"{by_seed[s]:.2f}" for s in sorted(by_seed))}
            if name != "simclr" and reference in scores:
                diffs = paired_differences(by_seed, scores[reference])
                row["vs_simclr"] = round(sum(diffs.values()) / len(diffs), 2)
                if len(diffs) > 1:  # one seed: the difference, no interval
                    diff = t_interval(diffs)
                    row.update(ci_low=round(diff.low, 2), ci_high=round(diff.high, 2))
            table.append(row)
    save_text(csv_text(table), args.out / f"{args.name}.csv")
    head = (f"Validation top-1 (%) on synth10_lt's selection split, {params['tuning']['epochs']} epochs, tau "
            f"{KNOBS['tau']}, gamma {KNOBS['gamma']} (iSogCLR: {ISOGCLR_KNOBS}), seeds {args.seeds}; the same LARS "
            "optimizer for every variant (params.yaml), at the learning rate of column lr. vs_simclr: paired by seed "
            "with SimCLR at the same rate, 95% t interval. Written by `python benchmarks/gradient_scale.py"
            + command_args(args, ap) + "`.\n\n")
    cols = list(dict.fromkeys(c for r in table for c in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in table]
    save_text(head + "\n".join(lines) + "\n", args.out / f"{args.name}.md")
    print(head + "\n".join(lines))


def command_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The options that differ from their defaults, as a command line (the folders --runs and --out left out)."""
    out = []
    for key in (a.dest for a in parser._actions if a.dest not in ("help", "runs", "out")):
        value = getattr(args, key)
        if value != parser.get_default(key):
            out.append(f"--{key} " + " ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                              for v in (value if isinstance(value, list) else [value])))
    return "".join(f" {part}" for part in out)


if __name__ == "__main__":
    main()
