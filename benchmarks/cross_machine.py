"""Cross-machine stability, measured: Table 1's committed runs against the same runs on another machine type, and
against an emulation of one (other CPU kernels on the committed runs' machine type).

Another machine type computes the same run with other kernels (ATen picks AVX-512, AVX2 or the default by the
CPU, oneDNN and the BLAS dispatch by CPU too), so its roundings differ, and training grows a difference of one
rounding into a new draw of its noise. Two measurements, side by side in ``reports/benchmarks/cross_machine.md``:

* **a real second machine** (``--other``, by default ``benchmarks/other_machines/epyc_avx2_e43b069``: Table 1's
  21 synth10_lt runs retrained on an AMD EPYC without AVX-512; its ``machine.json`` and README say how): every run
  folder there against the committed run of the same id (``cross_machine_real{,_runs}.csv``);
* **the emulation**: a sample of Table 1's runs rerun exactly as the pipeline does (``python -m isogclr train
  --method M --dataset D --seed S --tuned``, the committed params and selections) in a process with
  ``ATEN_CPU_CAPABILITY=avx2``, on the committed runs' machine type, into a folder outside the project
  (``--work``; ``cross_machine{,_runs}.csv``). ``--report`` recomputes it when ``--work`` holds the reruns and
  otherwise keeps the numbers its csvs hold (the reruns are not kept).

For each: each run's change of test top-1 against the committed run (median and largest |change|, sd of the
change), and every Table 1 verdict (the pairwise orderings and claim (iii)) recomputed with those runs' scores in
place of the committed ones (the other seeds unchanged): its status and effect before and after, and the effect's
movement against the half-width of its interval.

Usage (resumable: a run whose ``metrics.json`` exists is not trained again; one torch thread per process):
    python benchmarks/cross_machine.py --seeds 0 1 2 --work /tmp/isogclr-avx2     # train the emulation's sample
    python benchmarks/cross_machine.py --report    # reports/benchmarks/cross_machine.md and its csvs
The machine's own kernels are those the committed runs used; ``--capability`` names the others (avx2 by default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from isogclr import machine
from isogclr.analysis.table1 import longtail_gain_verdict, no_learning_floors, table1_verdicts
from isogclr.analysis.tables import collect_runs
from isogclr.analysis.testbed import reference_runs
from isogclr.config.core import run_id
from isogclr.config.profiles import load_params
from isogclr.config.sections import table_spec
from isogclr.io import csv_text, read_json, save_text

ROOT = Path(__file__).resolve().parents[1]
OTHER = ROOT / "benchmarks" / "other_machines" / "epyc_avx2_e43b069"  # Table 1's synth10_lt runs, AVX2-only EPYC
REAL = "other machine"  # the column label of the real second machine's verdicts


def train_sample(params_path: Path, work: Path, methods: list[str], datasets: list[str], seeds: list[int],
                 capability: str) -> None:
    """Train every (method, dataset, seed) of the sample that ``work`` does not hold yet, under ``capability``
    (refused, before any training, on a CPU that lacks it: ATen would not run those kernels)."""
    if not machine.runs_aten_capability(capability, machine.cpu_flags()):
        raise SystemExit(f"--capability {capability}: this CPU ({machine.isa_level(machine.cpu_flags())}) cannot run "
                         "those kernels; emulate a capability at or below its own")
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


def compare(committed: pd.DataFrame, other: pd.DataFrame, spec, floors: dict, label: str
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``other``'s runs (method, dataset, seed, top1) against the committed ones: per run its change of top-1, and
    every Table 1 verdict before and after ``other``'s scores replace the committed ones (columns ``<x> committed``
    and ``<x> <label>``)."""
    runs = committed.merge(other, on=["method", "dataset", "seed"], how="left", suffixes=("", "_other"))
    runs["change"] = runs["top1_other"] - runs["top1"]
    moved_runs = runs.dropna(subset=["top1_other"])[["method", "dataset", "seed", "top1", "top1_other", "change"]]
    substituted = runs.assign(top1=runs["top1_other"].fillna(runs["top1"]))[["method", "dataset", "seed", "top1"]]
    before, after = table1_claims(committed, spec, floors), table1_claims(substituted, spec, floors)
    table = before.add_suffix(" committed").join(after.add_suffix(f" {label}"))
    half_width = (table["ci_high committed"] - table["ci_low committed"]) / 2
    table["effect moved"] = table[f"effect {label}"] - table["effect committed"]
    table["moved / half-width"] = table["effect moved"].abs() / half_width
    table["status kept"] = table["status committed"].eq(table[f"status {label}"])
    return moved_runs.reset_index(drop=True), table.reset_index()


def other_machine_runs(folder: Path, spec) -> pd.DataFrame:
    """Every run folder of ``folder`` (``<run-id>/metrics.json``, a Table 1 run's id) as rows method, dataset, seed,
    top1; a folder that is no Table 1 run is an error naming it."""
    ids = {run_id(m, d, s): (m, d, s) for m in spec.methods for d in spec.datasets for s in spec.seeds}
    rows = []
    for path in sorted(Path(folder).glob("*/metrics.json")):
        if path.parent.name not in ids:
            raise ValueError(f"{path.parent}: not a Table 1 run of params.yaml (expected <method>-<dataset>-s<seed>)")
        method, dataset, seed = ids[path.parent.name]
        rows.append({"method": method, "dataset": dataset, "seed": seed, "top1": read_json(path)["top1"]})
    if not rows:
        raise FileNotFoundError(f"{folder}: no run folders (<run-id>/metrics.json) to compare")
    return pd.DataFrame(rows)


def shown(path: Path) -> str:
    """``path`` as the report names it: relative to the project if inside it."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def spread(runs: pd.DataFrame) -> str:
    """The headline of a set of moved runs: median and largest |change|, and the sd of the change."""
    change = runs["change"]
    return (f"median |change| **{change.abs().median():.2f}** points, largest **{change.abs().max():.2f}**, sd of "
            f"the change **{change.std():.2f}**, over {len(runs)} runs")


def headline(what: str, runs: pd.DataFrame, table: pd.DataFrame, label: str) -> str:
    """One line of the summary: how far ``what`` moved the runs and which verdicts changed status."""
    changed = table[~table["status kept"].astype(bool)]
    moves = "; ".join(f"{row.claim}: {row['status committed']} -> {row[f'status {label}']}"
                      for _, row in changed.iterrows())
    return (f"- With {what}: {spread(runs)}; {int(table['status kept'].sum())} of {len(table)} Table 1 statuses "
            f"kept" + (f" ({moves})." if moves else "."))


def machine_text(record: dict) -> str:
    """A machine record (:mod:`isogclr.machine`) in one line."""
    keys = (("cpu", "{}"), ("isa", "ISA {}"), ("aten_cpu_capability", "ATen kernels {}"), ("torch", "torch {}"),
            ("numpy", "numpy {}"), ("blas_coretype", "OpenBLAS kernel {}"), ("cores", "{} cores"))
    return ", ".join(fmt.format(record[key]) for key, fmt in keys if record.get(key) is not None)


def committed_machines(runs: pd.DataFrame) -> str:
    """The machines the committed runs of ``runs`` record (``runs/<run>/artifacts/machine.json``), and whether a
    record was written afterwards (its ``recorded`` field)."""
    paths = [ROOT / "runs" / run_id(m, d, s) / "artifacts" / "machine.json"
             for m, d, s in runs[["method", "dataset", "seed"]].itertuples(index=False)]
    records = [read_json(p) for p in paths if p.exists()]
    text = "; ".join(sorted({machine_text(r) for r in records})) or "not recorded"
    later = sum("recorded" in r for r in records)
    return text + " (`runs/*/artifacts/machine.json`" + (
        f"; {later} of {len(paths)} written afterwards, on the machine type that reproduced the runs byte for byte: "
        "their `recorded` field)" if later else ")")


def interval(row: pd.Series, label: str) -> str:
    return (f"{row[f'status {label}']} {row[f'effect {label}']:+.2f} "
            f"[{row[f'ci_low {label}']:+.2f}, {row[f'ci_high {label}']:+.2f}]")


def verdict_lines(table: pd.DataFrame, label: str) -> list[str]:
    """Every verdict before and after, as status, effect and interval, and the effect's movement."""
    rows = pd.DataFrame({"claim": table["claim"], "committed runs": table.apply(interval, axis=1, label="committed"),
                         label: table.apply(interval, axis=1, label=label),
                         "moved / half-width": table["moved / half-width"].round(2),
                         "status kept": table["status kept"]})
    return [f"Statuses kept: **{int(table['status kept'].sum())} of {len(table)}**; the largest movement of an "
            f"effect is {table['moved / half-width'].max():.2f} of its interval's half-width.", "",
            rows.to_markdown(index=False), ""]


def report(params_path: Path, work: Path, methods: list[str], datasets: list[str], seeds: list[int],
           capability: str, out: Path, other: Path | None = None) -> str:
    """``out/cross_machine.md`` and its csvs: the real second machine's runs (``other``, if given) and the
    emulation (recomputed from ``work``'s reruns if it holds any, else the numbers its csvs already hold)."""
    params = load_params(params_path)
    spec = table_spec(params, "table1")
    committed = collect_runs(ROOT / "runs", list(spec.methods), list(spec.datasets), list(spec.seeds))
    ref_spec = table_spec(params, "references")
    floors = no_learning_floors(reference_runs(ROOT / "runs", ref_spec.datasets, ref_spec.seeds))
    out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/cross_machine.py --report" + (
        f" --other {shown(other)}" if other is not None and Path(other).resolve() != OTHER else "")
    lines = ["# Cross-machine stability: Table 1's runs on another machine, and under other CPU kernels", "",
             f"Written by `{command}`; do not edit. Test top-1 (%), read from each run's metrics.json: the committed "
             "runs against the same runs (same code, seeds, params and selections) computed with other roundings. "
             f"The committed runs' machine: {committed_machines(committed)}.", ""]
    summary: list[str] = []
    if other is not None:
        record = read_json(other / "machine.json") if (other / "machine.json").exists() else {}
        moved, table = compare(committed, other_machine_runs(other, spec), spec, floors, REAL)
        save_text(csv_text(table.round(4).to_dict("records")), out / "cross_machine_real.csv")
        save_text(csv_text(moved.round(4).to_dict("records")), out / "cross_machine_real_runs.csv")
        summary.append(headline("a real second machine", moved, table, REAL))
        lines += ["## A real second machine", "",
                  f"The runs of `{shown(other)}` ({', '.join(moved['dataset'].unique())}; "
                  f"{', '.join(moved['method'].unique())}; seeds {sorted(moved['seed'].unique().tolist())}), "
                  f"retrained on: {machine_text(record) or 'a machine not recorded'} (its `machine.json`, README). "
                  f"Against the committed runs: {spread(moved)}.", "",
                  "### Every Table 1 verdict with the other machine's scores in place of the committed ones", "",
                  "Each cell: status, effect [95% interval] (points of top-1).", "",
                  *verdict_lines(table, REAL),
                  "<details><summary>The runs</summary>", "", moved.round(2).to_markdown(index=False), "",
                  "</details>", ""]
    if any((work / "runs").glob("*/metrics.json")):
        moved, table = compare(committed, collect_runs(work / "runs", methods, datasets, seeds), spec, floors,
                               capability)
        save_text(csv_text(table.round(4).to_dict("records")), out / "cross_machine.csv")
        save_text(csv_text(moved.round(4).to_dict("records")), out / "cross_machine_runs.csv")
        source = (f"recomputed from the reruns of `python benchmarks/cross_machine.py --seeds "
                  f"{' '.join(map(str, seeds))} --work {work}`")
    elif (out / "cross_machine.csv").exists() and (out / "cross_machine_runs.csv").exists():
        table, moved = pd.read_csv(out / "cross_machine.csv"), pd.read_csv(out / "cross_machine_runs.csv")
        source = ("read from `cross_machine.csv` and `cross_machine_runs.csv` as the last training of the emulation "
                  "(`python benchmarks/cross_machine.py --seeds 0 1 2 --work /tmp/isogclr-avx2`, then `--report`) "
                  "wrote them: its reruns are not kept")
    else:
        table = None
    if table is not None:
        sample = (f"{', '.join(moved['method'].unique())}; {', '.join(moved['dataset'].unique())}; seeds "
                  f"{sorted(moved['seed'].unique().tolist())}")
        summary.append(headline(f"the emulation (ATEN_CPU_CAPABILITY={capability})", moved, table, capability))
        lines += [f"## The emulation: ATEN_CPU_CAPABILITY={capability} on the committed runs' machine type", "",
                  f"The same runs ({sample}) retrained with `ATEN_CPU_CAPABILITY={capability}` on a machine of the "
                  f"committed runs' type (only ATen's "
                  f"kernels swapped; oneDNN, the BLAS and the CPU unchanged); {source}. Against the committed runs: "
                  f"{spread(moved)}.", "",
                  "### Every Table 1 verdict with the sample's scores in place of the committed ones", "",
                  *verdict_lines(table, capability),
                  "<details><summary>The runs</summary>", "", moved.round(2).to_markdown(index=False), "",
                  "</details>", ""]
    text = "\n".join([*lines[:4], "## In short", "", *summary, "", *lines[4:]])
    save_text(text, out / "cross_machine.md")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--work", type=Path, default=Path("/tmp/isogclr-cross-machine"),
                        help="where the emulation's reruns are written (outside the project)")
    parser.add_argument("--other", type=Path, default=OTHER,
                        help="run folders retrained on a real second machine, with its machine.json "
                             "(default: %(default)s)")
    parser.add_argument("--methods", nargs="+", default=["simclr", "sogclr", "isogclr"])
    parser.add_argument("--datasets", nargs="+", default=["synth10", "synth10_lt"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--capability", default="avx2", help="ATEN_CPU_CAPABILITY of the reruns")
    parser.add_argument("--report", action="store_true", help="write reports/benchmarks/cross_machine.md and its csvs")
    args = parser.parse_args()
    if args.report:
        print(report(args.params, args.work, args.methods, args.datasets, args.seeds, args.capability,
                     ROOT / "reports" / "benchmarks", other=args.other))
    else:
        train_sample(args.params.resolve(), args.work.resolve(), args.methods, args.datasets, args.seeds,
                     args.capability)


if __name__ == "__main__":
    main()
