"""Barlow Twins: redundancy reduction between two views (Zbontar et al., ICML 2021)."""

from __future__ import annotations

import torch

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import compute_dtype, full_precision


def standardize(z: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-dimension batch standardisation, as a BatchNorm1d without affine in training mode
    (biased variance, ``eps`` inside the square root)."""
    centered = z - z.mean(dim=0, keepdim=True)
    return centered / torch.sqrt(centered.square().mean(dim=0, keepdim=True) + eps)


@register_loss(modality="unimodal")
class BarlowTwinsLoss(ContrastiveLoss):
    r"""L = sum_i (1 - C_ii)^2 + lambda sum_{i != j} C_ij^2 (Barlow Twins eq. 1).

    C = (1/B) sum_b zn1_b zn2_b^T is the cross-correlation matrix (d x d) of the two views'
    features, each standardised per dimension over the batch (the official code's
    ``BatchNorm1d(affine=False)``: biased variance, eps 1e-5 inside the square root).
    Defaults: lambda = 0.0051 (the official value; the paper writes 5e-3).

    This loss takes the **projector output, not L2-normalised** (``expects_normalized``
    is False): the caller passes the raw (B, d) features of the two views.

    Args:
        num_samples: dataset size (unused).
        lambd: weight of the redundancy-reduction (off-diagonal) term.
        eps: added to the per-dimension variance.
    """

    expects_normalized = False

    def __init__(self, num_samples: int | None = None, lambd: float = 0.0051, eps: float = 1e-5) -> None:
        super().__init__()
        if lambd < 0:
            raise ValueError(f"lambd must be >= 0, got {lambd}")
        self.lambd, self.eps = float(lambd), float(eps)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        if z1.shape != z2.shape or z1.dim() != 2 or len(z1) < 2:
            raise ValueError(f"z1 and z2 must both be (B, d) with B >= 2; got {tuple(z1.shape)}, {tuple(z2.shape)}")
        with full_precision(z1.device):
            dtype = compute_dtype(z1, z2)
            a, b = standardize(z1.to(dtype), self.eps), standardize(z2.to(dtype), self.eps)
            c = a.T @ b / len(a)
            diag = torch.diagonal(c)
            on_diag = (1.0 - diag).square().sum()
            off_diag = c.square().sum() - diag.square().sum()
            return on_diag + self.lambd * off_diag
