"""iSogCLR for bimodal (image-text) contrastive learning (iSogCLR paper, appendix B, Algorithm 2)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from .base import ContrastiveLoss
from .conventions import PRESET, LogMovingAverage, MovingAverageConventions, check_index, resolve_conventions
from .layouts import bimodal_batch
from .loss_table import register_loss
from .moving_average import PerSampleTemperatures, WeightWatch
from .numerics import capped_weights
from .sogclr_bimodal import DirectionReductionT, direction_factor
from .two_views import full_precision, masked_logsumexp


@register_loss(modality="bimodal")
class ISogCLRBimodalLoss(PerSampleTemperatures, WeightWatch, ContrastiveLoss):
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

    ``convention="official"`` sets every switch as the authors' current code (the table of
    :mod:`.conventions`): the sums run over all B columns (the positive's exp(0) in g), s after the
    update and starting at 0, G clipped at 5 per direction, the directions summed; the positive
    weight is ``exact`` in both (their code differentiates h = sim - pos). Options mirror
    :class:`.ISogCLRLoss` (``conventions``, ``tau_grad_clip``, ``positive_weight``).

    State: log s, u, tau per direction, 24 bytes per pair. The weights' exponent is capped at 64
    against float32 overflow; reaching the cap raises :class:`.TrainingDiverged` (:mod:`.moving_average`).

    Args:
        num_samples: number of pairs n.
        rho: KL radius of the RGCL (the paper tunes 5.8-6.4 with B = 512).
        tau_init, tau_min, tau_max: initial value and bounds of every temperature (tau_min is tau_0).
        beta0, beta1, eta: moving-average weight of s, momentum and step size of the temperature update.
        convention: ``"paper"`` or ``"official"``, the preset of every switch.
        conventions: single switches on top of the preset (object or mapping; shared by both directions).
        tau_grad_clip: the ``tau_grad_clip`` switch (clip G(tau) to [-c, c]; None: no clip).
        positive_weight: the ``positive_weight`` switch (``"exact"``: gradient of tau_i log g_i, or ``"one"``).
        direction_reduction: the ``reduction`` switch, ``"mean"`` or ``"sum"`` of the two directions in the
            model gradient and value.
    """

    expects_normalized = True
    knob = "tau_min"
    state_knobs = ("rho", "beta0", "beta1", "eta")  # act from a sample's second visit on (losses/base.py)

    def temperatures(self) -> dict[str, torch.Tensor]:
        return {"tau_image": self.tau_image, "tau_text": self.tau_text}  # (n,) each, the buffers themselves

    def __init__(self, num_samples: int, rho: float = 6.0, tau_init: float = 0.01, tau_min: float = 0.005,
                 tau_max: float = 1.0, beta0: float = 0.9, beta1: float = 0.9, eta: float = 0.01,
                 convention: str = "paper", conventions: MovingAverageConventions | dict | None = None,
                 tau_grad_clip: float | None = PRESET, positive_weight: Literal["exact", "one"] = PRESET,
                 direction_reduction: DirectionReductionT = PRESET) -> None:
        super().__init__()
        if direction_reduction is not PRESET:
            direction_factor(direction_reduction)
        self.conventions = conventions = resolve_conventions(
            "isogclr_bimodal", convention, conventions, tau_grad_clip=tau_grad_clip,
            positive_weight=positive_weight, reduction=direction_reduction)
        if conventions.positive_in_g and conventions.kernel != "hardness":
            raise ValueError("positive_in_g=True needs kernel='hardness' (the positive's term is then exp(0) = 1)")
        self._init_temperatures(rho, tau_init, tau_min, tau_max, beta1, eta)
        self.num_samples = int(num_samples)
        self.direction_reduction = conventions.reduction
        self.direction_factor = direction_factor(conventions.reduction)
        self.s_image = LogMovingAverage(num_samples, beta0, conventions=conventions)
        self.s_text = LogMovingAverage(num_samples, beta0, conventions=conventions)
        self._register_temperatures("_image", num_samples, tau_init)
        self._register_temperatures("_text", num_samples, tau_init)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(image_features))
        cv = self.conventions
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            log_m = math.log(batch.num_negatives)
            g_mask = torch.ones_like(batch.neg_mask) if cv.positive_in_g else batch.neg_mask
            surrogate, value, tops = 0.0, 0.0, []
            directions = (
                (batch.sim, self.s_image, self.tau_image, self.tau_momentum_image),
                (batch.sim.T, self.s_text, self.tau_text, self.tau_momentum_text),
            )
            for sim, s, tau_buffer, momentum_buffer in directions:
                tau = tau_buffer[index].to(sim.dtype)  # (B,)
                # h_{x_i}(t_j) or h_{t_i}(x_j); the similarity kernel drops the positive's shift
                kernel = sim - batch.pos[:, None] if cv.kernel == "hardness" else sim
                scaled = (kernel / tau[:, None]).masked_fill(~g_mask, 0.0)
                log_g = masked_logsumexp(scaled, g_mask) - log_m  # eqs. 15-16
                log_s = s.update(index, log_g[:, None])[:, 0]
                # w_ij = exp(h_ij / tau_i) / ((B - 1) s_i): (tau_i / s_i) grad g_i = sum_j w_ij grad h_ij
                log_w = (scaled - log_m - log_s[:, None]).masked_fill(~batch.neg_mask, -math.inf).detach()
                tops.append(log_w.amax())
                weights = capped_weights(log_w)
                if cv.kernel == "hardness" and cv.positive_weight == "exact":
                    pos_weight = weights.sum(1)
                else:  # the similarity kernel's objective is tau_i log g_i - I_i^T T_i: weight one
                    pos_weight = torch.ones_like(batch.pos)
                surrogate = surrogate + ((weights * sim).sum(1) - pos_weight * batch.pos).mean()
                # (tau_i / s_i) dg_i/dtau_i = -sum_j w_ij h_ij / tau_i (the positive's h = 0 adds nothing)
                grad = -(weights * scaled.detach()).sum(1) + log_s + self.rho
                self._step_temperatures(index, grad, tau, tau_buffer, momentum_buffer)
                direction_value = tau * (log_g + self.rho)
                if cv.kernel == "similarity":
                    direction_value = direction_value - batch.pos
                value = value + direction_value.mean()
            surrogate = self.direction_factor * surrogate
            value = self.direction_factor * value
            top = torch.stack(tops).max()
            self._watch(top + log_m, top, value.detach())
            return surrogate - surrogate.detach() + value.detach()
