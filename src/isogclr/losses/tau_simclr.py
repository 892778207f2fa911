"""TaU+SimCLR: SimCLR with an input-dependent temperature ("Temperature as Uncertainty",
Zhang et al., 2021), the baseline of the iSogCLR paper's appendix C.3 (Table 10)."""

from __future__ import annotations

import torch

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import full_precision, masked_logsumexp, two_view_batch


@register_loss(modality="unimodal")
class TaUSimCLRLoss(ContrastiveLoss):
    r"""NT-Xent whose anchors carry their own temperature, predicted by the encoder.

    The encoder returns d + 1 entries: the first d (normalised) are the embedding z, the
    last, e, gives the anchor's scale sigmoid(e) / t (iSogCLR appendix C.3: "a temperature
    for the input by sigmoid(e)/t, t a fixed hyper-parameter"). In TaU this quantity
    *multiplies* the similarities (it is an inverse temperature), so the effective
    temperature of anchor a is tau_a = t / sigmoid(e_a) in (t, infinity):

    .. math::
        L = \frac{1}{2B}\sum_a \Big[\log \sum_{k \in D_a} \exp(z_a^\top z_k / \tau_a)
            - z_a^\top z_{a^+} / \tau_a\Big].

    D_a holds the 2B - 2 negatives (TaU's default mask removes both the anchor and its
    positive from the denominator); ``positive_in_denominator=True`` adds the positive.
    Each anchor uses its own e (TaU's reference code uses view 1's e for the positive
    term of both views; we use the anchor's, which is the written objective). The gradient
    flows into e through the scale.

    Called as ``loss_fn(z1, z2, index, e1=..., e2=...)`` with e1, e2 of shape (B,).

    Args:
        num_samples: dataset size (unused).
        t: the fixed hyper-parameter t (the lowest effective temperature).
        positive_in_denominator: include the positive pair in the denominator.
    """

    expects_normalized = True
    extra_outputs = 1  # the training loop appends one output (e) to the projection head

    def __init__(self, num_samples: int | None = None, t: float = 0.1, positive_in_denominator: bool = False) -> None:
        super().__init__()
        if t <= 0:
            raise ValueError(f"t must be positive, got {t}")
        self.t = float(t)
        self.positive_in_denominator = positive_in_denominator

    def temperature(self, e: torch.Tensor) -> torch.Tensor:
        """The effective temperature t / sigmoid(e) of inputs with extra output e."""
        return self.t / torch.sigmoid(e)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None, *,
                e1: torch.Tensor | None = None, e2: torch.Tensor | None = None) -> torch.Tensor:
        if e1 is None or e2 is None:
            raise ValueError("TaU+SimCLR needs the encoder's extra outputs: loss_fn(z1, z2, index, e1=..., e2=...)")
        b = len(z1)
        if e1.shape != (b,) or e2.shape != (b,):
            raise ValueError(f"e1 and e2 must have shape ({b},), got {tuple(e1.shape)} and {tuple(e2.shape)}")
        with full_precision(z1.device):
            batch = two_view_batch(z1, z2)
            scale = torch.sigmoid(torch.cat([e1, e2]).to(batch.sim.dtype)) / self.t  # 1 / tau_a, (2B,)
            logits = batch.sim * scale[:, None]
            denominator = batch.neg_mask.clone()
            if self.positive_in_denominator:
                denominator[torch.arange(2 * b, device=logits.device), batch.pos_index] = True
            return (masked_logsumexp(logits, denominator) - batch.pos * scale).mean()
