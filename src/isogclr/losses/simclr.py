"""SimCLR's NT-Xent loss with a global temperature (Chen et al., 2020)."""

from __future__ import annotations

import torch

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp, two_view_batch


@register_loss(modality="unimodal")
class SimCLRLoss(ContrastiveLoss):
    r"""NT-Xent over the 2B views of a batch (SogCLR paper, eq. 1).

    .. math::
        L = \frac{1}{2B}\sum_{a=1}^{2B} -\log
            \frac{\exp(z_a^\top z_{a^+}/\tau)}{\sum_{k \in D_a} \exp(z_a^\top z_k/\tau)}

    where :math:`D_a` holds every view but :math:`a` itself
    (``positive_in_denominator=True``, the standard NT-Xent) or only the 2B - 2
    negatives (``False``, the local form of the GCL in the SogCLR paper's eq. 3).

    Args:
        num_samples: dataset size (unused; every loss takes it for a uniform registry).
        tau: the global temperature.
        positive_in_denominator: include the positive pair in the denominator.
    """

    expects_normalized = True

    def __init__(self, num_samples: int | None = None, tau: float = 0.1,
                 positive_in_denominator: bool = True) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        self.tau = float(tau)
        self.positive_in_denominator = positive_in_denominator

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(z1.device):
            batch = two_view_batch(z1, z2)
            logits = batch.sim / self.tau
            denominator = batch.neg_mask.clone()
            if self.positive_in_denominator:
                denominator[torch.arange(len(logits)), batch.pos_index] = True
            return (masked_logsumexp(logits, denominator) - batch.pos / self.tau).mean()
