"""Spectral contrastive loss (HaoChen et al., NeurIPS 2021, "Provable guarantees for self-supervised
deep learning with spectral contrastive loss")."""

from __future__ import annotations

import torch

from .base import ContrastiveLoss
from .layouts import NegativesT, check_negatives, cross_view_rows, negative_mask
from .loss_table import register_loss
from .two_views import full_precision, two_view_batch


@register_loss(modality="unimodal")
class SpectralContrastiveLoss(ContrastiveLoss):
    r"""L = -2 E_{x, x+}[f(x)^T f(x+)] + E_{x, x'}[(f(x)^T f(x'))^2].

    Mini-batch estimate: the first expectation over the B positive pairs
    (mean of z1_i^T z2_i), the second over the negative pairs:

    * ``negatives="cross"`` (default, the two-view form of the paper: x and x' are
      augmentations of two independent images, one from each view):
      mean over i != j of (z1_i^T z2_j)^2, B(B - 1) pairs;
    * ``negatives="all"``: mean over the 2B anchors and their 2B - 2 negatives.

    The loss is a polynomial of the features; its value is the objective itself.

    Args:
        num_samples: dataset size (unused).
        negatives: ``"cross"`` or ``"all"``.
    """

    expects_normalized = True

    def __init__(self, num_samples: int | None = None, negatives: NegativesT = "cross") -> None:
        super().__init__()
        check_negatives(negatives)
        self.negatives = negatives

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(z1.device):
            b = len(z1)
            if self.negatives == "cross":  # only the (z1, z2) block is needed: one B x B matmul
                rows, pos, _ = cross_view_rows(z1, z2)
                cross = rows[:b]
                squares = cross.square()
                negative_term = (squares.sum() - squares.diagonal().sum()) / (b * (b - 1))
            else:
                batch = two_view_batch(z1, z2)
                pos = batch.pos
                negative_term = batch.sim.square()[negative_mask(batch, "all")].mean()
            return -2.0 * pos[:b].mean() + negative_term
