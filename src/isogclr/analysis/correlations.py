"""Correlation verdicts over samples (description, and the rule for a quantity at its bound).

:func:`correlation` judges "``x`` grows with ``y``" with Spearman's rho over one run's samples and a bootstrap over
samples, per seed. A claim about how a quantity varies with a *group* property (class or cluster frequency) is not
judged here but at the group level (:mod:`.groups`): samples of one group share its property, and a sample-level
correlation can come from a few groups. :func:`at_bound_reason`: "not testable (at its bound)".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from .rerun import rerun_probability_bootstrap
from .stats import AT_BOUND_RTOL, Interval, at_bound, bootstrap_spearman
from .verdicts import Verdict, not_testable, status_of

AT_BOUND_SHARE = 0.5  # more than this share of values at one bound: its correlations say nothing


def at_bound_reason(values: Iterable[float], bounds: Mapping[str, float], *, what: str = "values",
                    share: float = AT_BOUND_SHARE, rtol: float = AT_BOUND_RTOL) -> str | None:
    """The rule "not testable (at its bound)": when more than ``share`` of ``values`` sit at one of ``bounds``
    (:func:`~isogclr.analysis.stats.at_bound`), the reason, e.g. "at its bound: 99.1% of the 12000 values within
    5e-05 (1% of the bound) of tau_min 0.005"; None otherwise (the values spread between their bounds)."""
    x = list(values)
    frac, name, bound, tol = at_bound(x, bounds, rtol)
    if frac <= share:
        return None
    scale = "the bound" if bound != 0 else "the bounds' range"
    return (f"at its bound: {frac:.1%} of the {len(x)} {what} within {tol:.3g} ({rtol:.0%} of {scale}) of {name} "
            f"{bound:g}, more than the {share:.0%} a learned quantity may have there")


def correlation(claim: str, samples: Mapping[Any, tuple[Iterable[float], Iterable[float]]], *, what: str,
                paper_effect: float | None = None, n_boot: int = 1000, seed: int = 0,
                bounds: Mapping[str, float] | None = None) -> Verdict:
    """"``x`` grows with ``y``": per seed, Spearman's rho over the run's samples with a seeded 95% percentile
    bootstrap interval over samples (:func:`~isogclr.analysis.stats.bootstrap_spearman`). Supported when every
    seed's interval lies above 0, contradicted when every one lies below 0 (the seeds agree in sign);
    otherwise inconclusive (the evidence says whether the seeds' signs disagree); one seed: not testable.
    Reported: the mean rho over seeds and the hull of the seeds' intervals.

    ``bounds`` (name -> value): the bounds of a learned ``x`` (a temperature's ``tau_min`` / ``tau_max``). When
    more than :data:`AT_BOUND_SHARE` of the x values of all seeds together sit at one of them
    (:func:`at_bound_reason`), the ranks compare rounding noise: **not testable (at its bound)**, the fraction
    stated first in the evidence, the numbers kept."""
    samples = {s: (list(x), list(y)) for s, (x, y) in samples.items()}
    by_seed = {s: bootstrap_spearman(x, y, n_boot=n_boot, seed=seed) for s, (x, y) in samples.items()}
    if not by_seed:
        return not_testable(claim, "no run")
    verdict = _correlation_verdict(claim, by_seed, what=what, paper_effect=paper_effect)
    degenerate = at_bound_reason([v for x, _ in samples.values() for v in x], bounds) \
        if bounds else None
    if degenerate is None:
        return verdict
    return replace(verdict, status="not testable", evidence=f"{degenerate}; {verdict.evidence}")


def _correlation_verdict(claim: str, by_seed: Mapping[Any, Interval], *, what: str,
                         paper_effect: float | None) -> Verdict:
    """:func:`correlation`'s rule on the seeds' bootstrap intervals ``by_seed`` (at least one)."""
    listing = "; ".join(f"seed {s}: rho {i.estimate:+.3f} [{i.low:+.3f}, {i.high:+.3f}] over {i.n} samples"
                        for s, i in by_seed.items())
    said = "paper: no number" if paper_effect is None else f"paper: {paper_effect:+.3f}"
    mean = sum(i.estimate for i in by_seed.values()) / len(by_seed)
    low, high = min(i.low for i in by_seed.values()), max(i.high for i in by_seed.values())
    if len(by_seed) < 2:
        return Verdict(claim, "not testable", f"{what}, {listing}; one seed: agreement across seeds cannot be "
                                              f"checked; {said}", effect=mean, n_seeds=1, paper_effect=paper_effect)
    # the hull of the seeds' intervals excludes 0 exactly when every seed's does, on the same side
    status = status_of(Interval(mean, low, high, len(by_seed)))
    # a rerun keeps the status when every seed's interval stays on its side: per seed the bootstrap rule of
    # .rerun with the seed's bootstrap sd read from its 95% percentile interval (half-width / 1.96), multiplied
    p_up = math.prod(rerun_probability_bootstrap("supported", i.low, i.high, i.half_width / 1.96)
                     for i in by_seed.values())
    p_down = math.prod(rerun_probability_bootstrap("contradicted", i.low, i.high, i.half_width / 1.96)
                       for i in by_seed.values())
    p = {"supported": p_up, "contradicted": p_down, "inconclusive": max(0.0, 1 - p_up - p_down)}[status]
    estimates = {math.copysign(1, i.estimate) for i in by_seed.values() if i.estimate != 0}
    agree = "the seeds agree in sign" if len(estimates) <= 1 else "the seeds disagree in sign"
    return Verdict(claim, status, f"{what}, {listing}; {agree}; {said}", effect=mean, ci_low=low, ci_high=high,
                   n_seeds=len(by_seed), paper_effect=paper_effect, p_rerun=p, interval="bootstrap")
