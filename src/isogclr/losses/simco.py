"""SimCo: InfoNCE with dual temperatures (Zhang et al., CVPR 2022, "Dual temperature helps
contrastive learning without many negative samples: towards understanding and simplifying MoCo")."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .layouts import LayoutLoss, NegativesT
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp


def softplus_over_sigmoid(v: torch.Tensor) -> torch.Tensor:
    """softplus(v) / sigmoid(v), finite for every v (it tends to 1 as v -> -inf)."""
    cutoff = math.log(torch.finfo(v.dtype).tiny) + 10.0  # below it softplus(v) = exp(v) to working precision
    log_softplus = torch.where(v < cutoff, v, torch.log(F.softplus(v).clamp_min(torch.finfo(v.dtype).tiny)))
    return torch.exp(log_softplus - F.logsigmoid(v))


@register_loss(modality="unimodal")
class SimCoLoss(LayoutLoss):
    r"""The dual-temperature loss of SimCo, symmetrised over the two views.

    SimCo decomposes the InfoNCE gradient of an anchor into an *intra-anchor* part, the
    softmax over the anchor's negatives, and an *inter-anchor* part, the factor
    W_a = 1 - P_a^+ that scales the anchor's whole gradient. With
    P_a^+(\tau) = softmax of the positive among {positive} U negatives at temperature tau,

    .. math::
        L = \frac{1}{2B} \sum_a \mathrm{sg}\Big[\frac{1 - P_a^+(\tau_\beta)}{1 - P_a^+(\tau_\alpha)}\Big]
            \big(-\log P_a^+(\tau_\alpha)\big),

    so the negatives are weighted by the tau_alpha softmax and the anchors by
    1 - P^+(tau_beta). Defaults are the paper's tau_alpha = 0.1, tau_beta = 1.0 (``dt_m = 10``).

    Our reading (see docs/losses.md): the positive is in the softmax (as InfoNCE); SimCo is
    MoCo without momentum encoder or queue, so each query of view a is contrasted with the
    keys of the other view: ``negatives="cross"`` (B - 1 negatives), the loss is the mean of
    the two directions. ``negatives="all"`` uses the 2B - 2 views of the other samples.

    Numerics: with v_a = logsumexp_neg((s - s_+)/tau_alpha), 1 - P^+ = sigmoid(v_a) and
    -log P^+ = softplus(v_a), so the gradient is sg[sigmoid(v_beta)] grad v_alpha and the
    value sigmoid(v_beta) softplus(v_alpha) / sigmoid(v_alpha), both finite in float32.

    Args:
        num_samples: dataset size (unused).
        tau_alpha: intra-anchor temperature (the softmax over negatives).
        tau_beta: inter-anchor temperature (the weight of each anchor).
        negatives: ``"cross"`` or ``"all"``.
    """

    expects_normalized = True

    def __init__(self, num_samples: int | None = None, tau_alpha: float = 0.1, tau_beta: float = 1.0,
                 negatives: NegativesT = "cross") -> None:
        super().__init__(negatives)
        if tau_alpha <= 0 or tau_beta <= 0:
            raise ValueError(f"temperatures must be positive, got {tau_alpha}, {tau_beta}")
        self.tau_alpha, self.tau_beta = float(tau_alpha), float(tau_beta)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(z1.device):
            sim, pos, mask = self.rows(z1, z2)
            hardness = sim - pos[:, None]
            v_alpha = masked_logsumexp(hardness / self.tau_alpha, mask)
            v_beta = masked_logsumexp(hardness / self.tau_beta, mask)
            inter = torch.sigmoid(v_beta).detach()  # 1 - P^+(tau_beta)
            surrogate = (inter * v_alpha).mean()
            value = (inter * softplus_over_sigmoid(v_alpha.detach())).mean()
            return surrogate - surrogate.detach() + value
