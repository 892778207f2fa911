"""The words every report page shares: what "settled" and a precondition mean (one snippet, shown on every page
and in the index, so that no page defines them differently)."""

from __future__ import annotations

from .rerun import SETTLED

SETTLED_NOTE = (
    "Settled: a supported or contradicted verdict is settled when a rerun on a machine of another type (another "
    "draw of the training noise at the same seeds) would give the same status with predictive probability at "
    f"least {SETTLED:g} (p_rerun: a posterior predictive that carries the uncertainty of the seeds' spread, "
    "isogclr.analysis.rerun); simulated, 97.5% of the verdicts it calls settled at 7 seeds keep their status, and "
    "no verdict resting on 3 seeds can be settled. An inconclusive verdict says instead how many seeds would "
    "answer it (at the paper's effect, else at the one observed).")
PRECONDITION_NOTE = (
    "Not testable (precondition: measured value): the runs are outside the regime the claim speaks of, as "
    "measured on them (isogclr.analysis.preconditions): the knob did not move the state it drives, the runs did "
    "not reach the end state the claim is about, the paper's premise does not hold, or the runs did not learn "
    "(at the no-learning floor) or leave no room for the paper's effect (at the ceiling).")
MULTIPLICITY_NOTE = (
    "Multiplicity: beside each status, the status under a Holm adjustment across every claim tested (each counted "
    "once): a supported or contradicted verdict keeps its status when its p value, times the number of claims "
    "still in play, stays below 0.05 (isogclr.analysis.multiplicity).")
