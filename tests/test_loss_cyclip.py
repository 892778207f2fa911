"""CyCLIP against a float64 reference with explicit loops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.clip import CLIPLoss
from isogclr.losses.cyclip import CyCLIPLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    text = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return image, text


def ref_cyclip(image, text, tau, lambda_in, lambda_cross):
    n = len(image)
    clip = 0.0
    for i in range(n):
        pos = torch.exp(image[i] @ text[i] / tau)
        clip = clip - torch.log(pos / sum(torch.exp(image[i] @ text[j] / tau) for j in range(n)))
        clip = clip - torch.log(pos / sum(torch.exp(image[j] @ text[i] / tau) for j in range(n)))
    clip = clip / (2 * n)
    inmodal = sum((image[j] @ image[k] - text[j] @ text[k]) ** 2 for j in range(n) for k in range(n)) / n
    crossmodal = sum((image[j] @ text[k] - image[k] @ text[j]) ** 2 for j in range(n) for k in range(n)) / n
    return clip + lambda_in * inmodal + lambda_cross * crossmodal


@pytest.mark.parametrize("lambdas", [(0.25, 0.25), (1.0, 0.0), (0.0, 2.0)])
def test_matches_reference(lambdas):
    image, text = features()
    loss = CyCLIPLoss(tau=0.2, lambda_inmodal=lambdas[0], lambda_crossmodal=lambdas[1])(image, text, torch.arange(B))
    ref = ref_cyclip(image, text, 0.2, *lambdas)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, image, text), grads(ref, image, text))


def test_consistent_features_reduce_to_clip():
    """Identical image and text geometry: both cyclic terms vanish and CyCLIP is CLIP."""
    image, _ = features(1)
    text = image.detach().clone().requires_grad_()
    loss = CyCLIPLoss(tau=0.1)(image, text)
    clip = CLIPLoss(tau=0.1)(image, text)
    torch.testing.assert_close(loss, clip)
    assert_close(grads(loss, image, text), grads(clip, image, text))


def test_learnable_tau_is_inherited():
    loss_fn = CyCLIPLoss(tau=0.07, learn_tau=True)
    image, text = (z.detach().float() for z in features(2))
    loss_fn(image, text).backward()
    assert loss_fn.log_tau.grad is not None and torch.isfinite(loss_fn.log_tau.grad)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    image, text = z.clone().requires_grad_(), (sign * z).requires_grad_()
    loss = CyCLIPLoss(tau=0.005, tau_min=None)(image, text)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, image, text))


def test_bf16_autocast_matches_float32():
    image, text = (z.detach().float() for z in features(3, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = image.clone().requires_grad_(), text.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = CyCLIPLoss(tau=0.005)(a, b)
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry():
    assert LOSSES["cyclip"] is CyCLIPLoss and CyCLIPLoss.registry_name == "cyclip"
    assert LOSSES["clip"] is CLIPLoss and CLIPLoss.registry_name == "clip"
    loss = build_loss("cyclip", 10)
    assert (loss.lambda_inmodal, loss.lambda_crossmodal) == (0.25, 0.25)
