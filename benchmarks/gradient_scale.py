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

Usage: python benchmarks/gradient_scale.py [--seeds 0 1 2 3 4] [--runs DIR] [--out reports/benchmarks]
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
from isogclr.config import load_params
from isogclr.io import csv_text, save_text
from isogclr.losses.registry import build_loss
from isogclr.train.loop import train_run
from isogclr.train.tuning import tune_method

KNOBS = {"tau": 0.2, "gamma": 0.9}
# name: (registered loss, its arguments beside KNOBS, what it is)
VARIANTS = {
    "simclr": ("simclr", {}, "SimCLR"),
    "sogclr": ("sogclr", {}, "SogCLR, paper form (F = tau log g - pos)"),
    "sogclr_sum": ("sogclr", {"conventions": {"reduction": "sum"}}, "SogCLR, the two views' terms summed"),
    "sogclr_official": ("sogclr", {"convention": "official"}, "SogCLR, the official code's preset"),
    "sogclr_over_tau": ("sogclr", {"conventions": {"loss_over_tau": True}}, "SogCLR, F / tau"),
}


def variant_params(params: dict, seeds: list[int]) -> dict:
    """params.yaml with one candidate per variant, selected on tuning's validation split at Table 1's
    synth10_lt budget."""
    out = copy.deepcopy(params)
    out["methods"] = {}
    for name, (loss, args, _) in VARIANTS.items():  # SimCLR has no gamma
        knobs = {"tau": KNOBS["tau"]} if loss == "simclr" else dict(KNOBS)
        out["methods"][name] = {"loss": loss, **args, "search": [knobs]}
    out["tuning"].update(seeds=list(seeds), candidates=1, methods=list(VARIANTS),
                         epochs=params["train"]["epochs_by_dataset"][params["tuning"]["dataset"]])
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

    knobs = {"tau": KNOBS["tau"]} if loss == "simclr" else dict(KNOBS)
    return norm(loss, {**knobs, **args}) / norm("simclr", {"tau": KNOBS["tau"]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--runs", type=Path, default=None, help="run folders (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = ap.parse_args()
    params = variant_params(load_params("params.yaml"), args.seeds)
    runs = args.runs or Path(tempfile.mkdtemp(prefix="gradient_scale-"))
    scores = {}
    for name in VARIANTS:
        tune_method(params, name, train_run, tuning_dir=runs, checkpoints=runs / "checkpoints")
        with open(runs / name / "candidates.csv") as f:
            scores[name] = {int(r["seed"]): float(r["val_top1"]) for r in csv.DictReader(f)}
    table = []
    for name, (loss, loss_args, what) in VARIANTS.items():
        mean = t_interval(scores[name])
        row = {"variant": name, "what": what, "gradient_vs_simclr": round(gradient_ratio(loss, loss_args), 3),
               "val_top1_mean": round(mean.estimate, 2), "val_top1_by_seed": " ".join(
                   f"{scores[name][s]:.2f}" for s in sorted(scores[name]))}
        if name != "simclr":
            diff = t_interval(paired_differences(scores[name], scores["simclr"]))
            row.update(vs_simclr=round(diff.estimate, 2), ci_low=round(diff.low, 2), ci_high=round(diff.high, 2))
        table.append(row)
    save_text(csv_text(table), args.out / "gradient_scale.csv")
    head = (f"Validation top-1 (%) on synth10_lt's selection split, {params['tuning']['epochs']} epochs (Table 1's "
            f"budget), tau {KNOBS['tau']}, gamma {KNOBS['gamma']}, seeds {args.seeds}; the same LARS optimizer and "
            "learning rate for every variant (params.yaml). vs_simclr: paired by seed, 95% t interval. Written by "
            "`python benchmarks/gradient_scale.py`.\n\n")
    cols = list(table[-1])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in table]
    save_text(head + "\n".join(lines) + "\n", args.out / "gradient_scale.md")
    print(head + "\n".join(lines))


if __name__ == "__main__":
    main()
