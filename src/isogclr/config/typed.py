"""params.yaml's values checked by type, with the key in the message: :class:`ConfigError` (every invalid value of
the configuration), :func:`check_number`, :func:`check_finite` and :func:`typed_section` (a section read into its
dataclass, unknown keys refused).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


class ConfigError(ValueError):
    """An invalid value in params.yaml; the message starts with the key."""


def check_number(key: str, value: Any, kind: str = "float") -> None:
    """``value`` must be a finite number (``kind="float"``: an int or a float) or an integer (``"int"``);
    a boolean, a string, NaN or an infinity is a :class:`ConfigError` naming ``key``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}: expected {'an integer' if kind == 'int' else 'a number'}, got {value!r}")
    if kind == "int" and not isinstance(value, int):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")


def _check_field(key: str, value: Any, annotation: str) -> None:
    """Check ``value`` against a dataclass field's annotation (a string, ``from __future__ import annotations``):
    ``int``, ``float``, ``bool``, their ``| None`` forms and tuples of them; other annotations are left to the
    dataclass's own checks."""
    options = [o for o in annotation.replace(" ", "").split("|") if o != "None"]
    if value is None and len(options) < len(annotation.replace(" ", "").split("|")):
        return
    if len(options) != 1:
        return
    kind = options[0]
    if kind in ("int", "float"):
        check_number(key, value, kind)
    elif kind == "bool" and not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    elif kind.startswith("tuple[") and isinstance(value, tuple | list):
        inner = kind[len("tuple["):-1].split(",")
        kinds = inner[:1] * len(value) if inner[1:] == ["..."] else inner if len(inner) == len(value) else []
        for i, (item, item_kind) in enumerate(zip(value, kinds, strict=False)):
            if item_kind in ("int", "float"):
                check_number(f"{key}[{i}]", item, item_kind)


def check_finite(tree: Any, key: str) -> None:
    """Every float anywhere in ``tree`` (mappings and lists, e.g. a tuning grid) must be finite; the error names
    its dotted key."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            check_finite(v, f"{key}.{k}" if key else str(k))
    elif isinstance(tree, list | tuple):
        for i, v in enumerate(tree):
            check_finite(v, f"{key}[{i}]")
    elif isinstance(tree, float) and not math.isfinite(tree):
        raise ConfigError(f"{key}: expected a finite number, got {tree!r}")


def typed_section(cls: type, values: Any, key: str):
    """``values`` (a params.yaml section) as the dataclass ``cls``: unknown keys refused, and every field
    annotated as a number, a boolean or a tuple of numbers checked for its type and finiteness (the one place
    where params.yaml's values are checked by type, with the key in the message); then ``cls``'s own checks."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{key}: expected a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (allowed: {sorted(fields)})")
    for name, value in values.items():
        check_finite(value, f"{key}.{name}")
        if isinstance(fields[name].type, str):
            _check_field(f"{key}.{name}", value, fields[name].type)
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**converted)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{key}: {err}") from err


def check_seed(key: str, seed: Any) -> int:
    """``seed`` must be a non-negative integer; else a :class:`ConfigError` naming ``key``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{key}: seeds are non-negative integers, got {seed!r}")
    return seed
