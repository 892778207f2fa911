"""Forward + backward time of every unimodal loss relative to the InfoNCE floor, on CPU.

The floor is ``torch.nn.functional.cross_entropy`` forward + backward on the (2B x 2B)
logits of the same features, including the similarity matmul and the diagonal mask
(the cheapest possible NT-Xent). Each entry is the median of several repeats (5 when a
run takes < 0.3 s, 3 when < 2 s, else 1); the floor is the minimum of three such timings
taken before, during and after the configuration's losses (robust to load from other
processes; it makes the ratios conservative). B = 2048 with d = 8192 is skipped (minutes per
run on CPU). Also measured: one SogCLR / iSogCLR step with n = 10**3 vs 10**7 samples of
per-sample state (the state is indexed, its cost must not depend on n; minimum over 3
interleaved rounds).

Usage: python benchmarks/bench_losses.py [--threads 1] [--out reports/benchmarks]
Writes ``losses.md`` (markdown tables) and ``losses.csv`` in the output directory.
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

from isogclr.losses import LOSSES, UNIMODAL_LOSSES, build_loss

BATCH_SIZES = (128, 512, 2048)
DIMS = (128, 256, 8192)
SKIP = {(2048, 8192)}
TAU = 0.1


def timed(fn) -> float:
    """Median wall time of ``fn`` (seconds) after one warm-up run."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    repeats = 5 if first < 0.3 else 3 if first < 2.0 else 1
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def make_features(b: int, d: int, normalized: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    z1, z2 = torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)
    if normalized:
        z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    return z1, z2


def floor_step(z1: torch.Tensor, z2: torch.Tensor):
    b = len(z1)
    target = (torch.arange(2 * b) + b) % (2 * b)

    def run():
        a, c = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        feats = torch.cat([a, c])
        logits = (feats @ feats.T).div_(TAU)
        logits.fill_diagonal_(float("-inf"))
        F.cross_entropy(logits, target).backward()

    return run


def loss_kwargs(name: str, b: int, d: int) -> tuple[int, dict]:
    """(num_samples, constructor kwargs) for the benchmark of ``name``."""
    if name == "negcache":
        return 4 * b, {"dim": d}  # a cache of 4B entries
    if name in ("simclr", "sogclr", "flatclr", "simo"):
        return b, {"tau": TAU}
    return b, {}


def loss_step(name: str, z1: torch.Tensor, z2: torch.Tensor):
    b, d = z1.shape
    n, kwargs = loss_kwargs(name, b, d)
    loss_fn = build_loss(name, n, **kwargs)
    index = torch.arange(b)
    extra = {}
    if name == "negcache":
        g = torch.Generator().manual_seed(1)
        loss_fn.update_cache(torch.arange(n), F.normalize(torch.randn(n, d, generator=g), dim=1))
    if name == "tau_simclr":
        extra = {"e1": torch.zeros(b), "e2": torch.zeros(b)}

    def run():
        a, c = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        loss_fn(a, c, index, **extra).backward()

    return run


def state_step(name: str, n: int, b: int = 512, d: int = 256):
    loss_fn = build_loss(name, n, **({"tau": TAU} if name == "sogclr" else {}))
    index = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:b]
    z1, z2 = make_features(b, d, True)

    def run():
        a, c = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        loss_fn(a, c, index).backward()

    return run


def state_cost(name: str, sizes=(10**3, 10**7), rounds: int = 3) -> list[float]:
    """Step time for each n: the minimum over interleaved rounds of the median of repeats
    (interleaving and the minimum discount load from other processes)."""
    steps = [state_step(name, n) for n in sizes]
    times = [[timed(step) for step in steps] for _ in range(rounds)]
    return [min(row[k] for row in times) for k in range(len(sizes))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: stable timings on a shared 2-core machine)")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)

    rows = []
    configs = [(b, d) for b in BATCH_SIZES for d in DIMS if (b, d) not in SKIP]
    started = time.perf_counter()
    for b, d in configs:
        floor_runs = {normalized: floor_step(*make_features(b, d, normalized)) for normalized in (True, False)}
        floor_times = {normalized: [timed(run)] for normalized, run in floor_runs.items()}
        seconds = {}
        for k, name in enumerate(UNIMODAL_LOSSES):
            normalized = getattr(LOSSES[name], "expects_normalized", True)
            seconds[name] = timed(loss_step(name, *make_features(b, d, normalized)))
            if k in (len(UNIMODAL_LOSSES) // 2, len(UNIMODAL_LOSSES) - 1):  # re-time the floor: min of 3
                for normalized, run in floor_runs.items():
                    floor_times[normalized].append(timed(run))
        floor = {normalized: min(times) for normalized, times in floor_times.items()}
        for name in UNIMODAL_LOSSES:
            base = floor[getattr(LOSSES[name], "expects_normalized", True)]
            rows.append({"loss": name, "B": b, "d": d, "ms": 1e3 * seconds[name], "floor_ms": 1e3 * base,
                         "ratio": seconds[name] / base})
            print(f"B={b:5d} d={d:5d} {name:14s} {1e3 * seconds[name]:10.1f} ms  x{seconds[name] / base:.2f}",
                  flush=True)
    state_rows = []
    for name in ("sogclr", "isogclr"):
        small, large = state_cost(name)
        state_rows.append({"loss": name, "n=1e3 ms": 1e3 * small, "n=1e7 ms": 1e3 * large, "ratio": large / small})
        print(f"{name}: n=1e3 {1e3 * small:.1f} ms, n=1e7 {1e3 * large:.1f} ms", flush=True)
    elapsed = time.perf_counter() - started

    with open(args.out / "losses.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["loss", "B", "d", "ms", "floor_ms", "ratio"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in row.items()})

    header = [f"B={b}, d={d}" for b, d in configs]
    lines = [
        "# Loss benchmark: forward + backward time relative to the InfoNCE floor",
        "",
        f"CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}, "
        f"{args.threads} intra-op thread(s), float32. Generated by `benchmarks/bench_losses.py` in {elapsed:.0f} s.",
        "",
        "Floor: `F.cross_entropy` forward + backward on the (2B x 2B) logits `cat(z1, z2) @ cat(z1, z2).T / tau`",
        "with the diagonal masked (matmul included), same features. Entries: loss time / floor time",
        "(median of 5, 3 or 1 repeats by run length; the floor is the minimum of 3 such timings spread",
        "over the configuration, so the ratios err upward). Barlow Twins and VICReg get un-normalized features",
        "(their floor uses the same features). `negcache` has a cache of n = 4B entries, `emc2` its default",
        "R = 2B - 2 M-H steps. `simco`, `simo` and `spectral` use cross-view negatives by default: one",
        "B x B matmul instead of the floor's 2B x 2B, hence ratios below 1. Skipped: "
        + ", ".join(f"B={b} with d={d}" for b, d in sorted(SKIP)) + " (minutes per run on CPU).",
        "Timings on a shared machine: the ratios (loss and floor measured back to back) are more stable",
        "than the absolute times.",
        "",
        "| loss | " + " | ".join(header) + " |",
        "|---|" + "---|" * len(header),
    ]
    floor_ms = {(r["B"], r["d"]): r["floor_ms"] for r in rows if r["loss"] == "simclr"}
    lines.append("| floor (ms) | " + " | ".join(f"{floor_ms[c]:.1f}" for c in configs) + " |")
    for name in UNIMODAL_LOSSES:
        ratios = {(r["B"], r["d"]): r["ratio"] for r in rows if r["loss"] == name}
        lines.append(f"| {name} | " + " | ".join(f"{ratios[c]:.2f}" for c in configs) + " |")
    lines += [
        "",
        "## Per-sample state: one step at B = 512, d = 256 with n samples",
        "",
        "Minimum over 3 interleaved rounds of the median of 5 steps.",
        "",
        "| loss | n = 10^3 (ms) | n = 10^7 (ms) | ratio |",
        "|---|---|---|---|",
    ]
    for row in state_rows:
        lines.append(f"| {row['loss']} | {row['n=1e3 ms']:.1f} | {row['n=1e7 ms']:.1f} | {row['ratio']:.2f} |")
    (args.out / "losses.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'losses.md'} and {args.out / 'losses.csv'} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
