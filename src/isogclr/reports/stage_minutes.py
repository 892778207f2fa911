"""The stage times of the forced repro that made the committed runs (:data:`STAGE_RECORD`), and the CPU minutes
of a report's training stages read from it (:func:`training_minutes`, :func:`timed`): each page's sentence of
scale quotes them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from .report_table import REPORTS


@dataclass(frozen=True)
class StageRecord:
    """The stage times of the forced repro that made the committed runs: ``python -m isogclr repro --force`` writes
    ``reports/repro_stages.csv``, and its copy ``path`` (``repro_stages_<commit>.csv``) is frozen with the runs it
    made, of profile ``profile``. Each page's sentence of scale quotes its training stages' minutes from it
    (:func:`training_minutes`): a number that reruns do not move, unlike the live record."""

    path: str
    profile: str

    @property
    def commit(self) -> str:
        """The commit that forced repro ran, from the file's name."""
        return Path(self.path).stem.removeprefix("repro_stages_")


STAGE_RECORD = StageRecord("reports/testbed/repro_stages_d583a80.csv", "mini")


def training_minutes(name: str, params: dict, root: Path | str = ".") -> float | None:
    """The wall minutes of report ``name``'s training stages (``Report.trains``, every stage of those families) in
    :data:`STAGE_RECORD`, two stages at a time on 2 cores; None when ``params`` is of another profile than the
    record's (its runs are not the ones timed) or the report trains nothing."""
    families = set(REPORTS[name].trains)
    if not families or params.get("profile") != STAGE_RECORD.profile:
        return None
    with open(Path(root) / STAGE_RECORD.path, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = families - {row["family"] for row in rows}
    if missing:
        raise ValueError(f"{STAGE_RECORD.path} has no stage of {sorted(missing)} (Report.trains of {name!r})")
    return sum(float(row["seconds"]) for row in rows if row["family"] in families) / 60


def timed(name: str, params: dict) -> dict:
    """The keywords of a sentence of scale (:func:`isogclr.analysis.explain.scale_sentence`) that quote report
    ``name``'s CPU minutes of training: ``{"minutes": ..., "commit": ...}`` (minutes None: not timed)."""
    return {"minutes": training_minutes(name, params), "commit": STAGE_RECORD.commit}
