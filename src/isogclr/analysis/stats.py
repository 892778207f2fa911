"""The statistics behind the verdicts: paired differences over seeds and bootstrap intervals over samples.

* :func:`paired_differences` pairs two methods' numbers by seed (same seed: same initialization, data
  order and augmentations where the code allows it);
* :func:`t_interval`: the mean of per-seed numbers with its two-sided Student-t confidence interval
  (mean ± t_{1-a/2, n-1} · s / sqrt(n));
* :func:`bootstrap_spearman`: Spearman's rank correlation of one run's samples with a seeded percentile
  bootstrap interval over samples (reproducible: the same inputs and seed give the same interval).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats


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
