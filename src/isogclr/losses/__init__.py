"""Contrastive objectives of the iSogCLR, SogCLR and EMC2 papers, registered by name.

Unimodal losses are called as ``loss_fn(z1, z2, index)`` with two views' L2-normalized
features (B, d) and the samples' dataset indices (B,); they return a scalar whose
gradient is the paper's estimator. Conventions left open by the papers are settled in
:mod:`isogclr.losses.conventions`.

Bimodal losses are called as ``loss_fn(image_features, text_features, index)``. Each loss
registers its modality (``register_loss(name, modality=...)``); ``losses_of("unimodal")`` lists
them. Every loss class declares ``expects_normalized``: False only for Barlow Twins and VICReg,
which take the projector output as it is. The moving-average losses take
``convention="paper"`` or ``"official"`` (:mod:`isogclr.losses.conventions`) and report
``step_stats()``; they raise :class:`TrainingDiverged` when their weights reach the cap. The
equations, states and conventions of every method are documented in ``docs/losses.md``.

Importing the package imports no loss: :func:`build_loss` imports the module of the loss it builds (its row
of :data:`~.registry.REGISTRY`), so a run's code, and its pipeline stage's dependencies, are its own loss's.
The classes are importable from the package as before (``from isogclr.losses import SimCLRLoss``): the
package imports their module on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import ContrastiveLoss
from .numerics import TrainingDiverged
from .registry import LOSSES, MODALITY, REGISTRY, build_loss, loss_module, losses_of, register_loss

UNIMODAL_LOSSES = losses_of("unimodal")  # derived from the registry (each loss declares its modality)
BIMODAL_LOSSES = losses_of("bimodal")

# the package's other public names, by the module that defines them (imported on first access)
_LAZY = {REGISTRY[name][0].partition(":")[2]: loss_module(name) for name in REGISTRY}
_LAZY.update(LogMovingAverage="isogclr.losses.conventions", MovingAverageConventions="isogclr.losses.conventions")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BIMODAL_LOSSES",
    "LOSSES",
    "MODALITY",
    "REGISTRY",
    "UNIMODAL_LOSSES",
    "ContrastiveLoss",
    "TrainingDiverged",
    "build_loss",
    "loss_module",
    "losses_of",
    "register_loss",
    *sorted(_LAZY),
]
