"""Budget ladders: the Table 1 comparison (iSogCLR vs SimCLR and SogCLR) at growing pre-training budgets.

A ladder is a one-knob study (``studies.<name>`` in params.yaml) with ``knob: train.epochs`` and
``report: budget_ladder``; its runs are ``studies/<name>/<method>-<epochs>-s<seed>/``. It also gets Table 1's
budget for free (:func:`table1_budget`, the one place of that rule): when the ladder's dataset is in
``table1.datasets`` (or ``table1_real.datasets``), that section's seeds include all the ladder's seeds and its
methods include all the ladder's methods, the runs ``runs/<method>-<dataset>-s<seed>/`` are the point at
:func:`isogclr.config.studies.pretraining_epochs` epochs (unless the ladder has that budget itself).

The statistics are those of every report (:mod:`.stats`, :mod:`.verdicts`): per budget, the mean over seeds
with its 95% Student-t interval; iSogCLR's gaps paired by seed; the Spearman correlation of the learned
per-sample tau with the class frequency (:mod:`.temperatures`). A budget is tested only with at least
:data:`MIN_SEEDS` seeds; with fewer its claims are "not testable", with the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.core import run_id
from ..config.studies import pretraining_epochs, study_spec
from .stats import paired_differences, t_interval
from .studies import check_differs_only, studies_read_by, study_run_path
from .tables import MISSING, PAPER_COUNTERPART, paper_numbers
from .temperatures import frequency_correlation, frequency_verdict, load_temperatures
from .verdicts import LEVEL, Verdict, compare, not_testable, paper_difference

REPORT = "budget_ladder"  # studies.<name>.report of a ladder
KNOB = "train.epochs"
MIN_SEEDS = 3  # a budget's claims are tested with at least this many seeds
GRID_SECTIONS = ("table1", "table1_real")  # the grids whose runs can be a ladder's Table 1 budget
COLUMNS = ("method", "epochs", "seed", "top1", "knn1_top1", "run_path")
PAPER_TABLE = "isogclr_table1"  # the paper's effects (400 epochs) are read from Table 1, as table1_unimodal does
# what a ladder claims at each budget (the key of :func:`ladder_claim`), besides "<better> > <worse>"
TAU_CLAIM = "tau grows with class frequency"


def ladder_studies(params: dict[str, Any]) -> list[str]:
    """The names of the studies that are budget ladders (their ``report`` lists ``budget_ladder``), in
    params.yaml's order; a ladder whose knob is not ``train.epochs`` is an error."""
    names = studies_read_by(params, REPORT)
    for name in names:
        if study_spec(params, name).knob != KNOB:
            raise ValueError(f"studies.{name}.knob: a budget ladder's knob is {KNOB}, got "
                             f"{study_spec(params, name).knob!r}")
    return names


def table1_budget(params: dict[str, Any], study: str) -> tuple[str, int] | None:
    """``(section, epochs)`` when Table 1's runs (``runs/<method>-<dataset>-s<seed>``) give the ladder ``study``
    a budget: its dataset is in the section's datasets, its seeds among the section's seeds and its methods
    among the section's methods (first of :data:`GRID_SECTIONS` that qualifies); None otherwise, or when the
    ladder has that budget itself (its own runs are used)."""
    spec = study_spec(params, study)
    for section in GRID_SECTIONS:
        grid = params.get(section) or {}
        if (spec.dataset in (grid.get("datasets") or []) and set(spec.seeds) <= set(grid.get("seeds") or [])
                and set(spec.methods) <= set(grid.get("methods") or [])):
            epochs = pretraining_epochs(params, dataset=spec.dataset)
            return None if epochs in {int(v) for v in spec.values} else (section, epochs)
    return None


def _row(method: str, epochs: int, seed: int, path: Path) -> dict[str, Any]:
    metrics = json.loads((path / "metrics.json").read_text())
    return {"method": method, "epochs": int(epochs), "seed": int(seed), "top1": float(metrics["top1"]),
            "knn1_top1": float(metrics.get("knn1_top1", math.nan)), "run_path": str(path)}


def ladder_runs(params: dict[str, Any], study: str, runs_dir: Path | str = "runs",
                studies_dir: Path | str = "studies") -> pd.DataFrame:
    """One row per (method, epochs, seed) of the ladder ``study``: columns :data:`COLUMNS` (``run_path``: the
    run's folder), sorted by method (the study's order), epochs and seed.

    The study's runs are read from ``studies_dir``; Table 1's budget (:func:`table1_budget`) from
    ``runs_dir``, after checking that each Table 1 run's saved config differs from the same method's and seed's
    ladder run only in ``train.epochs`` (where both configs are saved). A missing run is an error naming the
    command that produces it.
    """
    spec = study_spec(params, study)
    if spec.knob != KNOB:
        raise ValueError(f"studies.{study}.knob: a budget ladder's knob is {KNOB}, got {spec.knob!r}")
    points: list[tuple[int, Any]] = [(int(v), v) for v in spec.values]
    extra = table1_budget(params, study)
    if extra is not None:
        points.append((extra[1], None))  # None: Table 1's run
    rows = []
    for method in spec.methods:
        for epochs, value in sorted(points, key=lambda p: p[0]):
            for seed in spec.seeds:
                if value is not None:
                    path = study_run_path(studies_dir, study, method, value, seed)
                else:
                    path = Path(runs_dir) / run_id(method, spec.dataset, seed)
                    if not (path / "metrics.json").exists():
                        raise FileNotFoundError(
                            f"{path / 'metrics.json'} is missing: the {epochs}-epoch budget of the ladder {study} is "
                            f"{extra[0]}'s run; run `dvc repro` (or `python -m isogclr train --method {method} "
                            f"--dataset {spec.dataset} --seed {seed}`)")
                    mine = study_run_path(studies_dir, study, method, spec.values[0], seed)
                    if all((p / "artifacts" / "config.json").exists() for p in (path, mine)):
                        check_differs_only([(path, mine)], key=KNOB)
                rows.append(_row(method, epochs, seed, path))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def ladder_summary(frame: pd.DataFrame, metric: str = "top1", by: Sequence[str] = ("method", "epochs"),
                   level: float = LEVEL) -> pd.DataFrame:
    """Per group ``by`` (default method x epochs, in the frame's order): ``n`` seeds (finite values), ``mean``
    and its Student-t interval over seeds ``ci_low``, ``ci_high`` (:func:`.stats.t_interval`; NaN for one seed)."""
    rows = []
    for keys, group in frame.groupby(list(by), sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        values = {int(s): float(v) for s, v in zip(group["seed"], group[metric], strict=True) if np.isfinite(v)}
        rows.append(dict(zip(by, keys, strict=True)) | _interval(values, "mean", level))
    return pd.DataFrame(rows, columns=[*by, "n", "mean", "ci_low", "ci_high"])


def _interval(values: dict[int, float], name: str, level: float) -> dict[str, float]:
    """``n``, the mean as ``name`` and its Student-t interval over seeds (NaN below 2 seeds; one seed: its value)."""
    row = {"n": len(values), name: math.nan, "ci_low": math.nan, "ci_high": math.nan}
    if len(values) >= 2:
        interval = t_interval(values, level)
        row.update({name: interval.estimate, "ci_low": interval.low, "ci_high": interval.high})
    elif values:
        row[name] = next(iter(values.values()))
    return row


def _by_seed(frame: pd.DataFrame, metric: str, method: str, epochs: int) -> dict[int, float]:
    rows = frame[(frame["method"] == method) & (frame["epochs"] == epochs)]
    return {int(s): float(v) for s, v in zip(rows["seed"], rows[metric], strict=True) if np.isfinite(v)}


def _need(frame: pd.DataFrame, methods: Iterable[str]) -> None:
    missing = [m for m in methods if m not in set(frame["method"])]
    if missing:
        raise ValueError(f"no run of {missing} in this ladder (methods: {sorted(frame['method'].unique())})")


def ladder_gaps(frame: pd.DataFrame, better: str = "isogclr", worse: Sequence[str] = ("simclr", "sogclr"),
                metric: str = "top1", level: float = LEVEL) -> pd.DataFrame:
    """Per epochs and rival: ``better - worse`` paired by seed (:func:`.stats.paired_differences`) over the
    ``n`` seeds both have: ``gap`` (the mean) and its Student-t interval ``ci_low``, ``ci_high`` (NaN below 2
    seeds). Columns: epochs, better, worse, n, gap, ci_low, ci_high."""
    worse = [worse] if isinstance(worse, str) else list(worse)
    _need(frame, [better, *worse])
    rows = []
    for epochs in sorted(int(e) for e in frame["epochs"].unique()):
        for rival in worse:
            diffs = paired_differences(_by_seed(frame, metric, better, epochs), _by_seed(frame, metric, rival, epochs))
            rows.append({"epochs": epochs, "better": better, "worse": rival} | _interval(diffs, "gap", level))
    return pd.DataFrame(rows, columns=["epochs", "better", "worse", "n", "gap", "ci_low", "ci_high"])


def ladder_temperatures(frame: pd.DataFrame, method: str = "isogclr") -> pd.DataFrame:
    """The learned per-sample temperatures (``artifacts/tau.csv``) of ``method``'s runs in a ladder table
    (:func:`ladder_runs`), with each sample's class frequency (:func:`.temperatures.load_temperatures`), the
    run's epochs and seed; ``run`` is the run's folder."""
    _need(frame, [method])
    frames = []
    for row in frame[frame["method"] == method].itertuples():
        path = Path(row.run_path)
        taus = load_temperatures(path.parent, [path.name])
        frames.append(taus.assign(run=row.run_path, epochs=int(row.epochs), seed=int(row.seed)))
    return pd.concat(frames, ignore_index=True)


def ladder_correlations(params: dict[str, Any], study: str, runs_dir: Path | str = "runs",
                        studies_dir: Path | str = "studies", *, method: str = "isogclr",
                        taus: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per epochs and seed of ``method`` in the ladder ``study``: Spearman's rho of the learned tau with the
    class frequency over samples (``spearman``) and over class means (``spearman_class_means``),
    :func:`.temperatures.frequency_correlation` of each run. ``taus`` (from :func:`ladder_temperatures`) saves
    reading the runs again. The interval over seeds per budget is
    ``ladder_summary(correlations, "spearman", by=("epochs",))``."""
    if taus is None:
        taus = ladder_temperatures(ladder_runs(params, study, runs_dir, studies_dir), method)
    where = taus.groupby("run", sort=False)[["epochs", "seed"]].first()
    corr = frequency_correlation(taus).join(where, on="run")
    corr = corr.rename(columns={"spearman_samples": "spearman", "run": "run_path"})
    return corr[["epochs", "seed", "run_path", "samples", "spearman", "spearman_class_means", "tau_mean", "tau_std"]]


def ladder_claim(study: str, dataset: str, epochs: int, what: str) -> str:
    """The claim text of one verdict of the ladder ``study`` on ``dataset``: ``what`` ("isogclr > simclr" or
    :data:`TAU_CLAIM`) at one budget (unique across ladders, also two on one dataset)."""
    return f"Budget ladder {study} on {dataset} ({PAPER_COUNTERPART.get(dataset, dataset)}), {epochs} epochs: {what}"


def ladder_verdicts(params: dict[str, Any], study: str, frame: pd.DataFrame, taus: pd.DataFrame | None = None, *,
                    better: str = "isogclr", worse: Sequence[str] = ("simclr", "sogclr"),
                    min_seeds: int = MIN_SEEDS, floor: float | None = None) -> list[Verdict]:
    """Per budget of the ladder table ``frame`` (:func:`ladder_runs`): "``better`` > ``worse``" for each rival,
    paired by seed (:func:`.verdicts.compare`, beside the paper's Table 1 difference on the dataset's
    counterpart, at 400 epochs), and, when ``taus`` (:func:`ladder_temperatures`) is given, ":data:`TAU_CLAIM`"
    for ``better``'s runs (:func:`.temperatures.frequency_verdict`: over classes, a cluster bootstrap). A budget
    with fewer than ``min_seeds`` seeds gets "not testable", with the
    reason. Claims are named by :func:`ladder_claim`. ``floor``: the dataset's best no-learning probe (the
    testbed's reference rows): a budget at which both methods are within a margin of it is not testable. At Table
    1's own budget (:func:`table1_budget`) the rows name the Table 1 / temperature claim they repeat (``repeats``:
    counted once across the reports, :mod:`.multiplicity`)."""
    worse = [worse] if isinstance(worse, str) else list(worse)
    _need(frame, [better, *worse])
    dataset = study_spec(params, study).dataset
    counterpart = PAPER_COUNTERPART.get(dataset, dataset)
    paper = paper_numbers(PAPER_TABLE)
    grid = table1_budget(params, study)  # Table 1's own runs at its budget: those rows repeat its claims
    out = []
    for epochs in sorted(int(e) for e in frame["epochs"].unique()):
        repeated = grid is not None and epochs == grid[1]
        for rival in worse:
            claim = ladder_claim(study, dataset, epochs, f"{better} > {rival}")
            pe = paper_difference(paper, better, rival, dataset=counterpart)
            a, b = _by_seed(frame, "top1", better, epochs), _by_seed(frame, "top1", rival, epochs)
            diffs = paired_differences(a, b)
            if len(diffs) >= min_seeds:
                out.append(replace(compare(claim, (better, a), (rival, b), paper_effect=pe, floor=floor),
                                   repeats=f"Table 1: {better} > {rival} on {dataset} ({counterpart})"
                                   if repeated else None))
                continue
            said = (f"mean {better} - {rival} {sum(diffs.values()) / len(diffs):+.2f} points over seeds {list(diffs)}"
                    if diffs else f"no seed has both runs ({better} seeds {sorted(a)}, {rival} seeds {sorted(b)})")
            paper_said = "paper: no number" if pe is None else f"paper ({counterpart}, 400 epochs): {pe:+.2f} points"
            out.append(replace(not_testable(claim, f"{len(diffs)} seed(s) with both runs at {epochs} epochs, fewer "
                                                   f"than the {min_seeds} a budget needs; {said}; {paper_said}"),
                               n_seeds=len(diffs), effect=(sum(diffs.values()) / len(diffs)) if diffs else None,
                               paper_effect=pe))
        if taus is None:
            continue
        here = taus[taus["epochs"] == epochs]
        runs = dict(here.groupby("seed", sort=True)["run"].first())
        claim = ladder_claim(study, dataset, epochs, TAU_CLAIM)
        if len(runs) >= min_seeds:
            out.append(replace(frequency_verdict(here, claim, {int(s): r for s, r in runs.items()}),
                               repeats=f"Samples of frequent semantics learn larger tau ({better} on {dataset})"
                               if repeated else None))
        else:
            out.append(replace(not_testable(claim, f"{len(runs)} seed(s) of {better} with learned temperatures at "
                                                   f"{epochs} epochs, fewer than the {min_seeds} a budget needs; "
                                                   "paper: no number"), n_seeds=len(runs)))
    return out


# --- the report's table and sentences ------------------------------------------------------------------------


def interval_cell(mean: float, low: float, high: float, n: int, digits: int = 2, signed: bool = False) -> str:
    """``mean [low, high]`` (a 95% interval over ``n`` seeds); ``mean (n=1)`` for one seed; ``—`` for none."""
    if n == 0 or not np.isfinite(mean):
        return MISSING
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    if n == 1 or not (np.isfinite(low) and np.isfinite(high)):
        return f"{f.format(mean)} (n={n})"
    return f"{f.format(mean)} [{f.format(low)}, {f.format(high)}]"


def ladder_table(study: str, dataset: str, summary: pd.DataFrame, gaps: pd.DataFrame,
                 correlations: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per budget of the ladder ``study``: dataset, epochs, ladder (the study), seeds, each method's mean
    top-1 with its 95% interval (:func:`ladder_summary`), each gap (:func:`ladder_gaps`) and, given the
    correlation summary (``ladder_summary(correlations, "spearman", by=("epochs",))``), the tau-frequency
    Spearman."""
    rows = []
    for epochs in sorted(int(e) for e in summary["epochs"].unique()):
        mine = summary[summary["epochs"] == epochs]
        row: dict[str, Any] = {"dataset": dataset, "epochs": epochs, "ladder": study, "seeds": int(mine["n"].max())}
        for r in mine.itertuples():
            row[f"{r.method} top-1"] = interval_cell(r.mean, r.ci_low, r.ci_high, r.n)
        for r in gaps[gaps["epochs"] == epochs].itertuples():
            row[f"{r.better} − {r.worse}"] = interval_cell(r.gap, r.ci_low, r.ci_high, r.n, signed=True)
        if correlations is not None:
            c = correlations[correlations["epochs"] == epochs]
            row["Spearman(tau, class frequency)"] = (MISSING if c.empty else
                                                     interval_cell(c["mean"].iloc[0], c["ci_low"].iloc[0],
                                                                   c["ci_high"].iloc[0], int(c["n"].iloc[0]),
                                                                   digits=3, signed=True))
        rows.append(row)
    return pd.DataFrame(rows)


STATUS_WORDS = {
    "supported": "lies above 0 (the paper's direction)",
    "contradicted": "lies below 0 (against the paper)",
    "inconclusive": "contains 0",
    "not testable": f"is not tested (fewer than {MIN_SEEDS} seeds)",
}


def budgets_text(epochs: list[int]) -> str:
    """"5, 10 and 40 epochs"."""
    words = [f"{e}" for e in epochs]
    return (words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" and {words[-1]}") + " epochs"


def statuses_by_budget(verdicts: list[Verdict], study: str, dataset: str, what: str,
                       epochs: Iterable[int]) -> dict[int, str]:
    """``{epochs: status}`` of the claim ``what`` of the ladder ``study`` (as named by :func:`ladder_claim`)."""
    by_claim = {v.claim: v for v in verdicts}
    claims = {int(e): ladder_claim(study, dataset, int(e), what) for e in epochs}
    return {e: by_claim[c].status for e, c in claims.items() if c in by_claim}


CLAIM_WORDS = {  # the same statuses said of a claim rather than of an interval (e.g. the correlation's)
    "supported": "is supported",
    "contradicted": "is contradicted",
    "inconclusive": "is inconclusive",
    "not testable": f"is not tested (fewer than {MIN_SEEDS} seeds)",
}


def status_sentence(statuses: dict[int, str], subject: str, words: dict[str, str] | None = None) -> str:
    """"<subject> lies above 0 (the paper's direction) at 40 epochs; contains 0 at 5, 10 and 20 epochs." from
    ``{epochs: status}`` (``words``: the phrase of each status, default :data:`STATUS_WORDS`); "at every budget"
    when one status covers all of them."""
    words = words or STATUS_WORDS
    if not statuses:
        return f"{subject}: no budget."
    groups = {s: [e for e, t in sorted(statuses.items()) if t == s] for s in words}
    parts = [f"{words[s]} " + ("at every budget" if len(budgets) == len(statuses) else f"at {budgets_text(budgets)}")
             for s, budgets in groups.items() if budgets]
    return f"{subject} " + "; ".join(parts) + "."


def ordering_sentence(verdicts: list[Verdict], study: str, dataset: str, better: str, rivals: Sequence[str],
                      epochs: Iterable[int]) -> str:
    """At which budgets of the ladder ``study`` the paper's ordering appears: ``better`` above every rival, each
    verdict supported (interval above 0); the budgets left untested (fewer than :data:`MIN_SEEDS` seeds) are
    named."""
    epochs = sorted(int(e) for e in epochs)
    status = {r: statuses_by_budget(verdicts, study, dataset, f"{better} > {r}", epochs) for r in rivals}
    ordered = [e for e in epochs if all(status[r].get(e) == "supported" for r in rivals)]
    untested = [e for e in epochs if any(status[r].get(e, "not testable") == "not testable" for r in rivals)]
    what = f"the paper's ordering ({better} above {' and '.join(rivals)}, every paired interval above 0)"
    text = f"{what} appears at {budgets_text(ordered)}" if ordered else f"{what} appears at no budget of this ladder"
    return text + (f" (not tested at {budgets_text(untested)}: fewer than {MIN_SEEDS} seeds)." if untested else ".")


def trend_sentence(summary: pd.DataFrame, subject: str, unit: str = " points", digits: int = 2) -> str:
    """How the per-budget mean (a frame with epochs, n, mean, ci_low, ci_high, e.g. one gap's rows of
    :func:`ladder_gaps` renamed, or a correlation summary) moves from the smallest to the largest budget, and
    whether the two ends' 95% intervals overlap (if they do, the change is within the seeds' spread)."""
    rows = summary[np.isfinite(summary["mean"])].sort_values("epochs")
    if len(rows) < 2:
        return f"{subject}: fewer than two budgets with a number, no trend."
    first, last = rows.iloc[0], rows.iloc[-1]
    f = f"{{:+.{digits}f}}{unit}"
    a, b = round(float(first["mean"]), digits), round(float(last["mean"]), digits)  # as shown
    change = "larger" if b > a else "smaller" if b < a else "the same"
    text = (f"{subject} goes from {f.format(first['mean'])} at {int(first['epochs'])} epochs to "
            f"{f.format(last['mean'])} at {int(last['epochs'])} epochs ({change} at the largest budget")
    bounds = [first["ci_low"], first["ci_high"], last["ci_low"], last["ci_high"]]
    if not all(np.isfinite(bounds)):
        return text + "; one end has no interval, so the change is not weighed against the seeds' spread)."
    overlap = first["ci_low"] <= last["ci_high"] and last["ci_low"] <= first["ci_high"]
    return text + ("; the two ends' 95% intervals overlap: the change is within the seeds' spread)." if overlap else
                   "; the two ends' 95% intervals do not overlap).")


def gap_summary(gaps: pd.DataFrame, worse: str) -> pd.DataFrame:
    """One rival's rows of :func:`ladder_gaps` in the columns :func:`trend_sentence` reads."""
    return gaps[gaps["worse"] == worse].rename(columns={"gap": "mean"})
