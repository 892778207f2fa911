"""The Gram fast path used by SogCLR / iSogCLR / EMC2 and the float32 overflow guard.

SogCLR and iSogCLR route their gradient through :class:`GramGradient` (one backward matmul);
here they are compared, on later steps with stale moving averages, to a straightforward
autograd implementation of the same estimators written independently (masks, surrogate and
``surrogate - sg(surrogate) + value``).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import TrainingDiverged
from isogclr.losses.conventions import MovingAverageConventions
from isogclr.losses.gram import GramGradient, two_view_features
from isogclr.losses.isogclr import ISogCLRLoss
from isogclr.losses.isogclr_bimodal import ISogCLRBimodalLoss
from isogclr.losses.sogclr import SogCLRLoss
from isogclr.losses.sogclr_bimodal import SogCLRBimodalLoss

from .loss_helpers import assert_close, features, grads

B, D = 6, 5


def masks(b):
    eye = torch.eye(2 * b, dtype=torch.bool)
    pos_mask = eye.roll(b, dims=1)
    return pos_mask, ~(eye | pos_mask)


def autograd_sogclr(z1, z2, tau, log_u_anchor):
    """Eq. 10 with given log u per anchor row (v1), through autograd."""
    b = len(z1)
    feats = torch.cat([z1, z2])
    sim = feats @ feats.T
    pos_mask, neg_mask = masks(b)
    pos = sim[pos_mask]
    weights = torch.exp(sim / tau - math.log(2 * b - 2) - log_u_anchor[:, None]).masked_fill(~neg_mask, 0).detach()
    return (-pos + (weights * sim).sum(1)).mean()


def autograd_isogclr(z1, z2, tau, log_s):
    """Eq. 14 (exact positive weight) with given tau_i and log s_i, through autograd."""
    b = len(z1)
    feats = torch.cat([z1, z2])
    sim = feats @ feats.T
    pos_mask, neg_mask = masks(b)
    pos = sim[pos_mask]
    scaled = (sim - pos[:, None]) / tau.repeat(2)[:, None]
    weights = torch.exp(scaled - math.log(2 * b - 2) - log_s.repeat(2)[:, None]).masked_fill(~neg_mask, 0).detach()
    return ((weights * sim).sum(1) - weights.sum(1) * pos).mean()


def test_gram_gradient_is_the_gradient_of_the_weighted_gram_matrix():
    z1, z2 = features()
    g = torch.Generator().manual_seed(1)
    grad_sim = torch.randn(2 * B, 2 * B, generator=g, dtype=torch.float64)
    feats = two_view_features(z1, z2)
    value = torch.tensor(0.7, dtype=torch.float64)
    out = GramGradient.apply(feats, grad_sim, value)
    assert out.item() == 0.7
    reference = (grad_sim * (torch.cat([z1, z2]) @ torch.cat([z1, z2]).T)).sum()
    assert_close(grads(3.0 * out, z1, z2), grads(3.0 * reference, z1, z2))


def log_g_rows(z1, z2, tau_rows, hardness):
    """log of the mean of exp(h / tau) over each anchor row's 2B - 2 negatives."""
    b = len(z1)
    feats = torch.cat([z1, z2]).detach()
    sim = feats @ feats.T
    pos_mask, neg_mask = masks(b)
    logits = (sim - sim[pos_mask][:, None]) if hardness else sim
    logits = (logits / tau_rows[:, None]).masked_fill(~neg_mask, -math.inf)
    return torch.logsumexp(logits, 1) - math.log(2 * b - 2)


def moved(log_prev, log_g, beta):
    """log((1 - beta) exp(log_prev) + beta exp(log_g)); the first visit (-inf) takes log_g."""
    new = torch.logaddexp(log_prev + math.log1p(-beta), log_g + math.log(beta))
    return torch.where(torch.isneginf(log_prev), log_g, new)


@pytest.mark.parametrize("s_timing", ["previous", "updated"])
def test_sogclr_fast_path_matches_autograd_on_stale_steps(s_timing):
    tau, gamma = 0.3, 0.6
    loss_fn = SogCLRLoss(B, tau=tau, gamma=gamma, conventions=MovingAverageConventions(s_timing=s_timing))
    for step in range(3):
        before = loss_fn.u.log_s.double().T.reshape(-1)  # per anchor row, v1
        z1, z2 = features(step)
        loss = loss_fn(z1, z2, torch.arange(B))
        log_g = log_g_rows(z1, z2, torch.full((2 * B,), tau, dtype=torch.float64), hardness=False)
        new = moved(before, log_g, gamma)
        log_u = new if s_timing == "updated" or step == 0 else before
        reference = autograd_sogclr(z1, z2, tau, log_u)
        assert_close(grads(loss, z1, z2), grads(reference, z1, z2))


def test_isogclr_fast_path_matches_autograd_on_stale_steps():
    beta0 = 0.5
    loss_fn = ISogCLRLoss(B, rho=0.3, tau_init=0.4, beta0=beta0, eta=0.05, conventions={"s_timing": "previous"})
    for step in range(3):
        tau = loss_fn.tau.double().clone()
        before = loss_fn.s.log_s[:, 0].double().clone()
        z1, z2 = features(10 + step)
        loss = loss_fn(z1, z2, torch.arange(B))
        rows = log_g_rows(z1, z2, tau.repeat(2), hardness=True)
        log_g = torch.logaddexp(rows[:B], rows[B:]) - math.log(2)
        log_s = moved(before, log_g, beta0) if step == 0 else before
        reference = autograd_isogclr(z1, z2, tau, log_s)
        assert_close(grads(loss, z1, z2), grads(reference, z1, z2))


MAKERS = [
    lambda cv: SogCLRLoss(20, tau=0.005, conventions=cv),
    lambda cv: ISogCLRLoss(20, rho=8.0, tau_init=0.005, tau_min=0.005, tau_max=0.05, eta=100.0, beta1=1.0,
                           conventions=cv),
    lambda cv: SogCLRBimodalLoss(20, tau=0.005, conventions=cv),
    lambda cv: ISogCLRBimodalLoss(20, rho=8.0, tau_init=0.005, tau_min=0.005, tau_max=0.05, eta=100.0, beta1=1.0,
                                  conventions=cv),
]


def alternating_steps(loss_fn):
    """Views identical, then antipodal, at tau = 0.005: every output of each step must be finite."""
    g = torch.Generator().manual_seed(0)
    for step in range(6):
        z = F.normalize(torch.randn(B, D, generator=g), dim=1)
        z1 = z.clone().requires_grad_()
        z2 = (z if step % 2 else -z).clone().requires_grad_()
        loss = loss_fn(z1, z2, torch.arange(B) + step)
        assert torch.isfinite(loss) and all(torch.isfinite(x).all() for x in grads(loss, z1, z2))
        assert loss_fn.step_stats()["max_weight"] < math.exp(64)
    for name, buffer in loss_fn.named_buffers():
        if "tau" in name:
            assert torch.isfinite(buffer).all(), name


@pytest.mark.parametrize("make", MAKERS)
def test_alternating_views_with_a_stale_s_stop_at_the_cap(make):
    """With s_timing='previous' a stale s_i is e^400 below this step's g_i: the weights reach the
    e^64 cap and the loss stops with TrainingDiverged naming the s timing, instead of returning
    capped (wrong) gradients; before that step every output is finite."""
    with pytest.raises(TrainingDiverged, match="s_timing: updated"):
        alternating_steps(make({"s_timing": "previous"}))


@pytest.mark.parametrize("make", MAKERS)
def test_alternating_views_with_the_updated_s_stay_finite(make):
    """With s_timing='updated' (the default) s_i includes beta g_i: the weights stay below 1 / beta per row mean."""
    alternating_steps(make(None))


def test_shape_errors_are_kept():
    with pytest.raises(ValueError, match="shape"):
        SogCLRLoss(10)(torch.ones(4, 3), torch.ones(4, 2), torch.arange(4))
    with pytest.raises(ValueError, match="at least 2"):
        ISogCLRLoss(10)(torch.ones(1, 3), torch.ones(1, 3), torch.arange(1))
