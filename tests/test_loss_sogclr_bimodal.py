"""Bimodal SogCLR (SogCLR paper, section 4) against float64 references with explicit loops."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.clip import CLIPLoss
from isogclr.losses.conventions import MovingAverageConventions
from isogclr.losses.sogclr_bimodal import SogCLRBimodalLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    text = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return image, text


def g_values(image, text, tau):
    """g(w; x_i) and g(w; t_i): means of exp(sim / tau) over the B - 1 negatives of each direction."""
    b = len(image)
    g_image = [sum(torch.exp(image[i] @ text[j] / tau) for j in range(b) if j != i) / (b - 1) for i in range(b)]
    g_text = [sum(torch.exp(image[j] @ text[i] / tau) for j in range(b) if j != i) / (b - 1) for i in range(b)]
    return torch.stack(g_image), torch.stack(g_text)


def ref_two_way_gcl(image, text, tau, factor=0.5):
    """(c/B) sum_i [tau log g(x_i) - I_i.T_i + tau log g(t_i) - I_i.T_i]: the batch is the dataset."""
    g_image, g_text = g_values(image, text, tau)
    pos = (image * text).sum(1)
    return factor * (tau * torch.log(g_image) - pos + tau * torch.log(g_text) - pos).mean()


@pytest.mark.parametrize("s_timing", ["previous", "updated"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_first_visit_is_exact(s_timing, reduction):
    image, text = features()
    loss_fn = SogCLRBimodalLoss(B, tau=0.3, gamma=0.7, conventions=MovingAverageConventions(s_timing=s_timing),
                                direction_reduction=reduction)
    loss = loss_fn(image, text, torch.arange(B))
    ref = ref_two_way_gcl(image, text, 0.3, 0.5 if reduction == "mean" else 1.0)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, image, text), grads(ref, image, text))


def test_gamma_one_is_clip_without_positive_times_tau():
    """gamma = 1, batch = dataset: u = g at every step, the gradient is tau x CLIP's (no positive)."""
    tau = 0.25
    loss_fn = SogCLRBimodalLoss(B, tau=tau, gamma=1.0)
    loss_fn(*[z.detach() for z in features(1)], torch.arange(B))  # a first step with other features
    for s_timing in ("previous", "updated"):
        loss_fn.u_image.conventions = loss_fn.u_text.conventions = MovingAverageConventions(s_timing=s_timing)
        image, text = features(2)
        sog = loss_fn(image, text, torch.arange(B))
        clip = CLIPLoss(tau=tau, positive_in_denominator=False)(image, text, torch.arange(B))
        got, want = grads(sog, image, text), grads(clip, image, text)
        if s_timing == "updated":
            assert_close(got, tuple(tau * g for g in want))
        else:  # 'previous' uses u from the other features: not CLIP
            assert max((a - tau * b).abs().max().item() for a, b in zip(got, want, strict=True)) > 1e-4


def test_moving_averages_follow_their_update():
    """u_i <- (1 - gamma) u_i + gamma g_i for each direction, stored in log space."""
    gamma, tau = 0.6, 0.5
    loss_fn = SogCLRBimodalLoss(B, tau=tau, gamma=gamma)
    (ia, ta), (ib, tb) = ([z.detach() for z in features(s)] for s in (3, 4))
    loss_fn(ia, ta, torch.arange(B))
    loss_fn(ib, tb, torch.arange(B))
    ga, gb = g_values(ia, ta, tau), g_values(ib, tb, tau)
    for k, u in enumerate((loss_fn.u_image, loss_fn.u_text)):
        expected = (1 - gamma) * ga[k] + gamma * gb[k]
        torch.testing.assert_close(u.log_s[:, 0].double().exp(), expected, rtol=1e-6, atol=0)


def test_stale_average_weights_the_gradient():
    """Second step with s_timing='previous': negatives weighted by exp(s / tau) / ((B - 1) u_prev)."""
    tau, gamma = 0.4, 0.5
    loss_fn = SogCLRBimodalLoss(B, tau=tau, gamma=gamma, conventions={"s_timing": "previous"})
    loss_fn(*[z.detach() for z in features(5)], torch.arange(B))
    log_u = (loss_fn.u_image.log_s[:, 0].double().clone(), loss_fn.u_text.log_s[:, 0].double().clone())
    image, text = features(6)
    loss = loss_fn(image, text, torch.arange(B))
    g_image, g_text = g_values(image, text, tau)
    pos = (image * text).sum(1)
    surrogate = 0.5 * (tau * g_image / log_u[0].exp() - pos + tau * g_text / log_u[1].exp() - pos).mean()
    assert_close(grads(loss, image, text), grads(surrogate, image, text))


def test_conventions_are_shared_and_first_visit_zero():
    conventions = MovingAverageConventions(first_visit="zero")
    loss_fn = SogCLRBimodalLoss(B, tau=0.5, gamma=0.6, conventions=conventions)
    assert loss_fn.u_image.conventions is loss_fn.u_text.conventions is loss_fn.conventions
    assert loss_fn.conventions.first_visit == "zero" and loss_fn.conventions.s_timing == "updated"
    fresh = SogCLRBimodalLoss(B, tau=0.5, gamma=0.6)
    image, text = (z.detach() for z in features(7))
    loss_fn(image, text, torch.arange(B))
    fresh(image, text, torch.arange(B))
    torch.testing.assert_close(loss_fn.u_text.log_s, fresh.u_text.log_s + math.log(0.6))


def test_state_survives_save_and_restore():
    n = 15
    original = build_loss("sogclr_bimodal", n, tau=0.2)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randperm(n, generator=g)[:B] for _ in range(4)]
    feats = [[z.detach().float() for z in features(s)] for s in range(4)]
    for idx, (i, t) in zip(batches[:2], feats[:2], strict=True):
        original(i, t, idx)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = build_loss("sogclr_bimodal", n, tau=0.2)
    restored.load_state_dict(torch.load(buffer))
    for idx, (i, t) in zip(batches[2:], feats[2:], strict=True):
        outs = []
        for loss_fn in (original, restored):
            a, b = i.clone().requires_grad_(), t.clone().requires_grad_()
            loss = loss_fn(a, b, idx)
            outs.append((loss, *grads(loss, a, b)))
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    loss_fn = SogCLRBimodalLoss(B, tau=0.005, gamma=0.9)
    for _ in range(3):
        image, text = z.clone().requires_grad_(), (sign * z).requires_grad_()
        loss = loss_fn(image, text, torch.arange(B))
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, image, text))


def test_bf16_autocast_matches_float32():
    image, text = (z.detach().float() for z in features(8, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = image.clone().requires_grad_(), text.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = SogCLRBimodalLoss(16, tau=0.005)(a, b, torch.arange(16))
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["sogclr_bimodal"] is SogCLRBimodalLoss and SogCLRBimodalLoss.expects_normalized
    with pytest.raises(ValueError, match="direction_reduction"):
        SogCLRBimodalLoss(10, direction_reduction="max")
    with pytest.raises(IndexError, match="out of range"):
        SogCLRBimodalLoss(3)(*features(), torch.arange(B))
