"""Per-claim verdicts of a report, computed from the runs' numbers with their uncertainty, never typed.

Four statuses (:data:`STATUSES`), one rule (:func:`status_of`) applied to a 95% confidence interval of an
effect signed so that positive is the paper's direction:

* **supported**: the interval lies above 0;
* **contradicted**: the interval lies below 0;
* **inconclusive**: the interval contains 0 (a tie included); the evidence gives the interval beside the
  paper's own effect, and whether an effect of the paper's size could have been detected (half-width of
  our interval < |paper's effect|);
* **not testable**: one seed (no interval over seeds), no counterpart at this scale, a missing run, or no
  learning (both methods of a comparison within :data:`NO_LEARNING_MARGIN` of the best no-learning score:
  ``compare(..., floor=...)``), or **at its bound** (a correlation on a learned quantity most of whose values
  sit at one of its bounds: :mod:`.correlations`), or a failed precondition (:mod:`.preconditions`), with the
  reason.

Power, per paired verdict (:func:`effect`, hence :func:`compare`, :func:`best_of`, :func:`combine`): ``mde``, the
minimum detectable effect, the smallest true effect that the two-sided paired t test at 95% detects with 80%
power given the observed spread of the per-seed differences and the number of seeds
(:func:`~isogclr.analysis.stats.min_detectable_effect`, exact noncentral t); and ``seeds_needed``, the smallest
number of seeds that would detect an effect of the paper's size with that power at the observed spread
(:func:`~isogclr.analysis.stats.seeds_needed`; ``">100"`` beyond :data:`~isogclr.analysis.stats.MAX_SEEDS`).

**Settled across machines**: the ``p_rerun`` column, the posterior predictive probability that a rerun on a machine
of another type (another draw of the training noise at the same seeds) gives the same status
(:func:`~isogclr.analysis.rerun.rerun_probability`); a supported or contradicted verdict is settled when it is at
least :data:`RERUN_SETTLED` (the ``qualifier`` column: "settled" / "not settled (p 0.61)"); an inconclusive one
says instead how many seeds would answer it (:func:`qualifier`).

Builders: :func:`compare` (two methods paired by seed, Student t over seeds), :func:`effect` (any per-seed
difference), :func:`best_of` / :func:`combine` (a claim over several comparisons), :func:`knob_effect`
(sensitive / insensitive to a hyper-parameter), :func:`exact` (a deterministic computation, no seeds) and
:func:`not_testable`. Every report notebook ends with :func:`write_verdicts`
(``reports/verdicts/<report>.csv``); the index stage (:mod:`isogclr.reports.index`) gathers them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd

from ..io import save_text
from .rerun import SETTLED, floor_digits, is_settled, rerun_probability, seeds_to_answer
from .stats import (
    MAX_SEEDS,
    POWER,
    Interval,
    min_detectable_effect,
    paired_differences,
    seeds_needed,
    t_interval,
)

STATUSES = ("supported", "contradicted", "inconclusive", "not testable")
COLUMNS = ("claim", "status", "outcome", "effect", "ci_low", "ci_high", "n_seeds", "paper_effect", "mde",
           "seeds_needed", "p_rerun", "qualifier", "interval", "repeats", "runs", "evidence")
OUTCOMES = ("detected", "excluded", "neither")  # what a tested row lets a reader act on (:func:`outcome`)
LEVEL = 0.95
NO_LEARNING_MARGIN = 2.0  # points: a method at most this far above the best no-learning score has not learned
RERUN_SETTLED = SETTLED  # a supported / contradicted verdict a rerun keeps with this probability is settled (.rerun)

Numbers = Mapping[Any, float]  # seed -> one number of one run


@dataclass(frozen=True)
class Verdict:
    """One claim's status, the evidence in words, and the numbers: our effect (positive = the paper's
    direction) with its interval, the seeds it rests on (None for an exact computation) and the paper's effect;
    for a paired comparison, its minimum detectable effect ``mde`` and the seeds an effect of the paper's size
    would need (``seeds_needed``: a count, or ``">100"``)."""

    claim: str
    status: str
    evidence: str
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_seeds: int | None = None
    paper_effect: float | None = None
    mde: float | None = None
    seeds_needed: str | None = None
    p_rerun: float | None = None  # set by a builder whose interval is not a t interval (a bootstrap); else computed
    precondition: str | None = None  # the failed precondition and its measured value (.preconditions.require)
    interval: str = "t"  # how the interval was made: "t" (over seeds), "bootstrap", "exact" (.multiplicity)
    repeats: str | None = None  # the claim of another report this row repeats on the same runs (counted once)
    runs: str | None = None  # the runs it reads when they are not its page's main runs (study, budget, batch)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if not self.evidence:
            raise ValueError(f"verdict {self.claim!r} has no evidence (a reason is required)")
        if self.status in ("supported", "contradicted"):
            if self.ci_low is None or self.ci_high is None:
                raise ValueError(f"{self.status!r} needs an interval ({self.claim!r})")
            if self.n_seeds is not None and self.n_seeds < 2:
                raise ValueError(f"{self.status!r} cannot rest on {self.n_seeds} seed(s) ({self.claim!r})")
            if self.ci_low <= 0 <= self.ci_high:
                raise ValueError(f"{self.status!r} with an interval containing 0: [{self.ci_low}, {self.ci_high}] "
                                 f"({self.claim!r})")


def status_of(interval: Interval | None) -> str:
    """The one rule: no interval (fewer than 2 seeds) -> not testable; above 0 -> supported; below 0 ->
    contradicted; containing 0 (ties included) -> inconclusive."""
    if interval is None:
        return "not testable"
    return {1: "supported", -1: "contradicted", 0: "inconclusive"}[interval.sign()]


def _fmt(x: float, unit: str) -> str:
    """Points (or any unit) to 2 decimals; a unit-less number (a temperature, a correlation) to 3 significant."""
    return f"{x:+.2f} {unit}" if unit else f"{x:+.3g}"


def _paper_statement(interval: Interval | None, paper_effect: float | None, unit: str) -> str:
    """The paper's effect beside ours; for an interval containing 0, could one of the paper's size be seen?"""
    if paper_effect is None or (isinstance(paper_effect, float) and math.isnan(paper_effect)):
        return "paper: no number for this comparison"
    said = f"paper: {_fmt(paper_effect, unit)}"
    if interval is None or interval.sign() != 0:
        return said
    half = f"{interval.half_width:.2f}" if unit else f"{interval.half_width:.3g}"
    if interval.half_width >= abs(paper_effect):
        return f"{said}; our half-width {half} >= |paper's effect|: could not detect an effect of the paper's size"
    return f"{said}; our half-width {half} < |paper's effect|: an effect of the paper's size would have been detected"


def _interval_text(interval: Interval, unit: str) -> str:
    """"+1.10 points, 95% CI [-0.50, +2.70] (3 seeds)": the bounds in the estimate's format, without the unit."""
    low, high = (f"{x:+.2f}" if unit else _fmt(x, "") for x in (interval.low, interval.high))
    return f"{_fmt(interval.estimate, unit)}, {interval.level:.0%} CI [{low}, {high}] ({interval.n} seeds)"


def effect(claim: str, differences: Numbers, *, what: str, paper_effect: float | None = None,
           unit: str = "points", detail: str = "") -> Verdict:
    """A claim whose per-seed effect is ``differences[seed]`` (positive = the paper's direction, e.g. the
    paired difference iSogCLR - SimCLR of one seed). Statistic: the mean over seeds with its 95% Student-t
    interval (n - 1 degrees of freedom); fewer than 2 seeds: not testable. ``what`` names the difference,
    ``detail`` (optional) is prepended to the evidence."""
    values = {s: float(v) for s, v in differences.items()}
    head = f"{detail}; " if detail else ""
    pe = None if paper_effect is None or pd.isna(paper_effect) else float(paper_effect)
    if len(values) < 2:
        reason = ("no seed has both runs" if not values else
                  f"one seed ({next(iter(values))}): {what} {_fmt(next(iter(values.values())), unit)}, no interval")
        return Verdict(claim, "not testable", f"{head}{reason}; {_paper_statement(None, pe, unit)}",
                       effect=next(iter(values.values()), None), n_seeds=len(values), paper_effect=pe)
    interval = t_interval(values, LEVEL)
    status = status_of(interval)
    tie = " (a tie)" if interval.low == interval.high == 0 else ""
    mde, needed, power = _power(list(values.values()), pe, unit)
    return Verdict(claim, status, f"{head}{what}: {_interval_text(interval, unit)}{tie}; "
                                  f"{_paper_statement(interval, pe, unit)}; {power}",
                   effect=interval.estimate, ci_low=interval.low, ci_high=interval.high, n_seeds=interval.n,
                   paper_effect=pe, mde=mde, seeds_needed=needed)


def _power(differences: list[float], paper_effect: float | None, unit: str) -> tuple[float, str | None, str]:
    """``(mde, seeds_needed, words)`` of per-seed differences (at least 2): the minimum detectable effect at
    :data:`~isogclr.analysis.stats.POWER` power and :data:`LEVEL`, from their sample sd and count, and the seeds
    an effect of the paper's size would need at that sd (None without a paper effect)."""
    n = len(differences)
    mean = sum(differences) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    mde = min_detectable_effect(sd, n, POWER, LEVEL)
    size = (lambda x: f"{x:.2f} {unit}") if unit else (lambda x: f"{x:.3g}")
    words = (f"minimum detectable effect {size(mde)} ({POWER:.0%} power, {n} seeds, sd of the differences "
             f"{size(sd)})")
    if paper_effect is None or paper_effect == 0:
        return mde, None, words
    count = seeds_needed(paper_effect, sd, POWER, LEVEL)
    needed = str(count) if count is not None else f">{MAX_SEEDS}"
    return mde, needed, f"{words}; an effect of the paper's size needs {needed} seeds"


def compare(claim: str, better: tuple[str, Numbers], worse: tuple[str, Numbers], *,
            paper_effect: float | None = None, unit: str = "points", floor: float | None = None,
            margin: float = NO_LEARNING_MARGIN) -> Verdict:
    """"``better`` beats ``worse``" (the paper's direction), paired by seed: the effect is the mean over the
    seeds both have of ``better[seed] - worse[seed]``, with its 95% Student-t interval (see :func:`effect`).

    ``better`` and ``worse`` are ``(name, {seed: number})``; ``paper_effect`` is the paper's
    ``better - worse`` (e.g. from :func:`paper_difference`). ``floor`` (optional) is the best score reached
    without learning (e.g. the better of the raw-pixel and random-init probes, or chance): when both methods'
    means are at most ``floor + margin``, neither has learned and the claim is **not testable (no learning)**;
    the evidence keeps the numbers (the effect, its interval and the minimum detectable effect too)."""
    (a_name, a), (b_name, b) = better, worse
    diffs = paired_differences(a, b)
    seeds = list(diffs)

    def mean(x: Numbers) -> float:
        over = seeds or list(x)
        return sum(x[s] for s in over) / len(over) if over else math.nan

    def text(m: float) -> str:
        return f"{m:.2f}" if unit else f"{m:.3g}"

    means = (f"{a_name} {text(mean(a))} vs {b_name} {text(mean(b))} (seeds {seeds})" if seeds else
             f"{a_name} seeds {sorted(a)} vs {b_name} seeds {sorted(b)}")
    verdict = effect(claim, diffs, what=f"{a_name} - {b_name}", paper_effect=paper_effect, unit=unit, detail=means)
    if floor is None or not (mean(a) <= floor + margin and mean(b) <= floor + margin):
        return verdict
    return replace(verdict, status="not testable",
                   evidence=f"no learning: {a_name} {text(mean(a))} and {b_name} {text(mean(b))} are both at most "
                            f"{margin:g} above the best no-learning score {text(floor)}; {verdict.evidence}")


def combine(claim: str, parts: list[Verdict]) -> Verdict:
    """A claim that needs every part (e.g. "A beats B and C"): contradicted if any part is; else not testable
    if any part is; else supported if every part is; else inconclusive. The numbers are the binding part's
    (the smallest effect among the parts with that status)."""
    if not parts:
        raise ValueError(f"combine({claim!r}) got no parts")
    for status in ("contradicted", "not testable", "inconclusive", "supported"):
        chosen = [p for p in parts if p.status == status]
        if chosen:
            break
    binding = min(chosen, key=lambda p: math.inf if p.effect is None else p.effect)
    evidence = " | ".join(f"{p.claim}: {p.status}, {p.evidence}" for p in parts)
    return replace(binding, claim=claim, status=status, evidence=evidence)


def best_of(claim: str, claimed: tuple[str, Numbers], rivals: Mapping[str, Numbers], *,
            paper_effects: Mapping[str, float] | None = None, unit: str = "points") -> Verdict:
    """"``claimed`` beats every rival": one paired :func:`compare` per rival, combined by :func:`combine`
    (supported only when every interval lies above 0)."""
    name = claimed[0]
    if not rivals:
        return not_testable(claim, f"{name} has no rival at this scale")
    return combine(claim, [compare(f"vs {r}", claimed, (r, v), unit=unit,
                                   paper_effect=(paper_effects or {}).get(r)) for r, v in rivals.items()])


def knob_effect(claim: str, by_value: Mapping[Any, Numbers], *, tolerance: float, sensitive: bool,
                paper_effect: float | None = None, unit: str = "points", knob: str = "value") -> Verdict:
    """Whether a hyper-parameter moves the result by more than ``tolerance``. For every pair of values, the
    paired-by-seed difference (oriented so that its mean is >= 0) with its 95% t interval [lo, hi]: the pair
    "differs" when lo > tolerance, is "equivalent" when -tolerance < lo and hi < tolerance.
    ``sensitive=True`` (the paper says the knob matters): supported if some pair differs, contradicted if every
    pair is equivalent; ``sensitive=False``: the reverse; otherwise inconclusive. Not testable with fewer than
    2 values or 2 shared seeds. The effect reported is ``|difference| - tolerance`` (sensitive) or
    ``tolerance - |difference|`` (insensitive) of the binding pair, so that its interval's sign is the status."""
    if tolerance <= 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    values = list(by_value)
    means = ", ".join(f"{k}: {sum(x.values()) / len(x):.2f}" for k, x in by_value.items() if x)
    paper = "paper: no number" if paper_effect is None else f"paper's range {_fmt(paper_effect, unit)}"
    if len(values) < 2:
        return not_testable(claim, f"only {knob} {values}; {paper}")
    pairs = {}
    for u, v in combinations(values, 2):
        diffs = paired_differences(by_value[u], by_value[v])
        if len(diffs) < 2:
            return Verdict(claim, "not testable", f"{len(diffs)} seed(s) shared by {knob} {u} and {v}, no "
                                                  f"interval; mean per {knob}: {means}; {paper}",
                           n_seeds=len(diffs), paper_effect=paper_effect)
        i = t_interval(diffs, LEVEL)
        pairs[(u, v) if i.estimate >= 0 else (v, u)] = i if i.estimate >= 0 else \
            Interval(-i.estimate, -i.high, -i.low, i.n, i.level)
    differs = [p for p, i in pairs.items() if i.low > tolerance]
    equivalent = all(-tolerance < i.low and i.high < tolerance for i in pairs.values())
    # binding pair: the most different one (largest lo) if some pair differs, else the largest hi; its interval
    # shifted by the tolerance lies above 0 exactly when the claim holds and below 0 exactly when it fails
    (u, v), w = max(pairs.items(), key=lambda kv: kv[1].low if differs else kv[1].high)
    signed = (Interval(w.estimate - tolerance, w.low - tolerance, w.high - tolerance, w.n, w.level) if sensitive
              else Interval(tolerance - w.estimate, tolerance - w.high, tolerance - w.low, w.n, w.level))
    status = status_of(signed)
    evidence = (f"mean per {knob}: {means}; binding pair {knob} {u} - {v}: {_interval_text(w, unit)}; tolerance "
                f"±{tolerance:g}; pairs beyond it: {[f'{a}/{b}' for a, b in differs] or 'none'}; every pair within "
                f"it: {'yes' if equivalent else 'no'}; effect = "
                + ("|difference| - tolerance" if sensitive else "tolerance - |difference|") + f"; {paper}")
    return Verdict(claim, status, evidence, effect=signed.estimate, ci_low=signed.low, ci_high=signed.high,
                   n_seeds=signed.n, paper_effect=paper_effect)


def exact(claim: str, margin: float, evidence: str, *, paper_effect: float | None = None) -> Verdict:
    """A claim about a deterministic computation (a closed form, an exact optimum: no seed, no sampling), whose
    ``margin`` is positive when the claim holds: supported if > 0, contradicted if < 0, inconclusive at 0.
    Not for trained runs: those go through :func:`compare` / :func:`effect`."""
    margin = float(margin)
    evidence = f"{evidence}; exact computation (no seeds), margin {margin:+.4g}"
    return Verdict(claim, status_of(Interval(margin, margin, margin, 0)), evidence, effect=margin, ci_low=margin,
                   ci_high=margin, paper_effect=paper_effect, interval="exact")


def not_testable(claim: str, reason: str) -> Verdict:
    """A claim with no data-driven test at this scale, with the reason."""
    return Verdict(claim, "not testable", reason)


def per_seed(frame: pd.DataFrame, column: str = "top1", /, **where: Any) -> dict[int, float]:
    """``{seed: column}`` of the rows of ``frame`` matching ``where`` (column name = value; any column, since
    ``frame`` and ``column`` are positional); a ValueError names the filter when none or several rows per seed
    match."""
    rows = frame
    for col, val in where.items():
        rows = rows[rows[col] == val]
    if rows.empty:
        raise ValueError(f"no row with {where} (columns {list(frame.columns)})")
    if rows["seed"].duplicated().any():
        raise ValueError(f"several rows per seed with {where}: add a filter")
    return {int(s): float(v) for s, v in zip(rows["seed"], rows[column], strict=True)}


def paper_difference(table: pd.DataFrame, better: Any, worse: Any, /, *, rows_by: str = "method",
                     number: str = "mean", **where: Any) -> float | None:
    """The paper's ``better - worse`` of column ``number`` in a transcribed table, between the rows whose
    ``rows_by`` is ``better`` / ``worse`` among those matching ``where``; None when the paper has no such row."""
    rows = table
    for col, val in where.items():
        rows = rows[rows[col] == val]
    a, b = rows[rows[rows_by] == better][number], rows[rows[rows_by] == worse][number]
    return float(a.iloc[0]) - float(b.iloc[0]) if len(a) and len(b) else None


def count_statuses(statuses: Iterable[str]) -> dict[str, int]:
    """How many of each status (every status listed, in :data:`STATUSES` order); an unknown one is an error."""
    counts = dict.fromkeys(STATUSES, 0)
    for s in statuses:
        if s not in counts:
            raise ValueError(f"unknown verdict status {s!r} (expected one of {STATUSES})")
        counts[s] += 1
    return counts


def outcome(status: str, ci_low: float | None, ci_high: float | None, paper_effect: float | None) -> str:
    """What a tested row lets a reader act on beside its status (positive = the paper's direction): **detected**
    (supported); **excluded** (the interval lies below the paper's effect; without a paper number, or with one not
    in its own direction, below 0); **neither** (it holds 0 and the paper's effect: the qualifier says how many
    seeds would answer it). "" for a row that is not tested (not testable, no interval)."""
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (ci_low, ci_high)]
    if status == "not testable" or any(missing):
        return ""
    if status == "supported":
        return "detected"
    paper = paper_effect is not None and not (isinstance(paper_effect, float) and math.isnan(paper_effect)) \
        and paper_effect > 0
    return "excluded" if ci_high < (paper_effect if paper else 0) else "neither"


def with_runs(verdicts: Iterable[Verdict], runs: str) -> list[Verdict]:
    """``verdicts`` naming the ``runs`` they read (e.g. "studies/bimodal_epochs: 8 epochs"), for rows whose runs are
    not their page's main runs: a reader sees the budget, batch or study beside the claim."""
    return [replace(v, runs=runs) for v in verdicts]


def qualifier(status: str, p_rerun: float | None, ci_low: float | None, ci_high: float | None,
              n_seeds: int | None, paper_effect: float | None, effect: float | None) -> str:
    """The words after a status: "settled" / "not settled (p 0.61)" for a supported or contradicted verdict
    (:func:`~isogclr.analysis.rerun.is_settled`, p printed rounded down); for an inconclusive one with a t interval,
    how many seeds would answer it at the paper's effect, else at the effect we observed
    (:func:`~isogclr.analysis.rerun.seeds_to_answer`; "... would have been seen at these seeds" when ours already
    suffice: the effect is not there); "" otherwise."""
    settled = is_settled(status, p_rerun)
    if settled is not None:
        return "settled" if settled else f"not settled (p {floor_digits(p_rerun)})"
    missing = [x is None or (isinstance(x, float) and math.isnan(x)) for x in (ci_low, ci_high, n_seeds)]
    if status != "inconclusive" or any(missing) or int(n_seeds) < 2:
        return ""
    paper = paper_effect is not None and not (isinstance(paper_effect, float) and math.isnan(paper_effect))
    target, at = (paper_effect, "the paper's effect") if paper else (effect, "the observed effect")
    count = seeds_to_answer(ci_low, ci_high, int(n_seeds), target)
    if count and count <= int(n_seeds):
        return f"{at} would have been seen at these seeds"
    return f"{count} seeds would answer it at {at}" if count else f"more than {MAX_SEEDS} seeds at {at}"


def verdict_table(verdicts: list[Verdict]) -> pd.DataFrame:
    """The verdicts as a table with :data:`COLUMNS` (the CSV's): ``p_rerun`` (the builder's, else
    :func:`~isogclr.analysis.rerun.rerun_probability` of the t interval) and the :func:`qualifier`."""
    rows = []
    for v in verdicts:
        p = v.p_rerun if v.p_rerun is not None else rerun_probability(v.status, v.ci_low, v.ci_high, v.n_seeds)
        words = qualifier(v.status, p, v.ci_low, v.ci_high, v.n_seeds, v.paper_effect, v.effect)
        if v.p_rerun is not None and v.status == "inconclusive":  # a bootstrap over groups, not a t over seeds
            words = "a bootstrap over groups: more groups, not more seeds, would answer it"
        if v.status == "not testable":  # the failed precondition, or a short reason ("no runs", "no learning")
            head = v.evidence.split(":", 1)[0]
            words = v.precondition or (head if ":" in v.evidence and len(head) <= 40 else "")
        rows.append({**asdict(v), "p_rerun": p, "qualifier": words,
                     "outcome": outcome(v.status, v.ci_low, v.ci_high, v.paper_effect)})
    return pd.DataFrame(rows, columns=list(COLUMNS)).astype({"n_seeds": "Int64", "seeds_needed": object,
                                                             "p_rerun": float})


def write_verdicts(verdicts: list[Verdict], reports_dir: Path | str, report: str) -> pd.DataFrame:
    """Write ``<reports_dir>/verdicts/<report>.csv`` (atomically, 4 significant digits); return the table."""
    table = verdict_table(verdicts)
    save_text(table.to_csv(index=False, float_format="%.4g"), Path(reports_dir) / "verdicts" / f"{report}.csv")
    return table
