"""Wall-clock times for the reports, read from the timing record ``timing.csv`` (:mod:`isogclr.timing`).

No run's result files hold wall clock; the record keeps the last measured seconds of every run's epochs
(or steps), on the machine that ran it. It is tracked in git but is no DVC dependency, so a report that
shows times shows the last measured ones. A run without rows in the record gets NaN times, not an error.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .. import timing


def timing_record(timing_path: Path | str | None = None) -> pd.DataFrame:
    """The timing record (default ``timing.csv`` in the working directory); empty when the file is missing."""
    return timing.read(timing_path, as_frame=True)


def run_seconds(run: Path | str, by: str = "epoch", record: pd.DataFrame | None = None,
                timing_path: Path | str | None = None) -> pd.DataFrame:
    """One run's cumulative wall-clock seconds: columns ``by`` (``epoch`` or ``step``) and ``train_seconds``
    (the sum of the recorded seconds up to and including that epoch / step).

    ``run``: the run's folder (its key in the record, :func:`isogclr.timing.run_key`); ``record``: the record
    already read (:func:`timing_record`), else it is read from ``timing_path``. No row for the run: an empty frame.
    """
    record = timing_record(timing_path) if record is None else record
    rows = record[record["run"] == timing.run_key(run)].dropna(subset=[by]).sort_values(by)
    return pd.DataFrame({by: rows[by].astype("int64").to_numpy(),
                         "train_seconds": rows["seconds"].cumsum().to_numpy(dtype=float)})


def convergence_run(runs_dir: Path | str, method: str, num_augmentations: int) -> Path:
    """The folder name (and timing-record key) of one run of the EMC2 convergence study (A = 0: fresh views)."""
    return Path(runs_dir) / f"{method}-A{int(num_augmentations)}"


def convergence_seconds(table: pd.DataFrame, runs_dir: Path | str, final: bool = False,
                        timing_path: Path | str | None = None) -> pd.Series:
    """Training seconds (evaluations excluded) of the rows of a convergence study table (``runs_convergence``).

    ``table`` has ``method`` and ``num_augmentations`` columns and, unless ``final``, ``step``: the
    cumulative seconds at that step (0 at step 0); ``final``: the run's total. NaN where the record has no row.
    """
    record, cache = timing_record(timing_path), {}

    def seconds(row) -> float:  # noqa: ANN001
        key = (row["method"], int(row["num_augmentations"]))
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
