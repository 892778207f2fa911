"""CLIP's symmetric InfoNCE over image-text pairs (Radford et al., 2021)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import ContrastiveLoss
from .layouts import BimodalBatch, bimodal_batch
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp


def two_way_infonce(batch: BimodalBatch, inv_tau: torch.Tensor, positive_in_denominator: bool) -> torch.Tensor:
    """(B,) per-pair mean of the image-to-text and text-to-image InfoNCE terms (scalar ``inv_tau``)."""
    image = directional_infonce(batch.sim, batch.pos, inv_tau, batch.neg_mask, positive_in_denominator)
    text = directional_infonce(batch.sim.T, batch.pos, inv_tau, batch.neg_mask, positive_in_denominator)
    return (image + text) / 2


def directional_infonce(sim: torch.Tensor, pos: torch.Tensor, inv_tau: torch.Tensor, neg_mask: torch.Tensor,
                        positive_in_denominator: bool) -> torch.Tensor:
    """Row-wise -log softmax of the diagonal: logsumexp_j(sim_ij / tau_i) - sim_ii / tau_i.

    ``inv_tau`` is a scalar or a (B,) vector of per-row inverse temperatures.
    """
    inv = inv_tau if inv_tau.dim() == 0 else inv_tau.reshape(-1, 1)
    logits = sim * inv
    mask = torch.ones_like(neg_mask) if positive_in_denominator else neg_mask
    return masked_logsumexp(logits, mask) - pos * inv.reshape(-1)


@register_loss(modality="bimodal")
class CLIPLoss(ContrastiveLoss):
    r"""CLIP: L = (1/2B) sum_i [ -log softmax_j(I_i.T_j / tau)_i - log softmax_j(I_j.T_i / tau)_i ].

    The mean of the image-to-text and text-to-image cross-entropies (CLIP's pseudo-code).
    The temperature is fixed (``learn_tau=False``) or a learnable global parameter
    (``learn_tau=True``): ``log_tau`` is an ``nn.Parameter`` (so the optimizer of the loss's
    parameters trains it, as CLIP trains its logit scale = -log tau) and the temperature is
    clamped to [tau_min, tau_max] inside the forward (CLIP clamps the logit scale at 100,
    i.e. tau >= 0.01); a clamped temperature gets no gradient.

    ``positive_in_denominator=False`` drops the positive from the softmax denominators:
    B - 1 negatives per anchor, the mini-batch form of the two-way GCL (SogCLR section 4).

    Args:
        num_samples: dataset size (unused).
        tau: fixed temperature, or initial value of the learnable one.
        learn_tau: learn a global log-temperature.
        tau_min, tau_max: clamp of the learnable temperature (None: no bound).
        positive_in_denominator: include the positive pair in the denominators.
    """

    expects_normalized = True

    def temperatures(self) -> dict[str, torch.Tensor]:
        return {"tau": self.tau}  # global, 0-d

    def __init__(self, num_samples: int | None = None, tau: float = 0.07, learn_tau: bool = False,
                 tau_min: float | None = 0.01, tau_max: float | None = None,
                 positive_in_denominator: bool = True) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        if tau_min is not None and tau_max is not None and tau_min > tau_max:
            raise ValueError(f"need tau_min <= tau_max, got {tau_min}, {tau_max}")
        self.learn_tau = learn_tau
        self.tau_min, self.tau_max = tau_min, tau_max
        self.positive_in_denominator = positive_in_denominator
        if learn_tau:
            self.log_tau = nn.Parameter(torch.tensor(math.log(tau)))
        else:
            self.register_buffer("log_tau", torch.tensor(math.log(tau), dtype=torch.float64))  # exact in float64

    @property
    def tau(self) -> torch.Tensor:
        """The temperature used by the forward (after the clamp), a detached scalar."""
        return self.log_temperature(torch.float32).detach().exp()

    def log_temperature(self, dtype: torch.dtype) -> torch.Tensor:
        log_tau = self.log_tau.to(dtype)
        if self.learn_tau and (self.tau_min is not None or self.tau_max is not None):
            lo = math.log(self.tau_min) if self.tau_min is not None else None
            hi = math.log(self.tau_max) if self.tau_max is not None else None
            log_tau = log_tau.clamp(lo, hi)
        return log_tau

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            inv_tau = torch.exp(-self.log_temperature(batch.sim.dtype))
            return two_way_infonce(batch, inv_tau, self.positive_in_denominator).mean()
