"""Per-pair state on the model's device or in host memory (``bimodal.state_device``): step overhead and memory.

For each number of pairs n in ``--sizes`` and each option, one fresh process builds the image-text iSogCLR loss
(24 bytes of state per pair: log s, tau and its momentum per direction) for n pairs and times ``--steps`` loss
forward + backward passes on random unit features of a global batch of ``--batch`` pairs (``--dim`` dims,
random distinct indices), after two warm-up steps:

* ``model``: the state is a buffer of the loss on the model's device (here the CPU);
* ``cpu``: :class:`~isogclr.train.state_offload.HostStateLoss`: the state in host memory (pinned on CUDA), a
  window of B rows on the device, the batch's rows copied in and out every step.

It records the step time (median over the steps), the bytes of state on the model's device and on the host,
and the process's peak resident memory (``ru_maxrss``). On this CPU-only machine "device" and host are the same
RAM, so the peak RSS is about the same for both options; what the option changes on a GPU is the device column.

Usage: python benchmarks/bench_state.py [--sizes 1000000 10000000 100000000] [--batch 512] [--dim 256]
       [--steps 20] [--out reports/benchmarks]
Writes ``state.csv`` and ``state.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

COLUMNS = ["n", "option", "step_ms", "overhead_ms", "rows_ms", "device_state_mb", "host_state_mb", "peak_rss_mb",
           "build_s"]


def one(n: int, option: str, batch: int, dim: int, steps: int) -> dict:
    import resource
    import statistics

    import torch
    import torch.nn.functional as F

    from isogclr.losses import build_loss
    from isogclr.train.state_offload import HostStateLoss, state_bytes

    torch.set_num_threads(1)
    kwargs = {"rho": 6.0, "tau_init": 0.01, "tau_min": 0.005, "tau_max": 0.05}
    t0 = time.perf_counter()
    if option == "cpu":
        loss_fn = HostStateLoss(lambda k: build_loss("isogclr_bimodal", k, **kwargs), n, batch, torch.device("cpu"))
        device_bytes, host_bytes = state_bytes(loss_fn.window, batch), sum(
            t.numel() * t.element_size() for t in loss_fn.host.values())
    else:
        loss_fn = build_loss("isogclr_bimodal", n, **kwargs)
        device_bytes, host_bytes = state_bytes(loss_fn, n), 0
    build_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(0)
    times, rows_times = [], []
    for step in range(steps + 2):
        index = torch.randint(0, n, (batch * 2,), generator=g).unique()[:batch]
        while len(index) < batch:  # tiny n: draw without replacement
            index = torch.randperm(n, generator=g)[:batch]
        image = F.normalize(torch.randn(batch, dim, generator=g), dim=1).requires_grad_()
        text = F.normalize(torch.randn(batch, dim, generator=g), dim=1).requires_grad_()
        t0 = time.perf_counter()
        loss_fn(image, text, index).backward()
        if step >= 2:
            times.append(time.perf_counter() - t0)
        if option == "cpu":  # the row moves alone (the step's overhead, without the loss's noise)
            t0 = time.perf_counter()
            for name, host in loss_fn.host.items():
                torch.index_select(host, 0, index, out=loss_fn.staging[name])
                loss_fn.window.get_buffer(name).copy_(loss_fn.staging[name])
                host.index_copy_(0, index, loss_fn.window.get_buffer(name).to("cpu"))
            if step >= 2:
                rows_times.append(time.perf_counter() - t0)
    return {"n": n, "option": option, "step_ms": round(1000 * statistics.median(times), 2),
            "rows_ms": round(1000 * statistics.median(rows_times), 3) if rows_times else 0.0,
            "device_state_mb": round(device_bytes / 2**20, 2), "host_state_mb": round(host_bytes / 2**20, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "build_s": round(build_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="reports/benchmarks")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # n option: run in this (fresh) process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.batch, args.dim, args.steps)))
        return
    rows = []
    for n in args.sizes:
        for option in ("model", "cpu"):
            cmd = [sys.executable, __file__, "--one", str(n), option, "--batch", str(args.batch), "--dim",
                   str(args.dim), "--steps", str(args.steps)]
            row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            rows.append(row)
            print(row, flush=True)
    for row in rows:
        base = next(r for r in rows if r["n"] == row["n"] and r["option"] == "model")
        row["overhead_ms"] = round(row["step_ms"] - base["step_ms"], 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "state.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# Per-pair state on the device or in host memory (`bimodal.state_device`)", "",
             f"`python benchmarks/bench_state.py --sizes {' '.join(map(str, args.sizes))} --batch {args.batch} "
             f"--dim {args.dim} --steps {args.steps}` on {platform.processor() or platform.machine()}, one torch "
             "thread, image-text iSogCLR loss (24 bytes of state per pair), forward + backward of the loss only "
             "(median step). `overhead`: the step time minus the on-device option's at the same n (on a shared "
             "machine its noise is larger than the effect); `row moves`: the copies of the batch's rows in and "
             "out alone (median), the option's cost per step.", "",
             "| n pairs | state_device | step (ms) | overhead (ms) | row moves (ms) | state on the device (MB) "
             "| state on the host (MB) | peak RSS (MB) | build (s) |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['n']:,} | {r['option']} | {r['step_ms']} | {r['overhead_ms']} | {r['rows_ms']} | "
              f"{r['device_state_mb']} | "
              f"{r['host_state_mb']} | {r['peak_rss_mb']} | {r['build_s']} |" for r in rows]
    (out / "state.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'state.csv'} and {out / 'state.md'}")


if __name__ == "__main__":
    main()
