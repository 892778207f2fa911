"""Similarity layout shared by the unimodal losses.

For a batch of B samples with two views, the 2B anchors are ``cat([z1, z2])``.
Row r's positive is column ``(r + B) mod 2B``; its negatives are the other
2B - 2 views (the views of the other B - 1 samples), as the set B_i of the
SogCLR paper's eq. (2) and the iSogCLR paper's eq. (11).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch


@dataclass
class TwoViewBatch:
    sim: torch.Tensor  # (2B, 2B) cosine similarities z_a . z_b
    pos: torch.Tensor  # (2B,) similarity of each anchor with its positive
    neg_mask: torch.Tensor  # (2B, 2B) bool, True on the 2B - 2 negatives of each row
    batch_size: int

    @property
    def num_negatives(self) -> int:
        return 2 * self.batch_size - 2

    @property
    def pos_index(self) -> torch.Tensor:
        b = self.batch_size
        return (torch.arange(2 * b, device=self.sim.device) + b) % (2 * b)


def compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float32 at least, float64 when the inputs are (so exactness tests are exact)."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def full_precision(device: torch.device):
    """Disable autocast inside a loss: similarities / tau are computed in float32 or above."""
    if device.type in ("cuda", "cpu") and torch.is_autocast_enabled(device.type):
        return torch.autocast(device.type, enabled=False)
    return nullcontext()


def two_view_batch(z1: torch.Tensor, z2: torch.Tensor) -> TwoViewBatch:
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"z1 and z2 must both have shape (B, d); got {tuple(z1.shape)} and {tuple(z2.shape)}")
    b = z1.shape[0]
    if b < 2:
        raise ValueError("a contrastive batch needs at least 2 samples")
    dtype = compute_dtype(z1, z2)
    feats = torch.cat([z1, z2]).to(dtype)
    sim = feats @ feats.T
    eye = torch.eye(2 * b, dtype=torch.bool, device=sim.device)
    pos_mask = eye.roll(b, dims=1)
    pos = sim[pos_mask]
    neg_mask = ~(eye | pos_mask)
    return TwoViewBatch(sim=sim, pos=pos, neg_mask=neg_mask, batch_size=b)


def masked_logsumexp(x: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return torch.logsumexp(x.masked_fill(~mask, float("-inf")), dim=dim)
