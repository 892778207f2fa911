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
"""

from .barlow_twins import BarlowTwinsLoss
from .clip import CLIPLoss
from .clip_individual_tau import CLIPIndividualTauLoss
from .conventions import LogMovingAverage, MovingAverageConventions
from .cyclip import CyCLIPLoss
from .emc2 import EMC2Loss
from .flatclr import FlatCLRLoss
from .isogclr import ISogCLRLoss
from .isogclr_bimodal import ISogCLRBimodalLoss
from .negcache import NegativeCacheLoss
from .numerics import TrainingDiverged
from .registry import LOSSES, MODALITY, build_loss, losses_of, register_loss
from .simclr import SimCLRLoss
from .simco import SimCoLoss
from .simo import SiMoLoss
from .sogclr import SogCLRLoss
from .sogclr_bimodal import SogCLRBimodalLoss
from .spectral import SpectralContrastiveLoss
from .supervised import SupervisedLoss
from .tau_simclr import TaUSimCLRLoss
from .vicreg import VICRegLoss

UNIMODAL_LOSSES = losses_of("unimodal")  # derived from the registry (each loss declares its modality)
BIMODAL_LOSSES = losses_of("bimodal")

__all__ = [
    "BIMODAL_LOSSES",
    "LOSSES",
    "MODALITY",
    "UNIMODAL_LOSSES",
    "BarlowTwinsLoss",
    "CLIPIndividualTauLoss",
    "CLIPLoss",
    "CyCLIPLoss",
    "EMC2Loss",
    "FlatCLRLoss",
    "ISogCLRBimodalLoss",
    "ISogCLRLoss",
    "LogMovingAverage",
    "MovingAverageConventions",
    "NegativeCacheLoss",
    "SiMoLoss",
    "SimCLRLoss",
    "SimCoLoss",
    "SogCLRBimodalLoss",
    "SogCLRLoss",
    "SpectralContrastiveLoss",
    "TaUSimCLRLoss",
    "TrainingDiverged",
    "VICRegLoss",
    "build_loss",
    "losses_of",
    "register_loss",
]
