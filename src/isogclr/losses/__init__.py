"""Contrastive objectives of the iSogCLR, SogCLR and EMC2 papers, registered by name.

Unimodal losses are called as ``loss_fn(z1, z2, index)`` with two views' L2-normalized
features (B, d) and the samples' dataset indices (B,); they return a scalar whose
gradient is the paper's estimator. Conventions left open by the papers are settled in
:mod:`isogclr.losses.conventions`.

Bimodal losses are called as ``loss_fn(image_features, text_features, index)``. A loss is one module,
``isogclr.losses.<name>``, whose class is decorated with ``@register_loss(modality=...)``, and one line of the
table of its modality in :mod:`.registry` (``losses_of("unimodal")`` lists them). Every loss class declares
``expects_normalized``: False only for Barlow Twins, VICReg and the supervised reference, which take the
projector output as it is. The moving-average losses take ``convention="paper"`` or ``"official"``
(:mod:`isogclr.losses.conventions`) and report ``step_stats()``; they raise :class:`TrainingDiverged` when their
weights reach the cap. The equations, states and conventions of every method are documented in ``docs/losses.md``.

Importing the package imports no loss: :data:`LOSSES` imports the module of the loss it is asked for, so a run's
code, and its pipeline stage's dependencies, are its own loss's. A loss's class is imported from its module
(``from isogclr.losses.simclr import SimCLRLoss``) or by name (``LOSSES["simclr"]``).
"""

from __future__ import annotations

from .base import ContrastiveLoss
from .numerics import TrainingDiverged
from .registry import BIMODAL, LOSSES, MODALITY, UNIMODAL, build_loss, losses_of, register_loss

UNIMODAL_LOSSES = losses_of("unimodal")
BIMODAL_LOSSES = losses_of("bimodal")

__all__ = [
    "BIMODAL",
    "BIMODAL_LOSSES",
    "LOSSES",
    "MODALITY",
    "UNIMODAL",
    "UNIMODAL_LOSSES",
    "ContrastiveLoss",
    "TrainingDiverged",
    "build_loss",
    "losses_of",
    "register_loss",
]
