"""The regime a claim speaks of, declared and measured on the runs: a verdict outside it is not testable.

A claim about a trained state (temperatures "learned", a gradient norm "at stationarity", an accuracy that "drops
after saturating") says nothing when the runs never reached that state, and a claim of insensitivity to a knob is
vacuous when the knob did not move what it drives. Each :class:`Check` is one such condition, measured on the
runs, with the amount it needs; :func:`require` applies the checks to a verdict:

* all hold: the verdict is kept, the measured values appended to its evidence ("preconditions met: ...");
* one fails: **not testable (<what happened> (<measured value>, needs <amount>))**, e.g. "the runs did not learn
  (spectral 77.11, needs > 80.35)"; the numbers stay in the evidence, for the record.

A check has two names: ``name``, what is required ("the runs learned"), and ``failed``, what happened when it
does not hold ("the runs did not learn"). A failed check is only ever printed by its ``failed`` name, so that its
label reads as the failure it is (``tests/test_analysis_preconditions.py`` holds every builder to it).

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
    """One precondition: ``name``, what is required ("the temperatures left tau_init"); ``failed``, what happened
    when it does not hold ("the temperatures did not leave tau_init"); the ``measured`` value in words, what it
    ``needs`` in words, and whether it ``holds``."""

    name: str
    failed: str
    measured: str
    needs: str
    holds: bool

    def label(self) -> str:
        """"the runs learned (spectral 81.0, needs > 80.35)" when it holds, "the runs did not learn (...)" when not."""
        return f"{self.name if self.holds else self.failed} ({self.measured}, needs {self.needs})"


def require(verdict: Verdict, *checks: Check) -> Verdict:
    """``verdict`` if every check holds (the measured values appended to its evidence), else not testable naming
    the first failed check and its measured value (``precondition``), the other checks and the numbers kept in the
    evidence."""
    failed = [c for c in checks if not c.holds]
    said = "; ".join(c.label() for c in checks)
    if not failed:
        return replace(verdict, evidence=f"{verdict.evidence}; preconditions met: {said}")
    return replace(verdict, status="not testable", precondition=failed[0].label(), p_rerun=None,
                   evidence=f"precondition not met: {said}; the numbers, for the record: {verdict.evidence}")


def moved(state: str, start_name: str, start: Mapping[object, float], end: Mapping[object, float],
          min_relative: float = MOVED) -> Check:
    """The ``state`` left its start (``start_name``, e.g. "tau_init") in some run: the largest |end - start| /
    |start| over the keys both have."""
    rel = {k: abs(end[k] - start[k]) / abs(start[k]) for k in start if k in end and start[k] != 0}
    top = max(rel.values()) if rel else 0.0
    return Check(f"{state} left {start_name}", f"{state} did not leave {start_name}",
                 f"moved at most {top:.1%} of {start_name}", f">= {min_relative:.0%}", top >= min_relative)


def knob_acted(knob: str, state: str, by_value: Mapping[object, float], min_relative: float = KNOB_ACTED) -> Check:
    """The knob moved the state it drives: (max - min) / |mean| of ``by_value`` (knob value -> the state's mean)."""
    values = list(by_value.values())
    mean = sum(values) / len(values)
    spread = (max(values) - min(values)) / abs(mean) if mean else 0.0
    listing = ", ".join(f"{k}: {v:.4g}" for k, v in by_value.items())
    return Check(f"{knob} acted on {state}", f"{knob} did not act on {state}", f"{spread:.1%} spread ({listing})",
                 f">= {min_relative:.0%}", spread >= min_relative)


def fell(what: str, towards: str, initial: float, final: float, max_ratio: float = 1.0) -> Check:
    """``what`` (e.g. "the squared gradient norm") trends ``towards`` its end state ("stationarity"): ``final /
    initial`` at most ``max_ratio``; when it fails, the label says whether it rose or fell too little."""
    ratio = final / initial if initial else float("inf")
    failed = (f"{what} did not fall towards {towards}: it rose {ratio:.3g}x" if ratio > 1 else
              f"{what} did not fall enough towards {towards}")
    return Check(f"{what} fell towards {towards}", failed, f"final / initial {ratio:.3g} ({initial:.3g} to "
                 f"{final:.3g})", f"<= {max_ratio:g}", ratio <= max_ratio)


def saturated(what: str, by: str, gain: float, max_gain: float, over: str, unit: str = "points") -> Check:
    """``what`` (a method's curve) stopped rising ``by`` a budget: its ``gain`` ``over`` the last part of the budget
    is at most ``max_gain``."""
    return Check(f"{what} saturated by {by}", f"{what} had not saturated by {by}: still gaining",
                 f"{gain:+.2f} {unit} {over}", f"<= {max_gain:g} {unit}", gain <= max_gain)


def premise(name: str, verdict: Verdict) -> Check:
    """The paper's premise holds on our runs: ``verdict`` (oriented so that the premise is its positive
    direction) is supported."""
    numbers = (f"{verdict.effect:+.2f} [{verdict.ci_low:+.2f}, {verdict.ci_high:+.2f}]"
               if verdict.ci_low is not None else verdict.status)
    return Check(f"the paper's premise holds: {name}", f"the paper's premise does not hold: not ({name})",
                 f"{numbers}, {verdict.status}", "supported", verdict.status == "supported")


def above_floor(means: Mapping[str, float], floor: float, margin: float) -> Check:
    """The runs learned: every mean of ``means`` (name -> mean over seeds) above ``floor + margin``."""
    low = min(means, key=means.get)
    return Check("the runs learned", "the runs did not learn", f"{low} {means[low]:.2f}",
                 f"> {floor + margin:.2f}, the no-learning floor {floor:.2f} + {margin:g}", means[low] > floor + margin)


def room_below(means: Mapping[str, float], ceiling: float, needed: float, what: str = "the supervised ceiling"
               ) -> Check:
    """The ceiling leaves room for the paper's effect: ``ceiling`` - the best of ``means`` >= |``needed``|."""
    top = max(means, key=means.get)
    room = ceiling - means[top]
    return Check("room for the paper's effect", "not enough room for the paper's effect below the ceiling",
                 f"{room:.2f} points from {top} {means[top]:.2f} to {what} {ceiling:.2f}",
                 f">= the paper's {abs(needed):.2f}", room >= abs(needed))


def mean_of(numbers: Mapping[object, float] | Sequence[float]) -> float:
    """The mean of per-seed numbers (a mapping seed -> number, or a sequence)."""
    values = list(numbers.values()) if isinstance(numbers, Mapping) else list(numbers)
    return sum(values) / len(values)
