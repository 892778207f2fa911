"""Barlow Twins against a float64 reference with explicit loops (un-normalized features)."""

from __future__ import annotations

import pytest
import torch

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.barlow_twins import BarlowTwinsLoss

B, D = 7, 4


def features(seed=0, b=B, d=D, dtype=torch.float64, scale=3.0):
    """Projector outputs: not normalized, with a non-zero mean."""
    g = torch.Generator().manual_seed(seed)
    z1 = (scale * torch.randn(b, d, generator=g, dtype=dtype) + 1.0).requires_grad_()
    z2 = (scale * torch.randn(b, d, generator=g, dtype=dtype) - 0.5).requires_grad_()
    return z1, z2


def ref_barlow(z1, z2, lambd, eps=1e-5):
    b, d = z1.shape

    def standardized(z, k):
        column = [z[n, k] for n in range(b)]
        mean = sum(column) / b
        var = sum((x - mean) ** 2 for x in column) / b
        return [(x - mean) / torch.sqrt(var + eps) for x in column]

    a = [standardized(z1, k) for k in range(d)]
    c = [[sum(a[i][n] * bb[n] for n in range(b)) / b for bb in (standardized(z2, j) for j in range(d))]
         for i in range(d)]
    loss = 0.0
    for i in range(d):
        for j in range(d):
            loss = loss + ((1 - c[i][j]) ** 2 if i == j else lambd * c[i][j] ** 2)
    return loss


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


@pytest.mark.parametrize("lambd", [0.0051, 0.5])
def test_matches_reference(lambd):
    z1, z2 = features()
    loss = BarlowTwinsLoss(B, lambd=lambd)(z1, z2, torch.arange(B))
    ref = ref_barlow(z1, z2, lambd)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


def test_takes_unnormalized_features():
    assert BarlowTwinsLoss.expects_normalized is False
    z1, z2 = features(1)
    big = BarlowTwinsLoss(B)(100 * z1, 100 * z2)  # standardisation removes the scale
    torch.testing.assert_close(big, BarlowTwinsLoss(B)(z1, z2), rtol=1e-6, atol=1e-8)


def test_identical_views_have_near_zero_diagonal_loss():
    z1, _ = features(2)
    loss = BarlowTwinsLoss(B, lambd=0.0)(z1, z1)
    assert loss.item() < 1e-6


@pytest.mark.parametrize("case", ["constant", "huge"])
def test_extreme_inputs_are_finite_in_float32(case):
    z = torch.ones(B, D) if case == "constant" else 1e4 * torch.randn(B, D, generator=torch.Generator().manual_seed(0))
    z1, z2 = z.clone().requires_grad_(), (-z).requires_grad_()
    loss = BarlowTwinsLoss(B)(z1, z2)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, z1, z2))


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(3, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = BarlowTwinsLoss(16)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["barlow_twins"] is BarlowTwinsLoss
    assert build_loss("barlow_twins", 10, lambd=0.01).lambd == 0.01
    with pytest.raises(ValueError, match="lambd"):
        BarlowTwinsLoss(10, lambd=-1.0)
    with pytest.raises(ValueError, match="B, d"):
        BarlowTwinsLoss(10)(torch.ones(1, 3), torch.ones(1, 3))
