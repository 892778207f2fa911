"""The bimodal report: our image-text runs beside the iSogCLR paper's Tables 2/5/6/7 (and SogCLR's Table 4).

Our evaluation sets stand in for the paper's by role only (same protocol, generated data):

* ``retrieval_a`` ~ MSCOCO: its images follow the training (Zipf) cluster distribution, like a test
  set from the same long-tailed web-like distribution;
* ``retrieval_b`` ~ Flickr30K: its images are uniform over the clusters (rare semantics as common
  as frequent ones);
* ``synth10`` ~ CIFAR10, ``synth100`` ~ CIFAR100 (zero-shot classification with prompt templates);
  ImageNet1K has no counterpart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import spearmanr

from ..config import bimodal_run_id, bimodal_study_spec
from .studies import study_run_path
from .tables import cell, mean_std
from .verdicts import NO_LEARNING_MARGIN, Verdict, compare, paper_difference, per_seed

PAPER_COUNTERPART = {"retrieval_a": "MSCOCO", "retrieval_b": "Flickr30K", "synth10": "CIFAR10",
                     "synth100": "CIFAR100"}
RETRIEVAL_METRICS = ("ir_r1", "ir_r5", "ir_r10", "tr_r1", "tr_r5", "tr_r10")
ZEROSHOT_METRICS = ("top1", "top3", "top5")


def _run_dir(runs_dir: Path | str, method: str, seed: int) -> Path:
    path = Path(runs_dir) / bimodal_run_id(method, seed)
    if not (path / "metrics.json").exists():
        raise FileNotFoundError(f"{path / 'metrics.json'} is missing: run `dvc repro` (or `python -m isogclr "
                                f"train-bimodal --method {method} --seed {seed}`)")
    return path


def _metric_rows(run: Path) -> list[dict[str, Any]]:
    """One row (dataset, metric, value) per number of a run's ``metrics.json`` (``retrieval_a_ir_r1``, ...)."""
    rows = []
    for key, value in json.loads((run / "metrics.json").read_text()).items():
        metric = next(x for x in (*RETRIEVAL_METRICS, *ZEROSHOT_METRICS) if key.endswith(f"_{x}"))
        rows.append({"dataset": key[:-len(metric) - 1], "metric": metric, "value": value})
    return rows


def collect_bimodal_runs(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """Long table: method, seed, dataset, metric, value, one row per number of each run's ``metrics.json``."""
    return pd.DataFrame([{"method": m, "seed": s, **row} for m in methods for s in seeds
                         for row in _metric_rows(_run_dir(runs_dir, m, s))])


def collect_bimodal_study(params: dict[str, Any], study: str, root: Path | str = "studies") -> pd.DataFrame:
    """The long table of :func:`collect_bimodal_runs` for the runs of ``bimodal_studies.<study>``,
    with the knob's value of each run in column ``knob``."""
    spec = bimodal_study_spec(params, study)
    return pd.DataFrame([{"method": m, "knob": v, "seed": s, **row}
                         for m in spec.methods for v in spec.values for s in spec.seeds
                         for row in _metric_rows(study_run_path(root, study, m, v, s, command="train-bimodal"))])


def budget_table(runs: pd.DataFrame, cells: list[tuple[str, str]], paper: pd.DataFrame,
                 paper_rows: dict[str, str]) -> pd.DataFrame:
    """Rows: methods. Columns: our mean ± std over seeds of each (dataset, metric) cell per number of
    epochs (column ``epochs`` of ``runs``), then the paper's number per (batch size, epochs) of its row
    ``paper_rows.get(method, method)`` (SogCLR Table 4: columns method, batch_size, epochs, top1)."""
    table = pd.DataFrame(index=pd.Index(runs["method"].unique(), name="method"))
    for dataset, metric in cells:
        for epochs in sorted(runs["epochs"].unique()):
            mine = runs[(runs.dataset == dataset) & (runs.metric == metric) & (runs.epochs == epochs)]
            stats = mean_std(mine, "value", by=("method",)).set_index("method")
            table[f"ours {dataset} {metric} {epochs} ep"] = [cell(*stats.loc[m, ["mean", "std", "seeds"]])
                                                              for m in table.index]
    for (batch, epochs), theirs in paper.groupby(["batch_size", "epochs"]):
        top1 = theirs.set_index("method")["top1"]
        table[f"paper top1 b={batch} {epochs} ep"] = [f"{top1[r]:.1f}" if r in top1 else "—"
                                                      for r in (paper_rows.get(m, m) for m in table.index)]
    return table


def side_by_side(runs: pd.DataFrame, paper: pd.DataFrame, metrics: tuple[str, ...],
                 paper_rows: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows (dataset, method, source: ours / paper); columns ``metrics``; cells mean ± std over seeds.

    The paper row of a method is ``paper_rows.get(method, method)``; methods the paper does not
    report get no paper row. ``dataset`` reads ``ours (paper counterpart)``.
    """
    paper_rows = paper_rows or {}
    runs = runs[runs["metric"].isin(metrics)]
    stats = mean_std(runs, "value", by=("dataset", "method", "metric")).set_index(["dataset", "method", "metric"])
    rows, index = [], []
    order = list(PAPER_COUNTERPART)
    datasets = sorted(runs["dataset"].unique(), key=lambda d: (order.index(d) if d in order else len(order), d))
    for dataset in datasets:
        counterpart = PAPER_COUNTERPART.get(dataset)
        label = f"{dataset} ({counterpart or 'no counterpart'})"
        theirs = paper[paper["dataset"] == counterpart].set_index(["method", "metric"])
        for method in runs["method"].unique():
            rows.append([cell(*stats.loc[(dataset, method, m), ["mean", "std", "seeds"]]) for m in metrics])
            index.append((label, method, "ours"))
            row = paper_rows.get(method, method)
            if (row, metrics[0]) in theirs.index:
                rows.append([cell(theirs.loc[(row, m), "mean"], theirs.loc[(row, m), "std"]) for m in metrics])
                index.append((label, method, f"paper ({row})"))
    return pd.DataFrame(rows, columns=list(metrics),
                        index=pd.MultiIndex.from_tuples(index, names=["dataset", "method", "source"]))


def ordering_verdict(runs: pd.DataFrame, claim: str, better: str, worse: str, dataset: str, metric: str,
                     paper: pd.DataFrame | None = None, paper_rows: dict[str, str] | None = None,
                     floor: float | None = None, margin: float = NO_LEARNING_MARGIN) -> Verdict:
    """"``better`` beats ``worse``" on one of our numbers, paired by seed (:func:`.verdicts.compare`: mean
    paired difference with its 95% t interval over seeds). The paper's effect is its ``better - worse`` on the
    counterpart of ``dataset`` (``paper``: the transcribed Tables 2/5/6/7; ``paper_rows`` maps our method to
    the paper's row), None where the paper has no such number. ``floor``: the metric's no-learning score
    (chance, or the untrained pair of encoders); both methods within ``margin`` of it: not testable (no
    learning)."""
    rows = paper_rows or {}
    paper_effect = None if paper is None else paper_difference(
        paper, rows.get(better, better), rows.get(worse, worse), dataset=PAPER_COUNTERPART.get(dataset),
        metric=metric)
    return compare(f"{claim} [{dataset} {metric}]", (better, per_seed(runs, "value", method=better,
                                                                      dataset=dataset, metric=metric)),
                   (worse, per_seed(runs, "value", method=worse, dataset=dataset, metric=metric)),
                   paper_effect=paper_effect, floor=floor, margin=margin)


def load_train_logs(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """Every run's ``train_log.csv`` with its method and seed."""
    frames = []
    for m in methods:
        for s in seeds:
            df = pd.read_csv(_run_dir(runs_dir, m, s) / "train_log.csv")
            frames.append(df.assign(method=m, seed=s))
    return pd.concat(frames, ignore_index=True)


def load_bimodal_taus(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """``artifacts/tau.csv`` of every (method, seed) run that has per-pair temperatures, with method and seed."""
    frames = []
    for m in methods:
        for s in seeds:
            path = _run_dir(runs_dir, m, s) / "artifacts" / "tau.csv"
            if path.exists():
                frames.append(pd.read_csv(path).assign(method=m, seed=s))
    if not frames:
        raise FileNotFoundError(f"no tau.csv under {runs_dir} for {methods}: only losses with per-pair "
                                "temperatures (isogclr_bimodal, clip_individual_tau) write one")
    return pd.concat(frames, ignore_index=True)


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho, NaN (not a warning) when either side is constant: a temperature pinned at its bound
    for every pair has no correlation with anything."""
    if x.nunique() < 2 or y.nunique() < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def tau_frequency_correlation(taus: pd.DataFrame) -> pd.DataFrame:
    """Per (method, seed): Spearman correlation of tau_image / tau_text with the pair's cluster frequency,
    over pairs and over cluster means (NaN where the temperatures are all equal), and the mean tau of
    mismatched vs matched pairs."""
    rows = []
    for (method, seed), df in taus.groupby(["method", "seed"], sort=False):
        row = {"method": method, "seed": seed, "pairs": len(df)}
        per_cluster = df.groupby("cluster").agg(tau_image=("tau_image", "mean"), tau_text=("tau_text", "mean"),
                                                frequency=("cluster_frequency", "first"))
        for col in ("tau_image", "tau_text"):
            row[f"spearman_{col}_pairs"] = _spearman(df[col], df["cluster_frequency"])
            row[f"spearman_{col}_clusters"] = _spearman(per_cluster[col], per_cluster["frequency"])
            row[f"{col}_mean"] = df[col].mean()
        row["tau_image_mismatched"] = df.loc[df["mismatched"] == 1, "tau_image"].mean()
        row["tau_image_matched"] = df.loc[df["mismatched"] == 0, "tau_image"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def tau_extremes(taus: pd.DataFrame, k: int, column: str = "tau_image") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The k pairs with the largest and the k with the smallest learned ``column`` (one run's taus)."""
    return taus.nlargest(k, column), taus.nsmallest(k, column)
