"""A fast path for losses whose gradient is an explicit function of the similarity matrix.

SogCLR and iSogCLR return a scalar whose gradient w.r.t. the similarities S = F F^T
(F = cat(z1, z2)) is a known matrix G (detached weights on the negatives, minus the positive's
weight). Autograd through ``F @ F.T`` would spend two matmuls in the backward (one per
operand); since S is symmetric, dL/dF = (G + G^T) F needs one. :class:`GramGradient` returns
the loss value and routes that gradient, so the loss costs one matmul forward, one backward
and a few in-place passes over the (2B x 2B) matrix, instead of autograd's graph of masked
copies. The math is unchanged: ``surrogate - sg(surrogate) + value`` and this give the same
value and the same gradient.
"""

from __future__ import annotations

import torch

from .two_views import compute_dtype, full_precision


def two_view_features(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """cat([z1, z2]) in float32 or above (float64 if the inputs are), with the checks of two_view_batch."""
    if z1.shape != z2.shape or z1.dim() != 2:
        raise ValueError(f"z1 and z2 must both have shape (B, d); got {tuple(z1.shape)} and {tuple(z2.shape)}")
    if z1.shape[0] < 2:
        raise ValueError("a contrastive batch needs at least 2 samples")
    return torch.cat([z1, z2]).to(compute_dtype(z1, z2))


def mask_own_views(matrix: torch.Tensor, value: float) -> torch.Tensor:
    """Write ``value`` on each row's own view (diagonal) and positive (diagonals +-B), in place."""
    b = matrix.shape[0] // 2
    matrix.diagonal().fill_(value)
    matrix.diagonal(b).fill_(value)
    matrix.diagonal(-b).fill_(value)
    return matrix


def subtract_positive_weights(grad_sim: torch.Tensor, weights: torch.Tensor | float) -> torch.Tensor:
    """grad_sim[a, pos(a)] -= weights[a] (in place), the positive of row a being column (a + B) mod 2B."""
    b = grad_sim.shape[0] // 2
    if isinstance(weights, torch.Tensor):
        grad_sim.diagonal(b).sub_(weights[:b])
        grad_sim.diagonal(-b).sub_(weights[b:])
    else:
        grad_sim.diagonal(b).sub_(weights)
        grad_sim.diagonal(-b).sub_(weights)
    return grad_sim


class GramGradient(torch.autograd.Function):
    """``GramGradient.apply(feats, grad_sim, value)`` returns ``value`` (a detached scalar) whose
    gradient w.r.t. ``feats`` is that of sum(grad_sim * feats @ feats.T), i.e. (G + G^T) feats."""

    @staticmethod
    def forward(ctx, feats: torch.Tensor, grad_sim: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(feats, grad_sim)
        return value.detach().clone()

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        feats, grad_sim = ctx.saved_tensors
        with full_precision(feats.device):
            symmetric = grad_sim.T.contiguous()  # a blocked transpose: G + G.T directly is ~8x slower on CPU
            symmetric += grad_sim
            grad_feats = symmetric @ feats.detach()
            grad_feats.mul_(grad_output.to(grad_feats.dtype))
        return grad_feats, None, None
