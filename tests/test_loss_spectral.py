"""Spectral contrastive loss against a float64 reference with explicit loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.spectral import SpectralContrastiveLoss

from .loss_helpers import assert_close, features, grads

B, D = 6, 5


def ref_spectral(z1, z2, negatives):
    b = len(z1)
    positive = sum(z1[i] @ z2[i] for i in range(b)) / b
    if negatives == "cross":
        pairs = [(z1[i], z2[j]) for i in range(b) for j in range(b) if i != j]
    else:
        views = [z1, z2]
        pairs = [(views[a][i], views[c][j]) for a in range(2) for i in range(b)
                 for j in range(b) if j != i for c in range(2)]
    negative = sum((u @ v) ** 2 for u, v in pairs) / len(pairs)
    return -2 * positive + negative


@pytest.mark.parametrize("negatives", ["cross", "all"])
def test_matches_reference(negatives):
    z1, z2 = features()
    loss = SpectralContrastiveLoss(B, negatives=negatives)(z1, z2, torch.arange(B))
    ref = ref_spectral(z1, z2, negatives)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_extreme_inputs_are_finite(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    z1, z2 = z.clone().requires_grad_(), (sign * z).requires_grad_()
    loss = SpectralContrastiveLoss(B)(z1, z2)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, z1, z2))
    torch.testing.assert_close(loss, torch.tensor(-2.0 * sign + 1.0))


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(2, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = SpectralContrastiveLoss(16)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_registry_and_errors():
    assert LOSSES["spectral"] is SpectralContrastiveLoss and SpectralContrastiveLoss.expects_normalized
    assert build_loss("spectral", 10, negatives="all").negatives == "all"
    with pytest.raises(ValueError, match="negatives"):
        SpectralContrastiveLoss(10, negatives="none")
