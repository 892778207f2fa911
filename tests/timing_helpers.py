"""Readers of the timing record that only the tests use: one run's cumulative seconds, the convergence study's."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from isogclr import epoch_times as timing
from isogclr.config.convergence import convergence_run_name


def timing_record(timing_path: Path | str | None = None) -> pd.DataFrame:
    """The timing record (default ``timing.csv`` in the working directory); empty when the file is missing."""
    return timing.read(timing_path, as_frame=True)


def run_seconds(run: Path | str, by: str = "epoch", record: pd.DataFrame | None = None,
                timing_path: Path | str | None = None) -> pd.DataFrame:
    """One run's cumulative wall-clock seconds: columns ``by`` (``epoch`` or ``step``) and ``train_seconds``
    (the sum of the recorded seconds up to and including that epoch / step).

    ``run``: the run's folder (its key in the record, :func:`isogclr.epoch_times.run_key`); ``record``: the record
    already read (:func:`timing_record`), else it is read from ``timing_path``, else from where the run's rows go
    (:func:`isogclr.epoch_times.record_location`). No row for the run: an empty frame.
    """
    key = timing.run_key(run)
    if record is None and timing_path is None:
        timing_path, key = timing.record_location(key)
    record = timing_record(timing_path) if record is None else record
    rows = record[record["run"] == key].dropna(subset=[by]).sort_values(by)
    return pd.DataFrame({by: rows[by].astype("int64").to_numpy(),
                         "train_seconds": rows["seconds"].cumsum().to_numpy(dtype=float)})


def convergence_run(runs_dir: Path | str, method: str, num_augmentations: int, seed: int) -> Path:
    """The folder (and timing-record key) of one run of the EMC2 convergence study (A = 0: fresh views)."""
    return Path(runs_dir) / convergence_run_name(method, num_augmentations, seed)


def convergence_seconds(table: pd.DataFrame, runs_dir: Path | str, final: bool = False,
                        timing_path: Path | str | None = None) -> pd.Series:
    """Training seconds (evaluations excluded) of the rows of a convergence study table (``runs_convergence``).

    ``table`` has ``seed``, ``method`` and ``num_augmentations`` columns and, unless ``final``, ``step``: the
    cumulative seconds at that step (0 at step 0); ``final``: the run's total. NaN where the record has no row.
    """
    record, cache = None if timing_path is None else timing_record(timing_path), {}

    def seconds(row) -> float:  # noqa: ANN001
        key = (row["method"], int(row["num_augmentations"]), int(row["seed"]))
        if key not in cache:
            cache[key] = run_seconds(convergence_run(runs_dir, *key), "step", record)
        cum = cache[key]
        if cum.empty:
            return math.nan
        if final:
            return float(cum["train_seconds"].iloc[-1])
        if int(row["step"]) == 0:
            return 0.0
        hit = cum.loc[cum["step"] == int(row["step"]), "train_seconds"]
        return float(hit.iloc[0]) if len(hit) else math.nan

    return pd.Series([seconds(row) for _, row in table.iterrows()], index=table.index, name="train_seconds",
                     dtype=float)
