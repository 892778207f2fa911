"""Losses by the name used in ``params.yaml`` (``methods.<name>.loss``): the tables :data:`UNIMODAL` and
:data:`BIMODAL` below, name -> ``"module:Class"``, are the whole list.

A loss is one file, ``src/isogclr/losses/<name>.py``, holding one class decorated with
``@register_loss(modality=...)``, and one line in the table of its modality. The decorator checks the class
against the interface of :class:`~.base.ContrastiveLoss` and against its line; ``tests/test_registry.py``
imports every line.

:data:`LOSSES` (an :class:`isogclr.import_table.Registry`) imports the module of the loss it is asked for and no other,
so a run's code, and its pipeline stage's dependencies (``LOSSES.module_of(name)``: :mod:`isogclr.code_deps`), are
its own loss's.

A unimodal loss is called as ``loss_fn(z1, z2, index)`` (two views of the same samples), a bimodal
one as ``loss_fn(image_features, text_features, index)``; :func:`losses_of` lists either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..import_table import Registry

if TYPE_CHECKING:
    from .base import ContrastiveLoss

ModalityT = Literal["unimodal", "bimodal"]
MODALITIES = ("unimodal", "bimodal")

# called as loss_fn(z1, z2, index): two views of the same images
UNIMODAL = {
    "barlow_twins": "isogclr.losses.barlow_twins:BarlowTwinsLoss",
    "emc2": "isogclr.losses.emc2:EMC2Loss",
    "flatclr": "isogclr.losses.flatclr:FlatCLRLoss",
    "isogclr": "isogclr.losses.isogclr:ISogCLRLoss",
    "negcache": "isogclr.losses.negcache:NegativeCacheLoss",
    "simclr": "isogclr.losses.simclr:SimCLRLoss",
    "simco": "isogclr.losses.simco:SimCoLoss",
    "simo": "isogclr.losses.simo:SiMoLoss",
    "sogclr": "isogclr.losses.sogclr:SogCLRLoss",
    "spectral": "isogclr.losses.spectral:SpectralContrastiveLoss",
    "supervised": "isogclr.losses.supervised:SupervisedLoss",
    "tau_simclr": "isogclr.losses.tau_simclr:TaUSimCLRLoss",
    "vicreg": "isogclr.losses.vicreg:VICRegLoss",
}
# called as loss_fn(image_features, text_features, index)
BIMODAL = {
    "clip": "isogclr.losses.clip:CLIPLoss",
    "clip_individual_tau": "isogclr.losses.clip_individual_tau:CLIPIndividualTauLoss",
    "cyclip": "isogclr.losses.cyclip:CyCLIPLoss",
    "isogclr_bimodal": "isogclr.losses.isogclr_bimodal:ISogCLRBimodalLoss",
    "sogclr_bimodal": "isogclr.losses.sogclr_bimodal:SogCLRBimodalLoss",
}

LOSSES = Registry("loss", dict(sorted({**UNIMODAL, **BIMODAL}.items())))
MODALITY: dict[str, ModalityT] = {name: ("unimodal" if name in UNIMODAL else "bimodal") for name in LOSSES}


def register_loss(modality: ModalityT) -> Callable[[type], type]:
    """Class decorator of the loss of a module ``isogclr.losses.<name>``: check ``cls`` against the loss
    interface and its line in :data:`UNIMODAL` or :data:`BIMODAL`, and give it ``registry_name`` (``<name>``, its
    module's) and ``modality`` (how it is called)."""
    if modality not in MODALITIES:
        raise ValueError(f"modality of a loss must be 'unimodal' or 'bimodal', got {modality!r}")

    def decorate(cls: type) -> type:
        from .base import ContrastiveLoss

        if not issubclass(cls, ContrastiveLoss):
            raise TypeError(f"{cls.__name__} must derive from isogclr.losses.base.ContrastiveLoss (the interface "
                            "the trainers read)")
        if not isinstance(getattr(cls, "expects_normalized", None), bool):
            raise TypeError(f"{cls.__name__} must declare the class attribute expects_normalized")
        name = cls.__module__.rpartition(".")[2]
        line = f'"{name}": "{cls.__module__}:{cls.__name__}"'
        table = UNIMODAL if modality == "unimodal" else BIMODAL
        if table.get(name) != f"{cls.__module__}:{cls.__name__}":
            raise ValueError(f"{cls.__name__} ({cls.__module__}) is not in the table of {modality} losses: a loss "
                             f"is a module isogclr.losses.<name> named after it, with the line {line} in "
                             f"{modality.upper()} of isogclr/losses/loss_table.py")
        cls.registry_name = name
        cls.modality = modality
        return cls

    return decorate


def losses_of(modality: ModalityT) -> tuple[str, ...]:
    """Names of the losses of ``modality``, sorted."""
    if modality not in MODALITIES:
        raise ValueError(f"modality must be 'unimodal' or 'bimodal', got {modality!r}")
    return tuple(sorted(UNIMODAL if modality == "unimodal" else BIMODAL))


def build_loss(name: str, num_samples: int, **kwargs: Any) -> ContrastiveLoss:
    """Instantiate the loss ``name`` (importing its module); every loss takes ``num_samples`` first."""
    return LOSSES[name](num_samples, **kwargs)
