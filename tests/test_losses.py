"""The three foundation losses against float64 references of the objectives they claim to optimize.

The references are written independently of the library (explicit loops over anchors and
negatives, plain exp/log in float64). With the whole dataset in one batch and fresh
moving averages (first visit, or weight 1 with ``s_timing='updated'``) the estimators are
exact, so gradients must agree to float64 precision.
"""

from __future__ import annotations

import inspect
import io
import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.conventions import MovingAverageConventions
from isogclr.losses.isogclr import ISogCLRLoss
from isogclr.losses.simclr import SimCLRLoss
from isogclr.losses.sogclr import SogCLRLoss

from .loss_helpers import assert_close, grads

B, D = 6, 5


def features(seed: int = 0, b: int = B, d: int = D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    z2 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return z1, z2


def views(z1, z2):
    """anchors[i][a] and the list of negatives of sample i (all views of the other samples)."""
    b = len(z1)
    anchors = [(z1[i], z2[i]) for i in range(b)]
    negatives = [[v for j in range(b) if j != i for v in (z1[j], z2[j])] for i in range(b)]
    return anchors, negatives


def ref_simclr(z1, z2, tau, positive_in_denominator):
    anchors, negatives = views(z1, z2)
    total = 0.0
    for i, (a1, a2) in enumerate(anchors):
        for anchor, positive in ((a1, a2), (a2, a1)):
            terms = [torch.exp(anchor @ z / tau) for z in negatives[i]]
            if positive_in_denominator:
                terms.append(torch.exp(anchor @ positive / tau))
            total = total - torch.log(torch.exp(anchor @ positive / tau) / sum(terms))
    return total / (2 * len(anchors))


def ref_gcl(z1, z2, tau, version):
    """SogCLR's V1 (eq. 5) or V2 (eq. 13) global contrastive objective, batch = dataset."""
    anchors, negatives = views(z1, z2)
    total = 0.0
    for i, (a1, a2) in enumerate(anchors):
        g = [sum(torch.exp(a @ z / tau) for z in negatives[i]) / len(negatives[i]) for a in (a1, a2)]
        if version == "v1":
            total = total + sum(-(a1 @ a2) + tau * torch.log(gv) for gv in g) / 2
        else:
            total = total - a1 @ a2 + tau * torch.log((g[0] + g[1]) / 2)
    return total / len(anchors)


def ref_rgco_terms(z1, z2, tau, rho):
    """F_i(w, tau_i) = tau_i log g_i + tau_i rho for every i (iSogCLR eq. 8 with eq. 11's g_i)."""
    anchors, negatives = views(z1, z2)
    terms = []
    for i, (a1, a2) in enumerate(anchors):
        exps = [torch.exp((a @ z - a @ p) / tau[i]) for a, p in ((a1, a2), (a2, a1)) for z in negatives[i]]
        g = sum(exps) / len(exps)
        terms.append(tau[i] * torch.log(g) + tau[i] * rho)
    return torch.stack(terms)


@pytest.mark.parametrize("positive_in_denominator", [True, False])
def test_simclr_matches_reference(positive_in_denominator):
    z1, z2 = features()
    loss = SimCLRLoss(B, tau=0.2, positive_in_denominator=positive_in_denominator)(z1, z2, torch.arange(B))
    ref = ref_simclr(z1, z2, 0.2, positive_in_denominator)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("s_timing", ["previous", "updated"])
def test_sogclr_first_visit_is_exact(version, s_timing):
    z1, z2 = features(1)
    loss_fn = SogCLRLoss(B, tau=0.3, gamma=0.7, version=version,
                         conventions=MovingAverageConventions(s_timing=s_timing))
    loss = loss_fn(z1, z2, torch.arange(B))
    ref = ref_gcl(z1, z2, 0.3, version)
    torch.testing.assert_close(loss, ref)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_sogclr_fresh_average_is_exact_on_later_steps(version):
    loss_fn = SogCLRLoss(B, tau=0.3, gamma=1.0, version=version,
                         conventions=MovingAverageConventions(s_timing="updated"))
    loss_fn(*features(2), torch.arange(B))  # a first step with other features
    z1, z2 = features(3)
    loss = loss_fn(z1, z2, torch.arange(B))
    ref = ref_gcl(z1, z2, 0.3, version)
    assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


def test_sogclr_previous_uses_stale_estimate():
    """With s_timing='previous' (the paper's eq. 10) the second step weights by u_{t-1}: not exact."""
    loss_fn = SogCLRLoss(B, tau=0.3, gamma=1.0, conventions={"s_timing": "previous"})
    loss_fn(*features(2), torch.arange(B))
    z1, z2 = features(3)
    loss = loss_fn(z1, z2, torch.arange(B))
    ref = ref_gcl(z1, z2, 0.3, "v1")
    diff = max((a - b).abs().max().item() for a, b in zip(grads(loss, z1, z2), grads(ref, z1, z2), strict=True))
    assert diff > 1e-4


def test_sogclr_gamma_one_is_simclr_without_positive_times_tau():
    tau = 0.25
    z1, z2 = features(4)
    sog = SogCLRLoss(B, tau=tau, gamma=1.0)(z1, z2, torch.arange(B))
    sim = SimCLRLoss(B, tau=tau, positive_in_denominator=False)(z1, z2, torch.arange(B))
    g_sog, g_sim = grads(sog, z1, z2), grads(sim, z1, z2)
    assert_close(g_sog, tuple(tau * g for g in g_sim))


def test_sogclr_moving_average_update():
    """u_i <- (1 - gamma) u_i + gamma g_i (eq. 9), stored in log space."""
    gamma, tau = 0.6, 0.5
    loss_fn = SogCLRLoss(B, tau=tau, gamma=gamma, version="v2")
    z1a, z2a = features(5)
    z1b, z2b = features(6)
    loss_fn(z1a, z2a, torch.arange(B))
    loss_fn(z1b, z2b, torch.arange(B))

    def g(z1, z2):
        anchors, negatives = views(z1.detach(), z2.detach())
        return torch.stack([
            sum(torch.exp(a @ z / tau) for a in anchors[i] for z in negatives[i]) / (2 * len(negatives[i]))
            for i in range(B)
        ])

    expected = (1 - gamma) * g(z1a, z2a) + gamma * g(z1b, z2b)
    torch.testing.assert_close(loss_fn.u.log_s[:, 0].double().exp(), expected, rtol=1e-6, atol=0)


def test_first_visit_zero_convention():
    loss_fn = SogCLRLoss(B, tau=0.5, gamma=0.6, version="v2", conventions=MovingAverageConventions(first_visit="zero"))
    fresh = SogCLRLoss(B, tau=0.5, gamma=0.6, version="v2")
    z1, z2 = features(7)
    loss_fn(z1, z2, torch.arange(B))
    fresh(z1, z2, torch.arange(B))
    torch.testing.assert_close(loss_fn.u.log_s, fresh.u.log_s + math.log(0.6))


@pytest.mark.parametrize("positive_weight", ["exact", "one"])
def test_isogclr_first_visit_gradient_is_exact(positive_weight):
    z1, z2 = features(8)
    loss_fn = ISogCLRLoss(B, rho=0.3, tau_init=0.4, tau_min=0.05, tau_max=1.0, positive_weight=positive_weight)
    loss_fn.tau.copy_(torch.linspace(0.2, 0.7, B))
    tau = loss_fn.tau.double().clone()
    loss = loss_fn(z1, z2, torch.arange(B))
    ref_terms = ref_rgco_terms(z1, z2, tau, 0.3)
    torch.testing.assert_close(loss, ref_terms.mean())
    if positive_weight == "exact":
        assert_close(grads(loss, z1, z2), grads(ref_terms.mean(), z1, z2))
    else:  # the positive gets weight 1 instead of sum_z w = g_i / s_i = 1 when fresh: still exact here
        assert_close(grads(loss, z1, z2), grads(ref_terms.mean(), z1, z2))


def test_isogclr_loss_over_tau_divides_each_samples_term_by_its_temperature():
    """``loss_over_tau``: the objective sum_i F_i / tau_i (value and feature gradient, exact on a first visit
    with distinct tau_i), the same temperature update; with the official preset and one tau for all, the
    gradient is the preset's / tau. It fails if a row is scaled by another sample's tau or G is rescaled."""
    z1, z2 = features(8)
    taus = torch.linspace(0.2, 0.7, B)
    after = {}
    for over_tau in (False, True):
        loss_fn = ISogCLRLoss(B, rho=0.3, tau_init=0.4, eta=0.5, beta1=1.0, conventions={"loss_over_tau": over_tau})
        loss_fn.tau.copy_(taus)
        a, b = z1.detach().clone().requires_grad_(), z2.detach().clone().requires_grad_()
        loss = loss_fn(a, b, torch.arange(B))
        terms = ref_rgco_terms(a, b, taus.double(), 0.3)
        expected = (terms / taus.double()).mean() if over_tau else terms.mean()
        torch.testing.assert_close(loss, expected)
        assert_close(grads(loss, a, b), grads(expected, a, b))
        after[over_tau] = loss_fn.tau.clone()
    torch.testing.assert_close(after[True], after[False])
    assert not torch.equal(after[False], taus)  # the temperatures did move
    tau = 0.25  # exact in the float32 buffer
    got = {}
    for over_tau in (False, True):
        loss_fn = ISogCLRLoss(B, tau_init=tau, convention="official", conventions={"loss_over_tau": over_tau})
        a, b = z1.detach().clone().requires_grad_(), z2.detach().clone().requires_grad_()
        got[over_tau] = grads(loss_fn.double()(a, b, torch.arange(B)), a, b)
    assert_close(got[True], tuple(g / tau for g in got[False]))


def test_isogclr_temperature_step_is_projected_gradient_step():
    """tau_i <- clip(tau_i - eta * beta1 * dF_i/dtau_i) on the first step (u_i = 0, s_i = g_i)."""
    rho, eta, beta1 = 0.2, 0.5, 0.8
    z1, z2 = features(9)
    loss_fn = ISogCLRLoss(B, rho=rho, tau_init=0.5, tau_min=0.05, tau_max=1.0, beta1=beta1, eta=eta)
    loss_fn.tau.copy_(torch.tensor([0.05, 0.1, 0.3, 0.5, 0.8, 1.0]))
    tau = loss_fn.tau.double().clone().requires_grad_()
    loss_fn(z1.detach(), z2.detach(), torch.arange(B))
    terms = ref_rgco_terms(z1.detach(), z2.detach(), tau, rho)
    (dtau,) = torch.autograd.grad(terms.sum(), tau)  # dF_i/dtau_i (the terms are separable in tau)
    expected = (tau.detach() - eta * beta1 * dtau).clamp(0.05, 1.0)
    torch.testing.assert_close(loss_fn.tau.double(), expected, rtol=1e-6, atol=1e-7)
    assert (loss_fn.tau_momentum.double() - beta1 * dtau).abs().max() < 1e-6


def test_isogclr_temperature_gradient_matches_closed_form_with_stale_s():
    """G(tau_i) = (tau_i/s_i) dg_i/dtau_i + log s_i + rho with the stored s_i (eq. 13)."""
    rho, eta = 0.3, 1e-3
    loss_fn = ISogCLRLoss(B, rho=rho, tau_init=0.5, beta0=0.5, beta1=1.0, eta=eta, conventions={"s_timing": "previous"})
    loss_fn(*[z.detach() for z in features(10)], torch.arange(B))
    log_s_prev = loss_fn.s.log_s[:, 0].double().clone()
    tau = loss_fn.tau.double().clone()
    z1, z2 = [z.detach() for z in features(11)]
    loss_fn(z1, z2, torch.arange(B))
    tau_var = tau.clone().requires_grad_()
    anchors, negatives = views(z1, z2)
    expected = []
    for i, (a1, a2) in enumerate(anchors):
        exps = torch.stack([torch.exp((a @ z - a @ p) / tau_var[i]) for a, p in ((a1, a2), (a2, a1))
                            for z in negatives[i]])
        (dg,) = torch.autograd.grad(exps.mean(), tau_var)
        expected.append(tau[i] / log_s_prev[i].exp() * dg[i] + log_s_prev[i] + rho)
    expected_tau = (tau - eta * torch.stack(expected)).clamp(0.05, 1.0)
    torch.testing.assert_close(loss_fn.tau.double(), expected_tau, rtol=1e-6, atol=1e-7)


def test_isogclr_temperatures_stay_in_bounds_under_adversarial_inputs():
    loss_fn = ISogCLRLoss(B, rho=5.0, tau_init=0.1, tau_min=0.05, tau_max=0.2, eta=100.0, beta1=1.0)
    for seed in range(5):
        z1, z2 = features(seed, dtype=torch.float32)
        z = z1.detach() if seed % 2 else -z1.detach()  # identical or antipodal views
        loss_fn(z, z if seed % 2 else z2.detach(), torch.arange(B))
        assert loss_fn.tau.min() >= 0.05 and loss_fn.tau.max() <= 0.2
    loss_fn.rho = 0.0
    loss_fn(*[z.detach() for z in features(9, dtype=torch.float32)], torch.arange(B))
    assert loss_fn.tau.min() >= 0.05 and loss_fn.tau.max() <= 0.2


def small_tau_losses(n=B):
    return [
        SimCLRLoss(n, tau=0.005),
        SogCLRLoss(n, tau=0.005, gamma=0.9),
        ISogCLRLoss(n, rho=6.0, tau_init=0.005, tau_min=0.005, tau_max=0.05),
    ]


@pytest.mark.parametrize("case", ["identical", "antipodal", "near_one", "random"])
@pytest.mark.parametrize("loss_index", [0, 1, 2])
def test_tau_0005_is_finite_in_float32(case, loss_index):
    g = torch.Generator().manual_seed(0)
    base = F.normalize(torch.randn(1, D, generator=g), dim=1)
    if case == "identical":
        z1 = base.repeat(B, 1)
        z2 = z1.clone()
    elif case == "antipodal":
        z1 = base.repeat(B, 1)
        z1[::2] *= -1
        z2 = -z1
    elif case == "near_one":
        z1 = F.normalize(base.repeat(B, 1) + 1e-3 * torch.randn(B, D, generator=g), dim=1)
        z2 = F.normalize(base.repeat(B, 1) + 1e-3 * torch.randn(B, D, generator=g), dim=1)
    else:
        z1, z2 = (z.detach() for z in features(0, dtype=torch.float32))
    loss_fn = small_tau_losses()[loss_index]
    for _ in range(3):  # later steps use the stored state
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        loss = loss_fn(a, b, torch.arange(B))
        ga, gb = torch.autograd.grad(loss, (a, b))
        assert torch.isfinite(loss) and torch.isfinite(ga).all() and torch.isfinite(gb).all()
    if isinstance(loss_fn, ISogCLRLoss):
        assert torch.isfinite(loss_fn.tau).all() and torch.isfinite(loss_fn.s.log_s).all()


@pytest.mark.parametrize("loss_index", [0, 1, 2])
def test_bf16_autocast_matches_float32(loss_index):
    """Inside a bf16 autocast region the loss still computes in float32: same value and gradients."""
    z1, z2 = (z.detach().float() for z in features(12, b=16, d=8))
    results = []
    for autocast in (False, True):
        loss_fn = small_tau_losses(16)[loss_index]
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(a, b, torch.arange(16))
        results.append((loss.detach(), *torch.autograd.grad(loss, (a, b))))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("half_dtype", [torch.bfloat16, torch.float16])
def test_half_precision_features_give_close_results(half_dtype):
    """Features produced in bf16/fp16 (as an autocast encoder outputs them), at tau = 0.005 too:
    finite, computed in float32, within half-precision rounding of the float32 result."""
    z1, z2 = (z.detach().float() for z in features(13, b=16, d=8))
    for make in (lambda: SimCLRLoss(16, tau=0.1), lambda: SogCLRLoss(16, tau=0.1),
                 lambda: ISogCLRLoss(16, tau_init=0.1, tau_min=0.05), *[lambda i=i: small_tau_losses(16)[i]
                                                                       for i in range(3)]):
        full = make()(z1, z2, torch.arange(16))
        a, b = z1.to(half_dtype).requires_grad_(), z2.to(half_dtype).requires_grad_()
        half = make()(a, b, torch.arange(16))
        assert half.dtype == torch.float32
        ga, gb = torch.autograd.grad(half, (a, b))
        assert torch.isfinite(ga.float()).all() and torch.isfinite(gb.float()).all()
        torch.testing.assert_close(half, full, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("name", ["sogclr", "isogclr"])
def test_state_survives_save_and_restore(name):
    n = 20
    kwargs = {"tau": 0.2} if name == "sogclr" else {"tau_init": 0.3}
    original = build_loss(name, n, **kwargs)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randperm(n, generator=g)[:B] for _ in range(4)]
    feats = [features(s, dtype=torch.float32) for s in range(4)]
    for idx, (z1, z2) in zip(batches[:2], feats[:2], strict=True):
        original(z1.detach(), z2.detach(), idx)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = build_loss(name, n, **kwargs)
    restored.load_state_dict(torch.load(buffer))
    for idx, (z1, z2) in zip(batches[2:], feats[2:], strict=True):
        outs = []
        for loss_fn in (original, restored):
            a, b = z1.detach().clone().requires_grad_(), z2.detach().clone().requires_grad_()
            loss = loss_fn(a, b, idx)
            outs.append((loss, *torch.autograd.grad(loss, (a, b))))
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)
    for key, value in original.state_dict().items():
        assert torch.equal(value, restored.state_dict()[key]), key


def test_registry_and_errors():
    assert {"simclr", "sogclr", "isogclr"} <= set(LOSSES)
    with pytest.raises(KeyError, match="unknown loss"):
        build_loss("nope", 10)
    with pytest.raises(ValueError, match="tau_min"):
        ISogCLRLoss(10, tau_min=0.5, tau_max=0.1, tau_init=0.3)
    with pytest.raises(ValueError, match="rho"):
        ISogCLRLoss(10, rho=-1.0)
    with pytest.raises(ValueError, match="repeated"):
        SogCLRLoss(10)(*features(0, dtype=torch.float32), torch.tensor([0, 0, 1, 2, 3, 4]))
    with pytest.raises(IndexError, match="out of range"):
        SogCLRLoss(3)(*features(0, dtype=torch.float32), torch.arange(B))


_STATE_KNOB_VALUES = {"gamma": 0.5, "beta0": 0.5, "beta1": 0.5}
# the bimodal defaults (tau_init 0.01, eta 0.01) send every tau_i of these random features to tau_min in one step
_STATE_KNOB_BASE = {"isogclr_bimodal": {"tau_init": 0.5, "eta": 0.001}}


def _grads_at(loss_fn, seed: int):
    z1, z2 = features(seed)
    return grads(loss_fn(z1, z2, torch.arange(B)), z1, z2)


@pytest.mark.parametrize(("name", "knob"), [(name, knob) for name in sorted(LOSSES)
                                            for knob in LOSSES[name].state_knobs])
def test_state_knobs_act_only_from_the_second_visit(name, knob):
    """``state_knobs``: the first visit's gradient is the same at any value (so a study of the knob at one epoch
    compares identical runs, and is refused), the second visit's is not."""
    base = _STATE_KNOB_BASE.get(name, {})
    default = inspect.signature(LOSSES[name]).parameters[knob].default
    other = _STATE_KNOB_VALUES.get(knob) or 2 * base.get(knob, default)  # rho, eta: twice the value
    losses = [build_loss(name, B, **base).double(), build_loss(name, B, **{**base, knob: other}).double()]
    first = [_grads_at(loss_fn, 0) for loss_fn in losses]
    assert_close(first[0], first[1])
    second = [_grads_at(loss_fn, 1) for loss_fn in losses]  # other features: g_i moves, tau_i has moved
    assert max((a - b).abs().max().item() for a, b in zip(second[0], second[1], strict=True)) > 1e-6
