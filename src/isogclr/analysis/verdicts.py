"""Per-claim verdicts of a report: held / not held / not testable at this scale, with the evidence.

Every report notebook ends by writing its verdicts to ``reports/verdicts/<report>.csv``;
the index stage (:mod:`isogclr.analysis.index`) gathers them into ``reports/index.html`` and
``reports/README.md``. A verdict is computed from the numbers the report shows, never typed in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from ..train.checkpoint import save_text

STATUSES = ("held", "not held", "not testable")


@dataclass(frozen=True)
class Verdict:
    claim: str  # the paper's claim, in one line
    status: str  # one of STATUSES
    evidence: str  # our numbers (and the paper's), and why

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


def ordering(claim: str, better: str, a: float, worse: str, b: float, noise: float = 0.0,
             unit: str = "%") -> Verdict:
    """"``better`` > ``worse``": held when a > b; the evidence says whether the gap exceeds ``noise``.

    ``noise`` is the seed spread (the larger std of the two), 0 when there is one seed.
    """
    gap = a - b
    spread = (f"gap {gap:+.2f} within the seed spread {noise:.2f}" if abs(gap) <= noise
              else f"gap {gap:+.2f}" + (f" > seed spread {noise:.2f}" if noise else " (one seed, no spread)"))
    evidence = f"{better} {a:.2f}{unit} vs {worse} {b:.2f}{unit}; {spread}"
    return Verdict(claim, "held" if gap > 0 else "not held", evidence)


def write_verdicts(verdicts: list[Verdict], reports_dir: Path | str, report: str) -> pd.DataFrame:
    """Write ``<reports_dir>/verdicts/<report>.csv`` (atomically) and return the table for display."""
    table = pd.DataFrame([asdict(v) for v in verdicts], columns=["claim", "status", "evidence"])
    save_text(table.to_csv(index=False), Path(reports_dir) / "verdicts" / f"{report}.csv")
    return table
