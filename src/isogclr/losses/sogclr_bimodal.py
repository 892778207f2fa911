"""SogCLR for bimodal (image-text) contrastive learning (SogCLR paper, section 4)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from .base import ContrastiveLoss
from .conventions import PRESET, LogMovingAverage, MovingAverageConventions, check_index, resolve_conventions
from .layouts import bimodal_batch
from .loss_table import register_loss
from .moving_average import WeightWatch
from .numerics import capped_weights
from .two_views import full_precision, masked_logsumexp

DirectionReductionT = Literal["mean", "sum"]


def direction_factor(reduction: str) -> float:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"direction_reduction must be 'mean' or 'sum', got {reduction!r}")
    return 0.5 if reduction == "mean" else 1.0


@register_loss(modality="bimodal")
class SogCLRBimodalLoss(WeightWatch, ContrastiveLoss):
    r"""The global two-way contrastive objective with one moving average per pair and direction.

    .. math::
        F(w) = \frac{c}{n}\sum_i \big[\tau \log g(w; x_i) - I_i^\top T_i
               + \tau \log g(w; t_i) - I_i^\top T_i\big],

    g(w; x_i) = mean_{j != i} exp(I_i^T T_j / tau) over the texts of the other pairs,
    g(w; t_i) = mean_{j != i} exp(I_j^T T_i / tau) over their images (B - 1 negatives each,
    the positive is not in the denominators, normalised by the count as in the unimodal
    :class:`.SogCLRLoss`). c = 1/2 (``direction_reduction="mean"``, default: the two
    directions are averaged, as CLIP does, so that gamma = 1 gives tau x the gradient of
    CLIP without positives) or 1 (``"sum"``: the paper's F).

    Update (section 4): u^I_i <- (1 - gamma) u^I_i + gamma g(w; x_i, B), same for u^T_i,
    stored in log space; the gradient weights each negative similarity by
    exp(s / tau) / ((B - 1) u_i), with the u of :class:`.MovingAverageConventions`
    (``s_timing``: before or after this step's update). SogCLR's section-4 estimator has a
    single -I_i^T T_i term, a typo for the two of F: we use the gradient of F.

    ``convention="official"`` sets every switch as the authors' current code (the table of
    :mod:`.conventions`): g averages exp(h / tau), h = I_i^T T_j - I_i^T T_i, over all B columns
    (the positive's exp(0) included, divided by B - 1), u after the update and starting at 0, the
    directions summed. Single switches go in ``conventions``.

    State: log u^I, log u^T, 8 bytes per pair. The weights' exponent is capped at 64 against
    float32 overflow; reaching the cap raises :class:`.TrainingDiverged` (:mod:`.moving_average`).

    Args:
        num_samples: number of pairs n.
        tau: global temperature.
        gamma: moving-average weight (1.0 = no moving average).
        convention: ``"paper"`` or ``"official"``, the preset of every switch.
        conventions: single switches on top of the preset (object or mapping; shared by both directions).
        direction_reduction: the ``reduction`` switch: ``"mean"`` or ``"sum"`` of the two directions.
    """

    expects_normalized = True
    knob = "tau"
    state_knobs = ("gamma",)  # act from a sample's second visit on (losses/base.py)

    def __init__(self, num_samples: int, tau: float = 0.1, gamma: float = 0.9, convention: str = "paper",
                 conventions: MovingAverageConventions | dict | None = None,
                 direction_reduction: DirectionReductionT = PRESET) -> None:
        super().__init__()
        if direction_reduction is not PRESET:
            direction_factor(direction_reduction)
        self.conventions = conventions = resolve_conventions("sogclr_bimodal", convention, conventions,
                                                             reduction=direction_reduction)
        if conventions.positive_in_g and conventions.kernel != "hardness":
            raise ValueError("positive_in_g=True needs kernel='hardness' (the positive's term is then exp(0) = 1)")
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        self.num_samples = int(num_samples)
        self.tau = float(tau)
        self.direction_reduction = conventions.reduction
        self.direction_factor = direction_factor(conventions.reduction)
        self.u_image = LogMovingAverage(num_samples, gamma, conventions=conventions)
        self.u_text = LogMovingAverage(num_samples, gamma, conventions=conventions)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(image_features))
        cv = self.conventions
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            log_m = math.log(batch.num_negatives)
            g_mask = torch.ones_like(batch.neg_mask) if cv.positive_in_g else batch.neg_mask
            surrogate, value, tops = 0.0, 0.0, []
            for sim, u in ((batch.sim, self.u_image), (batch.sim.T, self.u_text)):
                if cv.kernel == "hardness":  # exp((I_i^T T_j - I_i^T T_i) / tau)
                    logits = (sim - batch.pos[:, None]) / self.tau
                else:
                    logits = sim / self.tau
                log_g = masked_logsumexp(logits, g_mask) - log_m  # (B,)
                log_u = u.update(index, log_g[:, None])[:, 0]
                log_w = (logits - log_m - log_u[:, None]).masked_fill(~batch.neg_mask, -math.inf).detach()
                tops.append(log_w.amax())
                weights = capped_weights(log_w)
                pos_weight = weights.sum(1) if cv.kernel == "hardness" and cv.positive_weight == "exact" else 1.0
                surrogate = surrogate + ((weights * sim).sum(1) - pos_weight * batch.pos).mean()
                if cv.kernel == "hardness":
                    value = value + (self.tau * log_g).mean()
                else:
                    value = value + (self.tau * log_g - batch.pos).mean()
            surrogate = self.direction_factor * surrogate
            value = self.direction_factor * value
            top = torch.stack(tops).max()
            self._watch(top + log_m, top, value.detach())
            return surrogate - surrogate.detach() + value.detach()
