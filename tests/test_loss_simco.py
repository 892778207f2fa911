"""SimCo's dual-temperature loss against a float64 reference with explicit loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.simco import SimCoLoss

from .loss_helpers import assert_close, extreme, features, grads

B, D = 6, 5


def anchors_and_negatives(z1, z2, negatives):
    """(anchor, positive, [negatives]) for the 2B anchors in the given layout."""
    b = len(z1)
    views = [z1, z2]
    out = []
    for a in range(2):
        for i in range(b):
            if negatives == "cross":
                negs = [views[1 - a][j] for j in range(b) if j != i]
            else:
                negs = [views[c][j] for j in range(b) if j != i for c in range(2)]
            out.append((views[a][i], views[1 - a][i], negs))
    return out


def ref_simco(z1, z2, tau_alpha, tau_beta, negatives):
    """mean_a sg[(1 - P+(tau_beta)) / (1 - P+(tau_alpha))] * (-log P+(tau_alpha))."""
    total = 0.0
    triples = anchors_and_negatives(z1, z2, negatives)
    for anchor, positive, negs in triples:
        def p_pos(tau, anchor=anchor, positive=positive, negs=negs):
            num = torch.exp(anchor @ positive / tau)
            return num / (num + sum(torch.exp(anchor @ z / tau) for z in negs))

        with torch.no_grad():
            weight = (1 - p_pos(tau_beta)) / (1 - p_pos(tau_alpha))
        total = total - weight * torch.log(p_pos(tau_alpha))
    return total / len(triples)


@pytest.mark.parametrize("negatives", ["cross", "all"])
def test_matches_reference(negatives):
    z1, z2 = features()
    loss = SimCoLoss(B, tau_alpha=0.1, tau_beta=1.0, negatives=negatives)(z1, z2, torch.arange(B))
    ref = ref_simco(z1, z2, 0.1, 1.0, negatives)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


def test_equal_temperatures_give_infonce():
    """tau_alpha = tau_beta: the weight is 1 and SimCo is InfoNCE (MoCo layout, positive in the softmax)."""
    z1, z2 = features(1)
    loss = SimCoLoss(B, tau_alpha=0.3, tau_beta=0.3)(z1, z2, torch.arange(B))
    b = len(z1)
    l12 = F.cross_entropy(z1 @ z2.T / 0.3, torch.arange(b))
    l21 = F.cross_entropy(z2 @ z1.T / 0.3, torch.arange(b))
    ref = (l12 + l21) / 2
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("case", ["identical", "antipodal", "near_one"])
def test_tau_0005_is_finite_in_float32(case):
    z1, z2 = (z.requires_grad_() for z in extreme(case))
    loss = SimCoLoss(B, tau_alpha=0.005, tau_beta=0.05)(z1, z2, torch.arange(B))
    g1, g2 = grads(loss, z1, z2)
    assert torch.isfinite(loss) and torch.isfinite(g1).all() and torch.isfinite(g2).all()


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(2, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = SimCoLoss(16, tau_alpha=0.005)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_registry_and_errors():
    assert LOSSES["simco"] is SimCoLoss and SimCoLoss.expects_normalized
    assert build_loss("simco", 10).tau_beta == 1.0
    with pytest.raises(ValueError, match="negatives"):
        SimCoLoss(10, negatives="some")
    with pytest.raises(ValueError, match="positive"):
        SimCoLoss(10, tau_alpha=-1.0)
