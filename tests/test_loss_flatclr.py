"""FlatCLR (FlatNCE) against a float64 reference written with explicit loops."""

from __future__ import annotations

import pytest
import torch

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.flatclr import FlatCLRLoss
from isogclr.losses.simclr import SimCLRLoss

from .loss_helpers import assert_close, extreme, features, grads

B, D = 6, 5


def ref_flatnce_terms(z1, z2, tau):
    """v_a = log sum_{k in N_a} exp((z_a.z_k - z_a.z_a+) / tau) for the 2B anchors."""
    b = len(z1)
    views = [z1, z2]
    terms = []
    for a in range(2):
        for i in range(b):
            anchor, positive = views[a][i], views[1 - a][i]
            exps = [torch.exp((anchor @ views[c][j] - anchor @ positive) / tau) for j in range(b) if j != i
                    for c in range(2)]
            terms.append(torch.log(sum(exps)))
    return torch.stack(terms)


def test_gradient_is_the_flatnce_gradient_and_value_is_zero():
    z1, z2 = features()
    loss_fn = FlatCLRLoss(B, tau=0.2)
    loss = loss_fn(z1, z2, torch.arange(B))
    terms = ref_flatnce_terms(z1, z2, 0.2)
    assert loss.item() == 0.0
    torch.testing.assert_close(loss_fn.last_logsumexp, terms.mean().detach())
    assert_close(grads(loss, z1, z2), grads(terms.mean(), z1, z2))
    # FlatNCE's published form exp(v - sg(v)) - 1 has the same gradient
    terms = ref_flatnce_terms(z1, z2, 0.2)
    flat = (torch.exp(terms - terms.detach()) - 1).mean()
    assert_close(grads(loss_fn(z1, z2, torch.arange(B)), z1, z2), grads(flat, z1, z2))


def test_gradient_equals_simclr_without_positive_in_denominator():
    z1, z2 = features(1)
    flat = FlatCLRLoss(B, tau=0.3)(z1, z2, torch.arange(B))
    simclr = SimCLRLoss(B, tau=0.3, positive_in_denominator=False)(z1, z2, torch.arange(B))
    assert_close(grads(flat, z1, z2), grads(simclr, z1, z2))


@pytest.mark.parametrize("case", ["identical", "antipodal", "near_one"])
def test_tau_0005_is_finite_in_float32(case):
    z1, z2 = (z.requires_grad_() for z in extreme(case))
    loss_fn = FlatCLRLoss(B, tau=0.005)
    loss = loss_fn(z1, z2, torch.arange(B))
    g1, g2 = grads(loss, z1, z2)
    assert torch.isfinite(loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()
    assert torch.isfinite(loss_fn.last_logsumexp)


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(2, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = FlatCLRLoss(16, tau=0.005)(a, b)
        results.append(grads(loss, a, b))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_registry_and_errors():
    assert LOSSES["flatclr"] is FlatCLRLoss and FlatCLRLoss.expects_normalized
    assert isinstance(build_loss("flatclr", 10, tau=0.5), FlatCLRLoss)
    with pytest.raises(ValueError, match="tau"):
        FlatCLRLoss(10, tau=0.0)
