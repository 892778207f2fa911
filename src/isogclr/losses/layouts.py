"""Negative layouts used by the losses beyond :func:`.two_views.two_view_batch`.

* ``"all"``: the SimCLR layout of :mod:`.two_views`: each of the 2B anchors has the
  2B - 2 views of the other samples as negatives.
* ``"cross"``: the MoCo / SimCo / SiMo layout: an anchor of view a is contrasted only
  with the other view's features, so it has B - 1 negatives (the other samples' other view).
* bimodal: B image-text pairs; image i has the B - 1 texts t_j (j != i) as negatives and
  text i the B - 1 images x_j (j != i) (iSogCLR appendix B, eqs. 15-16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from .base import ContrastiveLoss
from .two_views import TwoViewBatch, compute_dtype, two_view_batch

NegativesT = Literal["all", "cross"]


def check_negatives(negatives: str) -> None:
    if negatives not in ("all", "cross"):
        raise ValueError(f"negatives must be 'all' or 'cross', got {negatives!r}")


def negative_mask(batch: TwoViewBatch, negatives: NegativesT) -> torch.Tensor:
    """(2B, 2B) bool mask of each anchor's negatives in the given layout."""
    if negatives == "all":
        return batch.neg_mask
    b = batch.batch_size
    second_view = torch.arange(2 * b, device=batch.sim.device) >= b
    return batch.neg_mask & (second_view[:, None] != second_view[None, :])


def num_negatives(batch_size: int, negatives: NegativesT) -> int:
    return 2 * batch_size - 2 if negatives == "all" else batch_size - 1


@dataclass
class BimodalBatch:
    sim: torch.Tensor  # (B, B) sim[i, j] = E_I(x_i)^T E_T(t_j)
    pos: torch.Tensor  # (B,) sim[i, i]
    neg_mask: torch.Tensor  # (B, B) bool, off-diagonal
    batch_size: int

    @property
    def num_negatives(self) -> int:
        return self.batch_size - 1


def bimodal_batch(image: torch.Tensor, text: torch.Tensor) -> BimodalBatch:
    """Image-text similarities in float32 or above (float64 if the inputs are)."""
    if image.shape != text.shape or image.dim() != 2:
        raise ValueError(f"image and text features must both be (B, d); got {tuple(image.shape)}, {tuple(text.shape)}")
    b = image.shape[0]
    if b < 2:
        raise ValueError("a contrastive batch needs at least 2 pairs")
    dtype = compute_dtype(image, text)
    sim = image.to(dtype) @ text.to(dtype).T
    eye = torch.eye(b, dtype=torch.bool, device=sim.device)
    return BimodalBatch(sim=sim, pos=sim.diagonal(), neg_mask=~eye, batch_size=b)


def cross_view_rows(z1: torch.Tensor, z2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``"cross"`` layout without the unused same-view blocks (one B x B matmul).

    Returns ``rows`` (2B, B): row r < B is z1_r against every z2_j, row B + r is z2_r against every
    z1_j; row r's positive is column r mod B. Also ``pos`` (2B,) and the negatives' mask (2B, B).
    """
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"z1 and z2 must both have shape (B, d); got {tuple(z1.shape)} and {tuple(z2.shape)}")
    b = z1.shape[0]
    if b < 2:
        raise ValueError("a contrastive batch needs at least 2 samples")
    dtype = compute_dtype(z1, z2)
    sim12 = z1.to(dtype) @ z2.to(dtype).T
    rows = torch.cat([sim12, sim12.T])
    pos = sim12.diagonal().repeat(2)
    neg_mask = ~torch.eye(b, dtype=torch.bool, device=rows.device).repeat(2, 1)
    return rows, pos, neg_mask


def anchor_rows(z1: torch.Tensor, z2: torch.Tensor, negatives: NegativesT
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 2B anchors' similarity rows, their positives (2B,) and their negatives' mask in the layout
    ``negatives``: ``"cross"`` (:func:`cross_view_rows`, (2B, B)) or ``"all"`` ((2B, 2B))."""
    if negatives == "cross":
        return cross_view_rows(z1, z2)
    batch = two_view_batch(z1, z2)
    return batch.sim, batch.pos, batch.neg_mask


class LayoutLoss(ContrastiveLoss):
    """Base of the losses that contrast each of the 2B anchors with the negatives of one layout
    (SimCo, SiMo): checks and keeps ``negatives``; :meth:`rows` gives (sim, pos, mask)."""

    def __init__(self, negatives: NegativesT) -> None:
        super().__init__()
        check_negatives(negatives)
        self.negatives = negatives

    def rows(self, z1: torch.Tensor, z2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return anchor_rows(z1, z2, self.negatives)
