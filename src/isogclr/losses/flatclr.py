"""FlatCLR: SimCLR trained with the FlatNCE loss (Chen et al., 2021, "Simpler, faster, stronger")."""

from __future__ import annotations

import torch

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp, two_view_batch


@register_loss(modality="unimodal")
class FlatCLRLoss(ContrastiveLoss):
    r"""FlatNCE over the 2B views of a batch (SimCLR layout, 2B - 2 negatives per anchor).

    For anchor a with positive a+ and negatives N_a,

    .. math::
        v_a = \log \sum_{k \in N_a} \exp\big((z_a^\top z_k - z_a^\top z_{a^+}) / \tau\big), \qquad
        L = \frac{1}{2B} \sum_a \big(v_a - \mathrm{sg}(v_a)\big).

    FlatNCE's published form is ``exp(v - sg(v)) - 1``; it has the same value (0) and the
    same first derivative, ``grad v_a``. The value is identically 0 (FlatNCE's point: the
    loss value no longer saturates at log K, only its gradient matters); the batch mean of
    ``v_a`` is kept in ``last_logsumexp`` for logging. The gradient equals that of SimCLR
    without the positive in the denominator (the local form of the GCL, SogCLR paper eq. 3).

    Args:
        num_samples: dataset size (unused; uniform registry signature).
        tau: temperature.
    """

    expects_normalized = True

    def __init__(self, num_samples: int | None = None, tau: float = 0.1) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        self.tau = float(tau)
        self.last_logsumexp: torch.Tensor | None = None

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(z1.device):
            batch = two_view_batch(z1, z2)
            logits = (batch.sim - batch.pos[:, None]) / self.tau
            v = masked_logsumexp(logits, batch.neg_mask)  # (2B,)
            self.last_logsumexp = v.detach().mean()
            return (v - v.detach()).mean()
