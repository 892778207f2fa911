"""Cross-machine stability, measured: a sample of Table 1's committed runs rerun with other CPU kernels.

Another machine type computes the same run with other kernels (ATen picks AVX-512, AVX2 or the default by the
CPU), so its roundings differ. This benchmark reruns a sample of Table 1's runs exactly as the pipeline does
(``python -m isogclr train --method M --dataset D --seed S --tuned``, the committed params and selections) in a
process with ``ATEN_CPU_CAPABILITY=avx2``, into a folder outside the project, and reports

* each rerun's test top-1 against the committed run's (the same run, other roundings);
* every Table 1 verdict (the pairwise orderings and claim (iii)) recomputed with the sample's scores in place of
  the committed ones (the other seeds unchanged): its status and effect before and after, and the effect's
  movement against the half-width of its interval.

Usage (resumable: a run whose ``metrics.json`` exists is not trained again; one torch thread per process):
    python benchmarks/cross_machine.py --seeds 0 1 2 --work /tmp/isogclr-avx2     # train the sample
    python benchmarks/cross_machine.py --seeds 0 1 2 --work /tmp/isogclr-avx2 --report
        # reports/benchmarks/cross_machine.{csv,md}
The machine's own kernels are those the committed runs used; ``--capability`` names the others (avx2 by default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from isogclr.analysis.table1 import longtail_gain_verdict, no_learning_floors, table1_verdicts
from isogclr.analysis.tables import collect_runs
from isogclr.analysis.testbed import reference_runs
from isogclr.config.core import run_id
from isogclr.config.profiles import load_params
from isogclr.config.sections import table_spec
from isogclr.io import csv_text, save_text

ROOT = Path(__file__).resolve().parents[1]


def train_sample(params_path: Path, work: Path, methods: list[str], datasets: list[str], seeds: list[int],
                 capability: str) -> None:
    """Train every (method, dataset, seed) of the sample that ``work`` does not hold yet, under ``capability``."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability, PYTHONHASHSEED="0", HF_HUB_OFFLINE="1")
    for dataset in datasets:
        for method in methods:
            todo = [s for s in seeds if not (work / "runs" / run_id(method, dataset, s) / "metrics.json").exists()]
            if not todo:
                continue
            cmd = [sys.executable, "-m", "isogclr", "train", "--method", method, "--dataset", dataset, "--seed",
                   *map(str, todo), "--tuned", "--params", str(params_path), "--out", str(work / "runs"),
                   "--checkpoints", str(work / "checkpoints")]
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT, env=env)


def verdict_frame(claims: list) -> pd.DataFrame:
    return pd.DataFrame([{"claim": c.claim, "status": c.status, "effect": c.effect, "ci_low": c.ci_low,
                          "ci_high": c.ci_high} for c in claims]).set_index("claim")


def table1_claims(runs: pd.DataFrame, spec, floors: dict) -> pd.DataFrame:
    claims = table1_verdicts(runs, spec, floors=floors)
    claims.append(longtail_gain_verdict(runs, spec, "synth10_lt", "synth10"))
    return verdict_frame(claims)


def report(params_path: Path, work: Path, methods: list[str], datasets: list[str], seeds: list[int],
           capability: str, out: Path) -> str:
    params = load_params(params_path)
    spec = table_spec(params, "table1")
    committed = collect_runs(ROOT / "runs", list(spec.methods), list(spec.datasets), list(spec.seeds))
    sample = collect_runs(work / "runs", methods, datasets, seeds)
    ref_spec = table_spec(params, "references")
    floors = no_learning_floors(reference_runs(ROOT / "runs", ref_spec.datasets, ref_spec.seeds))

    runs = committed.merge(sample, on=["method", "dataset", "seed"], how="left", suffixes=("", "_other"))
    runs["change"] = runs["top1_other"] - runs["top1"]
    moved_runs = runs.dropna(subset=["top1_other"])[["method", "dataset", "seed", "top1", "top1_other", "change"]]
    substituted = runs.assign(top1=runs["top1_other"].fillna(runs["top1"]))[["method", "dataset", "seed", "top1"]]

    before, after = table1_claims(committed, spec, floors), table1_claims(substituted, spec, floors)
    table = before.add_suffix(" committed").join(after.add_suffix(f" {capability}"))
    half_width = (table["ci_high committed"] - table["ci_low committed"]) / 2
    table["effect moved"] = table[f"effect {capability}"] - table["effect committed"]
    table["moved / half-width"] = table["effect moved"].abs() / half_width
    table["status kept"] = table["status committed"].eq(table[f"status {capability}"])
    table = table.reset_index()

    out.mkdir(parents=True, exist_ok=True)
    save_text(csv_text(table.round(4).to_dict("records")), out / "cross_machine.csv")
    save_text(csv_text(moved_runs.round(4).to_dict("records")), out / "cross_machine_runs.csv")
    lines = [
        "# Cross-machine stability: a sample of Table 1's runs under other CPU kernels",
        "",
        f"Written by `python benchmarks/cross_machine.py --seeds {' '.join(map(str, seeds))} --report` from the "
        f"committed runs and the same runs retrained with `ATEN_CPU_CAPABILITY={capability}` (methods "
        f"{', '.join(methods)}; datasets {', '.join(datasets)}; seeds {seeds}), the committed params and "
        "selections. Test top-1 (%), read from each run's metrics.json.",
        "",
        "## The runs",
        "",
        f"Median |change| {moved_runs['change'].abs().median():.2f} points, largest "
        f"{moved_runs['change'].abs().max():.2f}, over {len(moved_runs)} runs.",
        "",
        moved_runs.round(2).to_markdown(index=False),
        "",
        "## Every Table 1 verdict with the sample's scores in place of the committed ones",
        "",
        f"Statuses kept: **{int(table['status kept'].sum())} of {len(table)}**; the largest movement of an effect "
        f"is {table['moved / half-width'].max():.2f} of its interval's half-width.",
        "",
        table.round(3).to_markdown(index=False),
        "",
    ]
    text = "\n".join(lines)
    save_text(text, out / "cross_machine.md")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--work", type=Path, default=Path("/tmp/isogclr-cross-machine"),
                        help="where the reruns are written (outside the project)")
    parser.add_argument("--methods", nargs="+", default=["simclr", "sogclr", "isogclr"])
    parser.add_argument("--datasets", nargs="+", default=["synth10", "synth10_lt"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--capability", default="avx2", help="ATEN_CPU_CAPABILITY of the reruns")
    parser.add_argument("--report", action="store_true", help="write reports/benchmarks/cross_machine.{csv,md}")
    args = parser.parse_args()
    if args.report:
        print(report(args.params, args.work, args.methods, args.datasets, args.seeds, args.capability,
                     ROOT / "reports" / "benchmarks"))
    else:
        train_sample(args.params.resolve(), args.work.resolve(), args.methods, args.datasets, args.seeds,
                     args.capability)


if __name__ == "__main__":
    main()
