"""iSogCLR for bimodal (image-text) contrastive learning (iSogCLR paper, appendix B, Algorithm 2)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .conventions import LogMovingAverage, MovingAverageConventions, check_index
from .layouts import bimodal_batch
from .numerics import capped_weights
from .registry import register_loss
from .sogclr_bimodal import DirectionReductionT, direction_factor
from .two_views import full_precision, masked_logsumexp


@register_loss("isogclr_bimodal")
class ISogCLRBimodalLoss(nn.Module):
    r"""Bimodal iSogCLR (Algorithm 2 of the iSogCLR paper), in log space.

    Objective (bimodal RGCO, appendix B):

    .. math::
        F_B = \frac{c}{n}\sum_i \Big[(\tau_i + \tau'_i)\rho
              + \tau_i \log \mathbb{E}_{t \in \mathcal{T}_i^-} e^{h_{x_i}(t)/\tau_i}
              + \tau'_i \log \mathbb{E}_{x \in \mathcal{I}_i^-} e^{h_{t_i}(x)/\tau'_i}\Big],

    h_{x_i}(t_j) = I_i^T T_j - I_i^T T_i, h_{t_i}(x_j) = I_j^T T_i - I_i^T T_i; the
    expectations run over the B - 1 other texts / images of the batch (eqs. 15-16). tau_i
    (``tau_image``) and tau'_i (``tau_text``) lie in [tau_min, tau_max]. c = 1/2
    (``direction_reduction="mean"``, default, as the unimodal :class:`.ISogCLRLoss` whose
    g_i averages the two anchor views and as CLIP) or 1 (``"sum"``: eq. 21 as written).
    c scales the model gradient only, not the temperature updates.

    Per step, for each pair i of the batch and each direction (v: image, t: text):

    * s_i <- (1 - beta0) s_i + beta0 g_i (eqs. 17-18), stored as log s_i;
    * G(tau_i) = (tau_i / s_i) dg_i/dtau_i + log s_i + rho (eqs. 19-20; the 1/n is absorbed
      in eta, see :mod:`.conventions`);
    * u_i <- (1 - beta1) u_i + beta1 G(tau_i);  tau_i <- clip(tau_i - eta u_i, tau_min, tau_max);
    * the returned scalar has gradient c/B sum_i [(tau_i/s_i) grad g_{x_i} + (tau'_i/s'_i) grad g_{t_i}]
      (eq. 21) with this step's temperatures; its value is the batch estimate of F_B.

    Options mirror :class:`.ISogCLRLoss` (``conventions``, ``tau_grad_clip``,
    ``positive_weight``). State: log s, u, tau per direction, 24 bytes per pair. The weights'
    exponent is capped at 64 against float32 overflow with a stale s (:mod:`.numerics`).

    Args:
        num_samples: number of pairs n.
        rho: KL radius of the RGCL (the paper tunes 5.8-6.4 with B = 512).
        tau_init, tau_min, tau_max: initial value and bounds of every temperature (tau_min is tau_0).
        beta0, beta1, eta: moving-average weight of s, momentum and step size of the temperature update.
        conventions: which s_i the gradients use and what a first visit does (shared by both directions).
        tau_grad_clip: clip G(tau) to [-c, c] (off by default).
        positive_weight: ``"exact"`` (gradient of tau_i log g_i) or ``"one"`` (official code).
        direction_reduction: ``"mean"`` or ``"sum"`` of the two directions in the model gradient and value.
    """

    expects_normalized = True

    def __init__(self, num_samples: int, rho: float = 6.0, tau_init: float = 0.01, tau_min: float = 0.005,
                 tau_max: float = 1.0, beta0: float = 0.9, beta1: float = 0.9, eta: float = 0.01,
                 conventions: MovingAverageConventions | None = None, tau_grad_clip: float | None = None,
                 positive_weight: Literal["exact", "one"] = "exact",
                 direction_reduction: DirectionReductionT = "mean") -> None:
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
        self.direction_factor = direction_factor(direction_reduction)
        self.direction_reduction = direction_reduction
        conventions = conventions or MovingAverageConventions()
        self.s_image = LogMovingAverage(num_samples, beta0, conventions=conventions)
        self.s_text = LogMovingAverage(num_samples, beta0, conventions=conventions)
        self.register_buffer("tau_image", torch.full((num_samples,), float(tau_init)))
        self.register_buffer("tau_text", torch.full((num_samples,), float(tau_init)))
        self.register_buffer("tau_momentum_image", torch.zeros(num_samples))
        self.register_buffer("tau_momentum_text", torch.zeros(num_samples))

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(image_features))
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            log_m = math.log(batch.num_negatives)
            surrogate, value = 0.0, 0.0
            directions = (
                (batch.sim, self.s_image, self.tau_image, self.tau_momentum_image),
                (batch.sim.T, self.s_text, self.tau_text, self.tau_momentum_text),
            )
            for sim, s, tau_buffer, momentum_buffer in directions:
                tau = tau_buffer[index].to(sim.dtype)  # (B,)
                hardness = sim - batch.pos[:, None]  # h_{x_i}(t_j) or h_{t_i}(x_j)
                scaled = (hardness / tau[:, None]).masked_fill(~batch.neg_mask, 0.0)
                log_g = masked_logsumexp(scaled, batch.neg_mask) - log_m  # eqs. 15-16
                log_s = s.update(index, log_g[:, None])[:, 0]
                # w_ij = exp(h_ij / tau_i) / ((B - 1) s_i): (tau_i / s_i) grad g_i = sum_j w_ij grad h_ij
                weights = capped_weights(scaled - log_m - log_s[:, None]).masked_fill(~batch.neg_mask, 0.0)
                pos_weight = weights.sum(1) if self.positive_weight == "exact" else torch.ones_like(batch.pos)
                surrogate = surrogate + ((weights * sim).sum(1) - pos_weight * batch.pos).mean()
                self._update_temperatures(index, weights, scaled.detach(), log_s, tau, tau_buffer, momentum_buffer)
                value = value + (tau * (log_g + self.rho)).mean()
            surrogate = self.direction_factor * surrogate
            value = self.direction_factor * value
            return surrogate - surrogate.detach() + value.detach()

    @torch.no_grad()
    def _update_temperatures(self, index: torch.Tensor, weights: torch.Tensor, scaled: torch.Tensor,
                             log_s: torch.Tensor, tau: torch.Tensor, tau_buffer: torch.Tensor,
                             momentum_buffer: torch.Tensor) -> None:
        # (tau_i / s_i) dg_i/dtau_i = -sum_j w_ij h_ij / tau_i
        grad = -(weights * scaled).sum(1) + log_s + self.rho
        if self.tau_grad_clip is not None:
            grad = grad.clamp(-self.tau_grad_clip, self.tau_grad_clip)
        momentum = (1 - self.beta1) * momentum_buffer[index].to(grad.dtype) + self.beta1 * grad
        momentum_buffer[index] = momentum.to(momentum_buffer.dtype)
        tau_buffer[index] = (tau - self.eta * momentum).clamp(self.tau_min, self.tau_max).to(tau_buffer.dtype)
