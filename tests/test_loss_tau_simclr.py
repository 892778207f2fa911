"""TaU+SimCLR against a float64 reference with explicit loops (gradients into z and e)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.simclr import SimCLRLoss
from isogclr.losses.tau_simclr import TaUSimCLRLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    z2 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    e1 = (2 * torch.randn(b, generator=g, dtype=dtype)).requires_grad_()
    e2 = (2 * torch.randn(b, generator=g, dtype=dtype)).requires_grad_()
    return z1, z2, e1, e2


def ref_tau_simclr(z1, z2, e1, e2, t, positive_in_denominator):
    b = len(z1)
    views, extra = [z1, z2], [e1, e2]
    total = 0.0
    for a in range(2):
        for i in range(b):
            anchor, positive = views[a][i], views[1 - a][i]
            tau = t / torch.sigmoid(extra[a][i])  # the anchor's effective temperature
            terms = [torch.exp(anchor @ views[c][j] / tau) for j in range(b) if j != i for c in range(2)]
            if positive_in_denominator:
                terms.append(torch.exp(anchor @ positive / tau))
            total = total - torch.log(torch.exp(anchor @ positive / tau) / sum(terms))
    return total / (2 * b)


@pytest.mark.parametrize("positive_in_denominator", [False, True])
def test_matches_reference(positive_in_denominator):
    z1, z2, e1, e2 = features()
    loss_fn = TaUSimCLRLoss(B, t=0.2, positive_in_denominator=positive_in_denominator)
    loss = loss_fn(z1, z2, torch.arange(B), e1=e1, e2=e2)
    ref = ref_tau_simclr(z1, z2, e1, e2, 0.2, positive_in_denominator)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2, e1, e2), grads(ref, z1, z2, e1, e2))


def test_saturated_scale_is_simclr_at_t():
    """sigmoid(e) -> 1: every temperature is t and TaU+SimCLR is SimCLR with tau = t."""
    z1, z2, _, _ = features(1)
    big = torch.full((B,), 60.0, dtype=torch.float64)
    loss = TaUSimCLRLoss(B, t=0.3)(z1, z2, torch.arange(B), e1=big, e2=big)
    ref = SimCLRLoss(B, tau=0.3, positive_in_denominator=False)(z1, z2, torch.arange(B))
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))
    torch.testing.assert_close(TaUSimCLRLoss(B, t=0.3).temperature(torch.zeros(1)), torch.tensor([0.6]))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_t_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    z1, z2 = z.clone().requires_grad_(), (sign * z).requires_grad_()
    e1 = torch.full((B,), 30.0, requires_grad=True)
    e2 = torch.full((B,), -30.0, requires_grad=True)
    loss = TaUSimCLRLoss(B, t=0.005)(z1, z2, e1=e1, e2=e2)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, z1, z2, e1, e2))


def test_bf16_autocast_matches_float32():
    z1, z2, e1, e2 = (x.detach().float() for x in features(2, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = TaUSimCLRLoss(16, t=0.005)(a, b, e1=e1, e2=e2)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["tau_simclr"] is TaUSimCLRLoss and TaUSimCLRLoss.expects_normalized
    loss_fn = build_loss("tau_simclr", 10)
    z1, z2, e1, _ = features()
    with pytest.raises(ValueError, match="e1"):
        loss_fn(z1, z2, torch.arange(B))
    with pytest.raises(ValueError, match="shape"):
        loss_fn(z1, z2, torch.arange(B), e1=e1, e2=e1[:3])
    with pytest.raises(ValueError, match="t must"):
        TaUSimCLRLoss(10, t=0.0)
