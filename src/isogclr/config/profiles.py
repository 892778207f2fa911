"""Reading params.yaml and the profiles: :func:`load_params` (a full profile, or an overlay merged onto the
profile it ``extends``), :func:`merge_profile` (the overlay rules: ``!delete``, ``!replace``) and
:func:`profile_text` (what ``python -m isogclr profile <name>`` writes as params.yaml).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from ..io import TextFileError, read_text
from .typed import ConfigError, check_finite


class _Delete:
    """``!delete`` in a profile overlay: the key is removed from the base profile."""


class _Replace(dict):
    """``!replace {...}`` in a profile overlay: the mapping replaces the base's instead of being merged into it."""


class _OverlayLoader(yaml.SafeLoader):
    pass


_OverlayLoader.add_constructor("!delete", lambda loader, node: _Delete())
_OverlayLoader.add_constructor("!replace", lambda loader, node: _Replace(loader.construct_mapping(node, deep=True)))



def read_overlay(text: str) -> dict[str, Any]:
    """A profile overlay written as YAML text (its tags ``!delete`` and ``!replace``), for :func:`merge_profile`."""
    return yaml.load(text, Loader=_OverlayLoader) or {}


EXTENDS = "extends"  # an overlay's first key: the profile it changes (profiles/<name>.yaml beside it)


def merge_profile(base: dict[str, Any], overlay: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``overlay`` applied to ``base`` (neither is modified): mappings merge key by key, recursively; any other
    value (a number, a string, a list) replaces the base's; ``!delete`` removes the key; ``!replace {...}``
    replaces a whole mapping."""
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        here = f"{where}{key}"
        if isinstance(value, _Delete):
            if key not in merged:
                raise ConfigError(f"{here}: !delete of a key the base profile does not have")
            del merged[key]
        elif isinstance(value, _Replace):
            merged[key] = _plain_profile(dict(value), here)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_profile(merged[key], value, f"{here}.")
        else:
            merged[key] = _plain_profile(value, here)
    return merged


def _plain_profile(value: Any, where: str) -> Any:
    """``value`` without overlay tags (a ``!delete`` with no base key to remove is an error naming it)."""
    if isinstance(value, _Delete):
        raise ConfigError(f"{where}: !delete of a key the base profile does not have")
    if isinstance(value, dict):
        return {k: _plain_profile(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_profile(v, where) for v in value]
    return copy.deepcopy(value)


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    try:
        params = yaml.load(read_text(path), Loader=_OverlayLoader)  # noqa: S506 (a SafeLoader with two overlay tags)
    except TextFileError as err:  # names the file and line
        raise ConfigError(str(err)) from None
    except OSError as err:  # a folder, a loop of symbolic links, no permission
        raise ConfigError(f"{path}: cannot read it ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    try:
        check_finite(params, "")  # NaN or an infinity anywhere (a knob, a tuning grid) is refused
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    return params


def load_params(path: Path | str = "params.yaml") -> dict[str, Any]:
    """params.yaml (or a profile) as a dict; a missing file or malformed YAML is a one-line ConfigError
    naming the file, line and column.

    A profile may be an overlay: ``extends: mini`` as its first key, then only what differs from
    ``profiles/mini.yaml`` (the file beside it), merged by :func:`merge_profile`. params.yaml is always a full
    profile (DVC reads it): ``python -m isogclr profile <name>`` writes it."""
    path = Path(path)
    params = _read_yaml(path)
    base = params.pop(EXTENDS, None)
    if base is None:
        return _plain_profile(params, "")
    if not isinstance(base, str):
        raise ConfigError(f"{path}: {EXTENDS}: expected a profile name (profiles/<name>.yaml), got {base!r}")
    base_path = path.parent / f"{base}.yaml"
    if base_path.resolve() == path.resolve():
        raise ConfigError(f"{path}: {EXTENDS}: {base!r} is the file itself")
    base_params = load_params(base_path)
    try:
        return merge_profile(base_params, params)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def profile_text(path: Path | str) -> str:
    """The full profile ``path`` as params.yaml's text, under a header that names its source: the file itself
    when it is full (its comments kept), else the overlay merged onto its base. params.yaml is always written
    from a profile, never kept by hand beside it (``profile --check`` says where it differs)."""
    path = Path(path)
    if EXTENDS not in _read_yaml(path):
        return (f"# Written by `python -m isogclr profile {path.stem}` from profiles/{path.name}, the one source "
                "of this profile: change\n# the default there; an ablation edits this file (`dvc exp run -S ...`), "
                "`git checkout params.yaml` undoes it.\n") + read_text(path)
    params = load_params(path)

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    base = _read_yaml(path)[EXTENDS]
    header = (f"# Written by `python -m isogclr profile {path.stem}`: profiles/{path.name} (what differs) over "
              f"profiles/{base}.yaml.\n# Edit those two files, not this one; `git checkout params.yaml` returns "
              "to the default profile.\n")
    return header + yaml.dump(params, Dumper=_NoAliases, sort_keys=False, width=120, allow_unicode=True)


def differences(params: Any, base: Any, where: str = "") -> list[str]:
    """The dotted keys at which ``params`` differs from ``base`` (a key only one of them has, or another
    value); a mapping is compared key by key, anything else as a whole."""
    if isinstance(params, dict) and isinstance(base, dict):
        return [key for k in [*base, *(k for k in params if k not in base)]
                for key in differences(params.get(k, _MISSING), base.get(k, _MISSING), f"{where}{k}.")]
    return [] if params == base else [where.rstrip(".")]


_MISSING = object()


def overlay_keys(overlay: dict[str, Any], where: str = "") -> set[str]:
    """The dotted keys an overlay sets: its leaves, the mappings it replaces or deletes whole, and each
    prefix of them (a change below a key it sets is its change)."""
    keys: set[str] = set()
    for key, value in overlay.items():
        here = f"{where}{key}"
        keys.add(here)
        if isinstance(value, dict) and not isinstance(value, _Replace):
            keys |= overlay_keys(value, f"{here}.")
    return keys


def check_profiles(folder: Path | str, validate: Any) -> list[str]:
    """Check every profile of ``folder`` (``<name>.yaml`` with a ``profile`` or ``extends`` key): it loads,
    merged onto the profile it extends, and ``validate`` (:func:`isogclr.config.validate.validate_params`) accepts it;
    an overlay changes nothing but the keys it names (a merged key that differs from its base is under a key
    of the overlay). Returns one line per profile; raises :class:`ConfigError` naming the profile and the key
    on the first problem. This is ``python -m isogclr profile --check``: the merged profiles are checked by
    rule, not against a stored copy."""
    lines = []
    for path in sorted(Path(folder).glob("*.yaml")):
        if not {"profile", EXTENDS} & set(_read_yaml(path)):
            continue  # not a profile (paper_settings.yaml: the papers' settings the paper profile is checked on)
        try:
            params = load_params(path)
            validate(params)
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}" if str(path) not in str(err) else str(err)) from None
        raw = _read_yaml(path)
        base = raw.get(EXTENDS)
        if base is None:
            lines.append(f"{path}: a full profile, valid")
            continue
        named = overlay_keys({k: v for k, v in raw.items() if k != EXTENDS})
        stray = [k for k in differences(params, load_params(path.parent / f"{base}.yaml"))
                 if not any(k == n or k.startswith(f"{n}.") for n in named)]
        if stray:
            raise ConfigError(f"{path}: the merged profile differs from {base}.yaml at {stray[0]}, a key the overlay "
                              "does not name")
        changed = len(differences(params, load_params(path.parent / f"{base}.yaml")))
        lines.append(f"{path}: overlay of {base}.yaml, valid, {changed} keys differ from it")
    return lines
