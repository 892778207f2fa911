"""Contrastive objectives of the iSogCLR, SogCLR and EMC2 papers, registered by name.

Unimodal losses are called as ``loss_fn(z1, z2, index)`` with two views' L2-normalized
features (B, d) and the samples' dataset indices (B,); they return a scalar whose
gradient is the paper's estimator. Conventions left open by the papers are settled in
:mod:`isogclr.losses.conventions`.
"""

from .conventions import LogMovingAverage, MovingAverageConventions
from .isogclr import ISogCLRLoss
from .registry import LOSSES, build_loss, register_loss
from .simclr import SimCLRLoss
from .sogclr import SogCLRLoss

__all__ = [
    "LOSSES",
    "ISogCLRLoss",
    "LogMovingAverage",
    "MovingAverageConventions",
    "SimCLRLoss",
    "SogCLRLoss",
    "build_loss",
    "register_loss",
]
