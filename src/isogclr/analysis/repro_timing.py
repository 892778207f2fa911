"""``reports/timing.md``: where the wall-clock time of the last full repro went, claim by claim.

:func:`write_timing_report` turns the parallel runner's stage log of the last full repro
(``reports/repro_stages.csv``, written by :mod:`isogclr.repro`) into ``reports/timing.md``. No report notebook
shows wall-clock times (a report's bytes must not depend on the machine that reran it); the runs' own seconds
are in the timing record ``timing.csv`` (:mod:`isogclr.epoch_times`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from ..io import save_text

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
