"""Whether a verdict is *settled*: the probability that a rerun keeps its status, from a posterior predictive.

A rerun on a machine of another type is another draw of the training noise at the same seeds
(``docs/reproducibility.md``). A paired verdict rests on ``n`` per-seed differences with mean ``m`` and sample sd
``s``; its status is read from the Student-t interval m ± t_c s / sqrt(n) (t_c = t_{1-a/2, d}, d = n - 1), i.e.
from t = m sqrt(n) / s. The rerun draws ``n`` new differences from the same unknown normal N(delta sigma, sigma^2).

**The posterior predictive** (:func:`rerun_probability_t`). Prior: p(sigma) ∝ 1/sigma (the sd is unknown, it is
not taken as known), and the true effect in noise units delta ~ N(0, k^2), an equal mixture over k in
:data:`EFFECT_SDS` = 0.5, 1, 2 (true effects around zero, of half a noise sd to two). For one k, with
B = k^2 / (k^2 + 1/n) and A = d + t^2 / (1 + n k^2), the posterior of the noise is A sigma_0^2 / sigma^2 ~
chi2_{d+1} (sigma_0 = s), delta | sigma ~ N(B m / sigma, B / n), and the rerun's mean m' and sd s' =
sigma sqrt(Y / d), Y ~ chi2_d, give, in units of s / sqrt(n):

    P_k(same sign again) = E_{X ~ chi2_{d+1}, Y ~ chi2_d} Phi( (B |t| sqrt(X / A) - t_c sqrt(Y / d)) / sqrt(1 + B) )

(supported again for t > 0, contradicted again for t < 0). The mixture weighs each k by the marginal density of
t, t / sqrt(1 + n k^2) ~ t_d. The expectations are product Gauss-generalized-Laguerre rules (deterministic).
Killeen's p_rep, used before, takes sigma = s and s' = s with a flat prior on the effect.

**Settled** (:data:`SETTLED`): a supported or contradicted verdict whose predictive probability of the same status
is at least 0.95. Measured by simulation (``tests/test_analysis_rerun.py``; true effects drawn with sd 0.5, 1 or 2
noise units in equal parts, a run and a rerun at the same true effect, 400,000 experiments per seed count): at
7 seeds 97.5% of the verdicts called settled keep their status on the rerun (95.5% at a 0.9 threshold); at
3 seeds the predictive never exceeds 0.54, so **no verdict resting on 3 seeds is settled**. Taken one effect size
at a time, effects of 1 or 2 noise units keep 92% and 99% at 7 seeds, but effects of half a noise sd about half:
no rule that sees only one claim's seeds (its t statistic) reaches 90% there, since a large t at few seeds comes
as often from a small sample sd as from a large effect. "Settled" never qualifies an inconclusive verdict: an
inconclusive row says instead how many seeds would answer it (:func:`seeds_to_answer`).

**A bootstrap interval** (:func:`rerun_probability_bootstrap`, the group-level claims of :mod:`.groups`) is not a t
interval and is never divided by a t quantile: the rerun's estimate is m' ~ N(m, 2 sd_b^2), sd_b the sd of the
bootstrap replicates, and the rerun's interval keeps our interval's offsets from its estimate: P(supported again)
= Phi(low / (sqrt(2) sd_b)), P(contradicted again) = Phi(-high / (sqrt(2) sd_b)). It resamples groups, which a
rerun keeps, so it overstates the rerun's spread (a conservative rule); it is not checked by simulation.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from scipy import special, stats

from .stats import seeds_needed

SETTLED = 0.95  # a supported / contradicted verdict kept by a rerun with at least this predictive probability
LEVEL = 0.95
_NODES = 32  # Gauss-generalized-Laguerre nodes per chi-square variable
EFFECT_SDS = (0.5, 1.0, 2.0)  # the prior: true effects ~ N(0, (k sigma)^2), k one of these in equal parts


@cache
def _chi2_rule(df: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of E[f(X)], X ~ chi2_df = Gamma(df/2, scale 2): sum w_i f(2 x_i) / Gamma(df/2)."""
    x, w = special.roots_genlaguerre(_NODES, df / 2 - 1)
    return 2 * x, w / special.gamma(df / 2)


def _supported_given_k(t: np.ndarray, n: int, k: float, crit: float) -> np.ndarray:
    """P_k(the rerun is supported | t) (the module's equation with t signed), vectorised over ``t``."""
    d = n - 1
    b, a = k * k / (k * k + 1 / n), d + t * t / (1 + n * k * k)
    x, wx = _chi2_rule(d + 1)
    y, wy = _chi2_rule(d)
    first = b * t[..., None, None] * np.sqrt(x[:, None] / a[..., None, None])
    z = (first - crit * np.sqrt(y[None, :] / d)) / math.sqrt(1 + b)
    return (special.ndtr(z) * (wx[:, None] * wy[None, :])).sum(axis=(-2, -1))


def rerun_supported(t_obs: float | np.ndarray, n: int, level: float = LEVEL) -> np.ndarray:
    """The posterior predictive probability that a rerun of ``n`` seeds is supported, given our t statistic
    ``t_obs`` (signed, vectorised); the rerun is contradicted with probability ``rerun_supported(-t_obs, n)``.
    See the module's equation."""
    if n < 2:
        raise ValueError(f"a rerun probability needs at least 2 seeds, got {n}")
    t = np.asarray(t_obs, dtype=float)
    crit = float(stats.t.ppf(0.5 + level / 2, n - 1))
    scales = [math.sqrt(1 + n * k * k) for k in EFFECT_SDS]
    weights = np.stack([stats.t.pdf(t / c, n - 1) / c for c in scales])
    weights = weights / weights.sum(axis=0)
    return (weights * np.stack([_supported_given_k(t, n, k, crit) for k in EFFECT_SDS])).sum(axis=0)


def rerun_probability_t(t_obs: float | np.ndarray, n: int, level: float = LEVEL) -> np.ndarray:
    """The posterior predictive probability that a rerun of ``n`` seeds gives the same sign of verdict as ours
    (supported again for t > 0, contradicted again for t < 0): ``rerun_supported(|t|, n)``."""
    return rerun_supported(np.abs(np.asarray(t_obs, dtype=float)), n, level)


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def rerun_probability(status: str, ci_low: float | None, ci_high: float | None, n_seeds: float | None,
                      level: float = LEVEL) -> float | None:
    """The probability that a rerun (a new draw of the training noise at the same seeds) gives ``status`` again,
    for a verdict read from a Student-t interval [``ci_low``, ``ci_high``] over ``n_seeds`` seeds: its estimate is
    the midpoint, its standard error half-width / t_{1-a/2, n-1}, hence t = estimate / se, then
    :func:`rerun_probability_t`. An exact computation (an interval, no seeds) gives 1; a zero-width interval
    (identical values on every seed) 1; no interval or a not-testable verdict None."""
    if status == "not testable" or _missing(ci_low) or _missing(ci_high):
        return None
    if _missing(n_seeds):
        return 1.0  # exact: no training noise to draw again
    n = int(n_seeds)
    if n < 2:
        return None
    se = (ci_high - ci_low) / 2 / float(stats.t.ppf(0.5 + level / 2, n - 1))
    if se <= 0:
        return 1.0
    t = (ci_low + ci_high) / 2 / se
    if status != "inconclusive":
        return float(rerun_probability_t(t, n, level))
    return max(0.0, 1 - float(rerun_supported(t, n, level)) - float(rerun_supported(-t, n, level)))


def rerun_probability_bootstrap(status: str, low: float, high: float, boot_sd: float) -> float | None:
    """The rerun rule of a bootstrap interval [``low``, ``high``] whose replicates have sd ``boot_sd`` (module
    docstring): Phi(low / (sqrt 2 sd_b)) for supported, Phi(-high / (sqrt 2 sd_b)) for contradicted, the rest for
    inconclusive; None when not testable."""
    if status == "not testable":
        return None
    if boot_sd <= 0:
        return 1.0
    spread = math.sqrt(2) * boot_sd
    up, down = float(special.ndtr(low / spread)), float(special.ndtr(-high / spread))
    return {"supported": up, "contradicted": down, "inconclusive": 1 - up - down}[status]


def is_settled(status: str, p_rerun: float | None, threshold: float = SETTLED) -> bool | None:
    """True / False for a supported or contradicted verdict with a rerun probability; None otherwise ("settled"
    qualifies only those)."""
    if status not in ("supported", "contradicted") or _missing(p_rerun):
        return None
    return p_rerun >= threshold


def seeds_to_answer(ci_low: float, ci_high: float, n_seeds: int, target: float | None,
                    level: float = LEVEL) -> int | None:
    """The seeds an inconclusive verdict would need to be answered: the smallest n whose paired t test detects an
    effect of size ``target`` (the paper's effect, or the size the claim needs) with 80% power at the spread of
    our per-seed values, sd = se sqrt(n) with se = half-width / t_{1-a/2, n-1}
    (:func:`~isogclr.analysis.stats.seeds_needed`); None when more than 100 seeds would be needed or no target."""
    if _missing(target) or target == 0 or n_seeds is None or n_seeds < 2:
        return None
    se = (ci_high - ci_low) / 2 / float(stats.t.ppf(0.5 + level / 2, int(n_seeds) - 1))
    if se <= 0:
        return int(n_seeds)
    return seeds_needed(abs(target), se * math.sqrt(int(n_seeds)), level=level)


def floor_digits(p: float, digits: int = 2) -> str:
    """``p`` printed with ``digits`` decimals rounded down, so that a printed probability never crosses a
    threshold the number itself does not cross (0.897 -> "0.89", never "0.90")."""
    scale = 10 ** digits
    return f"{math.floor(p * scale + 1e-9) / scale:.{digits}f}"
