"""Losses by the name used in ``params.yaml`` (``methods.<name>.loss``): the name of a loss is its module's.

A loss is one file, ``src/isogclr/losses/<name>.py``, holding one class decorated with
``@register_loss(modality=...)``; nothing else lists losses. The decorator checks the class against the
interface of :class:`~.base.ContrastiveLoss` and names it after its module.

Which modules hold a loss, and of which modality, is read from their source (the decorator's line), not by
importing them: :func:`build_loss` imports the module of the loss it builds and no other, so a run's code, and
its pipeline stage's dependencies (:mod:`isogclr.pipeline`), are its own loss's.

A unimodal loss is called as ``loss_fn(z1, z2, index)`` (two views of the same samples), a bimodal
one as ``loss_fn(image_features, text_features, index)``; :func:`losses_of` lists either.
"""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from .base import ContrastiveLoss

ModalityT = Literal["unimodal", "bimodal"]
MODALITIES = ("unimodal", "bimodal")
PACKAGE = __name__.rpartition(".")[0]  # isogclr.losses


class LossEntry(NamedTuple):
    """A loss module as its source declares it: the decorated class and its modality."""

    cls: str
    modality: ModalityT


def _declared(path: Path) -> LossEntry | None:
    """The class of ``path`` decorated with ``register_loss(modality=...)``, or None: read from the source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "register_loss":
                args = [*deco.args, *(k.value for k in deco.keywords if k.arg == "modality")]
                if len(args) != 1 or not isinstance(args[0], ast.Constant) or args[0].value not in MODALITIES:
                    raise ValueError(f"{path}: class {node.name}: write @register_loss(modality='unimodal') or "
                                     "'bimodal', a literal the registry reads without importing the module")
                found.append(LossEntry(node.name, args[0].value))
    if len(found) > 1:
        raise ValueError(f"{path}: one loss per module (its name is the module's), found {[e.cls for e in found]}")
    return found[0] if found else None


@functools.cache
def registered() -> dict[str, LossEntry]:
    """Every loss of the package, by name (its module's name), sorted."""
    entries = {}
    for path in sorted(Path(__file__).parent.glob("*.py")):
        entry = _declared(path)
        if entry is not None:
            entries[path.stem] = entry
    return entries


def _entry(name: str) -> LossEntry:
    entry = registered().get(name)
    if entry is None:
        raise KeyError(f"unknown loss {name!r}: no module {PACKAGE}.{name} with a @register_loss class; "
                       f"registered: {sorted(registered())}")
    return entry


def loss_module(name: str) -> str:
    """The module that defines the loss ``name`` (what a run of it imports): ``isogclr.losses.<name>``."""
    _entry(name)
    return f"{PACKAGE}.{name}"


class _Losses(Mapping):
    """``LOSSES[name]``: the class of a loss, its module imported on first access."""

    def __getitem__(self, name: str) -> type[ContrastiveLoss]:
        entry = _entry(name)
        return getattr(importlib.import_module(loss_module(name)), entry.cls)

    def __iter__(self) -> Iterator[str]:
        return iter(registered())

    def __len__(self) -> int:
        return len(registered())


LOSSES: Mapping[str, type[ContrastiveLoss]] = _Losses()


class _Modality(Mapping):
    """``MODALITY[name]``: how the loss ``name`` is called, read from its module's decorator."""

    def __getitem__(self, name: str) -> ModalityT:
        return _entry(name).modality

    def __iter__(self) -> Iterator[str]:
        return iter(registered())

    def __len__(self) -> int:
        return len(registered())


MODALITY: Mapping[str, ModalityT] = _Modality()


def register_loss(modality: ModalityT) -> Callable[[type], type]:
    """Class decorator of the loss of a module ``isogclr.losses.<name>``: check ``cls`` against the loss
    interface and give it ``registry_name`` (``<name>``, its module's) and ``modality`` (how it is called)."""
    if modality not in MODALITIES:
        raise ValueError(f"modality of a loss must be 'unimodal' or 'bimodal', got {modality!r}")

    def decorate(cls: type) -> type:
        from .base import ContrastiveLoss

        if not issubclass(cls, ContrastiveLoss):
            raise TypeError(f"{cls.__name__} must derive from isogclr.losses.base.ContrastiveLoss (the interface "
                            "the trainers read)")
        if not isinstance(getattr(cls, "expects_normalized", None), bool):
            raise TypeError(f"{cls.__name__} must declare the class attribute expects_normalized")
        package, _, name = cls.__module__.rpartition(".")
        if package != PACKAGE:
            raise ValueError(f"{cls.__name__} is defined in {cls.__module__}: a loss is a module of {PACKAGE} "
                             f"(src/isogclr/losses/<name>.py), and its name is the module's")
        cls.registry_name = name
        cls.modality = modality
        return cls

    return decorate


def losses_of(modality: ModalityT) -> tuple[str, ...]:
    """Names of the losses of ``modality``, sorted."""
    if modality not in MODALITIES:
        raise ValueError(f"modality must be 'unimodal' or 'bimodal', got {modality!r}")
    return tuple(name for name, entry in registered().items() if entry.modality == modality)


def build_loss(name: str, num_samples: int, **kwargs: Any) -> ContrastiveLoss:
    """Instantiate the loss ``name`` (importing its module); every loss takes ``num_samples`` first."""
    return LOSSES[name](num_samples, **kwargs)
