"""Contrastive objectives of the iSogCLR, SogCLR and EMC2 papers, registered by name.

Unimodal losses are called as ``loss_fn(z1, z2, index)`` with two views' L2-normalized
features (B, d) and the samples' dataset indices (B,); they return a scalar whose
gradient is the paper's estimator. Conventions left open by the papers are settled in
:mod:`isogclr.losses.conventions`.

Bimodal losses are called as ``loss_fn(image_features, text_features, index)``. A loss is one module,
``isogclr.losses.<name>``, whose class is decorated with ``@register_loss(modality=...)``, and one line of the
table of its modality in :mod:`.loss_table` (``losses_of("unimodal")`` lists them). Every loss class declares
``expects_normalized``: False only for Barlow Twins, VICReg and the supervised reference, which take the
projector output as it is. The moving-average losses take ``convention="paper"`` or ``"official"``
(:mod:`isogclr.losses.conventions`) and report ``step_stats()``; they raise :class:`TrainingDiverged` when their
weights reach the cap. The equations, states and conventions of every method are documented in ``docs/losses.md``.

Importing the package imports no loss: :data:`LOSSES` imports the module of the loss it is asked for, so a run's
code, and its pipeline stage's dependencies, are its own loss's. A loss's class is imported from the package
(``from isogclr.losses import SimCLRLoss``: the module ``__getattr__`` of PEP 562 imports its module on first
access, by :data:`LOSSES`'s table), from its module (``from isogclr.losses.simclr import SimCLRLoss``) or by name
(``LOSSES["simclr"]``). The same classes are imported under ``if TYPE_CHECKING:`` for IDEs and type checkers: that
never runs, and :mod:`isogclr.code_deps` leaves such imports out of a stage's dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import ContrastiveLoss
from .loss_table import BIMODAL, LOSSES, MODALITY, UNIMODAL, build_loss, losses_of, register_loss
from .numerics import TrainingDiverged

if TYPE_CHECKING:  # the classes of .loss_table's tables, re-exported (tests/test_front_door.py checks both agree)
    from .barlow_twins import BarlowTwinsLoss as BarlowTwinsLoss
    from .clip import CLIPLoss as CLIPLoss
    from .clip_individual_tau import CLIPIndividualTauLoss as CLIPIndividualTauLoss
    from .cyclip import CyCLIPLoss as CyCLIPLoss
    from .emc2 import EMC2Loss as EMC2Loss
    from .flatclr import FlatCLRLoss as FlatCLRLoss
    from .isogclr import ISogCLRLoss as ISogCLRLoss
    from .isogclr_bimodal import ISogCLRBimodalLoss as ISogCLRBimodalLoss
    from .negcache import NegativeCacheLoss as NegativeCacheLoss
    from .simclr import SimCLRLoss as SimCLRLoss
    from .simco import SimCoLoss as SimCoLoss
    from .simo import SiMoLoss as SiMoLoss
    from .sogclr import SogCLRLoss as SogCLRLoss
    from .sogclr_bimodal import SogCLRBimodalLoss as SogCLRBimodalLoss
    from .spectral import SpectralContrastiveLoss as SpectralContrastiveLoss
    from .supervised import SupervisedLoss as SupervisedLoss
    from .tau_simclr import TaUSimCLRLoss as TaUSimCLRLoss
    from .vicreg import VICRegLoss as VICRegLoss

UNIMODAL_LOSSES = losses_of("unimodal")
BIMODAL_LOSSES = losses_of("bimodal")

# class name -> its loss's name: the classes the package exports, read from the registry's table (no import)
_CLASSES = {target.rpartition(":")[2]: name for name, target in LOSSES.targets.items()}


def __getattr__(name: str) -> Any:
    """``isogclr.losses.<Class>`` of a registered loss: its module is imported now, on first access, and no other
    loss's (PEP 562), so that importing the package keeps a run's code its own loss's."""
    if name in _CLASSES:
        return LOSSES[_CLASSES[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_CLASSES})


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
    *sorted(_CLASSES),
]
