"""Power of the paired verdicts: the minimum detectable effect, the seeds an effect needs, the no-learning rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isogclr.analysis.stats import MAX_SEEDS, min_detectable_effect, paired_power, seeds_needed
from isogclr.analysis.verdicts import NO_LEARNING_MARGIN, compare, verdict_table


def test_mde_of_three_seeds_with_unit_spread_is_the_hand_computed_one():
    # n = 3, sd = 1, 95% two-sided, 80% power. The usual approximation by hand, from a t table:
    # (t_{0.975, 2} + t_{0.80, 2}) / sqrt(3) = (4.3027 + 1.0607) / 1.7321 = 3.0965.
    # The exact value solves P(|T'| > 4.3027) = 0.8 for T' noncentral t (2 df, nc = d * sqrt(3)): d = 3.2640.
    # It is checked by simulation below (a different method): 200,000 sets of 3 N(3.2640, 1) differences.
    mde = min_detectable_effect(1.0, 3)
    assert mde == pytest.approx(3.2640, abs=1e-3)
    assert mde > 3.0965  # the approximation understates the MDE for few seeds
    x = np.random.default_rng(0).normal(3.2640, 1.0, size=(200_000, 3))
    t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(3))
    assert float((np.abs(t) > 4.302653).mean()) == pytest.approx(0.80, abs=0.005)


def test_mde_scales_with_the_spread_and_tends_to_the_normal_formula():
    assert min_detectable_effect(2.5, 5) == pytest.approx(2.5 * min_detectable_effect(1.0, 5), rel=1e-6)
    # many seeds: (z_0.975 + z_0.80) * sd / sqrt(n) = (1.95996 + 0.84162) / 10 = 0.28016
    assert min_detectable_effect(1.0, 100) == pytest.approx(0.28016, rel=0.01)
    assert min_detectable_effect(0.0, 3) == 0.0  # identical differences: any non-zero effect is seen
    assert min_detectable_effect(1.0, 10) < min_detectable_effect(1.0, 5) < min_detectable_effect(1.0, 3)
    with pytest.raises(ValueError, match="at least 2 seeds, got 1"):
        min_detectable_effect(1.0, 1)


def test_power_at_zero_effect_is_the_false_positive_rate():
    assert paired_power(0.0, 1.0, 5) == pytest.approx(0.05, abs=1e-6)
    assert paired_power(min_detectable_effect(1.0, 4), 1.0, 4) == pytest.approx(0.8, abs=1e-6)


def test_seeds_needed_is_the_smallest_count_that_reaches_the_power():
    n = seeds_needed(1.0, 1.0)  # effect = sd: 10 seeds (the textbook paired-t table: 10)
    assert n == 10 and paired_power(1.0, 1.0, n) >= 0.8 > paired_power(1.0, 1.0, n - 1)
    assert seeds_needed(-1.0, 1.0) == 10  # the sign of the effect does not matter (two-sided)
    assert seeds_needed(0.1, 1.0) is None  # beyond MAX_SEEDS
    assert paired_power(0.1, 1.0, MAX_SEEDS) < 0.8
    assert seeds_needed(10.0, 1.0) == 3 and seeds_needed(0.0, 1.0) is None


def test_a_paired_verdict_states_its_mde_and_the_seeds_the_paper_effect_needs():
    a, b = {0: 40.0, 1: 42.0, 2: 41.0}, {0: 39.0, 1: 40.0, 2: 41.0}  # differences 1, 2, 0: sd 1
    v = compare("a > b", ("a", a), ("b", b), paper_effect=1.0)
    assert v.mde == pytest.approx(3.2640, abs=1e-3) and v.seeds_needed == "10"
    assert "minimum detectable effect 3.26 points (80% power, 3 seeds" in v.evidence
    assert "an effect of the paper's size needs 10 seeds" in v.evidence
    tiny = compare("a > b", ("a", a), ("b", b), paper_effect=0.05)
    assert tiny.seeds_needed == f">{MAX_SEEDS}" and f"needs >{MAX_SEEDS} seeds" in tiny.evidence
    row = verdict_table([v, tiny]).iloc[0]
    assert row["mde"] == pytest.approx(3.264, abs=1e-3) and row["seeds_needed"] == "10"
    assert compare("a > b", ("a", a), ("b", b)).seeds_needed is None  # no paper number, no count
    assert compare("a > b", ("a", {0: 1.0}), ("b", {0: 0.0})).mde is None  # one seed: no spread


def test_both_methods_at_the_no_learning_floor_is_not_testable():
    learned, barely = {0: 40.0, 1: 41.0, 2: 42.0}, {0: 13.0, 1: 14.0, 2: 13.5}
    near = {0: 12.0, 1: 12.5, 2: 12.2}
    v = compare("a > b", ("a", barely), ("b", near), paper_effect=1.0, floor=13.3)
    assert v.status == "not testable" and v.evidence.startswith("no learning: a 13.50 and b 12.23")
    assert "best no-learning score 13.30" in v.evidence and v.effect == pytest.approx(1.2667, abs=1e-3)
    assert v.mde is not None  # the numbers stay
    # without a floor the same numbers are a supported ordering
    assert compare("a > b", ("a", barely), ("b", near)).status == "supported"
    # one method learned: tested as usual
    assert compare("a > b", ("a", learned), ("b", near), floor=13.3).status == "supported"
    # the margin decides: 13.5 is within 2 of 13.3 but not within 0.1
    assert compare("a > b", ("a", barely), ("b", near), floor=13.3, margin=0.1).status == "supported"
    assert NO_LEARNING_MARGIN == 2.0
