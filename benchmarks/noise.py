"""The training noise of the mini testbed, taken apart: which setting lets two methods run at one seed share their luck?

For SimCLR, SogCLR and iSogCLR on the central sets (synth10, synth10_lt), each at its committed selection
(tuning/<m>/selected.json) and Table 1's budget, every *setting* (a learning rate, a warm-up, a schedule length)
trains the three methods at the same seeds, exactly as a Table 1 run (the same training split, steps, initial
weights, data order and augmentation draws), and scores each on a **validation split**: a balanced set drawn by
the generator with its own split seed (``calibrate_testbed.synthetic_split``: split seed 3, 300 images a class;
the test split is never read). Per setting and set it gives

* each method's mean and seed-to-seed sd;
* for the central comparisons (each pair of methods), the mean paired difference, the sd of the paired
  differences, the correlation of the two methods' scores over seeds, and the minimum detectable effect of a
  paired t test (80% power, two-sided 5%) at 7 seeds, and per CPU-minute: ``mde7 x sqrt(cpu_min_per_seed / 7)``
  is the MDE that one CPU-minute per seed-pair would buy, the figure to compare between settings of different cost;
* an exponential moving average of the weights (decay 0.99, BatchNorm statistics averaged too) scored beside the
  raw weights of every run: weight averaging probed at no training cost.

The *divergence* of two runs one rounding apart is measured on SimCLR, synth10_lt, seed 0: the run again with
its initial weights moved by 1e-7 x N(0, 1) (a generator of its own), the relative distance of the two runs'
weights after every epoch and the change of the validation score (``--divergence``); and, where
``ATEN_CPU_CAPABILITY=avx2`` is set for the process, the same runs with ATen's AVX2 kernels (``--tag avx2``).

Usage (resumable: each run writes its result file once, under --runs):
    python benchmarks/noise.py --settings lr2.0 lr0.8 --seeds 0 1 2 3 [--datasets synth10_lt synth10]
    python benchmarks/noise.py --divergence --settings lr2.0 lr0.8
    ATEN_CPU_CAPABILITY=avx2 python benchmarks/noise.py --tag avx2 --settings lr2.0 lr0.8 --seeds 0 1
    python benchmarks/noise.py --report            # reports/benchmarks/noise.{csv,md}, noise_divergence.{csv,md}
The report keeps every run's result in reports/benchmarks/noise_runs.csv and reads it back beside --runs, so a
report is rebuilt from the committed runs and new seeds or settings add to them.
Run two processes side by side (disjoint --settings or --datasets) on two cores; one torch thread each.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from calibrate_testbed import VALIDATION_PER_CLASS, synthetic_split
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from isogclr.analysis.power import seeds_for_median_mde
from isogclr.analysis.stats import MAX_SEEDS, min_detectable_effect
from isogclr.analysis.tables import PAPER_COUNTERPART, paper_numbers
from isogclr.config.core import run_config
from isogclr.config.profiles import load_params
from isogclr.config.selection import with_selection
from isogclr.data.base import load_dataset
from isogclr.io import csv_text, save_json, save_text
from isogclr.train import distributed
from isogclr.train.engine import fit
from isogclr.train.loop import UnimodalTask, evaluate_encoder
from isogclr.train.references import raw_pixel_probe

METHODS = ("simclr", "sogclr", "isogclr")
PAIRS = (("simclr", "isogclr"), ("sogclr", "isogclr"), ("simclr", "sogclr"))
DATASETS = ("synth10_lt", "synth10")
EMA_DECAY = 0.99
PERTURBATION = 1e-7
LARGE_VALIDATION_PER_CLASS = 1000
TARGET_MDE = 0.6  # Table 1's median MDE wanted (issue: the paper's effects are 0.19-1.28 points)
# name: overrides of params.yaml (dotted keys); "epochs_scale" multiplies each set's epochs_by_dataset,
# "warmup_fraction" sets the warm-up as a fraction of the run's steps (the paper's: 2.5%)
SETTINGS = {
    "lr2.0": {"train.optimizer.lr": 2.0},
    "lr1.2": {"train.optimizer.lr": 1.2},
    "lr0.8": {"train.optimizer.lr": 0.8},
    "lr1.0": {"train.optimizer.lr": 1.0},
    "lr0.5": {"train.optimizer.lr": 0.5},
    "lr0.8-warmup2.5%": {"train.optimizer.lr": 0.8, "warmup_fraction": 0.025},
    "lr1.2-warmup2.5%": {"train.optimizer.lr": 1.2, "warmup_fraction": 0.025},
    "lr0.8-1.5x": {"train.optimizer.lr": 0.8, "epochs_scale": 1.5},
    "lr0.8-1.25x": {"train.optimizer.lr": 0.8, "epochs_scale": 1.25},
    "lr0.8-clip1": {"train.optimizer.lr": 0.8, "train.optimizer.clip_grad_norm": 1.0},
    # the long-tailed set's frequent class drawn from the seed (data.long_tailed_order: by_seed)
    "lr0.8-order": {"train.optimizer.lr": 0.8, "data.long_tailed_order": "by_seed"},
    "lr1.2-order": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed"},
    "lr1.0-order": {"train.optimizer.lr": 1.0, "data.long_tailed_order": "by_seed"},
    # the schedule's length with the seeded order: half and a third of Table 1's epochs (more seeds per CPU-minute)
    "lr1.2-order-e6": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed", "epochs_scale": 0.5},
    "lr1.2-order-e8": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed", "epochs_scale": 2 / 3},
    "lr1.2-order-e4": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed", "epochs_scale": 1 / 3},
    "lr1.2-order-clip1": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed",
                          "train.optimizer.clip_grad_norm": 1.0},
    "lr1.2-order-warmup10%": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed",
                              "warmup_fraction": 0.1},
    # SogCLR's headline (studies.batch_headline): a budget at which the large batch learns, and the small batch at
    # equal steps (synth10_lt only, where 12 epochs scale to these; --methods simclr sogclr)
    "lr1.2-order-b512-e16": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed",
                             "train.batch_size": 512, "epochs_scale": 16 / 12},
    "lr1.2-order-b256-e8": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed",
                            "train.batch_size": 256, "epochs_scale": 8 / 12},
    "lr1.2-order-b32-e1": {"train.optimizer.lr": 1.2, "data.long_tailed_order": "by_seed",
                           "train.batch_size": 32, "epochs_scale": 1 / 12},
}


# what every setting was measured over (params.yaml of e51a3ce): the rate, class order and clip a setting names
# replace these, so a setting means what it did when its runs were made, whatever the mini profile now sets
SETTING_BASE = {"train.optimizer.lr": 2.0, "data.long_tailed_order": "fixed", "train.optimizer.clip_grad_norm": 0.0}


def setting_params(params: dict, setting: str, method: str, dataset: str) -> tuple[dict, float | None]:
    """params.yaml with :data:`SETTING_BASE` and then the setting applied (the runs take the method's committed
    selection over it, as a typed overlay: :func:`with_selection`); (params, warm-up fraction)."""
    out = copy.deepcopy(params)
    fraction = None
    for key, value in {**SETTING_BASE, **SETTINGS[setting]}.items():
        if key == "epochs_scale":
            by = out["train"]["epochs_by_dataset"]
            by[dataset] = int(round(by[dataset] * value))
        elif key == "warmup_fraction":
            fraction = value
        else:
            node = out
            *parents, leaf = key.split(".")
            for part in parents:
                node = node[part]
            node[leaf] = value
    return out, fraction


def flat_weights(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.state_dict().values() if p.is_floating_point()])


def train_one(params: dict, setting: str, method: str, dataset: str, seed: int, perturb: bool,
              snapshots: bool) -> tuple[dict, torch.Tensor | None]:
    """One run of the setting; its validation scores (raw and EMA weights), cost and per-epoch losses."""
    p, warmup_fraction = setting_params(params, setting, method, dataset)
    cfg = with_selection(p, run_config(p, method, dataset, seed))
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, eval_every=0))
    train = load_dataset(dataset, cfg.data_root, "train", cfg.order_seed)
    val = synthetic_split(3, VALIDATION_PER_CLASS, train.images.shape[-1], False)
    device = torch.device("cpu")
    task = UnimodalTask(cfg, distributed.setup(device), train, val, train, False)
    if perturb:
        gen = torch.Generator().manual_seed(12345)
        with torch.no_grad():
            for q in task.model.parameters():
                q.add_(PERTURBATION * torch.randn(q.shape, generator=gen).to(q.dtype))
    ema = AveragedModel(task.model, multi_avg_fn=get_ema_multi_avg_fn(EMA_DECAY), use_buffers=True)
    step = task.optimizer.step
    weights = []

    def step_and_average(*args, **kwargs):  # the optimizer's step, then the EMA update
        out = step(*args, **kwargs)
        ema.update_parameters(task.model)
        return out

    task.optimizer.step = step_and_average
    if snapshots:
        columns = task.epoch_columns

        def with_snapshot(epoch: int) -> dict:
            weights.append(flat_weights(task.model).clone())
            return columns(epoch)

        task.epoch_columns = with_snapshot
    total = task.steps_per_epoch * cfg.train.epochs
    warmup = (round(warmup_fraction * total) if warmup_fraction is not None
              else cfg.optimizer.warmup_steps(task.steps_per_epoch))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = fit(task, total_steps=total, warmup_steps=warmup, final_lr_fraction=cfg.optimizer.final_lr_fraction,
                   ckpt_path=Path(tmp) / "checkpoint.pt", curves_dir=None, is_main=True,
                   clip_grad_norm=cfg.optimizer.clip_grad_norm)
    train_cpu, train_wall = time.process_time() - cpu0, time.perf_counter() - wall0
    raw = evaluate_encoder(task.model, train, val, cfg, device)
    averaged = evaluate_encoder(ema.module, train, val, cfg, device)
    # the same encoder on a validation split 3.3x as large (split seed 4, 1,000 a class): how much of the paired
    # differences' spread is the evaluation's finite sample
    large = evaluate_encoder(task.model, train, synthetic_split(4, LARGE_VALIDATION_PER_CLASS,
                                                                train.images.shape[-1], False), cfg, device)
    total_cpu = time.process_time() - cpu0
    tau = task.loss_fn.temperatures().get("tau")
    result = {"setting": setting, "method": method, "dataset": dataset, "seed": seed, "perturbed": perturb,
              "lr": cfg.optimizer.lr, "epochs": cfg.train.epochs, "steps": total, "warmup_steps": warmup,
              "val_top1": round(raw["top1"], 2), "val_top1_ema": round(averaged["top1"], 2),
              "val10k_top1": round(large["top1"], 2),
              "val_knn1": round(raw["knn1_top1"], 2), "train_cpu_s": round(train_cpu, 1),
              "train_wall_s": round(train_wall, 1), "cpu_s": round(total_cpu, 1),
              "tau_mean": None if not isinstance(tau, torch.Tensor) else round(tau.mean().item(), 4),
              "loss_by_epoch": [r["loss"] for r in rows], "isa": os.environ.get("ATEN_CPU_CAPABILITY", "default")}
    return result, (torch.stack(weights) if snapshots else None)


def run_path(runs: Path, tag: str, setting: str, method: str, dataset: str, seed: int, perturb: bool) -> Path:
    return runs / tag / setting / f"{method}-{dataset}-s{seed}{'-perturbed' if perturb else ''}.json"


def run_all(args: argparse.Namespace) -> None:
    params = load_params(args.params)
    torch.set_num_threads(1)
    if args.divergence:
        jobs = [(s, "simclr", "synth10_lt", 0, perturb) for s in args.settings for perturb in (False, True)]
    else:
        jobs = [(s, m, d, seed, False) for s, seed, d, m in
                itertools.product(args.settings, args.seeds, args.datasets, args.methods)]
    for setting, method, dataset, seed, perturb in jobs:
        path = run_path(args.runs, args.tag, setting, method, dataset, seed, perturb)
        done = json.loads(path.read_text()) if path.is_file() else None
        if done and (not args.divergence or path.with_suffix(".weights.pt").is_file()) and not (
                args.rescore and "val10k_top1" not in done):
            continue  # done (a divergence run also needs its weights after every epoch)
        result, weights = train_one(params, setting, method, dataset, seed, perturb, snapshots=args.divergence)
        if done and done["val_top1"] != result["val_top1"]:  # a rerun of the same run is bit-identical
            raise RuntimeError(f"{path}: the rerun scored {result['val_top1']}, the first run {done['val_top1']}")
        if weights is not None:
            torch.save(weights, path.with_suffix(".weights.pt"))
        save_json(result, path)
        print(json.dumps({k: v for k, v in result.items() if k != "loss_by_epoch"}), flush=True)


# ---- the report ----

RUN_KEY = ["tag", "setting", "method", "dataset", "seed", "perturbed"]


def load_results(runs: Path, committed: Path | None = None) -> pd.DataFrame:
    """Every run's result: the result files under ``runs``, and the rows of ``committed`` (the per-run table a
    report wrote, ``reports/benchmarks/noise_runs.csv``) that ``runs`` does not hold, so that a report is rebuilt
    from the committed runs and new seeds add to them (a run in both must have the same score)."""
    rows = [json.loads(p.read_text()) | {"tag": p.relative_to(runs).parts[0]} for p in sorted(runs.glob("*/*/*.json"))]
    here = pd.DataFrame(rows)
    if committed is None or not committed.is_file():
        return here
    kept = pd.read_csv(committed)
    if here.empty:
        return kept
    both = here.merge(kept, on=RUN_KEY, suffixes=("", "_committed"))
    moved = both[both["val_top1"] != both["val_top1_committed"]]
    if len(moved):
        raise RuntimeError(f"{committed}: {len(moved)} runs score otherwise than committed, e.g. "
                           f"{moved[RUN_KEY + ['val_top1', 'val_top1_committed']].iloc[0].to_dict()}")
    new = kept.merge(here[RUN_KEY], on=RUN_KEY, how="left", indicator=True)
    return pd.concat([here, kept[(new["_merge"] == "left_only").to_numpy()]], ignore_index=True)


def noise_table(results: pd.DataFrame, score: str = "val_top1", n_design: int = 7) -> pd.DataFrame:
    """One row per (setting, dataset, pair): the paired statistics over the seeds both methods ran."""
    base = results[(results.tag == "default") & ~results.perturbed]
    out = []
    for (setting, dataset), runs in base.groupby(["setting", "dataset"], sort=False):
        by = runs.pivot_table(index="seed", columns="method", values=score)
        cpu = runs.groupby("method")["cpu_s"].mean() / 60
        for a, b in PAIRS:
            if a not in by or b not in by:
                continue
            both = by[[a, b]].dropna()
            n = len(both)
            if n < 3:
                continue
            diff = both[a] - both[b]
            sd = float(diff.std(ddof=1))
            cpu_pair = float(cpu[a] + cpu[b])  # CPU-minutes of one seed of the comparison
            mde7 = min_detectable_effect(sd, n_design)
            out.append({"setting": setting, "dataset": dataset, "comparison": f"{a} - {b}", "seeds": n,
                        "mean a": round(both[a].mean(), 2), "sd a": round(float(both[a].std(ddof=1)), 2),
                        "mean b": round(both[b].mean(), 2), "sd b": round(float(both[b].std(ddof=1)), 2),
                        "difference": round(float(diff.mean()), 2), "sd of differences": round(sd, 2),
                        "correlation": round(float(np.corrcoef(both[a], both[b])[0, 1]), 2),
                        f"MDE at {n_design} seeds": round(mde7, 2),
                        "CPU-min per seed": round(cpu_pair, 2),
                        "MDE at 1 CPU-min per seed": round(mde7 * math.sqrt(cpu_pair / n_design), 2)})
    return pd.DataFrame(out)


def divergence_table(results: pd.DataFrame, runs: Path) -> pd.DataFrame:
    """Two runs one rounding apart: the relative weight distance after each epoch, and the score change."""
    out = []
    divergent = results[(results.tag == "default") & results.perturbed]
    for _, row in divergent.iterrows():
        a = run_path(runs, "default", row.setting, row.method, row.dataset, row.seed, False)
        b = run_path(runs, "default", row.setting, row.method, row.dataset, row.seed, True)
        wa, wb = (torch.load(p.with_suffix(".weights.pt")) for p in (a, b))
        rel = ((wa - wb).norm(dim=1) / wa.norm(dim=1)).tolist()
        base = json.loads(a.read_text())
        out.append({"setting": row.setting, "run": f"{row.method}-{row.dataset}-s{row.seed}",
                    "val_top1": base["val_top1"], "perturbed val_top1": row.val_top1,
                    "score change": round(row.val_top1 - base["val_top1"], 2),
                    "10k-image score change": round(row.val10k_top1 - base["val10k_top1"], 2),
                    **{f"epoch {e + 1}": f"{r:.1e}" for e, r in enumerate(rel)}})
    # the same runs with ATen's AVX2 kernels: the score change against the default kernels
    for tag, runs_tag in results[results.tag != "default"].groupby("tag"):
        for _, row in runs_tag.iterrows():
            ref = results[(results.tag == "default") & ~results.perturbed & (results.setting == row.setting)
                          & (results.method == row.method) & (results.dataset == row.dataset)
                          & (results.seed == row.seed)]
            if len(ref):
                out.append({"setting": row.setting, "run": f"{row.method}-{row.dataset}-s{row.seed} ({tag})",
                            "val_top1": float(ref.val_top1.iloc[0]), "perturbed val_top1": row.val_top1,
                            "score change": round(row.val_top1 - float(ref.val_top1.iloc[0]), 2),
                            "10k-image score change": round(row.val10k_top1 - float(ref.val10k_top1.iloc[0]), 2)})
    return pd.DataFrame(out)


def interaction_table(results: pd.DataFrame, n_design: int = 7) -> pd.DataFrame:
    """iSogCLR's claim (iii), "larger gains on long-tailed data", as a paired interaction per setting:
    (iSogCLR - SimCLR) on synth10_lt minus (iSogCLR - SimCLR) on synth10, by seed."""
    base = results[(results.tag == "default") & ~results.perturbed]
    out = []
    for setting, runs in base.groupby("setting", sort=False):
        by = runs.pivot_table(index="seed", columns=["dataset", "method"], values="val_top1")
        need = [(d, m) for d in DATASETS for m in ("isogclr", "simclr")]
        if not all(c in by for c in need):
            continue
        by = by[need].dropna()
        if len(by) < 3:
            continue
        gain = {d: by[(d, "isogclr")] - by[(d, "simclr")] for d in DATASETS}
        inter = gain["synth10_lt"] - gain["synth10"]
        sd = float(inter.std(ddof=1))
        out.append({"setting": setting, "seeds": len(by),
                    "gain on synth10_lt": round(float(gain["synth10_lt"].mean()), 2),
                    "gain on synth10": round(float(gain["synth10"].mean()), 2),
                    "interaction": round(float(inter.mean()), 2), "sd of the interaction": round(sd, 2),
                    f"MDE at {n_design} seeds": round(min_detectable_effect(sd, n_design), 2)})
    return pd.DataFrame(out)


def paper_effects() -> dict[tuple[str, str], float]:
    """(dataset, "a - b") -> the paper's Table 1 difference of that comparison (iSogCLR paper, Table 1: CIFAR10
    for synth10, CIFAR10-LT for synth10_lt)."""
    paper = paper_numbers("isogclr_table1").set_index(["method", "dataset"])["mean"]
    return {(d, f"{a} - {b}"): round(float(paper[(a, PAPER_COUNTERPART[d])] - paper[(b, PAPER_COUNTERPART[d])]), 2)
            for d in DATASETS for a, b in PAIRS}


def budget_table(raw: pd.DataFrame, steps: pd.Series, reference: str = "lr1.2-order", seeds: int = 7
                 ) -> pd.DataFrame:
    """The testbed choice: per (setting, set), the seeds that Table 1's budget buys (``seeds`` seeds of
    ``reference`` on that set, in optimizer steps: ``steps`` per (setting, dataset), as one step costs the same in
    every setting; the CPU-minutes measured beside it mix machines and loads), the MDE of each comparison at
    those seeds, and how many of the comparisons an effect of the paper's size is detectable in (MDE at most
    |paper's effect|)."""
    effects = paper_effects()
    out = []
    for (setting, dataset), rows in raw.groupby(["setting", "dataset"], sort=False):
        if (reference, dataset) not in steps.index:
            continue
        mine = float(steps[(setting, dataset)])
        n = min(MAX_SEEDS, max(2, math.floor(seeds * float(steps[(reference, dataset)]) / mine + 1e-9)))
        mdes = {r["comparison"]: min_detectable_effect(r["sd of differences"], n) for r in rows.to_dict("records")}
        detectable = [c for c, m in mdes.items() if m <= abs(effects[(dataset, c)])]
        out.append({"setting": setting, "dataset": dataset, "steps per run": int(mine),
                    "seeds measured": int(rows["seeds"].min()), "seeds in Table 1's steps": n,
                    "median MDE at those seeds": round(float(np.median(list(mdes.values()))), 2),
                    "paper's effects": ", ".join(f"{effects[(dataset, c)]:+.2f}" for c in mdes),
                    "detectable at the paper's effect": f"{len(detectable)} of {len(mdes)}"})
    return pd.DataFrame(out)


def floors(params: dict, runs: Path) -> dict[str, float]:
    """The raw-pixel probe on each set's validation split (the no-learning floor of the level constraint)."""
    path = runs / "raw_pixel_floors.json"
    if path.is_file():
        return json.loads(path.read_text())
    out = {}
    for dataset in DATASETS:
        cfg = with_selection(params, run_config(params, "simclr", dataset, 0))
        train = load_dataset(dataset, cfg.data_root, "train", cfg.order_seed)
        val = synthetic_split(3, VALIDATION_PER_CLASS, train.images.shape[-1], False)
        out[dataset] = round(raw_pixel_probe(train, val, cfg), 2)
    save_json(out, path)
    return out


def _seeds(sds: list[float]) -> str:
    try:
        return str(seeds_for_median_mde(sds, TARGET_MDE))
    except ValueError:
        return f"> {MAX_SEEDS}"


def markdown(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join("" if (isinstance(v, float) and math.isnan(v)) else str(v) for v in r) + " |"
              for r in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def report(params: dict, runs: Path, out: Path) -> None:
    torch.set_num_threads(1)
    results = load_results(runs, out / "noise_runs.csv")
    floor = floors(params, runs)
    interaction = interaction_table(results)
    raw = noise_table(results)
    ema = noise_table(results, "val_top1_ema")
    large = noise_table(results, "val10k_top1") if "val10k_top1" in results else pd.DataFrame()
    if raw.empty:
        raise SystemExit(f"{runs}: no pair of methods has 3 seeds of one setting yet; nothing to report")
    summary = (raw.groupby("setting", sort=False)
               .agg(**{"comparisons": ("comparison", "size"),
                       "median MDE at 7 seeds": ("MDE at 7 seeds", "median"),
                       "min correlation": ("correlation", "min"),
                       "median MDE at 1 CPU-min per seed": ("MDE at 1 CPU-min per seed", "median")}).round(2))
    summary[f"seeds for a median MDE of {TARGET_MDE}"] = [
        _seeds(raw.loc[raw.setting == s, "sd of differences"].tolist()) for s in summary.index]
    levels = (results[(results.tag == "default") & ~results.perturbed]
              .groupby(["setting", "dataset", "method"], sort=False)[["val_top1", "val_top1_ema"]].mean().round(2)
              .unstack("method"))
    levels.columns = [f"{m} {'EMA' if s.endswith('ema') else 'raw'}" for s, m in levels.columns]
    levels = levels.reset_index()
    levels["SimCLR above raw pixels"] = (levels["simclr raw"] - levels["dataset"].map(floor)).round(2)
    base = results[(results.tag == "default") & ~results.perturbed]
    choice = budget_table(raw, base.groupby(["setting", "dataset"])["steps"].median())
    if len(choice):
        choice = choice.merge(levels[["setting", "dataset", "SimCLR above raw pixels"]], on=["setting", "dataset"],
                              how="left")
        save_text(csv_text(choice.to_dict("records")), out / "noise_choice.csv")
    divergence = divergence_table(results, runs)
    if divergence.empty and (out / "noise_divergence.csv").is_file():  # its weights are not committed: kept
        divergence = pd.read_csv(out / "noise_divergence.csv")
    per_run = results.drop(columns=["loss_by_epoch"], errors="ignore").sort_values(RUN_KEY, kind="stable")
    save_text(csv_text(per_run.to_dict("records")), out / "noise_runs.csv")
    save_text(csv_text(raw.to_dict("records")), out / "noise.csv")
    save_text(csv_text(ema.to_dict("records")), out / "noise_ema.csv")
    if len(divergence):
        save_text(csv_text(divergence.to_dict("records")), out / "noise_divergence.csv")
    text = [
        "# The training noise of the mini testbed, by setting\n",
        "Validation top-1 (%) on a balanced validation set drawn by the generator with its own split seed (3,000 "
        "images; the test split is not read), each method at its committed selection and Table 1's budget, runs "
        "paired by seed (same initial weights, data order and augmentation draws). Written by "
        "`python benchmarks/noise.py --report` from the runs of `python benchmarks/noise.py --settings ... --seeds "
        "...` (see its docstring). MDE: the minimum detectable effect of a paired t test at 7 seeds (80% power, "
        "two-sided 5%); per CPU-minute: that MDE rescaled to one CPU-minute per seed of the comparison.\n",
        "## Summary by setting (raw weights)\n", markdown(summary.reset_index()),
        "\n## The choice: what Table 1's budget detects in each setting\n",
        "Per setting and set: the seeds that the budget of Table 1's 7 seeds at lr1.2-order (12 epochs on "
        "synth10_lt, 3 on synth10) buys at the setting's steps per run (a step costs the same in every setting; "
        "the CPU-minutes of the tables below mix machines and loads), the median MDE of the three comparisons at "
        "those seeds (the sd of each comparison's paired differences as measured here), and in how many of them "
        "an effect of the paper's size (iSogCLR Table 1, on CIFAR10-LT and CIFAR10) would be detected; the level "
        "constraint beside it (SimCLR at least 15 points above the raw-pixel probe). MDEs from 5-10 seeds: the sd "
        "of each is itself uncertain by about a third.\n",
        markdown(choice) if len(choice) else "(no setting beside lr1.2-order)\n",
        "\n## Level: mean validation top-1 by method (raw weights and their EMA, decay 0.99)\n",
        f"Raw-pixel probe on the same validation split (the no-learning floor): {floor}.\n",
        markdown(levels),
        "\n## iSogCLR's claim (iii) as a paired interaction\n",
        "(iSogCLR - SimCLR) on synth10_lt minus (iSogCLR - SimCLR) on synth10, by seed, raw weights.\n",
        markdown(interaction) if len(interaction) else "(no setting has both sets at 3 or more seeds)\n",
        "\n## Paired statistics, raw weights\n", markdown(raw),
        "\n## Paired statistics, EMA of the weights (decay 0.99)\n", markdown(ema),
    ]
    if len(large):
        save_text(csv_text(large.to_dict("records")), out / "noise_val10k.csv")
        text += ["\n## Paired statistics, raw weights, on a validation split of 10,000 images (split seed 4)\n",
                 "The runs that were scored on it too (the later ones); the same encoders as above.\n",
                 markdown(large)]
    if len(divergence):
        text += ["\n## Two runs one rounding apart\n",
                 f"SimCLR on synth10_lt, seed 0: the run against itself with the initial weights moved by "
                 f"{PERTURBATION:g} x N(0, 1): the relative distance ||w - w'|| / ||w|| of all weights and "
                 "BatchNorm statistics after each epoch, and the change of the validation score (on the 3,000 and the "
                 "10,000 images); rows marked (avx2): the same run under `ATEN_CPU_CAPABILITY=avx2` against the "
                 "default kernels (the 10,000-image change is empty where the default run was scored before that "
                 "split was added).\n",
                 markdown(divergence)]
    save_text("\n".join(text), out / "noise.md")
    print("\n".join(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["lr2.0", "lr0.8"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--rescore", action="store_true", help="rerun the runs scored before the 10,000-image "
                                                          "validation split was added (their first score must recur)")
    ap.add_argument("--divergence", action="store_true", help="SimCLR synth10_lt seed 0, with and without a 1e-7 "
                                                              "perturbation of the initial weights")
    ap.add_argument("--tag", default="default", help="a folder of its own for runs under other kernels (avx2)")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--runs", type=Path, default=Path(tempfile.gettempdir()) / "isogclr-noise")
    ap.add_argument("--report", action="store_true", help="write reports/benchmarks/noise.* from the runs")
    ap.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = ap.parse_args()
    if args.report:
        report(load_params(args.params), args.runs, args.out)
    else:
        run_all(args)


if __name__ == "__main__":
    main()
