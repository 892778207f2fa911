"""The regime a claim speaks of, declared and measured on the runs: a verdict outside it is not testable.

A claim about a trained state (temperatures "learned", a gradient norm "at stationarity", an accuracy that "drops
after saturating") says nothing when the runs never reached that state, and a claim of insensitivity to a knob is
vacuous when the knob did not move what it drives. Each :class:`Check` is one such condition, measured on the
runs, with the amount it needs; :func:`require` applies the checks to a verdict:

* all hold: the verdict is kept, the measured values appended to its evidence ("preconditions met: ...");
* one fails: **not testable (<precondition>: <measured value>)**; the numbers stay in the evidence, for the record.

Builders (each returns a :class:`Check`):

* :func:`moved`: the state left its start: max over runs of |end - start| / |start| >= ``min_relative``
  (e.g. temperatures left tau_init);
* :func:`knob_acted`: the knob moved the state it drives: (max - min) / |mean| of the state's mean per knob value
  >= ``min_relative``;
* :func:`fell`: a quantity trends towards its end state: final / initial <= ``max_ratio`` (a gradient norm towards
  stationarity);
* :func:`saturated`: a curve stopped rising: its gain over the last part of the budget <= ``max_gain``;
* :func:`premise`: the paper's premise holds on our runs: a verdict on it is supported;
* :func:`above_floor`: the runs learned: every compared mean > floor + margin (the best no-learning score);
* :func:`room_below`: the ceiling leaves room for the paper's effect: ceiling - best compared mean >= needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .verdicts import Verdict

MOVED = 0.10  # a state "left its start" when it moved by at least 10% of its initial value
KNOB_ACTED = 0.05  # a knob "acted" when the state it drives differs by at least 5% of its mean across the values


@dataclass(frozen=True)
class Check:
    """One precondition: ``name`` ("temperatures left tau_init"), the ``measured`` value in words, what it
    ``needs`` in words, and whether it ``holds``."""

    name: str
    measured: str
    needs: str
    holds: bool

    def short(self) -> str:
        return f"{self.name}: {self.measured}"


def require(verdict: Verdict, *checks: Check) -> Verdict:
    """``verdict`` if every check holds (the measured values appended to its evidence), else not testable naming
    the first failed check and its measured value (``precondition``), the other checks and the numbers kept in the
    evidence."""
    failed = [c for c in checks if not c.holds]
    said = "; ".join(f"{c.short()} (needs {c.needs}: {'met' if c.holds else 'not met'})" for c in checks)
    if not failed:
        return replace(verdict, evidence=f"{verdict.evidence}; preconditions met: {said}")
    return replace(verdict, status="not testable", precondition=failed[0].short(), p_rerun=None,
                   evidence=f"precondition not met: {said}; the numbers, for the record: {verdict.evidence}")


def moved(name: str, start: Mapping[object, float], end: Mapping[object, float], min_relative: float = MOVED
          ) -> Check:
    """Every run's state left its start: the largest |end - start| / |start| over the keys both have."""
    rel = {k: abs(end[k] - start[k]) / abs(start[k]) for k in start if k in end and start[k] != 0}
    top = max(rel.values()) if rel else 0.0
    return Check(name, f"moved at most {top:.1%} of its start", f">= {min_relative:.0%}", top >= min_relative)


def knob_acted(knob: str, state: str, by_value: Mapping[object, float], min_relative: float = KNOB_ACTED) -> Check:
    """The knob moved the state it drives: (max - min) / |mean| of ``by_value`` (knob value -> the state's mean)."""
    values = list(by_value.values())
    mean = sum(values) / len(values)
    spread = (max(values) - min(values)) / abs(mean) if mean else 0.0
    listing = ", ".join(f"{k}: {v:.4g}" for k, v in by_value.items())
    return Check(f"{knob} acted on {state}", f"{spread:.1%} spread ({listing})", f">= {min_relative:.0%}",
                 spread >= min_relative)


def fell(name: str, initial: float, final: float, max_ratio: float = 1.0) -> Check:
    """A quantity trends towards its end state: ``final / initial`` at most ``max_ratio``."""
    ratio = final / initial if initial else float("inf")
    return Check(name, f"final / initial {ratio:.3g} ({initial:.3g} to {final:.3g})", f"<= {max_ratio:g}",
                 ratio <= max_ratio)


def saturated(name: str, gain: float, max_gain: float, over: str, unit: str = "points") -> Check:
    """A curve stopped rising: its ``gain`` ``over`` the last part of the budget is at most ``max_gain``."""
    return Check(name, f"{gain:+.2f} {unit} {over}", f"<= {max_gain:g} {unit}", gain <= max_gain)


def premise(name: str, verdict: Verdict) -> Check:
    """The paper's premise holds on our runs: ``verdict`` (oriented so that the premise is its positive
    direction) is supported."""
    numbers = (f"{verdict.effect:+.2f} [{verdict.ci_low:+.2f}, {verdict.ci_high:+.2f}]"
               if verdict.ci_low is not None else verdict.status)
    return Check(name, f"{numbers}, {verdict.status}", "supported", verdict.status == "supported")


def above_floor(means: Mapping[str, float], floor: float, margin: float) -> Check:
    """The runs learned: every mean of ``means`` (name -> mean over seeds) above ``floor + margin``."""
    low = min(means, key=means.get)
    return Check("the runs learned", f"{low} {means[low]:.2f} against a no-learning floor {floor:.2f}",
                 f"> floor + {margin:g}", means[low] > floor + margin)


def room_below(means: Mapping[str, float], ceiling: float, needed: float, what: str = "the supervised ceiling"
               ) -> Check:
    """The ceiling leaves room for the paper's effect: ``ceiling`` - the best of ``means`` >= |``needed``|."""
    top = max(means, key=means.get)
    room = ceiling - means[top]
    return Check("room for the paper's effect", f"{room:.2f} points from {top} {means[top]:.2f} to {what} "
                 f"{ceiling:.2f}", f">= the paper's {abs(needed):.2f}", room >= abs(needed))


def mean_of(numbers: Mapping[object, float] | Sequence[float]) -> float:
    """The mean of per-seed numbers (a mapping seed -> number, or a sequence)."""
    values = list(numbers.values()) if isinstance(numbers, Mapping) else list(numbers)
    return sum(values) / len(values)
