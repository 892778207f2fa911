"""SiMo (EqCo-corrected InfoNCE) against a float64 reference with explicit loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.simclr import SimCLRLoss
from isogclr.losses.simo import SiMoLoss

from .loss_helpers import assert_close, features, grads

B, D = 6, 5


def ref_simo(z1, z2, tau, alpha, negatives, symmetric):
    b = len(z1)
    views = [z1, z2]
    losses = []
    for a in range(2 if symmetric else 1):
        for i in range(b):
            anchor, positive = views[a][i], views[1 - a][i]
            if negatives == "cross":
                negs = [views[1 - a][j] for j in range(b) if j != i]
            else:
                negs = [views[c][j] for j in range(b) if j != i for c in range(2)]
            pos = torch.exp(anchor @ positive / tau)
            neg = alpha / len(negs) * sum(torch.exp(anchor @ z / tau) for z in negs)
            losses.append(-torch.log(pos / (pos + neg)))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("negatives", ["cross", "all"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_matches_reference(negatives, symmetric):
    z1, z2 = features()
    loss = SiMoLoss(B, tau=0.2, alpha=65536, negatives=negatives, symmetric=symmetric)(z1, z2, torch.arange(B))
    ref = ref_simo(z1, z2, 0.2, 65536, negatives, symmetric)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


def test_alpha_equal_to_k_is_infonce():
    """alpha = K (the number of negatives used): EqCo's rule is the identity, SiMo is NT-Xent."""
    z1, z2 = features(1)
    loss = SiMoLoss(B, tau=0.3, alpha=2 * B - 2, negatives="all")(z1, z2, torch.arange(B))
    ref = SimCLRLoss(B, tau=0.3, positive_in_denominator=True)(z1, z2, torch.arange(B))
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    z1, z2 = z.clone().requires_grad_(), (sign * z).requires_grad_()
    loss = SiMoLoss(B, tau=0.005)(z1, z2)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, z1, z2))


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(2, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = SiMoLoss(16, tau=0.005)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["simo"] is SiMoLoss and SiMoLoss.expects_normalized
    assert build_loss("simo", 10).alpha == 65536
    with pytest.raises(ValueError, match="positive"):
        SiMoLoss(10, alpha=0)
