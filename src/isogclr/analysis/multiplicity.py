"""Multiplicity: every claim's status beside its status under a Holm adjustment across all claims, each counted once.

The reports test many claims at 95% each; some "supported" or "contradicted" verdicts are expected by chance
alone. The index states how many claims were tested and, beside each status, the status under **Holm's step-down
adjustment** (family-wise error 5% across all claims; Holm 1979):

    p_(1) <= ... <= p_(m) sorted;  adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j));

a supported or contradicted verdict keeps its status when its adjusted p is below 0.05, else it reads
inconclusive (an inconclusive one stays inconclusive; a not-testable one is not tested and not counted).

The p value of a row (:func:`p_value`) follows its interval (the ``interval`` column of the verdicts):

* ``t``: the two-sided paired t test, t = estimate / se with se = half-width / t_{0.975, n-1}, n - 1 degrees of
  freedom (the interval is exactly that test's 95% interval);
* ``bootstrap``: a normal approximation from the bootstrap interval, p = 2 Phi(-|estimate| / sd), sd = half-width /
  1.96;
* ``exact``: a deterministic computation, p = 0 when its margin is not 0 (no noise), 1 otherwise.

**Each claim once** (:func:`unique_rows`): a row whose ``repeats`` column names another claim (the budget ladder's
rows at Table 1's budget repeat Table 1's claims on a subset of its seeds) and a row with the very numbers of an
earlier row (effect, interval and seeds: the same runs, e.g. the ladder's 6-epoch rows and Tables 3/4's) are
repeats: they get the adjusted status of the row they repeat and are not counted again.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

ALPHA = 0.05
TESTED = ("supported", "contradicted", "inconclusive")


def _number(x: object) -> float | None:
    if x is None or x == "":
        return None
    x = float(x)
    return None if math.isnan(x) else x


def p_value(status: str, effect: object, ci_low: object, ci_high: object, n_seeds: object,
            interval: object = "t") -> float | None:
    """The two-sided p value of a verdict row (module docstring); None for a row that is not tested."""
    low, high, n = _number(ci_low), _number(ci_high), _number(n_seeds)
    if status not in TESTED or low is None or high is None:
        return None
    mid = (low + high) / 2 if interval == "t" else (_number(effect) if _number(effect) is not None else
                                                    (low + high) / 2)
    half = (high - low) / 2
    if interval == "exact" or n is None:
        return 0.0 if mid != 0 else 1.0
    if half <= 0:
        return 0.0 if mid != 0 else 1.0
    if interval == "bootstrap":
        return float(2 * stats.norm.sf(abs(mid) / (half / stats.norm.ppf(0.975))))
    df = int(n) - 1
    if df < 1:
        return None
    se = half / float(stats.t.ppf(0.975, df))
    return float(2 * stats.t.sf(abs(mid) / se, df))


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the order given."""
    m = len(p)
    order = np.argsort(np.asarray(p, dtype=float), kind="stable")
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def _key(x: object) -> str:
    """A number as one string whatever its column's type (3, 3.0 and "3" read alike; "" for none)."""
    x = _number(x)
    return "" if x is None else f"{x:.10g}"


def unique_rows(table: pd.DataFrame) -> pd.Series:
    """For each row of ``table`` (all reports' verdicts, columns claim, effect, ci_low, ci_high, n_seeds, repeats),
    the index of the row it counts as: itself, the row whose claim its ``repeats`` names, or the first row with
    the same effect, interval and seeds."""
    def repeats(r: pd.Series) -> str:
        target = r.get("repeats", "")
        return target if isinstance(target, str) else ""

    by_claim = {r.claim: i for i, r in table.iterrows() if not repeats(r)}
    by_numbers, out = {}, []
    for i, r in table.iterrows():
        numbers = tuple(_key(r.get(c, "")) for c in ("effect", "ci_low", "ci_high", "n_seeds"))
        if repeats(r) in by_claim:
            out.append(by_claim[repeats(r)])
        elif numbers[1] == "":  # no interval (not testable): its numbers say nothing of which runs it rests on
            out.append(i)
        else:
            out.append(by_numbers.setdefault(numbers, i))
    return pd.Series(out, index=table.index)


def adjust(table: pd.DataFrame) -> tuple[pd.Series, int]:
    """``(the status under Holm of each row, the number of claims tested)`` for all reports' verdicts ``table``;
    a not-testable row gets "" (it was not tested)."""
    counted = unique_rows(table)
    own = table.loc[counted.unique()]
    p = {i: p_value(r.status, r.effect, r.ci_low, r.ci_high, r.n_seeds, r.get("interval", "t") or "t")
         for i, r in own.iterrows()}
    tested = [i for i, v in p.items() if v is not None]
    adjusted = dict(zip(tested, holm([p[i] for i in tested]), strict=True))

    def status(i: int) -> str:
        j = counted[i]
        s = table.at[j, "status"]
        if j not in adjusted:
            return ""
        return s if s == "inconclusive" or adjusted[j] < ALPHA else "inconclusive"

    return pd.Series([status(i) for i in table.index], index=table.index), len(tested)
