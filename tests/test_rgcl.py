"""RGCL: the primal (eq. 6) solved numerically equals the dual with individual temperature (eq. 7)."""

from __future__ import annotations

import numpy as np
import pytest

from isogclr.analysis.rgcl import kl_to_uniform, rgcl_dual, rgcl_primal


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rho", [0.05, 0.2, 0.6])
def test_primal_equals_dual(seed, rho):
    rng = np.random.default_rng(seed)
    h = rng.uniform(-2.0, 0.5, size=rng.integers(2, 7))
    primal, dual = rgcl_primal(h, rho, tau0=0.05), rgcl_dual(h, rho, tau0=0.05)
    assert primal.value == pytest.approx(dual.value, abs=1e-5)
    np.testing.assert_allclose(primal.p, dual.p, atol=2e-3)
    assert kl_to_uniform(dual.p) <= rho + 1e-6


def test_figure2_case():
    """h = [0, -1], rho = 0.2: the harder negative gets p* ~ (0.8, 0.2) (Figure 2, left)."""
    dual = rgcl_dual(np.array([0.0, -1.0]), rho=0.2, tau0=0.01)
    np.testing.assert_allclose(dual.p, [0.8, 0.2], atol=0.01)
    assert kl_to_uniform(dual.p) == pytest.approx(0.2, abs=1e-4)  # the KL constraint is active
    equal = rgcl_dual(np.array([-0.5, -0.5]), rho=0.2, tau0=0.01)
    np.testing.assert_allclose(equal.p, [0.5, 0.5])  # equally hard negatives get equal weights


def test_larger_rho_means_more_hardness_awareness():
    h = np.array([0.0, -1.0])
    weights = [rgcl_dual(h, rho, tau0=0.01).p[0] for rho in (0.05, 0.1, 0.2, 0.4)]
    assert np.all(np.diff(weights) > 0)


def test_tau_at_its_lower_bound_when_the_constraint_is_slack():
    # nearly uniform hardness: KL(softmax(h / tau0), 1/m) < rho, so lambda = 0 and tau* = tau0
    dual = rgcl_dual(np.array([-0.5, -0.5001, -0.4999]), rho=0.5, tau0=0.05)
    assert dual.tau == pytest.approx(0.05)
