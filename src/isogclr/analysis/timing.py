"""Wall-clock times, read from the timing record ``timing.csv`` (:mod:`isogclr.timing`), and ``reports/timing.md``.

No run's result files hold wall clock; the record keeps the last measured seconds of every run's epochs
(or steps), on the machine that ran it. It is tracked in git but is no DVC dependency. No report notebook
shows these times (a report's bytes must not depend on the machine that reran it): the reports measure cost
in samples seen and optimizer steps, and the times are read here for the record's own users (the timing
report below, a reader's own analysis). A run without rows in the record gets NaN times, not an error.

:func:`write_timing_report` turns the parallel runner's stage log of the last full repro
(``reports/repro_stages.csv``, written by :mod:`isogclr.repro`) into ``reports/timing.md``: where the time
goes, claim by claim.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pandas as pd

from .. import timing
from ..io import save_text


def timing_record(timing_path: Path | str | None = None) -> pd.DataFrame:
    """The timing record (default ``timing.csv`` in the working directory); empty when the file is missing."""
    return timing.read(timing_path, as_frame=True)


def run_seconds(run: Path | str, by: str = "epoch", record: pd.DataFrame | None = None,
                timing_path: Path | str | None = None) -> pd.DataFrame:
    """One run's cumulative wall-clock seconds: columns ``by`` (``epoch`` or ``step``) and ``train_seconds``
    (the sum of the recorded seconds up to and including that epoch / step).

    ``run``: the run's folder (its key in the record, :func:`isogclr.timing.run_key`); ``record``: the record
    already read (:func:`timing_record`), else it is read from ``timing_path``, else from where the run's rows go
    (:func:`isogclr.timing.record_location`). No row for the run: an empty frame.
    """
    key = timing.run_key(run)
    if record is None and timing_path is None:
        timing_path, key = timing.record_location(key)
    record = timing_record(timing_path) if record is None else record
    rows = record[record["run"] == key].dropna(subset=[by]).sort_values(by)
    return pd.DataFrame({by: rows[by].astype("int64").to_numpy(),
                         "train_seconds": rows["seconds"].cumsum().to_numpy(dtype=float)})


def convergence_run(runs_dir: Path | str, method: str, num_augmentations: int, seed: int) -> Path:
    """The folder name (and timing-record key) of one run of the EMC2 convergence study (A = 0: fresh views)."""
    return Path(runs_dir) / f"{method}-A{int(num_augmentations)}-s{int(seed)}"


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


SIDE = "side studies (Table 3, ablations, batch size, EMC2)"
# the claim a family of stages serves (a family: a foreach block of the pipeline, or a single stage)
RGCL = "RGCL's mechanism: the rho sweeps of iSogCLR's image-text runs"
CLAIM_GROUPS = (
    ("tune", "selection on the validation split, unimodal"),
    ("tune_bimodal", "selection on held-out training pairs, image-text"),
    ("train", "Table 1 on the generated sets, balanced and long-tailed"),
    ("study_ladder_", "budget ladders and the temperature-frequency ground truth"),  # and Tables 3/4 (mini)
    ("references", "reference rows: no-learning probes and the supervised reference"),
    ("train_references", "reference rows: no-learning probes and the supervised reference"),
    ("train_pretrain", "pre-training of the image-text runs' image encoder"),
    ("train_real", "Table 1 on Fashion-MNIST"),
    ("train_bimodal", "the image-text comparison and SogCLR Table 4's second budget"),
    ("study_bimodal_epochs", "the image-text comparison and SogCLR Table 4's second budget"),
    ("study_rho_pairs", RGCL),
    ("study_rho_pairs_objects", RGCL),
    ("train_bimodal_side", "image-text side methods"),
    ("train_table3", SIDE),
    ("study_", SIDE),
    ("emc2_convergence_runs", SIDE),
)
OTHER = "data, the reports and the index"


def claim_group(family: str, runs: int) -> str:
    """The claim group of a stage family: an exact name of :data:`CLAIM_GROUPS`, else the longest prefix ending
    in ``_``; a family without a match is data or a report when it trains nothing, else its own name."""
    exact = dict(CLAIM_GROUPS)
    if family in exact:
        return exact[family]
    prefixes = [(p, g) for p, g in CLAIM_GROUPS if p.endswith("_") and family.startswith(p)]
    if prefixes:
        return max(prefixes, key=lambda pg: len(pg[0]))[1]
    return OTHER if runs == 0 else family


def timing_table(stages: pd.DataFrame, jobs: int) -> pd.DataFrame:
    """Per claim group (in order of first start): ``stages``, ``runs``, ``stage_min`` (the stages' wall times
    summed) and ``wall_min`` (that sum divided by the ``jobs`` slots: the group's share of the schedule).

    ``stages``: one row per stage run, columns ``stage``, ``family``, ``runs``, ``start_s``, ``seconds``
    (``reports/repro_stages.csv``)."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    groups = [claim_group(f, int(r)) for f, r in zip(stages["family"], stages["runs"], strict=True)]
    frame = stages.assign(group=groups)
    order = frame.groupby("group", sort=False)["start_s"].min().sort_values(kind="stable").index
    table = frame.groupby("group", sort=False).agg(stages=("stage", "size"), runs=("runs", "sum"),
                                                   seconds=("seconds", "sum")).loc[order]
    return pd.DataFrame({"claim": table.index, "stages": table["stages"].to_numpy(), "runs": table["runs"].to_numpy(),
                         "stage_min": (table["seconds"] / 60).round(1).to_numpy(),
                         "wall_min": (table["seconds"] / jobs / 60).round(1).to_numpy()})


def _commit(folder: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=folder, capture_output=True, text=True)
    except OSError:
        return "?"
    return out.stdout.strip() or "?"


def write_timing_report(stages_csv: Path | str, out: Path | str, jobs: int, force: bool = False,
                        stages: int | None = None, commit: str | None = None) -> str:
    """Write ``out`` (``reports/timing.md``): the last full repro's wall time, claim by claim, from its stage log.

    ``jobs``: stages at a time; ``force``: whether it was ``--force``; ``stages``: the pipeline's stage count;
    ``commit``: the commit it ran on (default: ``git rev-parse --short HEAD`` in ``out``'s folder). Returns the text.
    """
    log = pd.read_csv(stages_csv)
    table = timing_table(log, jobs)
    schedule_min = float(log["end_s"].max()) / 60
    commit = commit or _commit(Path(out).resolve().parent)
    failed = int((log["ok"] == 0).sum()) if "ok" in log else 0
    lines = [
        "# Where the time of the last full repro goes",
        "",
        f"Written by `python -m isogclr repro{' --force' if force else ''}` (`make repro"
        f"{' FORCE=1' if force else ''}`) from its stage log `reports/repro_stages.csv`; do not edit. Commit {commit}, "
        f"{len(log)} of {stages if stages is not None else len(log)} stages, {jobs} at a time"
        + (f", {failed} failed" if failed else "") + f": the schedule took **{schedule_min:.1f} min** "
        f"(set-up and the closing `dvc repro` not included). Each group's stage times are summed (`stage min`), then "
        f"divided by the {jobs} slot{'s' * (jobs != 1)} (`wall min`). Runs: training runs (`metrics.json` outputs) "
        "and selection candidates.",
        "",
        "| claim | stages | runs | stage min | wall min |",
        "|---|---|---|---|---|",
        *(f"| {r.claim} | {r.stages} | {r.runs or ''} | {r.stage_min:.1f} | {r.wall_min:.1f} |"
          for r in table.itertuples()),
        f"| total | {int(table['stages'].sum())} | {int(table['runs'].sum())} | {table['stage_min'].sum():.1f} | "
        f"{table['wall_min'].sum():.1f} |",
        "",
    ]
    text = "\n".join(lines)
    save_text(text, Path(out))
    return text
