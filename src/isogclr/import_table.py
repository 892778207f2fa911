"""Names to code: the one kind of registry of the package (losses, datasets, streams, data generators).

A registry is an explicit table, written out where it can be grepped, of names to import targets
``"module:attribute"``::

    LOSSES = Registry("loss", {"simclr": "isogclr.losses.simclr:SimCLRLoss", ...})

``LOSSES["simclr"]`` imports ``isogclr.losses.simclr`` (on first access, and no other entry's module) and returns
its ``SimCLRLoss``; ``"simclr" in LOSSES``, ``sorted(LOSSES)`` and :meth:`Registry.module_of` import nothing.
That is what keeps a run's code its own: a run imports its own loss and dataset, and
:func:`isogclr.code_deps.run_modules` makes its pipeline stage depend on those modules (``module_of``) and no
other entry's. An unknown name is a ``KeyError`` listing the known ones; a target that does not import fails
``tests/test_registry.py``, which imports every entry of every registry.

This is the only module of the package that imports by name (:mod:`importlib`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

_TARGET = re.compile(r"^[a-z_][\w.]*:[A-Za-z_]\w*$")


class Registry(Mapping[str, Any]):
    """``registry[name]``: the object at ``targets[name]`` (``"module:attribute"``), its module imported lazily.

    Args:
        kind: what the entries are ("loss", "dataset", ...), for error messages.
        targets: name -> ``"module:attribute"``; iteration follows its order.
    """

    def __init__(self, kind: str, targets: Mapping[str, str]) -> None:
        bad = {name: target for name, target in targets.items() if not _TARGET.match(str(target))}
        if bad:
            raise ValueError(f"{kind} registry: targets must read 'package.module:attribute', got {bad}")
        self.kind = kind
        self.targets: dict[str, str] = dict(targets)

    def target(self, name: str) -> str:
        """The import target of ``name``; ``KeyError`` naming the known names if there is none."""
        if name not in self.targets:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {sorted(self.targets)}")
        return self.targets[name]

    def module_of(self, name: str) -> str:
        """The module that defines ``name`` (what using it imports), without importing it."""
        return self.target(name).partition(":")[0]

    def module(self, name: str) -> ModuleType:
        """The module of ``name``'s entry, imported: the entry and the code that lives beside it (a stream loader's
        module holds the transforms and loaders a streamed run uses)."""
        return importlib.import_module(self.module_of(name))

    def __getitem__(self, name: str) -> Any:
        return self.load(self.target(name))

    def __contains__(self, name: object) -> bool:  # Mapping's would import the entry
        return name in self.targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.targets)

    def __len__(self) -> int:
        return len(self.targets)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries)"

    @staticmethod
    def load(target: str) -> Any:
        """The object at ``target`` (``"module:attribute"``), importing its module."""
        module, _, attribute = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except AttributeError:
            raise ImportError(f"{target}: module {module} has no attribute {attribute!r}") from None
