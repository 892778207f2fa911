"""The statistics behind the verdicts: paired differences over seeds and bootstrap intervals over samples.

* :func:`paired_differences` pairs two methods' numbers by seed (same seed: same initialization, data
  order and augmentations where the code allows it);
* :func:`t_interval`: the mean of per-seed numbers with its two-sided Student-t confidence interval
  (mean ± t_{1-a/2, n-1} · s / sqrt(n));
* :func:`bootstrap_spearman`: Spearman's rank correlation of one run's samples with a seeded percentile
  bootstrap interval over samples (reproducible: the same inputs and seed give the same interval);
* the power of the paired t test: :func:`paired_power`, the minimum detectable effect :func:`min_detectable_effect`
  and the seeds an effect would need, :func:`seeds_needed` (exact, from the noncentral t distribution);
* :func:`at_bound`: the share of a learned quantity's values that sit at one of its bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, stats

POWER = 0.8  # the power of a minimum detectable effect
MAX_SEEDS = 100  # seeds_needed says ">MAX_SEEDS" beyond this
AT_BOUND_RTOL = 0.01  # "at a bound": within 1% of the bound's magnitude (of the bounds' range for a bound at 0)


@dataclass(frozen=True)
class Interval:
    """An estimate with its confidence interval; ``n`` is the number of seeds (or samples) it rests on."""

    estimate: float
    low: float
    high: float
    n: int
    level: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def sign(self) -> int:
        """+1 when the interval lies above 0, -1 below 0, 0 when it contains 0 (a zero-width interval at 0 too)."""
        return 1 if self.low > 0 else -1 if self.high < 0 else 0


def paired_differences(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    """``a[s] - b[s]`` for every seed ``s`` both have (sorted by seed); seeds only one side has are dropped."""
    return {s: float(a[s]) - float(b[s]) for s in sorted(set(a) & set(b))}


def t_interval(values: Mapping[int, float] | list[float], level: float = 0.95) -> Interval:
    """Mean of the per-seed ``values`` and its Student-t interval over seeds (n - 1 degrees of freedom).

    Needs at least two values (one seed has no spread): a ValueError names the count otherwise.
    Identical values give a zero-width interval at their mean.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    x = np.asarray(list(values.values()) if isinstance(values, Mapping) else list(values), dtype=float)
    if len(x) < 2:
        raise ValueError(f"a t interval needs at least 2 seeds, got {len(x)}")
    if not np.isfinite(x).all():
        raise ValueError(f"non-finite value among {x.tolist()}")
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return Interval(mean, mean - half, mean + half, len(x), level)


def _rank_rows(x: np.ndarray) -> np.ndarray:
    return stats.rankdata(x, axis=-1)  # average ranks for ties, as Spearman's rho uses


def _pearson_rows(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=-1) / np.where(den > 0, den, 1.0), 0.0)


def bootstrap_spearman(x, y, n_boot: int = 1000, seed: int = 0, level: float = 0.95,  # noqa: ANN001
                       chunk: int = 200) -> Interval:
    """Spearman's rho of ``x`` and ``y`` with a percentile bootstrap interval over samples.

    Each of ``n_boot`` resamples draws len(x) pairs with replacement (numpy's PCG64 seeded with ``seed``)
    and recomputes rho; the interval is the (1 - level)/2 and (1 + level)/2 quantiles of the resampled
    rhos. A resample whose x or y is constant counts as rho 0.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-d of the same length, got shapes {x.shape} and {y.shape}")
    if len(x) < 3:
        raise ValueError(f"a bootstrap correlation needs at least 3 samples, got {len(x)}")
    estimate = float(_pearson_rows(_rank_rows(x), _rank_rows(y)))
    rng = np.random.default_rng(seed)
    rhos = []
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, len(x), size=(min(chunk, n_boot - start), len(x)))
        rhos.append(_pearson_rows(_rank_rows(x[idx]), _rank_rows(y[idx])))
    low, high = np.quantile(np.concatenate(rhos), [0.5 - level / 2, 0.5 + level / 2])
    return Interval(estimate, float(low), float(high), len(x), level)


def paired_power(effect: float, sd: float, n: int, level: float = 0.95) -> float:
    """Power of the two-sided paired t test at ``level`` with ``n`` seeds to detect a true mean difference
    ``effect`` when the per-seed differences have standard deviation ``sd``:

        P(|T| > t_{1-a/2, n-1}),  T ~ noncentral t(df = n - 1, nc = effect * sqrt(n) / sd),  a = 1 - level.

    ``sd`` = 0 (identical differences): power 1 for a non-zero effect, 1 - level for a zero one."""
    if n < 2:
        raise ValueError(f"the paired t test needs at least 2 seeds, got {n}")
    if sd < 0 or not math.isfinite(sd):
        raise ValueError(f"sd must be finite and >= 0, got {sd}")
    if sd == 0:
        return 1.0 if effect != 0 else 1 - level
    df, nc = n - 1, abs(effect) * math.sqrt(n) / sd
    crit = float(stats.t.ppf(0.5 + level / 2, df))
    # T = (Z + nc) / sqrt(V / df), Z ~ N(0, 1), V ~ chi2(df): integrate P(|T| > crit | V) over V (scipy's nct
    # returns NaN for some (df, nc) pairs, e.g. df = 1, nc = 11; the integral is the same quantity, stable)
    def given(v: float) -> float:
        c = crit * math.sqrt(v / df)
        return float(stats.norm.sf(c - nc) + stats.norm.cdf(-c - nc)) * float(stats.chi2.pdf(v, df))

    lo, hi = stats.chi2.ppf([1e-12, 1 - 1e-12], df)
    return float(integrate.quad(given, lo, hi, limit=200, epsabs=1e-10)[0])


def min_detectable_effect(sd: float, n: int, power: float = POWER, level: float = 0.95) -> float:
    """The minimum detectable effect (MDE): the smallest true mean difference that the two-sided paired t test
    at ``level`` detects with probability ``power``, given ``n`` seeds whose differences have spread ``sd``.

    Exact solution of :func:`paired_power` (effect, sd, n) = power for the effect (noncentral t, root-finding);
    it is close to the usual approximation (t_{1-a/2, n-1} + t_{power, n-1}) * sd / sqrt(n), a little above it
    for few seeds (n = 3, sd = 1: exact 3.264, approximation 3.097), and tends to (z_{1-a/2} + z_{power}) * sd
    / sqrt(n) = 2.80 * sd / sqrt(n) for many seeds. In the unit of ``sd``."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if sd == 0:
        paired_power(0.0, 0.0, n, level)  # validates n
        return 0.0
    if paired_power(0.0, sd, n, level) >= power:
        return 0.0
    high = sd
    while paired_power(high, sd, n, level) < power:
        high *= 2
    return float(optimize.brentq(lambda d: paired_power(d, sd, n, level) - power, 0.0, high, xtol=1e-10 * sd))


def seeds_needed(effect: float, sd: float, power: float = POWER, level: float = 0.95,
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """The smallest number of seeds n >= 2 whose paired t test (two-sided, ``level``) detects a true mean
    difference ``effect`` with probability at least ``power`` when the per-seed differences have spread ``sd``
    (:func:`paired_power`); None when more than ``max_seeds`` would be needed (or ``effect`` is 0)."""
    if effect == 0 or paired_power(effect, sd, max_seeds, level) < power:
        return None
    low, high = 1, max_seeds  # the power grows with n: bisect for the first n that reaches it
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if paired_power(effect, sd, mid, level) >= power else (mid, high)
    return high


def at_bound(values: Iterable[float], bounds: Mapping[str, float], rtol: float = AT_BOUND_RTOL
             ) -> tuple[float, str, float, float]:
    """The share of ``values`` at the bound that holds the most of them: ``(share, name, bound, tolerance)``.

    ``bounds``: name -> value (e.g. ``{"tau_min": 0.005, "tau_max": 0.1}``; NaN or None entries, a bound the
    quantity does not have, are skipped). A value is at a bound when ``|value - bound| <= tolerance``, the
    tolerance being ``rtol * |bound|`` (1% of the bound's value by default), or ``rtol`` times the range of the
    bounds for a bound at 0. A ValueError names the problem when there are no values or no bound."""
    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    given = {k: float(v) for k, v in bounds.items() if v is not None and not math.isnan(float(v))}
    if not len(x) or not given:
        raise ValueError(f"at_bound needs values and a bound: {len(x)} value(s), bounds {dict(bounds)}")
    span = max(given.values()) - min(given.values())
    best = (-1.0, "", math.nan, math.nan)
    for name, bound in given.items():
        tol = rtol * (abs(bound) if bound != 0 else span)
        if tol <= 0:
            raise ValueError(f"bound {name} = 0 with no range to scale the tolerance ({dict(bounds)})")
        share = float((np.abs(x - bound) <= tol).mean())
        best = max(best, (share, name, bound, tol), key=lambda b: b[0])
    return best
