"""Each moving-average loss, under ``convention="paper"`` and ``convention="official"``, against a
float64 re-derivation of the algorithm written from its description (the papers' equations, and
the authors' code as described in the table of ``isogclr.losses.conventions``), step by step over
revisited samples and drifting features: the feature gradients, the stored s / u, and for iSogCLR
the temperature momentum and the temperatures.

The official re-derivations state what the authors' current code was measured to do when run
(``docs/losses.md``, "Run against the authors' code"): in particular the SogCLR repository applies
its cross-entropy to the unscaled similarities z_a^T z (only the weights exp(z_a^T z / T) use T), so
its loss is F, not F / tau.

The re-derivations are plain loops over samples, views and negatives; the gradient of each step is
that of a surrogate (weights detached) through explicit dot products, and the paper's G(tau_i) uses
autograd for dg_i/dtau_i. They share nothing with the library but torch. The official code's
numerical shift b_i and its eps = 1e-10 in the denominators are left out (the same numbers up to
1e-10 relative); its "s = g in epoch 0" is a first visit (each sample is visited once per epoch).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import TrainingDiverged
from isogclr.losses.conventions import MovingAverageConventions
from isogclr.losses.isogclr import ISogCLRLoss
from isogclr.losses.isogclr_bimodal import ISogCLRBimodalLoss
from isogclr.losses.sogclr import SogCLRLoss
from isogclr.losses.sogclr_bimodal import SogCLRBimodalLoss

N, B, D, STEPS = 10, 5, 6, 9
TOL = 1e-10


def batches(seed: int = 0):
    """STEPS batches of B distinct indices out of N (so samples are revisited), drifting features."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    drift = torch.randn(2, N, D, generator=g, dtype=torch.float64)
    for step in range(STEPS):
        index = torch.randperm(N, generator=g)[:B]
        noise = 0.3 * torch.randn(2, B, D, generator=g, dtype=torch.float64)
        z = base[:, index] + 0.15 * step * drift[:, index] + noise
        z = F.normalize(z, dim=2)
        yield index, z[0].clone(), z[1].clone()


def grads_of(scalar, *tensors):
    return torch.autograd.grad(scalar, tensors)


# ---------------------------------------------------------------------------------------------
# re-derivations: unimodal (anchors z_a of sample i, a in {1, 2}; negatives: both views of j != i)
# ---------------------------------------------------------------------------------------------


def unimodal_rows(z1, z2):
    """For each sample i and view a: (anchor, positive, list of the 2B - 2 negatives)."""
    views = (z1, z2)
    rows = {}
    for i in range(len(z1)):
        for a in (0, 1):
            negatives = [views[c][j] for c in (0, 1) for j in range(len(z1)) if j != i]
            rows[i, a] = (views[a][i], views[1 - a][i], negatives)
    return rows


def moving(prev, g, beta, first, first_visit):
    if first:
        return g if first_visit == "estimate" else beta * g
    return (1 - beta) * prev + beta * g


class RefUnimodal:
    """SogCLR (fixed tau, no temperature update) or iSogCLR, paper or official, from the descriptions."""

    def __init__(self, kind: str, convention: str, timing: str = "updated", tau=0.2, beta=0.8, rho=0.3, beta1=0.7,
                 eta=0.05, tau_min=0.05, tau_max=1.0, clip=3.0, stored="mean", first_visit="estimate"):
        self.kind, self.convention, self.timing = kind, convention, timing
        self.stored, self.first_visit = stored, first_visit  # official only: the stored s_i, s on a first visit
        self.beta, self.rho, self.beta1, self.eta = beta, rho, beta1, eta
        self.tau_min, self.tau_max, self.clip = tau_min, tau_max, clip
        self.tau = {i: tau for i in range(N)}
        self.mom = {i: 0.0 for i in range(N)}
        self.s = {}  # paper iSogCLR: s_i; paper SogCLR: u_ia per view (key (i, a)); official: one s_i

    def step(self, index, z1, z2):
        z1, z2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        rows = unimodal_rows(z1, z2)
        b, m = len(index), 2 * len(index) - 2
        iso = self.kind == "isogclr"
        surrogate = 0.0
        for i, idx in enumerate(index.tolist()):
            tau = self.tau[idx]
            if self.convention == "paper":
                # g_ia with the paper's kernel: iSogCLR exp(h/tau_i), h = z_a.z - z_a.z_a+; SogCLR exp(z_a.z/tau)
                def g_of(a, t, i=i):
                    x, p, negs = rows[i, a]
                    k = [x @ z - x @ p if iso else x @ z for z in negs]
                    return sum(torch.exp(kz / t) for kz in k) / m
                if iso:  # one s_i of g_i = mean of the views (eq. 11); "previous": s_i^t (eqs. 13-14)
                    t = torch.tensor(tau, dtype=torch.float64, requires_grad=True)
                    g = (g_of(0, t) + g_of(1, t)) / 2
                    first = idx not in self.s
                    new = moving(self.s.get(idx), g.item(), self.beta, first, "estimate")
                    used = new if first or self.timing == "updated" else self.s[idx]
                    self.s[idx] = new
                    surrogate = surrogate + tau * g / used / b  # eq. 14: (tau_i / s_i) grad g_i
                    (dg_dtau,) = torch.autograd.grad(g, t, retain_graph=True)
                    grad_tau = math.log(used) + self.rho + tau / used * dg_dtau.item()  # eq. 13
                    self._temperature(idx, tau, grad_tau, clip=None)
                else:  # SogCLR v1: one u_ia per view (eq. 9); "previous": u^t (eq. 10)
                    for a in (0, 1):
                        g = g_of(a, tau)
                        first = (idx, a) not in self.s
                        new = moving(self.s.get((idx, a)), g.item(), self.beta, first, "estimate")
                        used = new if first or self.timing == "updated" else self.s[idx, a]
                        self.s[idx, a] = new
                        x, p, _ = rows[i, a]
                        surrogate = surrogate + (tau * g / used - x @ p) / (2 * b)
            else:
                # official: per view, exp(z_a.z / tau) / m; s_ia = (1-beta) s_i + beta g_ia (g_ia on a first
                # visit; beta g_ia from s = 0 with first_visit "zero"); s_i <- mean (or sum) of the s_ia;
                # each view's loss sum_z w z_a.z / m - z_a.z_a+ with w = exp(z_a.z / tau) / s_ia (the
                # similarities themselves, not over tau, in both SogCLR and iSogCLR), the views' losses
                # summed, averaged over the batch
                first = idx not in self.s
                s_views, grad_views = [], []
                for a in (0, 1):
                    x, p, negs = rows[i, a]
                    sims = [x @ z for z in negs]
                    g = sum(math.exp(sz.item() / tau) for sz in sims) / m
                    if first:
                        s_ia = g if self.first_visit == "estimate" else self.beta * g
                    else:
                        s_ia = (1 - self.beta) * self.s[idx] + self.beta * g
                    s_views.append(s_ia)
                    w = [math.exp(sz.item() / tau) / s_ia for sz in sims]
                    view_loss = sum(wz * sz for wz, sz in zip(w, sims, strict=True)) / m - x @ p
                    surrogate = surrogate + view_loss / b
                    grad_views.append(math.log(s_ia) + self.rho
                                      - sum(wz * sz.item() / tau for wz, sz in zip(w, sims, strict=True)) / m)
                self.s[idx] = (s_views[0] + s_views[1]) / (2 if self.stored == "mean" else 1)
                if iso:
                    self._temperature(idx, tau, (grad_views[0] + grad_views[1]) / 2, clip=self.clip)
        gz1, gz2 = grads_of(surrogate, z1, z2)
        return gz1, gz2

    def _temperature(self, idx, tau, grad, clip):
        if clip is not None:
            grad = min(max(grad, -clip), clip)
        self.mom[idx] = (1 - self.beta1) * self.mom[idx] + self.beta1 * grad
        self.tau[idx] = min(max(tau - self.eta * self.mom[idx], self.tau_min), self.tau_max)


# ---------------------------------------------------------------------------------------------
# re-derivations: bimodal (image i against the texts j, text i against the images j)
# ---------------------------------------------------------------------------------------------


class RefBimodal:
    def __init__(self, kind: str, convention: str, timing: str = "updated", tau=0.2, beta=0.8, rho=2.0, beta1=0.7,
                 eta=0.05, tau_min=0.05, tau_max=1.0, clip=5.0):
        self.kind, self.convention, self.timing = kind, convention, timing
        self.beta, self.rho, self.beta1, self.eta = beta, rho, beta1, eta
        self.tau_min, self.tau_max, self.clip = tau_min, tau_max, clip
        self.tau = {(d, i): tau for d in ("image", "text") for i in range(N)}
        self.mom = {(d, i): 0.0 for d in ("image", "text") for i in range(N)}
        self.s = {}

    def step(self, index, image, text):
        image, text = image.clone().requires_grad_(), text.clone().requires_grad_()
        b = len(index)
        iso = self.kind == "isogclr"
        surrogate = 0.0
        for direction in ("image", "text"):
            for i, idx in enumerate(index.tolist()):
                key = (direction, idx)
                tau = self.tau[key]
                anchor = image[i] if direction == "image" else text[i]
                others = text if direction == "image" else image
                pos = image[i] @ text[i]
                if self.convention == "paper":
                    # eqs. 15-16: mean over the B - 1 other pairs; iSogCLR exp(h/tau_i), SogCLR exp(sim/tau)
                    t = torch.tensor(tau, dtype=torch.float64, requires_grad=True)
                    terms = [anchor @ others[j] - pos if iso else anchor @ others[j] for j in range(b) if j != i]
                    g = sum(torch.exp(k / t) for k in terms) / (b - 1)
                    first = key not in self.s
                    new = moving(self.s.get(key), g.item(), self.beta, first, "estimate")
                    used = new if first or self.timing == "updated" else self.s[key]
                    self.s[key] = new
                    # c = 1/2: the two directions averaged; SogCLR's F has -I_i.T_i per direction
                    surrogate = surrogate + 0.5 * (tau * g / used - (0.0 if iso else pos)) / b
                    if iso:
                        (dg_dtau,) = torch.autograd.grad(g, t, retain_graph=True)
                        self._temperature(key, tau, math.log(used) + self.rho + tau / used * dg_dtau.item(), None)
                else:
                    # official: h_ij = sim_ij - sim_ii over all B columns (the positive's h = 0 included),
                    # divided by B - 1; s starts at 0 and is read after its update; the loss of the
                    # direction is sum_j w_ij h_ij / (B - 1), w = exp(h / tau) / s; directions summed
                    hs = [anchor @ others[j] - pos for j in range(b)]
                    g = sum(math.exp(h.item() / tau) for h in hs) / (b - 1)
                    s = (1 - self.beta) * self.s.get(key, 0.0) + self.beta * g
                    self.s[key] = s
                    w = [math.exp(h.item() / tau) / s for h in hs]
                    surrogate = surrogate + sum(wj * h for wj, h in zip(w, hs, strict=True)) / (b - 1) / b
                    if iso:
                        spread = sum(wj * h.item() / tau for wj, h in zip(w, hs, strict=True)) / (b - 1)
                        grad = math.log(s) + self.rho - spread
                        self._temperature(key, tau, grad, self.clip)
        return grads_of(surrogate, image, text)

    _temperature = RefUnimodal._temperature


# ---------------------------------------------------------------------------------------------
# the comparison
# ---------------------------------------------------------------------------------------------

HYPER = dict(tau=0.2, beta=0.8, rho=0.3, beta1=0.7, eta=0.05, tau_min=0.05, tau_max=1.0)


def build(name: str, convention: str, timing: str = "updated"):
    """The loss under ``convention`` (with ``s_timing=timing``) and its re-derivation."""
    h, cv = HYPER, {"s_timing": timing}
    if name == "sogclr":
        loss = SogCLRLoss(N, tau=h["tau"], gamma=h["beta"], convention=convention, conventions=cv)
        return loss, RefUnimodal("sogclr", convention, timing)
    if name == "isogclr":
        loss = ISogCLRLoss(N, rho=h["rho"], tau_init=h["tau"], tau_min=h["tau_min"], tau_max=h["tau_max"],
                           beta0=h["beta"], beta1=h["beta1"], eta=h["eta"], convention=convention, conventions=cv)
        return loss, RefUnimodal("isogclr", convention, timing)
    if name == "sogclr_bimodal":
        loss = SogCLRBimodalLoss(N, tau=h["tau"], gamma=h["beta"], convention=convention, conventions=cv)
        return loss, RefBimodal("sogclr", convention, timing)
    loss = ISogCLRBimodalLoss(N, rho=2.0, tau_init=h["tau"], tau_min=h["tau_min"], tau_max=h["tau_max"],
                              beta0=h["beta"], beta1=h["beta1"], eta=h["eta"], convention=convention, conventions=cv)
    return loss, RefBimodal("isogclr", convention, timing)


def library_state(name, loss):
    """{key: value} of the stored s (or u) and, for iSogCLR, momentum and tau, keyed as the reference."""
    out = {}
    if name == "sogclr":
        log_s = loss.u.log_s
        for i in range(N):
            for a in range(log_s.shape[1]):
                if math.isfinite(log_s[i, a].item()):
                    out["s", (i, a) if log_s.shape[1] == 2 else i] = log_s[i, a].exp().item()
    elif name == "isogclr":
        for i in range(N):
            if math.isfinite(loss.s.log_s[i, 0].item()):
                out["s", i] = loss.s.log_s[i, 0].exp().item()
            out["tau", i], out["mom", i] = loss.tau[i].item(), loss.tau_momentum[i].item()
    else:
        states = (loss.u_image, loss.u_text) if name == "sogclr_bimodal" else (loss.s_image, loss.s_text)
        for direction, state in zip(("image", "text"), states, strict=True):
            for i in range(N):
                if math.isfinite(state.log_s[i, 0].item()):
                    out["s", (direction, i)] = state.log_s[i, 0].exp().item()
                if name == "isogclr_bimodal":
                    out["tau", (direction, i)] = getattr(loss, f"tau_{direction}")[i].item()
                    out["mom", (direction, i)] = getattr(loss, f"tau_momentum_{direction}")[i].item()
    return out


def reference_state(name, ref):
    out = {("s", k): v for k, v in ref.s.items()}
    if name.startswith("isogclr"):
        out.update({("tau", k): v for k, v in ref.tau.items()})
        out.update({("mom", k): v for k, v in ref.mom.items()})
    return out


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def in_float64(loss):
    """The loss with float64 state; tau_init re-written in float64 (float32's 0.2 is 0.2 + 3e-9)."""
    loss = loss.double()
    for name, buffer in loss.named_buffers():
        if name.startswith("tau") and not name.startswith("tau_momentum"):
            buffer.fill_(HYPER["tau"])
    return loss


def largest_differences(name: str, convention: str, timing: str = "updated") -> dict[str, float]:
    """Max relative difference of the gradients and of the state over all steps."""
    loss, ref = build(name, convention, timing)
    return compare(name, loss, ref)


def compare(name: str, loss, ref) -> dict[str, float]:
    """Max relative difference of the gradients and of the state of ``loss`` and ``ref`` over all steps."""
    loss = in_float64(loss)
    worst = {"grad": 0.0, "state": 0.0, "grad_abs": 0.0}
    for index, a, b in batches():
        expected = ref.step(index, a, b)
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        got = grads_of(loss(a, b, index), a, b)
        for g, e in zip(got, expected, strict=True):
            scale = e.abs().max().item()
            worst["grad"] = max(worst["grad"], (g - e).abs().max().item() / scale)
            worst["grad_abs"] = max(worst["grad_abs"], (g - e).abs().max().item())
        lib, exp = library_state(name, loss), reference_state(name, ref)
        assert lib.keys() == exp.keys()
        worst["state"] = max([worst["state"]] + [relative(lib[k], exp[k]) for k in exp])
    return worst


LOSS_NAMES = ["sogclr", "isogclr", "sogclr_bimodal", "isogclr_bimodal"]


# the presets (both with the updated s timing, the default) and the paper's literal s timing
SETTINGS = [("paper", "updated"), ("official", "updated"), ("paper", "previous")]


@pytest.mark.parametrize("convention, timing", SETTINGS)
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_preset_matches_its_rederivation(name, convention, timing):
    worst = largest_differences(name, convention, timing)
    assert worst["grad"] < TOL and worst["state"] < TOL, worst


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_presets_differ_from_each_other(name):
    """The comparison can fail: the paper preset does not match the official re-derivation."""
    loss, _ = build(name, "paper")
    _, ref = build(name, "official")
    loss = in_float64(loss)
    differences = []
    for index, a, b in batches():
        expected = ref.step(index, a, b)
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        got = grads_of(loss(a, b, index), a, b)
        differences.append(max((g - e).abs().max().item() / e.abs().max().item()
                               for g, e in zip(got, expected, strict=True)))
    assert max(differences) > 1e-2


def test_sogclr_official_first_step_is_the_cross_entropy_of_unscaled_similarities():
    """The SogCLR repository's loss, on a first visit (u_ia = g_ia: gamma = 1 while the batch's u are 0),
    is sum over the views of [-z_a.z_a+ + sum_z softmax_z(z_a.z / T) z_a.z] (the weights detached), mean
    over the batch: its gradient is 2 T x that of SimCLR's cross-entropy of z.z / T (positive not in the
    denominator, mean over the 2B anchors). Dividing by tau (the preset's earlier reading) gives 2 x."""
    tau = 0.2
    index, z1, z2 = next(batches())
    a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    feats = torch.cat([a, b])
    logits = feats @ feats.T / tau
    rows = torch.arange(2 * B)
    own = (rows[:, None] % B) == (rows[None, :] % B)  # the anchor and its positive
    cross_entropy = (-logits[rows, (rows + B) % (2 * B)] + torch.logsumexp(logits.masked_fill(own, -math.inf), 1))
    expected = [2 * tau * g for g in grads_of(cross_entropy.mean(), a, b)]
    for over_tau, factor in ((False, 1.0), (True, 1 / tau)):
        loss = SogCLRLoss(N, tau=tau, gamma=0.9, convention="official", conventions={"loss_over_tau": over_tau})
        if not over_tau:
            assert loss.conventions == SogCLRLoss(N, tau=tau, convention="official").conventions
        a2, b2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        got = grads_of(loss.double()(a2, b2, index), a2, b2)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, factor * e, rtol=TOL, atol=TOL * e.abs().max().item())


def test_isogclr_repository_sogclr_copy():
    """The iSogCLR repository's copy of SogCLR (unimodal ``SogCLR_Loss``) stores the sum of the views'
    u_ia, starts u at 0 and takes the unscaled similarities: ``stored_s="sum"``, ``first_visit="zero"``
    on top of the official preset (measured against its code: docs/losses.md)."""
    h = HYPER
    loss = SogCLRLoss(N, tau=h["tau"], gamma=h["beta"], convention="official",
                      conventions={"stored_s": "sum", "first_visit": "zero"})
    ref = RefUnimodal("sogclr", "official", stored="sum", first_visit="zero")
    worst = compare("sogclr", loss, ref)
    assert worst["grad"] < TOL and worst["state"] < TOL, worst
    # and the reference tells the copy from the preset
    loss = SogCLRLoss(N, tau=h["tau"], gamma=h["beta"], convention="official")
    assert compare("sogclr", loss, RefUnimodal("sogclr", "official", stored="sum", first_visit="zero"))["grad"] > 1e-2


@pytest.mark.parametrize("timing", ["updated", "previous"])
def test_sogclr_v2_paper_rederivation(timing):
    """SogCLR v2 (eq. 13): one u_i of the view-averaged g_i, weight tau / u_i on grad of the average
    (the official code has no v2: ``convention="official"`` with v2 is an error, tested below)."""
    loss = SogCLRLoss(N, tau=0.2, gamma=0.8, version="v2", conventions={"s_timing": timing}).double()
    u = {}
    for index, z1, z2 in batches():
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        rows = unimodal_rows(a, b)
        m, surrogate = 2 * B - 2, 0.0
        for i, idx in enumerate(index.tolist()):
            g = sum(sum(torch.exp(x @ z / 0.2) for z in negs) / m for x, _, negs in (rows[i, 0], rows[i, 1])) / 2
            first = idx not in u
            new = g.item() if first else 0.2 * u[idx] + 0.8 * g.item()
            used = new if first or timing == "updated" else u[idx]
            u[idx] = new
            surrogate = surrogate + (0.2 * g / used - rows[i, 0][0] @ rows[i, 0][1]) / B
        expected = grads_of(surrogate, a, b)
        a2, b2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        got = grads_of(loss(a2, b2, index), a2, b2)
        for g_, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g_, e, rtol=TOL, atol=TOL * e.abs().max().item())
        for idx, value in u.items():
            assert relative(loss.u.log_s[idx, 0].exp().item(), value) < TOL


# ---------------------------------------------------------------------------------------------
# the presets and the switches
# ---------------------------------------------------------------------------------------------


def test_official_presets_state_the_authors_choices():
    iso = MovingAverageConventions.preset("official", loss="isogclr")
    assert (iso.s_timing, iso.kernel, iso.per_view_s, iso.positive_weight, iso.tau_grad_clip, iso.reduction) == (
        "updated", "similarity", True, "one", 3.0, "sum")
    bi = MovingAverageConventions.preset("official", loss="isogclr_bimodal")
    assert (bi.positive_in_g, bi.positive_weight, bi.first_visit, bi.tau_grad_clip, bi.reduction) == (
        True, "exact", "zero", 5.0, "sum")
    sog = MovingAverageConventions.preset("official", loss="sogclr")
    assert (sog.per_view_s, sog.stored_s, sog.loss_over_tau, sog.reduction) == (True, "mean", False, "sum")
    paper = MovingAverageConventions.preset("paper", loss="isogclr")
    assert (paper.s_timing, paper.kernel, paper.per_view_s, paper.positive_weight, paper.tau_grad_clip) == (
        "updated", "hardness", False, "exact", None)


def test_single_switch_overrides_the_preset():
    loss = ISogCLRLoss(N, convention="official", conventions={"s_timing": "previous"})
    assert loss.conventions.s_timing == "previous" and loss.conventions.kernel == "similarity"
    assert ISogCLRLoss(N).conventions == MovingAverageConventions.preset("paper", loss="isogclr")
    loss = ISogCLRLoss(N, tau_grad_clip=None, convention="official")
    assert loss.conventions.tau_grad_clip is None


@pytest.mark.parametrize("kwargs, match", [
    ({"convention": "offical"}, "convention must be 'paper' or 'official', got 'offical'"),
    ({"conventions": {"s_timing": "later"}}, "s_timing must be 'previous' or 'updated', got 'later'"),
    ({"conventions": {"positive_in_g": True}}, "positive_in_g=True does not apply to loss 'isogclr'"),
    ({"conventions": {"stored_s": "sum"}}, "stored_s='sum' needs per_view_s=True"),
    ({"tau_grad_clip": -1.0}, "tau_grad_clip must be a positive number or None"),
    ({"conventions": {"tau_grad_clip": 2.0}, "tau_grad_clip": 3.0}, "tau_grad_clip is given twice"),
])
def test_bad_switches_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ISogCLRLoss(N, **kwargs)


def test_sogclr_switches_that_do_not_apply():
    with pytest.raises(ValueError, match="tau_grad_clip=3.0 does not apply to loss 'sogclr'"):
        SogCLRLoss(N, conventions={"tau_grad_clip": 3.0})
    with pytest.raises(ValueError, match="per_view_s=True is the official code's form of version 'v1'"):
        SogCLRLoss(N, version="v2", convention="official")


def test_stored_sum_grows_as_the_defect_predicts():
    """stored_s='sum' (the iSogCLR repository's SogCLR copy): with fixed features the slot settles at
    gamma / (2 gamma - 1) x (g_1 + g_2), 1.125 x at gamma = 0.9; the mean settles at (g_1 + g_2) / 2."""
    index, z1, z2 = next(batches())
    summed = SogCLRLoss(N, tau=0.2, gamma=0.9, convention="official", conventions={"stored_s": "sum"}).double()
    mean = SogCLRLoss(N, tau=0.2, gamma=0.9, convention="official").double()
    for _ in range(200):
        summed(z1, z2, index), mean(z1, z2, index)
    ratio = (summed.u.log_s[index, 0] - mean.u.log_s[index, 0]).exp()  # sum / ((g_1 + g_2) / 2)
    torch.testing.assert_close(ratio, torch.full_like(ratio, 2 * 0.9 / (2 * 0.9 - 1)), rtol=1e-9, atol=0)


# ---------------------------------------------------------------------------------------------
# step_stats and divergence
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOSS_NAMES)
@pytest.mark.parametrize("convention", ["paper", "official"])
def test_step_stats_reports_the_largest_weight(name, convention):
    """max_weight = max over the batch of exp(k_iz / tau_i) / s_i, recomputed from the state."""
    loss, _ = build(name, convention)
    loss = loss.double()
    for index, a, b in batches():
        loss(a, b, index)
        assert loss.step_stats()["max_weight"] > 0
    # with s_i = g_i (first visit, estimate) the weights average 1 over each row: max >= 1
    fresh, _ = build(name, "paper")
    index, a, b = next(batches())
    fresh.double()(a, b, index)
    assert fresh.step_stats()["max_weight"] >= 1.0 - 1e-12


def test_step_stats_matches_an_explicit_weight():
    loss = SogCLRLoss(N, tau=0.2, gamma=0.8).double()
    index, z1, z2 = next(batches())
    loss(z1, z2, index)
    feats = torch.cat([z1, z2])
    sim = feats @ feats.T / 0.2
    weights = []
    for r in range(2 * B):
        i = r % B
        negs = [c for c in range(2 * B) if c % B != i]
        g = torch.exp(sim[r, negs]).mean()  # first visit: u_ia = g_ia
        weights.append((torch.exp(sim[r, negs]) / g).max())
    assert relative(loss.step_stats()["max_weight"], max(weights).item()) < 1e-12


def test_stale_s_raises_training_diverged_with_the_knob():
    """Previous timing, tau_min far below the current tau: the stale s_i of the first visit leaves
    the weights at e^64 after tau_i falls; the error names the s timing and tau_min."""
    loss = ISogCLRLoss(N, rho=8.0, tau_init=0.5, tau_min=0.005, tau_max=0.5, eta=1.0, beta1=1.0,
                       conventions={"s_timing": "previous"}).double()
    index, z1, z2 = next(batches())
    message = r"s_timing: updated\} \(s_i then includes this step's g_i\) or raise tau_min"
    with pytest.raises(TrainingDiverged, match=message):
        for _ in range(50):
            loss(z1, z2, index)
    updated = ISogCLRLoss(N, rho=8.0, tau_init=0.5, tau_min=0.005, tau_max=0.5, eta=1.0, beta1=1.0,
                          conventions={"s_timing": "updated"}).double()
    for _ in range(50):
        updated(z1, z2, index)
    assert updated.step_stats()["max_weight"] < math.exp(64)
