"""Contrastive objectives of the iSogCLR, SogCLR and EMC2 papers, registered by name.

Unimodal losses are called as ``loss_fn(z1, z2, index)`` with two views' L2-normalized
features (B, d) and the samples' dataset indices (B,); they return a scalar whose
gradient is the paper's estimator. Conventions left open by the papers are settled in
:mod:`isogclr.losses.conventions`.

Bimodal losses are called as ``loss_fn(image_features, text_features, index)``. A loss is one module,
``isogclr.losses.<name>``, whose class is decorated with ``@register_loss(modality=...)``: its name is the
module's (:mod:`.registry`); ``losses_of("unimodal")`` lists them. Every loss class declares
``expects_normalized``: False only for Barlow Twins and VICReg, which take the projector output as it is.
The moving-average losses take ``convention="paper"`` or ``"official"`` (:mod:`isogclr.losses.conventions`) and report
``step_stats()``; they raise :class:`TrainingDiverged` when their weights reach the cap. The
equations, states and conventions of every method are documented in ``docs/losses.md``.

Importing the package imports no loss: :func:`build_loss` imports the module of the loss it builds (the
registry reads which modules hold a loss from their source), so a run's code, and its pipeline stage's
dependencies, are its own loss's.
The classes are importable from the package as before (``from isogclr.losses import SimCLRLoss``): the
package imports their module on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import ContrastiveLoss
from .numerics import TrainingDiverged
from .registry import LOSSES, MODALITY, build_loss, loss_module, losses_of, register_loss, registered

UNIMODAL_LOSSES = losses_of("unimodal")  # derived from the loss modules (each declares its modality)
BIMODAL_LOSSES = losses_of("bimodal")

# the package's other public names, by the module that defines them (imported on first access)
_LAZY = {entry.cls: loss_module(name) for name, entry in registered().items()}
_LAZY.update(LogMovingAverage="isogclr.losses.conventions", MovingAverageConventions="isogclr.losses.conventions")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BIMODAL_LOSSES",
    "LOSSES",
    "MODALITY",
    "UNIMODAL_LOSSES",
    "ContrastiveLoss",
    "TrainingDiverged",
    "build_loss",
    "loss_module",
    "losses_of",
    "register_loss",
    "registered",
    *sorted(_LAZY),
]
