"""CLIP (fixed and learnable global temperature) against a float64 reference with explicit loops."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.clip import CLIPLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    text = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return image, text


def ref_clip(image, text, tau, positive_in_denominator=True):
    """(1/2B) sum_i [-log p(t_i | x_i) - log p(x_i | t_i)], explicit sums."""
    b = len(image)
    total = 0.0
    for i in range(b):
        pos = torch.exp(image[i] @ text[i] / tau)
        keep = [j for j in range(b) if positive_in_denominator or j != i]
        to_text = sum(torch.exp(image[i] @ text[j] / tau) for j in keep)
        to_image = sum(torch.exp(image[j] @ text[i] / tau) for j in keep)
        total = total - torch.log(pos / to_text) - torch.log(pos / to_image)
    return total / (2 * b)


@pytest.mark.parametrize("positive_in_denominator", [True, False])
def test_fixed_tau_matches_reference(positive_in_denominator):
    image, text = features()
    loss = CLIPLoss(tau=0.2, positive_in_denominator=positive_in_denominator)(image, text, torch.arange(B))
    ref = ref_clip(image, text, 0.2, positive_in_denominator)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, image, text), grads(ref, image, text))
    # the standard cross-entropy form
    if positive_in_denominator:
        logits = image @ text.T / 0.2
        ce = (F.cross_entropy(logits, torch.arange(B)) + F.cross_entropy(logits.T, torch.arange(B))) / 2
        torch.testing.assert_close(loss, ce)


def test_learnable_tau_gets_the_reference_gradient():
    image, text = features(1)
    loss_fn = CLIPLoss(tau=0.07, learn_tau=True).double()
    assert isinstance(loss_fn.log_tau, torch.nn.Parameter)
    loss = loss_fn(image, text)
    log_tau = loss_fn.log_tau.detach().clone().requires_grad_()
    ref = ref_clip(image, text, log_tau.exp())
    assert_close(grads(loss, image, text, loss_fn.log_tau), grads(ref, image, text, log_tau))
    torch.testing.assert_close(loss_fn.tau.double(), torch.tensor(0.07, dtype=torch.float64))


def test_clamped_tau_gets_no_gradient():
    image, text = features(2)
    loss_fn = CLIPLoss(tau=0.005, learn_tau=True, tau_min=0.01).double()  # below CLIP's bound
    loss = loss_fn(image, text)
    (g,) = grads(loss, loss_fn.log_tau)
    assert g.item() == 0.0
    torch.testing.assert_close(loss, ref_clip(image, text, 0.01))
    assert abs(loss_fn.tau.item() - 0.01) < 1e-8


def test_fixed_tau_is_a_buffer_and_state_round_trips():
    loss_fn = CLIPLoss(tau=0.3, learn_tau=True)
    with torch.no_grad():
        loss_fn.log_tau.fill_(math.log(0.05))
    buffer = io.BytesIO()
    torch.save(loss_fn.state_dict(), buffer)
    buffer.seek(0)
    restored = CLIPLoss(tau=0.3, learn_tau=True)
    restored.load_state_dict(torch.load(buffer))
    assert abs(restored.tau.item() - 0.05) < 1e-7
    fixed = CLIPLoss(tau=0.3)
    assert list(fixed.parameters()) == [] and "log_tau" in fixed.state_dict()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    image, text = z.clone().requires_grad_(), (sign * z).requires_grad_()
    loss_fn = CLIPLoss(tau=0.005, learn_tau=True, tau_min=0.005)
    loss = loss_fn(image, text)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, image, text, loss_fn.log_tau))


def test_bf16_autocast_matches_float32():
    image, text = (z.detach().float() for z in features(3, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = image.clone().requires_grad_(), text.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = CLIPLoss(tau=0.005, tau_min=None)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["clip"] is CLIPLoss and CLIPLoss.expects_normalized
    assert build_loss("clip", 10, learn_tau=True).learn_tau
    with pytest.raises(ValueError, match="tau"):
        CLIPLoss(tau=0.0)
    with pytest.raises(ValueError, match="tau_min"):
        CLIPLoss(tau_min=0.5, tau_max=0.1)
