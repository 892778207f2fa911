"""Training-step cost of the individualized temperatures, and the data pipeline's share of a step, on CPU.

1. One full training step (two augmented views, encoder + head forward/backward, loss, LARS
   step) for SimCLR, SogCLR and iSogCLR, measured side by side (interleaved rounds, median
   per method) with the mini encoder (ResNet-18, width 16, 16x16) and with ResNet-18 (width 64,
   32x32). Target: SogCLR and iSogCLR at most 1.05x SimCLR.
2. The same iSogCLR step with per-sample state for n = 10**3 and n = 10**7 samples.
3. The fraction of a mini-scale step spent fetching the batch and augmenting it.

Usage: python benchmarks/bench_train.py [--rounds 5] [--out reports/benchmarks]
Writes ``train.md`` and ``train.csv``.
"""

from __future__ import annotations

import argparse
import csv
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from isogclr.data.augment import AugmentConfig, simclr_augmentation, to_float
from isogclr.losses import build_loss
from isogclr.models import ContrastiveModel, EncoderConfig, HeadConfig
from isogclr.train.optim import OptimConfig, build_optimizer

METHODS = {"simclr": {"tau": 0.2}, "sogclr": {"tau": 0.2, "gamma": 0.9}, "isogclr": {"tau_init": 0.3}}
SETTINGS = {  # name: (width, image size, head hidden/out, batch)
    "mini (ResNet-18 w16, 16px)": (16, 16, 512, 128),
    "ResNet-18 (w64, 32px)": (64, 32, 2048, 128),
}


def make_step(width: int, size: int, head: int, batch: int, method: str, n: int):
    torch.manual_seed(0)
    model = ContrastiveModel(EncoderConfig(width=width), HeadConfig(layers=3, hidden_dim=head, out_dim=head))
    optimizer = build_optimizer(model, OptimConfig(lr=1.0), batch)
    loss_fn = build_loss(method, n, **METHODS[method])
    augment = simclr_augmentation(AugmentConfig(crop_scale_min=0.5), size)
    images = torch.randint(0, 256, (batch, 3, size, size), dtype=torch.uint8)
    gen = torch.Generator().manual_seed(1)

    def step() -> tuple[float, float]:
        t0 = time.perf_counter()
        index = torch.randperm(n, generator=gen)[:batch] if n < 10**6 else torch.randint(0, n, (batch,),
                                                                                           generator=gen).unique()
        x = to_float(images[: len(index)])
        views = torch.cat([augment(x), augment(x)])
        t1 = time.perf_counter()
        _, proj = model(views)
        z1, z2 = F.normalize(proj, dim=1).chunk(2)
        loss = loss_fn(z1, z2, index)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        t2 = time.perf_counter()
        return t2 - t0, t1 - t0

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="reports/benchmarks")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for setting, (width, size, head, batch) in SETTINGS.items():
        steps = {m: make_step(width, size, head, batch, m, 50_000) for m in METHODS}
        for step in steps.values():
            step()  # warm-up
        times = {m: [] for m in METHODS}
        for _ in range(args.rounds):  # interleaved: load from other processes hits every method alike
            for m, step in steps.items():
                times[m].append(step()[0])
        base = statistics.median(times["simclr"])
        for m in METHODS:
            med = statistics.median(times[m])
            rows.append({"setting": setting, "measure": f"{m} step", "ms": round(1000 * med, 1),
                         "ratio": round(med / base, 3)})
    width, size, head, batch = SETTINGS["mini (ResNet-18 w16, 16px)"]
    state = {n: make_step(width, size, head, batch, "isogclr", n) for n in (10**3, 10**7)}
    for step in state.values():
        step()
    times = {n: [] for n in state}
    for _ in range(args.rounds):
        for n, step in state.items():
            times[n].append(step()[0])
    small = statistics.median(times[10**3])
    for n in state:
        rows.append({"setting": "mini (ResNet-18 w16, 16px)", "measure": f"isogclr step, n = {n:.0e}",
                     "ms": round(1000 * statistics.median(times[n]), 1),
                     "ratio": round(statistics.median(times[n]) / small, 3)})
    step = make_step(width, size, head, batch, "isogclr", 50_000)
    step()
    parts = [step() for _ in range(args.rounds)]
    share = statistics.median(d / t for t, d in parts)
    rows.append({"setting": "mini (ResNet-18 w16, 16px)", "measure": "data (fetch + augment) share of a step",
                 "ms": round(1000 * statistics.median(d for _, d in parts), 1), "ratio": round(share, 3)})

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "train.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Training-step benchmark (CPU)", "",
        f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{args.rounds} interleaved rounds (median). Generated by `benchmarks/bench_train.py` in "
        f"{time.perf_counter() - start:.0f} s. Ratios: to SimCLR's step (rows 'step'), to n = 1e+03 "
        "(state rows), or the fraction of the step (data row). Synthetic uint8 batches held in memory, as "
        "the mini pipeline's datasets are.", "",
        "| setting | measure | ms | ratio |", "|---|---|---|---|",
        *[f"| {r['setting']} | {r['measure']} | {r['ms']} | {r['ratio']} |" for r in rows], "",
        "State memory per sample: iSogCLR 12 bytes (log s, u, tau, float32), SogCLR v1 8 bytes (log u per view).",
    ]
    (out / "train.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
