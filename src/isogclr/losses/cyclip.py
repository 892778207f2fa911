"""CyCLIP: CLIP with cyclic-consistency regularisers (Goel et al., NeurIPS 2022)."""

from __future__ import annotations

import torch

from .clip import CLIPLoss, two_way_infonce
from .layouts import bimodal_batch
from .loss_table import register_loss
from .two_views import compute_dtype, full_precision


@register_loss(modality="bimodal")
class CyCLIPLoss(CLIPLoss):
    r"""L = L_CLIP + lambda_in L_in-modal + lambda_cross L_cross-modal.

    With I_j, T_j the normalised image and text features of pair j of the batch (N = B):

    .. math::
        L_{in} = \frac{1}{N}\sum_{j,k} (I_j^\top I_k - T_j^\top T_k)^2, \qquad
        L_{cross} = \frac{1}{N}\sum_{j,k} (I_j^\top T_k - I_k^\top T_j)^2.

    The regularisers act on the cosine similarities (CyCLIP's code scales the logits by
    the logit scale and divides it back out). The 1/N normalisation (mean over the N^2
    pairs times N) is the official code's; lambda_in = lambda_cross = 0.25 are the paper's.
    L_CLIP and its temperature options are those of :class:`CLIPLoss`.

    Args:
        num_samples: dataset size (unused).
        lambda_inmodal, lambda_crossmodal: weights of the two cyclic terms.
        **clip_kwargs: ``tau``, ``learn_tau``, ``tau_min``, ``tau_max``, ``positive_in_denominator``.
    """

    def __init__(self, num_samples: int | None = None, lambda_inmodal: float = 0.25,
                 lambda_crossmodal: float = 0.25, **clip_kwargs) -> None:
        super().__init__(num_samples, **clip_kwargs)
        self.lambda_inmodal, self.lambda_crossmodal = float(lambda_inmodal), float(lambda_crossmodal)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor | None = None) -> torch.Tensor:
        with full_precision(image_features.device):
            batch = bimodal_batch(image_features, text_features)
            inv_tau = torch.exp(-self.log_temperature(batch.sim.dtype))
            clip = two_way_infonce(batch, inv_tau, self.positive_in_denominator).mean()
            dtype = compute_dtype(image_features, text_features)
            image, text = image_features.to(dtype), text_features.to(dtype)
            n = batch.batch_size
            inmodal = (image @ image.T - text @ text.T).square().sum() / n
            crossmodal = (batch.sim - batch.sim.T).square().sum() / n
            return clip + self.lambda_inmodal * inmodal + self.lambda_crossmodal * crossmodal
