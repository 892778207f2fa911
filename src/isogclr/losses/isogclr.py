"""iSogCLR: the robust global contrastive objective with individualized temperatures (Qiu et al., ICML 2023)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .conventions import LogMovingAverage, MovingAverageConventions, check_index
from .gram import GramGradient, mask_own_views, subtract_positive_weights, two_view_features
from .numerics import capped_weights_
from .registry import register_loss
from .two_views import full_precision


@register_loss("isogclr")
class ISogCLRLoss(nn.Module):
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
    is capped at 64 against float32 overflow with a stale s (:mod:`.numerics`, inactive in training).

    State: log s, u, tau, 12 bytes per sample (``loss.tau`` is readable, shape (n,)).

    Args:
        num_samples: dataset size n.
        rho: radius of the KL ball of RGCL (eq. 6).
        tau_init, tau_min, tau_max: initial value and bounds of every tau_i (tau_min is tau_0).
        beta0: moving-average weight of s (eq. 12).
        beta1: momentum of the temperature update (Algorithm 1, step 8).
        eta: step size of the temperature update (Algorithm 1, step 9).
        conventions: which s_i the gradients use and what a first visit does.
        tau_grad_clip: clip G(tau_i) to [-c, c] (off by default; the official code uses 3.0).
        positive_weight: ``"exact"`` (the gradient of tau_i log g_i) or ``"one"`` (official code).
    """

    def __init__(self, num_samples: int, rho: float = 0.3, tau_init: float = 0.7, tau_min: float = 0.05,
                 tau_max: float = 1.0, beta0: float = 0.9, beta1: float = 0.9, eta: float = 0.01,
                 conventions: MovingAverageConventions | None = None, tau_grad_clip: float | None = None,
                 positive_weight: Literal["exact", "one"] = "exact") -> None:
        super().__init__()
        if not 0 < tau_min <= tau_init <= tau_max:
            raise ValueError(f"need 0 < tau_min <= tau_init <= tau_max, got {tau_min}, {tau_init}, {tau_max}")
        if rho < 0:
            raise ValueError(f"rho must be >= 0, got {rho}")
        if not 0 < beta1 <= 1 or eta < 0:
            raise ValueError(f"need 0 < beta1 <= 1 and eta >= 0, got beta1={beta1}, eta={eta}")
        if positive_weight not in ("exact", "one"):
            raise ValueError(f"positive_weight must be 'exact' or 'one', got {positive_weight!r}")
        self.num_samples = int(num_samples)
        self.rho, self.tau_min, self.tau_max = float(rho), float(tau_min), float(tau_max)
        self.beta1, self.eta = float(beta1), float(eta)
        self.tau_grad_clip = tau_grad_clip
        self.positive_weight = positive_weight
        self.s = LogMovingAverage(num_samples, beta0, conventions=conventions)
        self.register_buffer("tau", torch.full((num_samples,), float(tau_init)))
        self.register_buffer("tau_momentum", torch.zeros(num_samples))

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(z1))
        with full_precision(z1.device):
            feats = two_view_features(z1, z2)  # (2B, d); anchors are rows, row a's positive is (a + B) mod 2B
            b, log_m = len(z1), math.log(2 * len(z1) - 2)
            with torch.no_grad():
                tau = self.tau[index].to(feats.dtype)  # (B,)
                inv_tau = 1.0 / tau.repeat(2)  # (2B,)
                half = (feats[:b] * feats[b:]).sum(1)
                pos = torch.cat([half, half])  # z_a^T z_{a+}
                # h_ia(z) / tau_i = (z_a^T z - z_a^T z_{a+}) / tau_i (eq. 3) in one matmul; negatives only
                scaled = torch.addmm((-pos * inv_tau)[:, None], feats * inv_tau[:, None], feats.T)
                mask_own_views(scaled, -math.inf)
                log_g_rows = torch.logsumexp(scaled, dim=1) - log_m  # (2B,) per anchor view
                log_g = torch.logaddexp(log_g_rows[:b], log_g_rows[b:]) - math.log(2)  # (B,) eq. 11
                log_s = self.s.update(index, log_g[:, None])[:, 0]
                # w_iaz = exp(h/tau_i) / (|N_i| s_i); the mean over 2B rows gives eq. 14's 1/(2|N_i|),
                # folded in the exponent: weights = w / (2B)
                shift = log_m + log_s.repeat(2) + math.log(2 * b)
                weights = capped_weights_(scaled - shift[:, None], log_g_rows + log_m - shift)
                mask_own_views(scaled, 0.0)
                row_term = (2 * b) * torch.linalg.vecdot(weights, scaled)  # sum_z w_iaz h_iaz / tau_i
                pos_weight = weights.sum(1) if self.positive_weight == "exact" else torch.full_like(pos, 1 / (2 * b))
                self._update_temperatures(index, row_term, log_s, tau)
                value = (tau * (log_g + self.rho)).mean()
                # gradient w.r.t. the similarities: w on the negatives, -pos_weight on the positive (eq. 14)
                grad_sim = subtract_positive_weights(weights, pos_weight)
            return GramGradient.apply(feats, grad_sim, value)

    @torch.no_grad()
    def _update_temperatures(self, index: torch.Tensor, row_term: torch.Tensor, log_s: torch.Tensor,
                             tau: torch.Tensor) -> None:
        b = len(index)
        # (tau_i / s_i) dg_i/dtau_i = -1/2 sum_{a,z} w_iaz h_iaz / tau_i
        grad = -0.5 * (row_term[:b] + row_term[b:]) + log_s + self.rho
        if self.tau_grad_clip is not None:
            grad = grad.clamp(-self.tau_grad_clip, self.tau_grad_clip)
        momentum = (1 - self.beta1) * self.tau_momentum[index].to(grad.dtype) + self.beta1 * grad
        self.tau_momentum[index] = momentum.to(self.tau_momentum.dtype)
        self.tau[index] = (tau - self.eta * momentum).clamp(self.tau_min, self.tau_max).to(self.tau.dtype)
