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

_DECIDED = ("supported", "contradicted")


def bottom_line(claims: list[str], statuses: list[str], qualifiers: list[str], holm: list[str] | None = None,
                most: int = 3) -> str:
    """The bottom line of a report, generated from its verdicts: which claims are supported or contradicted (settled
    or not, and whether they survive Holm's adjustment across all claims), and how many are open or not testable.
    E.g. "Bottom line: contradicted, settled: A. Not resolved at this scale: 7 inconclusive, 2 not testable."."""
    holm = holm or [""] * len(claims)
    decided = [(c, s, q, h) for c, s, q, h in zip(claims, statuses, qualifiers, holm, strict=True) if s in _DECIDED]
    parts = []
    for c, s, q, h in decided[:most]:
        after = f" (Holm: {h})" if h and h != s else ""
        parts.append(f"{s}{', ' + q if q else ''}{after}: {c}")
    if len(decided) > most:
        parts.append(f"and {len(decided) - most} more supported or contradicted")
    open_ = sum(s == "inconclusive" for s in statuses)
    untestable = sum(s == "not testable" for s in statuses)
    rest = ", ".join(x for x in (f"{open_} inconclusive" if open_ else "",
                                 f"{untestable} not testable" if untestable else "") if x)
    head = "; ".join(parts) + "." if parts else "no claim is supported or contradicted."
    return f"Bottom line: {head}" + (f" Not resolved at this scale: {rest}." if rest else "")
