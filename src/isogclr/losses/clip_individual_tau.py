"""CLIP with one learnable temperature per image and per text, trained by plain autograd
(the failing baseline of the iSogCLR paper's appendix C.3)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .base import ContrastiveLoss
from .clip import directional_infonce
from .conventions import check_index
from .layouts import bimodal_batch
from .loss_table import register_loss
from .two_views import full_precision


@register_loss(modality="bimodal")
class CLIPIndividualTauLoss(ContrastiveLoss):
    r"""CLIP whose image i uses tau_i and text i uses tau'_i, both learned by autograd.

    .. math::
        L = \frac{1}{2B}\sum_{i \in B}\Big[-\log\mathrm{softmax}_j(I_i^\top T_j/\tau_i)_i
            - \log\mathrm{softmax}_j(I_j^\top T_i/\tau'_i)_i\Big]

    ``log_tau_image`` and ``log_tau_text`` are ``nn.Parameter`` of shape (n,), indexed by
    the pairs' dataset indices (initialised to 0.01 as in the appendix); the optimizer of
    the loss's parameters updates them (exclude them from weight decay). The appendix
    reports that the temperatures drift upward and training fails. Its explanation ("when
    h < 0, the larger the temperature, the smaller the loss") has the sign reversed: for
    an anchor whose negatives are all less similar than its positive (every h < 0),
    log sum exp(h / tau) *increases* with tau and gradient descent lowers tau; descent
    raises tau exactly for anchors with a negative more similar than the positive (some
    h > 0), the common case early in training, hence the upward drift (both signs are
    tested). The temperature is clamped to [tau_min, tau_max] (default tau_min = 0.005,
    the bimodal tau_0 of the paper, so that a diverging temperature cannot reach 0 and
    overflow); a clamped temperature gets no gradient.

    State: two float32 parameters per pair (8 bytes, plus the optimizer's state).

    Args:
        num_samples: number of pairs n.
        tau_init: initial temperature of every image and text.
        tau_min, tau_max: clamp of the temperatures (None: no bound).
        positive_in_denominator: include the positive pair in the denominators (CLIP).
    """

    expects_normalized = True

    def temperatures(self) -> dict[str, torch.Tensor]:
        return {"tau_image": self.tau_image, "tau_text": self.tau_text}  # (n,) each

    def __init__(self, num_samples: int, tau_init: float = 0.01, tau_min: float | None = 0.005,
                 tau_max: float | None = None, positive_in_denominator: bool = True) -> None:
        super().__init__()
        if tau_init <= 0:
            raise ValueError(f"tau_init must be positive, got {tau_init}")
        self.num_samples = int(num_samples)
        self.tau_min, self.tau_max = tau_min, tau_max
        self.positive_in_denominator = positive_in_denominator
        self.log_tau_image = nn.Parameter(torch.full((num_samples,), math.log(tau_init)))
        self.log_tau_text = nn.Parameter(torch.full((num_samples,), math.log(tau_init)))

    @property
    def tau_image(self) -> torch.Tensor:
        return self._clamped(self.log_tau_image).detach().exp()

    @property
    def tau_text(self) -> torch.Tensor:
        return self._clamped(self.log_tau_text).detach().exp()

    def _clamped(self, log_tau: torch.Tensor) -> torch.Tensor:
        if self.tau_min is None and self.tau_max is None:
            return log_tau
        lo = math.log(self.tau_min) if self.tau_min is not None else None
        hi = math.log(self.tau_max) if self.tau_max is not None else None
        return log_tau.clamp(lo, hi)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(image_features))
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            dtype = batch.sim.dtype
            inv_image = torch.exp(-self._clamped(self.log_tau_image[index]).to(dtype))
            inv_text = torch.exp(-self._clamped(self.log_tau_text[index]).to(dtype))
            image = directional_infonce(batch.sim, batch.pos, inv_image, batch.neg_mask, self.positive_in_denominator)
            text = directional_infonce(batch.sim.T, batch.pos, inv_text, batch.neg_mask, self.positive_in_denominator)
            return ((image + text) / 2).mean()
