"""The conventions the papers leave open, settled in one place.

Every moving-average loss (SogCLR, iSogCLR, their bimodal forms) reads these
from :class:`MovingAverageConventions`; nothing else in the library decides them.
Defaults follow the papers' equations; the official code's choices are options.

========================  =====================================  ==========================================
question                  default (paper)                        option (official code)
========================  =====================================  ==========================================
g_i normalisation         mean over the 2B-2 negatives of the    --
                          anchor (iSogCLR eq. 11, SogCLR eq. 9);
                          the positive is not a negative
s_i used by the gradient  ``previous``: s_i^t, the value before  ``updated``: s_i^{t+1}, after this
                          this step's update (SogCLR eq. 10,     step's update (both official codes)
                          iSogCLR eqs. 13-14)
first visit of sample i   ``estimate``: s_i <- g_i, so log s_i   ``zero``: s_i starts at 0 and the first
                          is defined at once; on a first visit   update gives s_i = beta * g_i
                          the gradient uses this value (there    (SogCLR's u_0 = 0)
                          is no previous one)
1/n in G(tau_i)           absorbed in ``eta`` (eq. 13's 1/n is   --
                          the gradient of the average; Thm. 1's
                          eta = O(BB'eps^2/n) cancels it)
bounds on tau             [tau_min, tau_max] (Omega of Sec. 5)   --
clip of G(tau_i)          none                                   ``tau_grad_clip=3.0``
weight of the positive    ``exact``: sum_z w_iz, the gradient of ``one``: weight 1, as in the official
(iSogCLR)                 tau_i log g_i with h = sim - pos       iSogCLR code
numerics                  log space: log s_i is stored, never s  --
========================  =====================================  ==========================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

STimingT = Literal["previous", "updated"]
FirstVisitT = Literal["estimate", "zero"]


@dataclass(frozen=True)
class MovingAverageConventions:
    """How a moving-average estimator s_i of g_i is read and started (see module docstring)."""

    s_timing: STimingT = "previous"
    first_visit: FirstVisitT = "estimate"

    def __post_init__(self) -> None:
        if self.s_timing not in ("previous", "updated"):
            raise ValueError(f"s_timing must be 'previous' or 'updated', got {self.s_timing!r}")
        if self.first_visit not in ("estimate", "zero"):
            raise ValueError(f"first_visit must be 'estimate' or 'zero', got {self.first_visit!r}")


class LogMovingAverage(nn.Module):
    """Per-sample moving averages s_i <- (1 - beta) s_i + beta g_i, stored as log s_i.

    One float32 per sample and column (4 bytes x ``width``). Unvisited samples hold
    ``-inf``. The buffer is part of ``state_dict`` and moves with ``.to(device)``.
    """

    def __init__(self, num_samples: int, beta: float, width: int = 1,
                 conventions: MovingAverageConventions | None = None) -> None:
        super().__init__()
        if not 0.0 < beta <= 1.0:
            raise ValueError(f"moving-average weight must be in (0, 1], got {beta}")
        self.beta = float(beta)
        self.conventions = conventions or MovingAverageConventions()
        self.register_buffer("log_s", torch.full((num_samples, width), -math.inf))

    def update(self, index: torch.Tensor, log_g: torch.Tensor) -> torch.Tensor:
        """Write the update for ``index`` and return log s to use in this step's gradients.

        Args:
            index: (B,) distinct dataset indices.
            log_g: (B, width) log of this step's mini-batch estimates g_i (no grad).
        """
        log_g = log_g.detach()
        prev = self.log_s[index].to(log_g.dtype)
        first = torch.isneginf(prev)
        log_keep = math.log1p(-self.beta) if self.beta < 1.0 else -math.inf
        moved = torch.logaddexp(prev + log_keep, log_g + math.log(self.beta))
        new = torch.where(first, log_g, moved) if self.conventions.first_visit == "estimate" else moved
        self.log_s[index] = new.to(self.log_s.dtype)
        if self.conventions.s_timing == "updated":
            return new
        return torch.where(first, new, prev)


def check_index(index: torch.Tensor, num_samples: int, batch_size: int) -> None:
    """Per-sample state needs distinct, in-range indices (a sampler without replacement)."""
    if index.shape != (batch_size,):
        raise ValueError(f"index must have shape ({batch_size},), got {tuple(index.shape)}")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_samples):
        raise IndexError(f"index out of range [0, {num_samples}): min {int(index.min())}, max {int(index.max())}")
    if torch.unique(index).numel() != index.numel():
        raise ValueError("index has repeated entries; per-sample state needs distinct samples in a batch")
