"""Bimodal iSogCLR (iSogCLR appendix B, Algorithm 2) against float64 references with explicit loops."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.conventions import MovingAverageConventions
from isogclr.losses.isogclr_bimodal import ISogCLRBimodalLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    text = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return image, text


def g_terms(image, text, tau_image, tau_text):
    """g_{x_i} (eq. 15) and g_{t_i} (eq. 16) with the pairs' own temperatures: batch = dataset."""
    b = len(image)
    g_image, g_text = [], []
    for i in range(b):
        pos = image[i] @ text[i]
        g_image.append(sum(torch.exp((image[i] @ text[j] - pos) / tau_image[i]) for j in range(b) if j != i) / (b - 1))
        g_text.append(sum(torch.exp((image[j] @ text[i] - pos) / tau_text[i]) for j in range(b) if j != i) / (b - 1))
    return torch.stack(g_image), torch.stack(g_text)


def ref_terms(image, text, tau_image, tau_text, rho):
    """Per-pair terms of F_B: tau_i log g_{x_i} + tau'_i log g_{t_i} + (tau_i + tau'_i) rho."""
    g_image, g_text = g_terms(image, text, tau_image, tau_text)
    return tau_image * torch.log(g_image) + tau_text * torch.log(g_text) + (tau_image + tau_text) * rho


def make(**kwargs):
    options = {"rho": 0.5, "tau_init": 0.3, "tau_min": 0.05, "tau_max": 1.0}
    options.update(kwargs)
    loss_fn = ISogCLRBimodalLoss(B, **options)
    loss_fn.tau_image.copy_(torch.linspace(0.2, 0.7, B))
    loss_fn.tau_text.copy_(torch.linspace(0.9, 0.1, B))
    return loss_fn


@pytest.mark.parametrize("positive_weight", ["exact", "one"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_first_visit_gradient_is_exact(positive_weight, reduction):
    image, text = features()
    loss_fn = make(positive_weight=positive_weight, direction_reduction=reduction)
    tau_image, tau_text = loss_fn.tau_image.double().clone(), loss_fn.tau_text.double().clone()
    loss = loss_fn(image, text, torch.arange(B))
    factor = 0.5 if reduction == "mean" else 1.0
    ref = factor * ref_terms(image, text, tau_image, tau_text, 0.5).mean()
    torch.testing.assert_close(loss, ref)
    # fresh s = g: sum_j w_ij = g_i / s_i = 1, so the positive weight 'one' is exact here too
    assert_close(grads(loss, image, text), grads(ref, image, text))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_temperature_step_is_projected_gradient_step(reduction):
    """tau <- clip(tau - eta * beta1 * dF_i/dtau) for images and texts on the first step (u = 0, s = g),
    whatever the reduction of the model gradient."""
    rho, eta, beta1 = 0.2, 0.5, 0.8
    loss_fn = make(rho=rho, eta=eta, beta1=beta1, direction_reduction=reduction)
    loss_fn.tau_image.copy_(torch.tensor([0.05, 0.1, 0.3, 0.5, 0.8, 1.0]))
    tau_image = loss_fn.tau_image.double().clone().requires_grad_()
    tau_text = loss_fn.tau_text.double().clone().requires_grad_()
    image, text = (z.detach() for z in features(1))
    loss_fn(image, text, torch.arange(B))
    terms = ref_terms(image, text, tau_image, tau_text, rho)
    d_image, d_text = torch.autograd.grad(terms.sum(), (tau_image, tau_text))  # separable in each tau
    for got, tau, d, momentum in ((loss_fn.tau_image, tau_image, d_image, loss_fn.tau_momentum_image),
                                  (loss_fn.tau_text, tau_text, d_text, loss_fn.tau_momentum_text)):
        expected = (tau.detach() - eta * beta1 * d).clamp(0.05, 1.0)
        torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-7)
        assert (momentum.double() - beta1 * d).abs().max() < 1e-6


def test_temperature_gradient_matches_closed_form_with_stale_s():
    """G(tau_i) = (tau_i / s_i) dg_i/dtau_i + log s_i + rho with the stored s_i (eqs. 19-20)."""
    rho, eta = 0.3, 1e-3
    loss_fn = make(rho=rho, beta0=0.5, beta1=1.0, eta=eta, conventions={"s_timing": "previous"})
    loss_fn(*[z.detach() for z in features(2)], torch.arange(B))
    log_s = (loss_fn.s_image.log_s[:, 0].double().clone(), loss_fn.s_text.log_s[:, 0].double().clone())
    taus = (loss_fn.tau_image.double().clone(), loss_fn.tau_text.double().clone())
    image, text = (z.detach() for z in features(3))
    loss_fn(image, text, torch.arange(B))
    tau_vars = [t.clone().requires_grad_() for t in taus]
    g_image, g_text = g_terms(image, text, *tau_vars)
    for k, (g, got) in enumerate(((g_image, loss_fn.tau_image), (g_text, loss_fn.tau_text))):
        (dg,) = torch.autograd.grad(g.sum(), tau_vars[k])
        closed = taus[k] / log_s[k].exp() * dg + log_s[k] + rho
        torch.testing.assert_close(got.double(), (taus[k] - eta * closed).clamp(0.05, 1.0), rtol=1e-6, atol=1e-7)


def test_model_gradient_uses_stale_s():
    """Eq. 21 on a second step: (tau_i / s_i) grad g_i with the previous s_i (s_timing='previous')."""
    loss_fn = make(beta0=0.5, eta=0.0, conventions={"s_timing": "previous"})
    loss_fn(*[z.detach() for z in features(4)], torch.arange(B))
    log_s = (loss_fn.s_image.log_s[:, 0].double().clone(), loss_fn.s_text.log_s[:, 0].double().clone())
    taus = (loss_fn.tau_image.double(), loss_fn.tau_text.double())
    image, text = features(5)
    loss = loss_fn(image, text, torch.arange(B))
    g_image, g_text = g_terms(image, text, *taus)
    surrogate = 0.5 * (taus[0] * g_image / log_s[0].exp() + taus[1] * g_text / log_s[1].exp()).mean()
    assert_close(grads(loss, image, text), grads(surrogate, image, text))


def test_exposes_temperatures_and_keeps_them_in_bounds():
    loss_fn = ISogCLRBimodalLoss(20, rho=8.0, tau_init=0.01, tau_min=0.005, tau_max=0.05, eta=100.0, beta1=1.0,
                                 conventions={"s_timing": "updated"})  # "previous" stops at the cap here
    assert loss_fn.tau_image.shape == (20,) and loss_fn.tau_text.shape == (20,)
    for seed in range(4):
        image, text = (z.detach().float() for z in features(seed))
        if seed % 2:
            text = image.clone()  # identical
        else:
            text = -image  # antipodal
        loss_fn(image, text, torch.arange(B) + seed)
        for tau in (loss_fn.tau_image, loss_fn.tau_text):
            assert tau.min() >= 0.005 and tau.max() <= 0.05 and torch.isfinite(tau).all()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    loss_fn = ISogCLRBimodalLoss(B, rho=6.0, tau_init=0.005, tau_min=0.005, tau_max=0.05)
    for _ in range(3):
        image, text = z.clone().requires_grad_(), (sign * z).requires_grad_()
        loss = loss_fn(image, text, torch.arange(B))
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, image, text))
    for buffer in (loss_fn.tau_image, loss_fn.tau_text, loss_fn.s_image.log_s, loss_fn.s_text.log_s):
        assert torch.isfinite(buffer).all()


def test_bf16_autocast_matches_float32():
    image, text = (z.detach().float() for z in features(6, b=16, d=8))
    results = []
    for enabled in (False, True):
        loss_fn = ISogCLRBimodalLoss(16, tau_init=0.005, tau_min=0.005)
        a, b = image.clone().requires_grad_(), text.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = loss_fn(a, b, torch.arange(16))
        results.append((loss.detach(), *grads(loss, a, b), loss_fn.tau_image.clone(), loss_fn.tau_text.clone()))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_state_survives_save_and_restore():
    n = 15
    kwargs = {"tau_init": 0.05, "tau_grad_clip": 3.0, "conventions": MovingAverageConventions(s_timing="updated")}
    original = build_loss("isogclr_bimodal", n, **kwargs)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randperm(n, generator=g)[:B] for _ in range(4)]
    feats = [[z.detach().float() for z in features(s)] for s in range(4)]
    for idx, (i, t) in zip(batches[:2], feats[:2], strict=True):
        original(i, t, idx)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = build_loss("isogclr_bimodal", n, **kwargs)
    restored.load_state_dict(torch.load(buffer))
    for idx, (i, t) in zip(batches[2:], feats[2:], strict=True):
        outs = []
        for loss_fn in (original, restored):
            a, b = i.clone().requires_grad_(), t.clone().requires_grad_()
            loss = loss_fn(a, b, idx)
            outs.append((loss, *grads(loss, a, b)))
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)
    for key, value in original.state_dict().items():
        assert torch.equal(value, restored.state_dict()[key]), key


def test_registry_and_errors():
    assert LOSSES["isogclr_bimodal"] is ISogCLRBimodalLoss and ISogCLRBimodalLoss.expects_normalized
    with pytest.raises(ValueError, match="tau_min"):
        ISogCLRBimodalLoss(10, tau_min=0.5, tau_max=0.1, tau_init=0.3)
    with pytest.raises(ValueError, match="rho"):
        ISogCLRBimodalLoss(10, rho=-1.0)
    with pytest.raises(ValueError, match="positive_weight"):
        ISogCLRBimodalLoss(10, positive_weight="two")
