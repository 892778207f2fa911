"""SiMo: the EqCo-corrected InfoNCE used by SiMo (Zhu et al., 2020, "EqCo: equivalent rules for
self-supervised contrastive learning"), the small-batch baseline of SogCLR's Table 6."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .layouts import LayoutLoss, NegativesT, num_negatives
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp


@register_loss(modality="unimodal")
class SiMoLoss(LayoutLoss):
    r"""InfoNCE with the negatives' sum rescaled by alpha / K (EqCo's equivalence rule).

    .. math::
        L_a = -\log \frac{\exp(z_a^\top z_{a^+}/\tau)}
              {\exp(z_a^\top z_{a^+}/\tau) + \frac{\alpha}{K} \sum_{k \in N_a} \exp(z_a^\top z_k/\tau)}
            = \mathrm{softplus}\Big(\log\frac{\alpha}{K}
              + \log\sum_{k \in N_a} e^{(z_a^\top z_k - z_a^\top z_{a^+})/\tau}\Big)

    K = |N_a| is the number of negatives actually used, alpha the number the loss is made
    equivalent to (SogCLR Table 6: alpha = 65536, "a constant margin to offset the
    similarity score between positive pairs": the rule equals shifting the positive logit
    by -tau log(alpha / K)). With alpha = K this is InfoNCE with the positive in the
    denominator.

    Our reading (see docs/losses.md): SiMo is a simplified MoCo without queue, whose
    negatives are the batch's keys; each query of view a is contrasted with the keys of
    the other view (``negatives="cross"``, K = B - 1), symmetrised over the two views
    (``symmetric=True``: mean over the 2B anchors). SiMo's keys come from a momentum
    encoder: the trainer passes the key view already detached and calls the loss once per
    direction with ``symmetric=False`` (rows = z1 queries against z2 keys only).

    Args:
        num_samples: dataset size (unused).
        tau: temperature.
        alpha: the EqCo constant.
        negatives: ``"cross"`` (K = B - 1) or ``"all"`` (K = 2B - 2).
        symmetric: average both directions (True) or use the z1 queries only (False).
    """

    expects_normalized = True

    def __init__(self, num_samples: int | None = None, tau: float = 0.1, alpha: float = 65536.0,
                 negatives: NegativesT = "cross", symmetric: bool = True) -> None:
        super().__init__(negatives)
        if tau <= 0 or alpha <= 0:
            raise ValueError(f"tau and alpha must be positive, got {tau}, {alpha}")
        self.tau, self.alpha = float(tau), float(alpha)
        self.symmetric = symmetric

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(z1.device):
            sim, pos, mask = self.rows(z1, z2)
            b = len(z1)
            log_ratio = math.log(self.alpha / num_negatives(b, self.negatives))
            v = masked_logsumexp((sim - pos[:, None]) / self.tau, mask)
            losses = F.softplus(log_ratio + v)
            if not self.symmetric:
                losses = losses[:b]
            return losses.mean()
