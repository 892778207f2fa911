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
Sample-level correlations may be given in the evidence as description, never as the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .rerun import rerun_probability_bootstrap
from .stats import Interval, _pearson_rows, _rank_rows
from .verdicts import LEVEL, Verdict, not_testable, status_of

MIN_GROUPS = 4  # fewer groups than this: a rank correlation over groups says nothing
N_BOOT = 2000


def group_table(frame: pd.DataFrame, group: str, prop: str, value: str) -> pd.DataFrame:
    """One row per group of ``frame`` (index: the group id): ``value``, the mean over the group's samples, and
    ``property``, the group's ``prop`` (a ValueError when a group's samples disagree on it)."""
    g = frame.groupby(group)
    if (g[prop].nunique() > 1).any():
        raise ValueError(f"{prop} is not a group property of {group}: some groups have several values")
    return pd.DataFrame({"value": g[value].mean(), "property": g[prop].first()}).sort_index()


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
    values = np.stack([tables[s].loc[groups, "value"].to_numpy(float) for s in tables])  # (seeds, groups)
    prop = tables[next(iter(tables))].loc[groups, "property"].to_numpy(float)
    per_seed = _pearson_rows(_rank_rows(values), _rank_rows(np.broadcast_to(prop, values.shape)))
    estimate = float(per_seed.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(groups), size=(n_boot, len(groups)))
    drawn = values[:, idx]  # (seeds, n_boot, groups): the same groups drawn for every seed
    boot = _pearson_rows(_rank_rows(drawn), _rank_rows(np.broadcast_to(prop[idx], drawn.shape))).mean(axis=0)
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
