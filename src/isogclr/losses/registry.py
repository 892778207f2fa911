"""Registry of losses by the name used in ``params.yaml`` (``methods.<name>.loss``), with their modality.

:data:`REGISTRY` names each loss's class as ``"module:Class"``; :func:`build_loss` imports that module when
the loss is built, so a run imports the code of its own loss only, and the pipeline
(:mod:`isogclr.pipeline`) makes a run's stage depend on that module and no other loss. A loss class carries
``@register_loss(name, modality)``, which checks it against its row here and against the interface of
:class:`~.base.ContrastiveLoss`.

A unimodal loss is called as ``loss_fn(z1, z2, index)`` (two views of the same samples), a bimodal
one as ``loss_fn(image_features, text_features, index)``; :func:`losses_of` lists either.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .base import ContrastiveLoss

ModalityT = Literal["unimodal", "bimodal"]

# name -> ("module:Class", modality), by name
REGISTRY: dict[str, tuple[str, ModalityT]] = {
    "barlow_twins": ("isogclr.losses.barlow_twins:BarlowTwinsLoss", "unimodal"),
    "clip": ("isogclr.losses.clip:CLIPLoss", "bimodal"),
    "clip_individual_tau": ("isogclr.losses.clip_individual_tau:CLIPIndividualTauLoss", "bimodal"),
    "cyclip": ("isogclr.losses.cyclip:CyCLIPLoss", "bimodal"),
    "emc2": ("isogclr.losses.emc2:EMC2Loss", "unimodal"),
    "flatclr": ("isogclr.losses.flatclr:FlatCLRLoss", "unimodal"),
    "isogclr": ("isogclr.losses.isogclr:ISogCLRLoss", "unimodal"),
    "isogclr_bimodal": ("isogclr.losses.isogclr_bimodal:ISogCLRBimodalLoss", "bimodal"),
    "negcache": ("isogclr.losses.negcache:NegativeCacheLoss", "unimodal"),
    "simclr": ("isogclr.losses.simclr:SimCLRLoss", "unimodal"),
    "simco": ("isogclr.losses.simco:SimCoLoss", "unimodal"),
    "simo": ("isogclr.losses.simo:SiMoLoss", "unimodal"),
    "sogclr": ("isogclr.losses.sogclr:SogCLRLoss", "unimodal"),
    "sogclr_bimodal": ("isogclr.losses.sogclr_bimodal:SogCLRBimodalLoss", "bimodal"),
    "spectral": ("isogclr.losses.spectral:SpectralContrastiveLoss", "unimodal"),
    "supervised": ("isogclr.losses.supervised:SupervisedLoss", "unimodal"),
    "tau_simclr": ("isogclr.losses.tau_simclr:TaUSimCLRLoss", "unimodal"),
    "vicreg": ("isogclr.losses.vicreg:VICRegLoss", "unimodal"),
}
MODALITY: dict[str, ModalityT] = {name: modality for name, (_, modality) in REGISTRY.items()}


def loss_module(name: str) -> str:
    """The module that defines the loss registered as ``name`` (what a run of it imports)."""
    if name not in REGISTRY:
        raise KeyError(f"unknown loss {name!r}; registered: {sorted(REGISTRY)}")
    return REGISTRY[name][0].partition(":")[0]


class _Losses(Mapping):
    """``LOSSES[name]``: the class of a registered loss, its module imported on first access."""

    def __getitem__(self, name: str) -> type[ContrastiveLoss]:
        module = importlib.import_module(loss_module(name))
        return getattr(module, REGISTRY[name][0].partition(":")[2])

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


LOSSES: Mapping[str, type[ContrastiveLoss]] = _Losses()


def register_loss(name: str, modality: ModalityT) -> Callable[[type], type]:
    """Class decorator: check ``cls`` against its row of :data:`REGISTRY` and the loss interface, and give it
    ``registry_name`` and ``modality``; ``modality`` is how it is called."""
    if modality not in ("unimodal", "bimodal"):
        raise ValueError(f"modality of loss {name!r} must be 'unimodal' or 'bimodal', got {modality!r}")

    def decorate(cls: type) -> type:
        from .base import ContrastiveLoss

        if not issubclass(cls, ContrastiveLoss):
            raise TypeError(f"{cls.__name__} must derive from isogclr.losses.base.ContrastiveLoss (the interface "
                            "the trainers read)")
        if not isinstance(getattr(cls, "expects_normalized", None), bool):
            raise TypeError(f"{cls.__name__} must declare the class attribute expects_normalized")
        row = (f"{cls.__module__}:{cls.__qualname__}", modality)
        if REGISTRY.get(name) != row:
            raise ValueError(f"loss {name!r} ({row[0]}, {modality}) is not registered as such in "
                             f"isogclr.losses.registry.REGISTRY (has {REGISTRY.get(name)}): add or fix its row")
        cls.registry_name = name
        cls.modality = modality
        return cls

    return decorate


def losses_of(modality: ModalityT) -> tuple[str, ...]:
    """Names of the registered losses of ``modality``, in registration order."""
    if modality not in ("unimodal", "bimodal"):
        raise ValueError(f"modality must be 'unimodal' or 'bimodal', got {modality!r}")
    return tuple(name for name, kind in MODALITY.items() if kind == modality)


def build_loss(name: str, num_samples: int, **kwargs: Any) -> ContrastiveLoss:
    """Instantiate the loss registered as ``name`` (importing its module); every loss takes ``num_samples`` first."""
    if name not in REGISTRY:
        raise KeyError(f"unknown loss {name!r}; registered: {sorted(REGISTRY)}")
    return LOSSES[name](num_samples, **kwargs)
