"""Registry of losses by the name used in ``params.yaml`` (``methods.<name>.loss``), with their modality.

A unimodal loss is called as ``loss_fn(z1, z2, index)`` (two views of the same samples), a bimodal
one as ``loss_fn(image_features, text_features, index)``; :func:`losses_of` lists either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from torch import nn

ModalityT = Literal["unimodal", "bimodal"]

LOSSES: dict[str, type[nn.Module]] = {}
MODALITY: dict[str, ModalityT] = {}


def register_loss(name: str, modality: ModalityT) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make ``cls`` buildable as ``build_loss(name, ...)``; ``modality`` is how it is called."""
    if modality not in ("unimodal", "bimodal"):
        raise ValueError(f"modality of loss {name!r} must be 'unimodal' or 'bimodal', got {modality!r}")

    def decorate(cls: type[nn.Module]) -> type[nn.Module]:
        if name in LOSSES:
            raise ValueError(f"loss name {name!r} is registered twice ({LOSSES[name].__name__}, {cls.__name__})")
        if not isinstance(getattr(cls, "expects_normalized", None), bool):
            raise TypeError(f"{cls.__name__} must declare the class attribute expects_normalized")
        LOSSES[name] = cls
        MODALITY[name] = modality
        cls.registry_name = name
        cls.modality = modality
        return cls

    return decorate


def losses_of(modality: ModalityT) -> tuple[str, ...]:
    """Names of the registered losses of ``modality``, in registration order."""
    if modality not in ("unimodal", "bimodal"):
        raise ValueError(f"modality must be 'unimodal' or 'bimodal', got {modality!r}")
    return tuple(name for name, kind in MODALITY.items() if kind == modality)


def build_loss(name: str, num_samples: int, **kwargs: Any) -> nn.Module:
    """Instantiate the loss registered as ``name``; every loss takes ``num_samples`` first."""
    if name not in LOSSES:
        raise KeyError(f"unknown loss {name!r}; registered: {sorted(LOSSES)}")
    return LOSSES[name](num_samples, **kwargs)
