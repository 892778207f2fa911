"""Registry of losses by the name used in ``params.yaml`` (``methods.<name>.loss``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

LOSSES: dict[str, type[nn.Module]] = {}


def register_loss(name: str) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: make ``cls`` buildable as ``build_loss(name, ...)``."""

    def decorate(cls: type[nn.Module]) -> type[nn.Module]:
        if name in LOSSES:
            raise ValueError(f"loss name {name!r} is registered twice ({LOSSES[name].__name__}, {cls.__name__})")
        LOSSES[name] = cls
        cls.registry_name = name
        return cls

    return decorate


def build_loss(name: str, num_samples: int, **kwargs: Any) -> nn.Module:
    """Instantiate the loss registered as ``name``; every loss takes ``num_samples`` first."""
    if name not in LOSSES:
        raise KeyError(f"unknown loss {name!r}; registered: {sorted(LOSSES)}")
    return LOSSES[name](num_samples, **kwargs)
