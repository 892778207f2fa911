"""iSogCLR: the robust global contrastive objective with individualized temperatures (Qiu et al., ICML 2023)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from .base import ContrastiveLoss
from .conventions import PRESET, LogMovingAverage, MovingAverageConventions, check_index, resolve_conventions
from .gram import GramGradient, mask_own_views, subtract_positive_weights, two_view_features
from .loss_table import register_loss
from .moving_average import PerSampleTemperatures, WeightWatch
from .numerics import capped_weights_
from .two_views import full_precision


@register_loss(modality="unimodal")
class ISogCLRLoss(PerSampleTemperatures, WeightWatch, ContrastiveLoss):
    r"""Unimodal iSogCLR (Algorithm 1 of the iSogCLR paper), in log space.

    Objective (RGCO, the dual form of RGCL, eqs. 7-8), with both views of x_i as anchors:

    .. math::
        F(w, \tau) = \frac{1}{n}\sum_i \tau_i \log g_i(w, \tau_i) + \tau_i \rho, \qquad
        g_i = \frac{1}{2|N_i|}\sum_{a=1,2}\sum_{z \in N_i} \exp(h_{ia}(z)/\tau_i),

    with h_{ia}(z) = z_a^T z - z_a^T z_{a+} (eq. 3) and N_i the 2B - 2 views of the
    other samples (eq. 11), tau_i in [tau_min, tau_max].

    Per step, for each i in the batch (Algorithm 1):

    * s_i <- (1 - beta0) s_i + beta0 g_i (eq. 12), stored as log s_i;
    * G(tau_i) = (tau_i / s_i) d g_i / d tau_i + log s_i + rho (eq. 13; its 1/n is
      absorbed in eta, see :mod:`.conventions`);
    * u_i <- (1 - beta1) u_i + beta1 G(tau_i);  tau_i <- clip(tau_i - eta u_i, tau_min, tau_max);
    * the returned scalar has gradient 1/B sum_i (tau_i / s_i) grad_w g_i (eq. 14), with the
      temperatures of this step (before their update). Its value is the batch estimate of F.

    The gradient is routed through one backward matmul (:mod:`.gram`); the weights' exponent
    is capped at 64 against float32 overflow with a stale s (:mod:`.numerics`); reaching the cap raises
    :class:`.TrainingDiverged` and ``step_stats()`` reports the largest weight (:mod:`.moving_average`).

    ``convention="official"`` sets every switch as the authors' code (the table of
    :mod:`.conventions`: kernel exp(z_a^T z / tau_i), a per-view s_ia, s after the update, positive
    weight one, G clipped at 3, the views' terms summed); single switches go in ``conventions``
    (``loss_over_tau=True`` divides each sample's term by its tau_i: the feature gradient at SimCLR's scale).

    State: log s, u, tau, 12 bytes per sample (``loss.tau`` is readable, shape (n,)).

    Args:
        num_samples: dataset size n.
        rho: radius of the KL ball of RGCL (eq. 6).
        tau_init, tau_min, tau_max: initial value and bounds of every tau_i (tau_min is tau_0).
        beta0: moving-average weight of s (eq. 12).
        beta1: momentum of the temperature update (Algorithm 1, step 8).
        eta: step size of the temperature update (Algorithm 1, step 9).
        convention: ``"paper"`` or ``"official"``, the preset of every switch.
        conventions: single switches on top of the preset (object or mapping).
        tau_grad_clip: the ``tau_grad_clip`` switch (clip G(tau_i) to [-c, c]; None: no clip).
        positive_weight: the ``positive_weight`` switch (``"exact"`` or ``"one"``).
    """

    expects_normalized = True
    knob = "tau_min"
    state_knobs = ("rho", "beta0", "beta1", "eta")  # act from a sample's second visit on (losses/base.py)

    def temperatures(self) -> dict[str, torch.Tensor]:
        return {"tau": self.tau}  # tau_i (n,), the buffer itself

    def __init__(self, num_samples: int, rho: float = 0.3, tau_init: float = 0.7, tau_min: float = 0.05,
                 tau_max: float = 1.0, beta0: float = 0.9, beta1: float = 0.9, eta: float = 0.01,
                 convention: str = "paper", conventions: MovingAverageConventions | dict | None = None,
                 tau_grad_clip: float | None = PRESET, positive_weight: Literal["exact", "one"] = PRESET) -> None:
        super().__init__()
        self.conventions = resolve_conventions("isogclr", convention, conventions, tau_grad_clip=tau_grad_clip,
                                               positive_weight=positive_weight)
        self._init_temperatures(rho, tau_init, tau_min, tau_max, beta1, eta)
        self.num_samples = int(num_samples)
        self.s = LogMovingAverage(num_samples, beta0, conventions=self.conventions)
        self._register_temperatures("", num_samples, tau_init)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(z1))
        cv = self.conventions
        with full_precision(z1.device):
            feats = two_view_features(z1, z2)  # (2B, d); anchors are rows, row a's positive is (a + B) mod 2B
            b, log_m = len(z1), math.log(2 * len(z1) - 2)
            with torch.no_grad():
                tau = self.tau[index].to(feats.dtype)  # (B,)
                inv_tau = 1.0 / tau.repeat(2)  # (2B,)
                half = (feats[:b] * feats[b:]).sum(1)
                pos = torch.cat([half, half])  # z_a^T z_{a+}
                if cv.kernel == "hardness":
                    # h_ia(z) / tau_i = (z_a^T z - z_a^T z_{a+}) / tau_i (eq. 3) in one matmul; negatives only
                    scaled = torch.addmm((-pos * inv_tau)[:, None], feats * inv_tau[:, None], feats.T)
                else:  # the official code's kernel: z_a^T z / tau_i
                    scaled = (feats * inv_tau[:, None]) @ feats.T
                mask_own_views(scaled, -math.inf)
                log_g_rows = torch.logsumexp(scaled, dim=1) - log_m  # (2B,) per anchor view
                log_g = torch.logaddexp(log_g_rows[:b], log_g_rows[b:]) - math.log(2)  # (B,) eq. 11
                if cv.per_view_s:  # s_ia from the stored s_i, one per view (official code)
                    log_s_views = self.s.update_per_view(index, torch.stack([log_g_rows[:b], log_g_rows[b:]], 1),
                                                         cv.stored_s)
                    log_s_rows = log_s_views.T.reshape(-1)
                    log_s = log_s_views.mean(1)  # mean over the views of log s_ia, in G(tau_i)
                else:
                    log_s = self.s.update(index, log_g[:, None])[:, 0]
                    log_s_rows = log_s.repeat(2)
                scale = 2.0 if cv.reduction == "sum" else 1.0  # the official code sums the two views' terms
                # loss_over_tau (an option): each sample's term over its temperature, F_i / tau_i, so that the
                # feature gradient has SimCLR's scale at tau_i; the temperature update (G) is unchanged
                row_scale = scale * inv_tau if cv.loss_over_tau else torch.full_like(inv_tau, scale)  # (2B,)
                # w_iaz = exp(h/tau_i) / (|N_i| s_i); the mean over 2B rows gives eq. 14's 1/(2|N_i|),
                # folded in the exponent: weights = row_scale w / (2B)
                shift = log_m + log_s_rows + math.log(2 * b) - row_scale.log()
                terms = tau * (log_g + self.rho)
                if cv.kernel == "similarity":  # tau_i log g_i(sim) - z_1^T z_2 is the same objective
                    terms = terms - half
                value = scale * (terms / tau if cv.loss_over_tau else terms).mean()
                row_max = scaled.amax(dim=1)
                self._watch((row_max - log_s_rows).max(), (row_max - shift).max(), value)
                weights = capped_weights_(scaled - shift[:, None], log_g_rows + log_m - shift)
                mask_own_views(scaled, 0.0)
                row_term = (2 * b) / row_scale * torch.linalg.vecdot(weights, scaled)  # sum_z w_iaz k_iaz / tau_i
                if cv.kernel == "hardness" and cv.positive_weight == "exact":
                    pos_weight = weights.sum(1)
                else:  # the similarity kernel's positive term is -z_a^T z_{a+}, weight one
                    pos_weight = row_scale / (2 * b)
                # (tau_i / s_i) dg_i/dtau_i = -1/2 sum_{a,z} w_iaz k_iaz / tau_i; G(tau_i) of eq. 13
                self._step_temperatures(index, -0.5 * (row_term[:b] + row_term[b:]) + log_s + self.rho, tau,
                                        self.tau, self.tau_momentum)
                # gradient w.r.t. the similarities: w on the negatives, -pos_weight on the positive (eq. 14)
                grad_sim = subtract_positive_weights(weights, pos_weight)
            return GramGradient.apply(feats, grad_sim, value)
