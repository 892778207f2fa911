"""A claim about how a quantity varies with a *group* property, judged at the level of the groups.

iSogCLR's mechanism (Sec. 6.3: "samples with frequent semantics have large tau") is a statement about groups:
a class or a semantic cluster has one frequency, shared by all its samples. Over samples, n_samples observations
of a property that takes only G values are not independent: a correlation over samples can come from a few large
groups (the image-text report's three largest clusters, 35% of the pairs, made its pair-level Spearman -0.63 while
the cluster-level one was +0.10). The unit of the claim is the group.

:func:`group_correlation`: per seed, the quantity's mean per group (``value``) against the group's property
(``property``, e.g. its frequency); the statistic is Spearman's rho over the G groups,

    rho_s = Spearman( { mean_{i in g} value_i (seed s) }_g , { property_g }_g ),    estimate = mean_s rho_s,

and its 95% interval is a **cluster bootstrap**: each of ``n_boot`` resamples draws G groups with replacement
(numpy PCG64 seeded with ``seed``), the same groups for every seed (the groups are paired across seeds), and
recomputes the mean over seeds of the rho over the drawn groups; the interval is the 2.5% and 97.5% quantiles.
Supported above 0, contradicted below, inconclusive across it; not testable with fewer than 2 seeds or
:data:`MIN_GROUPS` groups. The rerun rule is the bootstrap's
(:func:`~isogclr.analysis.rerun.rerun_probability_bootstrap`).
Sample-level correlations may be given in the evidence as description, never as the verdict. Each seed's
groups are ranked against *that seed's* property: where the seed draws which group is frequent (the long-tailed
sets' class order), another seed's frequencies would be another claim.

A rank correlation per seed cannot tell a group's *identity* from its property: when some classes learn a large
tau whatever their frequency, and the seed happens to make them frequent, the correlation counts it for the
claim. :func:`within_group_slope` separates the two over the group x seed cells, where the seeds permute which
group is frequent (module docstring of the function: a two-way fixed-effects model, a bootstrap over seeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from .rerun import rerun_probability_bootstrap
from .stats import Interval, _pearson_rows, _rank_rows
from .verdicts import LEVEL, Verdict, not_testable, status_of

MIN_GROUPS = 4  # fewer groups than this: a rank correlation over groups says nothing
N_BOOT = 2000
MIN_SEEDS_SLOPE = 5  # a bootstrap over fewer seeds has too few distinct resamples for a percentile interval


def group_table(frame: pd.DataFrame, group: str, prop: str, value: str) -> pd.DataFrame:
    """One row per group of ``frame`` (index: the group id): ``value``, the mean over the group's samples, and
    ``property``, the group's ``prop`` (a ValueError when a group's samples disagree on it)."""
    g = frame.groupby(group)
    if (g[prop].nunique() > 1).any():
        raise ValueError(f"{prop} is not a group property of {group}: some groups have several values")
    return pd.DataFrame({"value": g[value].mean(), "property": g[prop].first()}).sort_index()


def _panel(tables: Mapping[Any, pd.DataFrame], groups: list) -> tuple[np.ndarray, np.ndarray]:
    """``(values, properties)``, each (seeds, groups): every seed's group means and *its own* group properties."""
    values = np.stack([tables[s].loc[groups, "value"].to_numpy(float) for s in tables])
    prop = np.stack([tables[s].loc[groups, "property"].to_numpy(float) for s in tables])
    return values, prop


def _within(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """``(slope, within sum of squares of x)`` of y on x with a group effect and a seed effect, for a balanced
    panel (seeds, groups): both double-demeaned (minus the seed's mean, the group's mean, plus the grand mean),
    slope = sum(x~ y~) / sum(x~^2), the ordinary least squares slope of the two-way fixed-effects model."""
    def demean(a: np.ndarray) -> np.ndarray:
        grand = a.mean(axis=(-2, -1), keepdims=True)
        return a - a.mean(axis=-1, keepdims=True) - a.mean(axis=-2, keepdims=True) + grand
    xt, yt = demean(x), demean(y)
    ss = (xt * xt).sum(axis=(-2, -1))
    return (xt * yt).sum(axis=(-2, -1)) / np.where(ss > 0, ss, np.nan), ss


def _identity_agreement(values: np.ndarray) -> float:
    """The mean over pairs of seeds of Spearman(group means of one seed, of the other): how much the groups' ranks
    are a property of the group itself (1: the same order in every seed, whatever each seed made frequent)."""
    ranks = _rank_rows(values)
    pairs = [(a, b) for a in range(len(values)) for b in range(a + 1, len(values))]
    return float(np.mean([_pearson_rows(ranks[a], ranks[b]) for a, b in pairs]))


def within_group_slope(claim: str, by_seed: Mapping[Any, pd.DataFrame], *, what: str, unit: str,
                       n_boot: int = N_BOOT, seed: int = 0, level: float = LEVEL, min_seeds: int = MIN_SEEDS_SLOPE,
                       description: str = "") -> Verdict:
    """The claim "``value`` grows with the group's ``property``", with the group's identity held fixed.

    Model, over the cells (group g, seed s) of the groups every seed has (``by_seed``: seed -> :func:`group_table`,
    ``property`` > 0, e.g. the class's frequency in that seed's long-tailed order)::

        value_gs = a_g + c_s + b * log(property_gs) + e_gs,

    a fixed effect per group (its identity: a class that learns a large tau whatever its frequency), one per seed
    (the run's level) and one slope ``b`` on log property, by least squares (:func:`_within`). ``b`` is identified
    only by the seeds moving a group's property, as the seeded class order does; where every seed gives a group
    the same property (a fixed order, the image-text clusters), identity and property are one thing and the claim
    is not testable. The seeds are the replicates: the 95% interval is b +- t_{S-1} sd*, with sd* the sd of b over
    a bootstrap over seeds (``n_boot`` draws of the S seeds with replacement, numpy PCG64 seeded with ``seed``; a
    draw whose cells do not identify b is drawn again) and t's S - 1 degrees of freedom for the few replicates (the
    percentile interval at 5-7 seeds called 5% of identity-only panels supported, this one about 2.5%:
    ``tests/test_analysis_groups.py``); fewer than ``min_seeds`` seeds: not testable. Supported above 0, contradicted
    below, inconclusive across it. The evidence gives the slope in ``unit`` per log unit, the identity agreement
    (:func:`_identity_agreement`) and ``description``."""
    tables = dict(by_seed)
    if len(tables) < 2:
        return not_testable(claim, f"{len(tables)} seed(s): no slope across seeds ({what})")
    groups = sorted(set.intersection(*(set(t.index) for t in tables.values())))
    if len(groups) < MIN_GROUPS:
        return not_testable(claim, f"{len(groups)} groups shared by the seeds: fewer than {MIN_GROUPS} ({what})")
    values, prop = _panel(tables, groups)
    if (prop <= 0).any():
        raise ValueError(f"{what}: the property must be > 0 for its log (got {prop.min():g})")
    x = np.log(prop)
    slope, ss = _within(values, x)
    agreement = _identity_agreement(values)
    said = (f"identity agreement (mean pairwise Spearman of the group means across seeds) {agreement:+.2f}"
            + (f"; {description}" if description else ""))
    if not ss > 1e-12 * max(1.0, float((x ** 2).sum())):
        return not_testable(claim, f"identity and frequency are one thing: every seed gives each of the "
                                   f"{len(groups)} groups the same property, so a group effect absorbs it ({what}); "
                                   + said)
    if len(tables) < min_seeds:
        return not_testable(claim, f"{len(tables)} seeds, needs >= {min_seeds}: the slope's interval rests on a "
                                   f"bootstrap over seeds ({what}: slope {float(slope):+.4g} {unit} per log unit); "
                                   + said)
    rng = np.random.default_rng(seed)
    boot, redrawn = [], 0
    while len(boot) < n_boot:
        pick = rng.integers(0, len(tables), size=len(tables))
        b, ss_b = _within(values[pick], x[pick])
        if ss_b > 1e-12 * max(1.0, float((x[pick] ** 2).sum())):
            boot.append(float(b))
        else:
            redrawn += 1
    boot = np.asarray(boot)
    half = float(stats.t.ppf(0.5 + level / 2, len(tables) - 1)) * float(boot.std(ddof=1))
    low, high = float(slope) - half, float(slope) + half
    status = status_of(Interval(float(slope), low, high, len(tables), level))
    evidence = (f"{what}: slope on log frequency with a group effect and a seed effect, over {len(groups)} groups x "
                f"{len(tables)} seeds: {float(slope):+.4g} {unit} per log unit, {level:.0%} interval "
                f"[{low:+.4g}, {high:+.4g}] (the bootstrap sd over seeds times t with {len(tables) - 1} degrees of "
                f"freedom; {n_boot} resamples" + (f", {redrawn} redrawn: one seed only" if redrawn
                                                                    else "") + f"); {said}")
    # a t interval over the seeds (its sd from the bootstrap): the rerun rule, p value and seeds to answer are t's
    return Verdict(claim, status, evidence, effect=float(slope), ci_low=low, ci_high=high, n_seeds=len(tables))


def group_correlation(claim: str, by_seed: Mapping[Any, pd.DataFrame], *, what: str, n_boot: int = N_BOOT,
                      seed: int = 0, level: float = LEVEL, description: str = "") -> Verdict:
    """The claim "``value`` grows with the group's ``property``" at the group level (module docstring).

    ``by_seed``: seed -> :func:`group_table` (index: group id; columns ``value``, ``property``); only the groups
    every seed has are used. ``what`` names the statistic (e.g. "Spearman(mean tau per class, class frequency)");
    ``description`` (optional) is appended to the evidence (e.g. sample-level numbers, as description)."""
    tables = {s: t for s, t in by_seed.items()}
    if len(tables) < 2:
        return not_testable(claim, f"{len(tables)} seed(s): no agreement across seeds can be checked ({what})")
    groups = sorted(set.intersection(*(set(t.index) for t in tables.values())))
    if len(groups) < MIN_GROUPS:
        return not_testable(claim, f"{len(groups)} groups shared by the seeds: fewer than {MIN_GROUPS} ({what})")
    values, prop = _panel(tables, groups)  # (seeds, groups) each: every seed against its own property
    per_seed = _pearson_rows(_rank_rows(values), _rank_rows(prop))
    estimate = float(per_seed.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    # (seeds, n_boot, groups): the same groups drawn for every seed, each seed's value against its own property
    boot = _pearson_rows(_rank_rows(values[:, idx]), _rank_rows(prop[:, idx])).mean(axis=0)
    low, high = (float(q) for q in np.quantile(boot, [0.5 - level / 2, 0.5 + level / 2]))
    status = status_of(Interval(estimate, low, high, len(tables), level))
    listing = ", ".join(f"seed {s} {r:+.2f}" for s, r in zip(tables, per_seed, strict=True))
    evidence = (f"{what} over {len(groups)} groups: {listing}; mean {estimate:+.3f}, {level:.0%} cluster bootstrap "
                f"[{low:+.3f}, {high:+.3f}] ({n_boot} resamples of the groups)" + (f"; {description}"
                                                                                   if description else ""))
    if status in ("supported", "contradicted") and not low <= estimate <= high:
        status = "inconclusive"  # a bootstrap interval that misses its own estimate: too few groups to trust it
        evidence += "; the interval misses the estimate: inconclusive"
    return Verdict(claim, status, evidence, effect=estimate, ci_low=low, ci_high=high, n_seeds=len(tables),
                   p_rerun=rerun_probability_bootstrap(status, low, high, float(boot.std(ddof=1))),
                   interval="bootstrap")


def frequency_verdict_over_groups(claim: str, by_seed: Mapping[Any, pd.DataFrame], *, value: str, group: str,
                                  unit: str = "", description: str = "") -> Verdict:
    """"``value`` grows with the frequency of its ``group``" (iSogCLR Sec. 6.3): the verdict is
    :func:`within_group_slope` (identity held fixed); each seed's rank correlation over groups against its own
    frequencies (:func:`group_correlation`) is in the evidence as description, with ``description``."""
    ranks = group_correlation(claim, by_seed, what=f"Spearman(mean {value} per {group}, {group} frequency)")
    return within_group_slope(claim, by_seed, what=f"mean {value} per {group} and seed", unit=unit,
                              description=f"description, not the verdict: {ranks.evidence}"
                              + (f"; {description}" if description else ""))
