"""VICReg: variance-invariance-covariance regularisation (Bardes et al., ICLR 2022)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import compute_dtype, full_precision


def variance_term(z: torch.Tensor, gamma: float, eps: float) -> torch.Tensor:
    """v(Z) = mean_j max(0, gamma - sqrt(Var(z^j) + eps)), unbiased variance (VICReg eq. 1)."""
    std = torch.sqrt(z.var(dim=0) + eps)
    return F.relu(gamma - std).mean()


def covariance_term(z: torch.Tensor) -> torch.Tensor:
    """c(Z) = (1/d) sum_{i != j} C(Z)_ij^2 with C(Z) = (Z - mean)^T (Z - mean) / (B - 1) (VICReg eq. 3)."""
    centered = z - z.mean(dim=0)
    cov = centered.T @ centered / (len(z) - 1)
    return (cov.square().sum() - torch.diagonal(cov).square().sum()) / z.shape[1]


@register_loss(modality="unimodal")
class VICRegLoss(ContrastiveLoss):
    r"""L = lambda s(Z, Z') + mu [v(Z) + v(Z')] / 2 + nu [c(Z) + c(Z')] (VICReg eq. 6).

    * invariance s: mean squared error over all B x d entries (the official code's
      ``F.mse_loss``; the paper's eq. 4 sums over dimensions, a factor d larger);
    * variance v: hinge at gamma = 1 on the per-dimension standard deviation
      sqrt(Var + 1e-4), averaged over dimensions; the two branches are *averaged*
      (official code), not summed as in eq. 6;
    * covariance c: squared off-diagonal entries of the covariance, divided by d, summed
      over the two branches.

    The default coefficients 25 / 25 / 1 are the paper's and were tuned with these
    normalisations. This loss takes the **projector output, not L2-normalised**
    (``expects_normalized`` is False).

    Args:
        num_samples: dataset size (unused).
        sim_coeff, std_coeff, cov_coeff: lambda, mu, nu.
        gamma: target standard deviation.
        eps: added to the variance inside the square root.
    """

    expects_normalized = False

    def __init__(self, num_samples: int | None = None, sim_coeff: float = 25.0, std_coeff: float = 25.0,
                 cov_coeff: float = 1.0, gamma: float = 1.0, eps: float = 1e-4) -> None:
        super().__init__()
        self.sim_coeff, self.std_coeff, self.cov_coeff = float(sim_coeff), float(std_coeff), float(cov_coeff)
        self.gamma, self.eps = float(gamma), float(eps)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        if z1.shape != z2.shape or z1.dim() != 2 or len(z1) < 2:
            raise ValueError(f"z1 and z2 must both be (B, d) with B >= 2; got {tuple(z1.shape)}, {tuple(z2.shape)}")
        with full_precision(z1.device):
            dtype = compute_dtype(z1, z2)
            a, b = z1.to(dtype), z2.to(dtype)
            invariance = F.mse_loss(a, b)
            variance = (variance_term(a, self.gamma, self.eps) + variance_term(b, self.gamma, self.eps)) / 2
            covariance = covariance_term(a) + covariance_term(b)
            return self.sim_coeff * invariance + self.std_coeff * variance + self.cov_coeff * covariance
