"""VICReg against a float64 reference with explicit loops (un-normalized features)."""

from __future__ import annotations

import pytest
import torch

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.vicreg import VICRegLoss

B, D = 7, 4


def features(seed=0, b=B, d=D, dtype=torch.float64, scale=0.7):
    g = torch.Generator().manual_seed(seed)
    z1 = (scale * torch.randn(b, d, generator=g, dtype=dtype) + 0.3).requires_grad_()
    z2 = (scale * torch.randn(b, d, generator=g, dtype=dtype) - 0.2).requires_grad_()
    return z1, z2


def ref_vicreg(z1, z2, lam=25.0, mu=25.0, nu=1.0, gamma=1.0, eps=1e-4):
    b, d = z1.shape
    invariance = sum((z1[n, k] - z2[n, k]) ** 2 for n in range(b) for k in range(d)) / (b * d)

    def mean(z, k):
        return sum(z[n, k] for n in range(b)) / b

    def cov(z, i, j):
        return sum((z[n, i] - mean(z, i)) * (z[n, j] - mean(z, j)) for n in range(b)) / (b - 1)

    def v(z):
        return sum(torch.clamp(gamma - torch.sqrt(cov(z, k, k) + eps), min=0) for k in range(d)) / d

    def c(z):
        return sum(cov(z, i, j) ** 2 for i in range(d) for j in range(d) if i != j) / d

    return lam * invariance + mu * (v(z1) + v(z2)) / 2 + nu * (c(z1) + c(z2))


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


@pytest.mark.parametrize("coefficients", [(25.0, 25.0, 1.0), (1.0, 3.0, 0.5)])
def test_matches_reference(coefficients):
    lam, mu, nu = coefficients
    z1, z2 = features()
    loss = VICRegLoss(B, sim_coeff=lam, std_coeff=mu, cov_coeff=nu)(z1, z2, torch.arange(B))
    ref = ref_vicreg(z1, z2, lam, mu, nu)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


def test_variance_hinge_is_active_and_inactive():
    """Small features: the hinge is active (std < 1); large features: only the covariance term moves them."""
    z1, z2 = features(1, scale=0.1)
    assert VICRegLoss(B, sim_coeff=0, cov_coeff=0)(z1, z2).item() > 0
    z1, z2 = features(1, scale=10.0)
    assert VICRegLoss(B, sim_coeff=0, cov_coeff=0)(z1, z2).item() == 0


def test_collapsed_features_are_finite_in_float32():
    z1 = torch.ones(B, D, requires_grad=True)
    z2 = torch.ones(B, D, requires_grad=True)
    loss = VICRegLoss(B)(z1, z2)
    g1, g2 = grads(loss, z1, z2)
    assert torch.isfinite(loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()
    torch.testing.assert_close(loss, torch.tensor(25.0 * (1 - 1e-2)))  # v = 1 - sqrt(1e-4) per branch


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(3, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = VICRegLoss(16)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["vicreg"] is VICRegLoss and VICRegLoss.expects_normalized is False
    loss = build_loss("vicreg", 10)
    assert (loss.sim_coeff, loss.std_coeff, loss.cov_coeff) == (25.0, 25.0, 1.0)
    with pytest.raises(ValueError, match="B, d"):
        loss(torch.ones(3, 2), torch.ones(3, 4))
