"""Learned per-sample temperatures against the frequency of each sample's semantics (iSogCLR Sec. 6.3).

The paper's central claim: samples with frequent semantics learn large temperatures, samples with
rare semantics small ones. On long-tailed data whose classes we generated, a sample's semantic
frequency is known exactly: the number of training samples of its class.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import spearmanr

from .correlations import at_bound_reason
from .groups import frequency_verdict_over_groups, group_table
from .verdicts import Verdict

BOUNDS = ("tau_min", "tau_max")  # the learned temperatures' bounds, as the methods' settings name them


def recorded_bounds(run_dir: Path | str) -> dict[str, float]:
    """The temperature bounds a run was trained with: ``tau_min`` / ``tau_max`` of ``method.kwargs`` in its
    ``artifacts/config.json``; NaN for a bound the config does not record (a method without it, or a run folder
    with no config.json, as hand-made test folders)."""
    path = Path(run_dir) / "artifacts" / "config.json"
    kwargs = json.loads(path.read_text()).get("method", {}).get("kwargs", {}) if path.is_file() else {}
    return {name: float(kwargs[name]) if kwargs.get(name) is not None else math.nan for name in BOUNDS}


def run_taus(run_dir: Path | str, **columns: Any) -> pd.DataFrame:
    """One run's per-sample temperatures (``artifacts/tau.csv``) with its bounds (:func:`recorded_bounds`) and
    the given constant ``columns`` (method, seed, a study's value) on every row."""
    run_dir = Path(run_dir)
    return pd.read_csv(run_dir / "artifacts" / "tau.csv").assign(**columns, **recorded_bounds(run_dir))


def frame_bounds(taus: pd.DataFrame) -> dict[str, float]:
    """The bounds (:data:`BOUNDS` columns, from :func:`recorded_bounds`) shared by the rows of ``taus``, those the
    runs recorded: {} when none did (runs or frames made by hand). A ValueError names the values when they differ."""
    out = {}
    for name in BOUNDS:
        values = set(taus[name].dropna().unique()) if name in taus else set()
        if len(values) > 1:
            raise ValueError(f"the runs of one verdict have different {name}: {sorted(values)}")
        if values:
            out[name] = float(values.pop())
    return out


def load_temperatures(runs_dir: Path | str, run_ids: list[str]) -> pd.DataFrame:
    """``tau.csv`` of each run with its class frequency (training samples of the class), run id and the bounds
    its temperatures were kept in (:func:`recorded_bounds`: columns ``tau_min``, ``tau_max``)."""
    frames = []
    for rid in run_ids:
        path = Path(runs_dir) / rid / "artifacts" / "tau.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: the run {rid} has no per-sample temperatures "
                                    "(only iSogCLR-type losses write them) or has not run")
        df = pd.read_csv(path)
        df["class_frequency"] = df.groupby("label")["label"].transform("size")
        df["run"] = rid
        frames.append(df.assign(**recorded_bounds(Path(runs_dir) / rid)))
    return pd.concat(frames, ignore_index=True)


def frequency_correlation(taus: pd.DataFrame) -> pd.DataFrame:
    """Per run: Spearman correlation between tau and class frequency, over samples and over class means."""
    rows = []
    for rid, df in taus.groupby("run", sort=False):
        per_class = df.groupby("label").agg(tau=("tau", "mean"), frequency=("class_frequency", "first"))
        rows.append({
            "run": rid, "samples": len(df),
            "spearman_samples": spearmanr(df["tau"], df["class_frequency"]).statistic,
            "spearman_class_means": spearmanr(per_class["tau"], per_class["frequency"]).statistic,
            "tau_mean": df["tau"].mean(), "tau_std": df["tau"].std(),
        })
    return pd.DataFrame(rows)


def frequency_verdict(taus: pd.DataFrame, claim: str, runs: Mapping[int, str]) -> Verdict:
    """The claim "frequent semantics learn larger tau" on the runs ``{seed: run id}`` of one method and dataset,
    judged over class x seed cells with the class's identity held fixed
    (:func:`.groups.frequency_verdict_over_groups`: a class effect, a seed effect and a slope on log class
    frequency, a bootstrap over seeds; each seed's Spearman over classes against its own frequencies and the
    sample-level Spearman are in the evidence as description). Temperatures mostly at one of the runs' bounds
    (:func:`frame_bounds`): not testable (at its bound)."""
    per_run = {seed: taus[taus["run"] == rid] for seed, rid in runs.items()}
    over_samples = frequency_correlation(pd.concat(per_run.values())).set_index("run")["spearman_samples"]
    verdict = frequency_verdict_over_groups(
        claim, {seed: group_table(df, "label", "class_frequency", "tau") for seed, df in per_run.items()},
        value="tau", group="class", unit="tau",
        description="over samples (description only, not the verdict): " + ", ".join(
            f"seed {seed} {over_samples[rid]:+.3f}" for seed, rid in runs.items()))
    bounds = frame_bounds(pd.concat(per_run.values()))
    degenerate = at_bound_reason(pd.concat(per_run.values())["tau"], bounds) if bounds else None
    if degenerate is None:
        return verdict
    return replace(verdict, status="not testable", p_rerun=None, evidence=f"{degenerate}; {verdict.evidence}")


def extreme_class_distribution(taus: pd.DataFrame, k: int) -> pd.DataFrame:
    """Figure 5 (left): the class distribution of the k largest-tau and the k smallest-tau samples of one run."""
    largest = taus.nlargest(k, "tau")["label"].value_counts(normalize=True)
    smallest = taus.nsmallest(k, "tau")["label"].value_counts(normalize=True)
    counts = taus.groupby("label")["class_frequency"].first()
    return pd.DataFrame({"class_frequency": counts, "share_largest_tau": largest, "share_smallest_tau": smallest}
                        ).fillna(0.0).sort_values("class_frequency", ascending=False)
