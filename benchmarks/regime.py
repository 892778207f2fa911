"""The papers' regime at the same CPU cost (issue 56): designs of equal optimizer steps from about 12 to about 240
updates of each sample's state, the central methods at their committed tuned knobs, scored on the validation split.

iSogCLR's temperatures tau_i and SogCLR's moving averages u_i are updated once each time their sample is visited.
The committed ``synth10_lt`` design (4,958 images, 12 epochs at batch 128: 456 steps) gives each sample 12 updates;
the papers give about 400. A *design* spends the same steps on fewer images: ``data.synthetic.per_class`` P head
images per class (the long tail keeps int(P * 0.01^(r/9)) of the r-th class, the class order drawn from the seed)
for E epochs, so that floor(N / batch) x E (the loader drops the last incomplete batch) stays within 10% of the
committed steps. Updates per sample are the mean visits, steps x batch / N (= E when no batch is dropped).

Each design trains, at seeds 0-4 and paired by seed (same initial weights, class order, data order and views):
SimCLR, SogCLR, and iSogCLR from tau_init 0.1, 0.3 and the paper's 0.7 (``methods.isogclr.pin.tau_init``; every
other knob at its committed selection, ``--tuned``). Every run is the training of ``python -m isogclr train
--tuned`` with one change: its linear probe scores the generated **validation split** (``validation_split``, the
selection's split: 1,000 images a class, split seed 3) instead of the test split, which is never read. The
no-learning rows (``isogclr.train.references.no_learning``: the raw-pixel probe and the probe of the encoder as
initialized by the run's seed) are computed on the same training set and validation split for every seed.

At the chosen design the controls of Table 1's deficit run beside them (``CONTROLS``: iSogCLR with eta 0, at the
paper's tau_init 0.7 and beta0 0.8; ``sogclr-tau<x>``: SogCLR at iSogCLR's final mean temperature). Every encoder is
also probed on one fixed labeled pool (:func:`regime_state.pool_probe`), and SogCLR's final u_i is compared with the
exact per-sample denominator (:func:`regime_state.denominator_row`).

Per design the report gives the level (SimCLR against both floors), iSogCLR's final temperatures from each
tau_init (``artifacts/tau.csv``: mean and sd over samples, each the mean over seeds) and the gap between the
final means from 0.1 and 0.7 as a fraction of the initial 0.6, tau against log class frequency with a class
effect over the seeds' class orders (:func:`isogclr.analysis.groups.within_group_slope`), and the paired noise of
the central comparisons (mean and sd of the per-seed differences, MDE at the seeds run).

Usage (resumable: a run whose ``metrics.json`` exists is not trained again; one torch thread per process, at most
``--jobs`` processes at once under ``nice``; ``--deadline`` HH:MM UTC starts no run after that time):
    python benchmarks/regime.py --designs lt-p2000-e12 lt-p400-e65 lt-p100-e456 --seeds 0 1 2 3 4 --work /tmp/regime
    python benchmarks/regime.py --report --work /tmp/regime     # reports/benchmarks/regime.md and regime*.csv
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import datetime as dt
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from isogclr.io import csv_text, read_json, save_text

ROOT = Path(__file__).resolve().parents[1]
IMBALANCE = 0.01  # synth10_lt: the r-th class keeps int(P * 0.01^(r/9))
NUM_CLASSES = 10
STEP_TOLERANCE = 0.10
GAP_TARGET = 0.25
LEVEL_TARGET = 10.0
TAU_INITS = (0.1, 0.3, 0.7)
CENTRAL_TAU = 0.3  # the iSogCLR of the central comparisons (the selected 0.2 is not among the designs' tau_inits)


@dataclass(frozen=True)
class Design:
    """P head images per class of ``dataset`` (the balanced set's train count) for ``epochs`` epochs."""

    dataset: str
    per_class: int
    epochs: int

    @property
    def name(self) -> str:
        return f"{'lt' if self.dataset == 'synth10_lt' else 'bal'}-p{self.per_class}-e{self.epochs}"

    @property
    def images(self) -> int:
        return train_images(self.dataset, self.per_class)

    def steps(self, batch: int = 128) -> int:
        return design_steps(self.images, batch, self.epochs)

    def updates(self, batch: int = 128) -> float:
        """Mean updates of a sample's state: visits per sample over the run (the loader drops a batch's rest)."""
        return self.steps(batch) * batch / self.images


def train_images(dataset: str, per_class: int) -> int:
    """Training images of the set built from ``per_class`` images a class (the long tail of ``synth10_lt``)."""
    if dataset == "synth10":
        return per_class * NUM_CLASSES
    return sum(int(per_class * IMBALANCE ** (r / (NUM_CLASSES - 1))) for r in range(NUM_CLASSES))


def design_steps(images: int, batch: int, epochs: int) -> int:
    """Optimizer steps of a run: the loader drops the last incomplete batch (``drop_last=True``)."""
    return (images // batch) * epochs


def within_steps(design: Design, reference: Design, tolerance: float = STEP_TOLERANCE, batch: int = 128) -> bool:
    return abs(design.steps(batch) / reference.steps(batch) - 1) <= tolerance


COMMITTED = {"synth10_lt": Design("synth10_lt", 2000, 12), "synth10": Design("synth10", 2000, 3)}
DESIGNS = {d.name: d for d in (
    COMMITTED["synth10_lt"],                       # 4,958 images: 38 steps x 12 = 456, 11.8 updates
    Design("synth10_lt", 1000, 24),                # 2,478: 19 x 24 = 456, 23.6
    Design("synth10_lt", 400, 65),                 # 988: 7 x 65 = 455, 58.9
    Design("synth10_lt", 200, 152),                # 492: 3 x 152 = 456, 118.6
    Design("synth10_lt", 100, 456),                # 242: 1 x 456 = 456, 241.2
    COMMITTED["synth10"],                          # 20,000: 156 x 3 = 468, 3.0
    Design("synth10", 400, 15),                    # 4,000: 31 x 15 = 465, 14.9
    Design("synth10", 100, 67),                    # 1,000: 7 x 67 = 469, 60.0
    Design("synth10", 200, 31),                    # 2,000: 15 x 31 = 465, 29.8 (the balanced set of lt-p200-e152)
    Design("synth10", 50, 156),                    # 500: 3 x 156 = 468, 119.8
    Design("synth10", 25, 470),                    # 250: 1 x 470 = 470, 240.6
)}
# variant -> (method, knobs pinned over its committed selection)
TAU_VARIANTS = {f"isogclr-t{t}": ("isogclr", {"tau_init": t}) for t in TAU_INITS}
CONTROLS = {  # Table 1's controls (issue 56): what tells a failed mechanism from a failed setting
    f"isogclr-t{CENTRAL_TAU}-eta0": ("isogclr", {"tau_init": CENTRAL_TAU, "eta": 0.0}),  # temperatures frozen
    "isogclr-paper": ("isogclr", {"tau_init": 0.7, "beta0": 0.8}),  # the paper's tau_init and a beta0 of its grid
}
VARIANTS = {"simclr": ("simclr", {}), "sogclr": ("sogclr", {}), **TAU_VARIANTS, **CONTROLS}
MAIN = ["simclr", "sogclr", *TAU_VARIANTS]  # every design's variants; the controls run at the chosen design
SOGCLR_AT = "sogclr-tau"  # sogclr-tau<x>: SogCLR at tau x (iSogCLR's final mean temperature at the design)


def variant_spec(name: str) -> tuple[str, dict]:
    """(method, pinned knobs) of a variant: one of VARIANTS or ``sogclr-tau<x>``."""
    if name in VARIANTS:
        return VARIANTS[name]
    if name.startswith(SOGCLR_AT):
        try:
            return "sogclr", {"tau": float(name[len(SOGCLR_AT):])}
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"unknown variant {name!r}: one of {list(VARIANTS)} or {SOGCLR_AT}<tau>")


def tau_init_of(variant: str) -> float | None:
    """The tau_init of a plain tau_init variant (the temperature tables read only those)."""
    return TAU_VARIANTS[variant][1]["tau_init"] if variant in TAU_VARIANTS else None


# ---------------------------------------------------------------------------------------------------------- training

def design_params(params: dict, design: Design, variant: str, data_root: Path) -> dict:
    """params.yaml for one (design, variant): the design's images and epochs, iSogCLR's tau_init pinned."""
    out = copy.deepcopy(params)
    method, pins = variant_spec(variant)
    if design.per_class != COMMITTED[design.dataset].per_class:
        counts = list(out["data"]["synthetic"]["per_class"][10])
        out["data"]["synthetic"]["per_class"] = {10: [design.per_class, *counts[1:]]}  # test and val unchanged
        out["data"]["root"] = str(data_root)
    else:
        out["data"]["root"] = str((ROOT / out["data"]["root"]).resolve())
    out["train"]["epochs_by_dataset"][design.dataset] = design.epochs
    if pins:
        out["methods"][method]["pin"] = {**(out["methods"][method].get("pin") or {}), **pins}
    return out


def paths(work: Path, design: str, variant: str, seed: int) -> tuple[Path, Path, Path]:
    """(params file, run folder, checkpoint folder) of one run."""
    ds = DESIGNS[design].dataset
    base = work / design / variant
    return base / "params.yaml", base / "runs" / f"{variant_spec(variant)[0]}-{ds}-s{seed}", base / "checkpoints"


def reference_path(work: Path, design: str, seed: int) -> Path:
    return work / design / "references" / f"s{seed}" / "metrics.json"


def prepare(params_path: Path, work: Path, design_name: str, variants: list[str]) -> None:
    """Write the design's params files of ``variants`` and generate its data (once) outside the project."""
    from isogclr.config.profiles import load_params
    design = DESIGNS[design_name]
    params = load_params(params_path)
    data_root = work / "data" / f"p{design.per_class}"
    for variant in dict.fromkeys(["simclr", *variants]):  # simclr's params also make the data and references
        path = paths(work, design_name, variant, 0)[0]
        text = yaml.safe_dump(design_params(params, design, variant, data_root), sort_keys=False)
        if not path.exists() or path.read_text() != text:
            save_text(text, path)
    if design.per_class != COMMITTED[design.dataset].per_class and not (data_root / "synthetic" / "meta.json").exists():
        cmd = [sys.executable, "-m", "isogclr", "synthetic", "--params", str(paths(work, design_name, "simclr", 0)[0]),
               "--out", str(data_root / "synthetic")]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)


def run_one(work: Path, design_name: str, variant: str, seed: int) -> None:
    """One run in this process: ``python -m isogclr train --tuned``'s training, its probe on the validation split;
    for variant ``references``, the no-learning rows on the same split."""
    import torch
    from regime_state import design_config

    from isogclr.train.loop import train_run
    from isogclr.train.references import no_learning

    torch.set_num_threads(1)
    design = DESIGNS[design_name]
    if variant == "references":
        cfg = design_config(paths(work, design_name, "simclr", seed)[0], "simclr", design.dataset, seed)
        metrics = no_learning(cfg, [seed], reference_path(work, design_name, seed).parent)
        print(f"[{design_name} references s{seed}] {metrics}", flush=True)
        return
    params_file, out, ckpt = paths(work, design_name, variant, seed)
    cfg = design_config(params_file, variant_spec(variant)[0], design.dataset, seed)
    t0 = time.perf_counter()
    train_run(cfg, out, ckpt / cfg.run_id)
    save_text(f"{time.perf_counter() - t0:.1f}\n", out / "wall_seconds.txt")


def done(work: Path, design: str, variant: str, seed: int) -> bool:
    if variant == "references":
        return reference_path(work, design, seed).exists()
    return (paths(work, design, variant, seed)[1] / "metrics.json").exists()


def schedule(designs: list[str], variants: list[str], seeds: list[int]) -> list[tuple[str, str, int]]:
    """The runs in the order they are trained: seed by seed, so that a deadline drops whole seeds last."""
    return [(d, v, s) for s in seeds for d in designs for v in ["references", *variants]]


def train_all(params_path: Path, work: Path, designs: list[str], variants: list[str], seeds: list[int],
              jobs: int, deadline: dt.datetime | None) -> None:
    for design in designs:
        prepare(params_path, work, design, variants)
    todo = [job for job in schedule(designs, variants, seeds) if not done(work, *job)]
    running: list[tuple[subprocess.Popen, tuple]] = []
    env = dict(os.environ, PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    log_dir = work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    while todo or running:
        for proc, job in list(running):
            if proc.poll() is not None:
                running.remove((proc, job))
                print(f"{dt.datetime.now(dt.UTC):%H:%M:%S} done {job} rc={proc.returncode}", flush=True)
        while todo and len(running) < jobs:
            if deadline is not None and dt.datetime.now(dt.UTC) >= deadline:
                print(f"deadline {deadline:%H:%M} UTC: not started: {todo}", flush=True)
                todo = []
                break
            job = todo.pop(0)
            cmd = ["nice", "-n", "10", sys.executable, str(Path(__file__).resolve()), "--one", *job[:2],
                   str(job[2]), "--work", str(work)]
            log = open(log_dir / f"{job[0]}-{job[1]}-s{job[2]}.log", "w")  # noqa: SIM115
            print(f"{dt.datetime.now(dt.UTC):%H:%M:%S} start {job}", flush=True)
            running.append((subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), job))
        time.sleep(2)


# ------------------------------------------------------------------------------------------------------- analysis

def collect(work: Path, designs: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(runs: design, variant, seed, val_top1, knn1, wall_s; references: design, seed, raw, random-init;
    tau tables: (design, variant, seed) -> tau.csv frame)."""
    rows, refs, taus = [], [], {}
    for design in designs:
        for variant in sorted(p.name for p in (work / design).iterdir() if (p / "runs").is_dir()):
            for run in sorted((work / design / variant / "runs").glob("*-s*/metrics.json")):
                seed = int(run.parent.name.rsplit("-s", 1)[1])
                m = read_json(run)
                wall = run.parent / "wall_seconds.txt"
                rows.append({"design": design, "variant": variant, "seed": seed, "val_top1": m["top1"],
                             "val_knn1": m.get("knn1_top1"),
                             "wall_s": float(wall.read_text()) if wall.exists() else float("nan")})
                if variant in TAU_VARIANTS and (run.parent / "artifacts" / "tau.csv").exists():
                    frame = pd.read_csv(run.parent / "artifacts" / "tau.csv")
                    log = pd.read_csv(run.parent / "train_log.csv")
                    if "tau_mean" in log and len(log) >= 4:  # still moving? the mean's change over the last quarter
                        frame.attrs["last_quarter"] = float(log["tau_mean"].iloc[-1]
                                                            - log["tau_mean"].iloc[(3 * len(log)) // 4 - 1])
                    taus[(design, variant, seed)] = frame
        for ref in sorted((work / design / "references").glob("s*/metrics.json")):
            seed = int(ref.parent.name[1:])
            m = read_json(ref)
            refs.append({"design": design, "seed": seed, "raw_pixels": m["raw_pixels_top1"],
                         "random_init": m[f"random_init_s{seed}_top1"]})
    return pd.DataFrame(rows), pd.DataFrame(refs), taus


def level_table(runs: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """Per design: mean validation top-1 of each method and of the floors (over the seeds each has), and SimCLR's
    margin over the raw-pixel probe and over the random-init probe (target: >= 10 points above both)."""
    out = []
    for design, r in runs[runs.variant.isin(MAIN)].groupby("design", sort=False):
        wide = r.pivot_table(index="seed", columns="variant", values="val_top1").dropna()  # the seeds of every method
        means = wide.mean()
        ref = refs[(refs.design == design) & refs.seed.isin(wide.index)] if len(refs) else refs
        raw, rnd = (float(ref[c].mean()) if len(ref) else float("nan") for c in ("raw_pixels", "random_init"))
        simclr = float(means.get("simclr", float("nan")))
        row = {"design": design, "seeds (every method)": " ".join(map(str, wide.index)),
               **{f"{v} top-1": round(float(means[v]), 2) for v in MAIN if v in means},
               "raw pixels": round(raw, 2), "random init": round(rnd, 2),
               "SimCLR - raw pixels": round(simclr - raw, 2), "SimCLR - random init": round(simclr - rnd, 2)}
        row["level met (>= 10 above both)"] = bool(min(simclr - raw, simclr - rnd) >= LEVEL_TARGET)
        out.append(row)
    return pd.DataFrame(out)


def gap_fraction(final_low: float, final_high: float, init_low: float = 0.1, init_high: float = 0.7) -> float:
    """The gap between the final mean temperatures from two tau_init as a fraction of their initial gap."""
    return (final_high - final_low) / (init_high - init_low)


def tau_table(taus: dict) -> pd.DataFrame:
    """Per design and tau_init: the final tau's mean and sd over samples, each the mean over seeds; and per design
    the gap fraction of tau_init 0.1 and 0.7 (target < 0.25)."""
    rows = []
    for (design, variant, seed), frame in taus.items():
        rows.append({"design": design, "tau_init": tau_init_of(variant), "seed": seed,
                     "mean": float(frame["tau"].mean()), "sd": float(frame["tau"].std(ddof=1)),
                     "last_quarter": frame.attrs.get("last_quarter", float("nan"))})
    if not rows:
        return pd.DataFrame()
    per_seed = pd.DataFrame(rows)
    table = (per_seed.groupby(["design", "tau_init"], sort=False)
             .agg(seeds=("seed", "nunique"), mean=("mean", "mean"), sd=("sd", "mean"),
                  mean_sd_over_seeds=("mean", "std"), last_quarter=("last_quarter", "mean")).reset_index())
    out = []
    for design, t in table.groupby("design", sort=False):
        row = {"design": design}
        for _, r in t.iterrows():
            row[f"tau {r.tau_init:g}: mean"] = round(r["mean"], 3)
            row[f"tau {r.tau_init:g}: sd"] = round(r["sd"], 3)
            row[f"tau {r.tau_init:g}: last-quarter change"] = round(r["last_quarter"], 3)
            row[f"tau {r.tau_init:g}: seeds"] = str(int(r.seeds))
        by = t.set_index("tau_init")["mean"]
        if 0.1 in by and 0.7 in by:
            row["gap fraction (0.1 vs 0.7)"] = round(gap_fraction(by[0.1], by[0.7]), 3)
            row["gap met (< 0.25)"] = bool(abs(row["gap fraction (0.1 vs 0.7)"]) < GAP_TARGET)
            seeds = per_seed[per_seed.design == design].pivot_table(index="seed", columns="tau_init", values="mean")
            paired = gap_fraction(seeds[0.1], seeds[0.7]).dropna()
            row["gap fraction: sd over seeds"] = round(float(paired.std(ddof=1)), 3) if len(paired) > 1 else None
        out.append(row)
    return pd.DataFrame(out)


def class_frequency(frame: pd.DataFrame) -> pd.DataFrame:
    """A tau.csv frame with each sample's class frequency in its own run (its seed's class order)."""
    counts = frame["label"].value_counts()
    return frame.assign(frequency=frame["label"].map(counts).astype(float))


def slope_table(taus: dict) -> pd.DataFrame:
    """Per design and tau_init: tau against log class frequency with a class effect and a seed effect, over the
    seeds' permuted class orders (:func:`within_group_slope`), and the identity agreement it reports."""
    from isogclr.analysis.groups import _panel, _within, group_table, within_group_slope
    out = []
    order = list(dict.fromkeys(d for d, _, _ in taus))
    balanced = {d for d, _, _ in taus if d in DESIGNS and DESIGNS[d].dataset == "synth10"}  # one frequency: no slope
    keys = sorted({(d, v) for d, v, _ in taus if d not in balanced},
                  key=lambda k: (order.index(k[0]), tau_init_of(k[1])))
    for design, variant in keys:
        by_seed = {s: group_table(class_frequency(f), "label", "frequency", "tau")
                   for (d, v, s), f in taus.items() if (d, v) == (design, variant)}
        verdict = within_group_slope("tau grows with class frequency", by_seed, what=f"{design} {variant}",
                                     unit="tau")
        if verdict.effect is None and len(by_seed) >= 2:  # too few seeds for the interval: the slope alone
            groups = sorted(set.intersection(*(set(t.index) for t in by_seed.values())))
            values, prop = _panel(by_seed, groups)
            verdict = dataclasses.replace(verdict, effect=float(_within(values, np.log(prop))[0]))
        agreement = verdict.evidence.split("identity agreement (mean pairwise Spearman of the group means across "
                                           "seeds) ")[-1].split(";")[0] if "identity agreement" in verdict.evidence \
            else ""
        out.append({"design": design, "tau_init": tau_init_of(variant), "seeds": len(by_seed),
                    "slope per log frequency": None if verdict.effect is None else round(verdict.effect, 4),
                    "95% low": None if verdict.ci_low is None else round(verdict.ci_low, 4),
                    "95% high": None if verdict.ci_high is None else round(verdict.ci_high, 4),
                    "status": verdict.status, "class identity agreement": agreement})
    return pd.DataFrame(out)


PAIRS = ((f"isogclr-t{CENTRAL_TAU}", "simclr"), ("sogclr", "simclr"), (f"isogclr-t{CENTRAL_TAU}", "sogclr"),
         *((f"isogclr-t{t}", "simclr") for t in TAU_INITS if t != CENTRAL_TAU))


def control_pairs(variants: list[str]) -> list[tuple[str, str]]:
    """Table 1's controls against what they hold fixed: learned against frozen temperatures (from the same
    tau_init), individual temperatures against SogCLR at their final mean, the paper's knobs against the selected
    ones at the same tau_init; and each control against SimCLR and SogCLR."""
    central = f"isogclr-t{CENTRAL_TAU}"
    out = [(central, c) for c in variants if c in CONTROLS and c != "isogclr-paper"]
    out += [(central, v) for v in variants if v.startswith(SOGCLR_AT)]
    out += [("isogclr-paper", "isogclr-t0.7")] if "isogclr-paper" in variants else []
    controls = [v for v in variants if v in CONTROLS or v.startswith(SOGCLR_AT)]
    return out + [(c, ref) for c in controls for ref in ("simclr", "sogclr") if c != ref]


def paired_table(runs: pd.DataFrame, pairs=PAIRS) -> pd.DataFrame:  # noqa: ANN001
    """Per design and comparison a - b: the mean and sd of the per-seed differences of validation top-1, the t
    interval (95%), and the minimum detectable effect (80% power, two-sided 5%) at 5 seeds and at the seeds run."""
    from isogclr.analysis.stats import min_detectable_effect, t_interval
    out = []
    for design, r in runs.groupby("design", sort=False):
        wide = r.pivot_table(index="seed", columns="variant", values="val_top1")
        for a, b in pairs(list(wide.columns)) if callable(pairs) else pairs:
            if a not in wide or b not in wide:
                continue
            diff = (wide[a] - wide[b]).dropna()
            if len(diff) < 2:
                continue
            sd = float(diff.std(ddof=1))
            ci = t_interval(list(diff))
            out.append({"design": design, "comparison": f"{a} - {b}", "seeds": len(diff),
                        "mean difference": round(float(diff.mean()), 2), "sd of differences": round(sd, 2),
                        "95% low": round(ci.low, 2), "95% high": round(ci.high, 2),
                        "MDE at 5 seeds": round(min_detectable_effect(sd, 5), 2),
                        "MDE at the seeds run": round(min_detectable_effect(sd, len(diff)), 2)})
    return pd.DataFrame(out)


def pool_runs(work: Path, designs: list[str], pool_root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, references) as :func:`collect` gives them, with each run's validation top-1 of the linear probe on
    the fixed labeled pool (:func:`regime_state.pool_probe`) in ``val_top1``, and the no-learning rows on the same
    pool: the raw pixels (one number) and the encoder as each seed initializes it. Cached beside each run
    (``pool_probe.json``) and in ``work/pool_floors``."""
    from regime_state import POOL_PER_CLASS, pool_probe

    from isogclr.io import save_json

    def cached(path: Path, *args, **kwargs) -> float:  # noqa: ANN002, ANN003
        if not path.exists():
            save_json({"top1": pool_probe(*args, pool_root=pool_root, **kwargs), "pool_per_class": POOL_PER_CLASS},
                      path)
        return float(read_json(path)["top1"])

    rows, refs = [], []
    for design in designs:
        dataset = DESIGNS[design].dataset
        for variant in sorted(p.name for p in (work / design).iterdir() if (p / "runs").is_dir()):
            params_file = paths(work, design, variant, 0)[0]
            method = variant_spec(variant)[0]
            for encoder in sorted((work / design / variant / "runs").glob("*-s*/local/encoder.pt")):
                run_dir = encoder.parent.parent
                seed = int(run_dir.name.rsplit("-s", 1)[1])
                top1 = cached(run_dir / "pool_probe.json",
                              params_file, method, dataset, seed, run_dir=run_dir)
                rows.append({"design": design, "variant": variant, "seed": seed, "val_top1": top1})
        simclr = paths(work, design, "simclr", 0)[0]
        seeds = sorted({r["seed"] for r in rows if r["design"] == design})
        raw = cached(work / "pool_floors" / f"{dataset}-raw.json",
                     simclr, "simclr", dataset, -1)
        for seed in seeds:
            rnd = cached(work / "pool_floors" / f"{dataset}-s{seed}.json",
                         simclr, "simclr", dataset, seed)
            refs.append({"design": design, "seed": seed, "raw_pixels": raw, "random_init": rnd})
    return pd.DataFrame(rows), pd.DataFrame(refs)


def denominator_table(work: Path, designs: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per run, per design): SogCLR's final u_i against the exact g_i over the whole set
    (:func:`regime_state.denominator_row`), for every SogCLR run that kept its state (``local/state.pt``); each
    run's row is kept beside it (``denominator.json``) so that a second report reads it."""
    from regime_state import denominator_row

    from isogclr.io import save_json
    rows = []
    for design in designs:
        for variant in ["sogclr", *(p.name for p in sorted((work / design).glob(f"{SOGCLR_AT}*")))]:
            for run in sorted((work / design / variant / "runs").glob("*-s*/local/state.pt")):
                run_dir = run.parent.parent
                cached = run_dir / "denominator.json"
                seed = int(run_dir.name.rsplit("-s", 1)[1])
                if not cached.exists():
                    save_json(denominator_row(run_dir, paths(work, design, variant, seed)[0],
                                              DESIGNS[design].dataset, seed), cached)
                rows.append({"design": design, "variant": variant, "seed": seed, **read_json(cached)})
    per_run = pd.DataFrame(rows)
    if per_run.empty:
        return per_run, per_run
    metrics = [c for c in per_run.columns if c.startswith(("u: ", "batch: "))]
    summary = (per_run.groupby(["design", "variant"], sort=False)
               .agg(seeds=("seed", "nunique"), n=("n", "first"), tau=("tau", "first"), gamma=("gamma", "first"),
                    **{m: (m, "mean") for m in metrics}).reset_index().round(4))
    return per_run, summary


def design_table(designs: list[str], runs: pd.DataFrame, batch: int = 128) -> pd.DataFrame:
    out = []
    for name in designs:
        d = DESIGNS[name]
        ref = COMMITTED[d.dataset]
        wall = runs.loc[runs.design == name, "wall_s"] if len(runs) else pd.Series(dtype=float)
        out.append({"design": name, "set": d.dataset, "images per class (head)": d.per_class, "images": d.images,
                    "epochs": d.epochs, "steps": d.steps(batch),
                    "steps / committed": round(d.steps(batch) / ref.steps(batch), 3),
                    "updates per sample": round(d.updates(batch), 1),
                    "runs": int(len(wall)), "median wall s per run": round(float(wall.median()), 1)
                    if len(wall) else None})
    return pd.DataFrame(out)


def markdown(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(none)\n"
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join("" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                                for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def machine_line(work: Path) -> str:
    from collections import Counter
    records = Counter()
    for path in work.glob("*/*/runs/*/artifacts/machine.json"):
        r = read_json(path)
        records[", ".join(str(r[k]) for k in ("cpu", "isa", "aten_cpu_capability", "torch", "numpy")
                          if r.get(k) is not None)] += 1
    return "; ".join(f"{k} ({n} runs)" for k, n in records.items()) or "not recorded"


def report(work: Path, designs: list[str], out: Path, commands: list[str], notes: list[str],
           pool_root: Path = ROOT / "data") -> str:
    runs, refs, taus = collect(work, designs)
    if runs.empty:
        raise SystemExit(f"{work}: no runs of {designs} to report")
    present = [d for d in designs if d in set(runs.design)]
    design = design_table(present, runs)
    level = level_table(runs, refs)
    tau = tau_table(taus)
    slope = slope_table(taus)
    paired = paired_table(runs[runs.variant.isin(MAIN)])
    controls = paired_table(runs, control_pairs)
    denominator_runs, denominator = denominator_table(work, present)
    pooled, pool_refs = pool_runs(work, present, pool_root)
    pool_level = level_table(pooled, pool_refs)
    pool_paired = pd.concat([paired_table(pooled[pooled.variant.isin(MAIN)]), paired_table(pooled, control_pairs)])
    per_run = runs.merge(refs, on=["design", "seed"], how="left").sort_values(["design", "variant", "seed"])
    save_text(csv_text(design.to_dict("records")), out / "regime_designs.csv")
    save_text(csv_text(level.to_dict("records")), out / "regime.csv")
    save_text(csv_text(tau.to_dict("records")), out / "regime_tau.csv")
    save_text(csv_text(slope.to_dict("records")), out / "regime_slope.csv")
    save_text(csv_text(paired.to_dict("records")), out / "regime_paired.csv")
    save_text(csv_text(controls.to_dict("records")), out / "regime_controls.csv")
    save_text(csv_text(denominator_runs.round(4).to_dict("records")), out / "regime_denominator.csv")
    save_text(csv_text(pooled.merge(pool_refs, on=["design", "seed"], how="left").round(4).to_dict("records")),
              out / "regime_pool_runs.csv")
    save_text(csv_text(per_run.round(4).to_dict("records")), out / "regime_runs.csv")
    counts = runs.groupby(["design", "variant"])["seed"].apply(lambda s: " ".join(map(str, sorted(s))))
    ran = "; ".join(f"{d} {v}: seeds {s}" for (d, v), s in counts.items())
    text = [
        "# The papers' regime at the same CPU cost: updates per sample at equal steps (issue 56)\n",
        "Written by `python benchmarks/regime.py --report`; do not edit. The runs were made by:\n",
        "```bash", *commands, "```\n",
        "Each run is `python -m isogclr train --method M --dataset synth10_lt --seed S --tuned` with the design's "
        "`data.synthetic.per_class` and `train.epochs_by_dataset`, iSogCLR's tau_init pinned "
        "(`methods.isogclr.pin.tau_init`), every other knob at its committed selection, and one change: the linear "
        "probe scores the generated **validation split** (`validation_split`: 10,000 images, 1,000 a class, split "
        "seed 3; the test split is never read). The no-learning floors (`isogclr.train.references.no_learning`) are "
        "the raw-pixel probe and the probe of the encoder as initialized by the run's seed, on each seed's own "
        "training set (its class order) and the same validation split. All numbers are validation top-1 (%) as the "
        "runs wrote them (`metrics.json`, `artifacts/tau.csv`), summarized here. Runs outside the project "
        f"(`{work}`), one torch thread each, two at a time under `nice -n 10`.\n",
        f"Machine: {machine_line(work)}.\n",
        f"What was run: {ran}.\n",
        *(f"{n}\n" for n in notes),
        "## Designs\n",
        "Steps = floor(images / 128) x epochs (the loader drops the last incomplete batch); updates per sample = "
        "steps x 128 / images, the mean visits of a sample (= epochs when no batch is dropped).\n",
        markdown(design),
        "\n## Level: does the testbed still learn?\n",
        "Mean validation top-1 over seeds; target: SimCLR at least 10 points above the raw-pixel probe and the "
        "random-init encoder probe.\n",
        markdown(level),
        "\nThe same encoders probed on one fixed labeled pool (`benchmarks/regime_state.py` `pool_probe`: the first "
        "500 images a class of the committed balanced `synth10` training split, 5,000 images, for every design; "
        "the floors on the same pool), scored on the same validation split. A design's own training set is also "
        "its probe's: 242 to 4,958 long-tailed images, the rarest class 1 to 20 of them, so the level above mixes "
        "the representation with the probe's labels; this one measures the representation.\n",
        markdown(pool_level),
        "\n## iSogCLR's final temperatures from each tau_init\n",
        "Mean and sd over samples of `artifacts/tau.csv`, each the mean over seeds; gap fraction = (final mean from "
        "0.7 - final mean from 0.1) / 0.6 (Figures 8/9's target: < 0.25), and its sd over the seeds (each seed's own "
        "pair); last-quarter change: the mean tau's change over the last quarter of the epochs (`train_log.csv`), "
        "mean over seeds (near 0: the temperatures have settled).\n",
        markdown(tau),
        "\n## Tau against log class frequency, with a class effect\n",
        "`isogclr.analysis.groups.within_group_slope`: class means of tau on log class frequency (each seed's own "
        "class order) with a class and a seed effect; 95% interval: the slope +- t (seeds - 1 df) x its sd over a "
        "bootstrap of the seeds. Identity agreement: the mean pairwise Spearman of the class means across seeds.\n",
        "Below 5 seeds the function gives no interval (not testable): the slope alone is shown.\n",
        markdown(slope),
        "\n## Paired noise of the central comparisons\n",
        f"Per-seed differences of validation top-1 (iSogCLR at tau_init {CENTRAL_TAU} is the central one; the other "
        "tau_inits beside it); MDE: paired t test, 80% power, two-sided 5%.\n",
        markdown(paired),
        "\n## Table 1's controls\n",
        f"At the chosen design: iSogCLR from tau_init {CENTRAL_TAU} with eta 0 (its temperatures frozen at "
        f"tau_init: what learning them adds), SogCLR at iSogCLR's final mean temperature (`{SOGCLR_AT}<x>`: "
        "individual temperatures against one global one at their mean), and iSogCLR at the paper's knobs "
        "(`isogclr-paper`: tau_init 0.7, beta0 0.8, the rest at the selection) against the selected beta0 0.5 at the "
        "same tau_init. Per-seed differences of validation top-1, the t interval over seeds (95%).\n",
        markdown(controls),
        "\nThe central comparisons and the controls again, each run probed on the fixed pool:\n",
        markdown(pool_paired),
        "\n## SogCLR's u_i against the exact per-sample denominator\n",
        "`benchmarks/regime_state.py`: the final u_i (`local/state.pt`) against g_i computed over the whole set "
        "with the final weights (every other sample's two views, the mean over 4 fresh augmentation draws); each "
        "sample is the mean over its two views. `u:` the moving average; `batch:` one fresh mini-batch estimate "
        "(the run's batch, one epoch's partition): the error a moving average with gamma 1 and no staleness would "
        "have. Spearman over samples; |ratio - 1| median over samples; each the mean over seeds.\n",
        markdown(denominator),
    ]
    save_text("\n".join(text), out / "regime.md")
    return "\n".join(text)


def _variant(name: str) -> str:
    variant_spec(name)
    return name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--designs", nargs="+", choices=list(DESIGNS),
                    default=["lt-p2000-e12", "lt-p400-e65", "lt-p100-e456"])
    ap.add_argument("--variants", nargs="+", type=_variant, default=["simclr", "sogclr", *TAU_VARIANTS],
                    help=f"of {list(VARIANTS)} or {SOGCLR_AT}<tau>")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--work", type=Path, default=Path("/tmp/regime"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--deadline", help="HH:MM UTC today: no run is started after it")
    ap.add_argument("--report", action="store_true", help="write reports/benchmarks/regime.md and regime*.csv")
    ap.add_argument("--pool-root", type=Path, default=ROOT / "data",
                    help="the data root whose synth10 training split is the fixed probe pool (the committed data)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks")
    ap.add_argument("--command", action="append", default=[], help="a command the report lists as what made its runs")
    ap.add_argument("--note", action="append", default=[], help="a line the report states (what was dropped)")
    ap.add_argument("--one", nargs=3, metavar=("DESIGN", "VARIANT", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = args.work.resolve()
    if args.one:
        run_one(work, args.one[0], args.one[1], int(args.one[2]))
    elif args.report:
        print(report(work, args.designs, args.out, args.command or [
            f"python benchmarks/regime.py --designs {' '.join(args.designs)} --seeds "
            f"{' '.join(map(str, args.seeds))} --work {args.work}"], args.note, args.pool_root.resolve()))
    else:
        deadline = None
        if args.deadline:
            hh, mm = map(int, args.deadline.split(":"))
            deadline = dt.datetime.now(dt.UTC).replace(hour=hh, minute=mm, second=0, microsecond=0)
        train_all(args.params, work, args.designs, args.variants, args.seeds, args.jobs, deadline)


if __name__ == "__main__":
    main()
