"""Typed overlays: a setting applied to a resolved run config rather than to params.yaml's dict.

A dotted key of params.yaml (a study's knob or override, a ``train.by_dataset`` setting) names a field of a
typed section of the run's config; :func:`apply_setting` replaces that section with :func:`typed_section`, which
re-runs the section's checks (its ``__post_init__``), and names the key's origin in any error. A method's knobs
(a selected or pinned candidate, a study's value) go through :func:`with_knobs`, checked as
``methods.<name>.<knob>`` is in params.yaml. Whether a method's arguments build its loss is checked once, by
:func:`check_loss` (the validation of params.yaml, before any compute); the trainer builds the loss of a run.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from ..losses import LOSSES
from .typed import ConfigError, check_finite, check_number, typed_section

LR = "lr"  # methods.<m>.lr: the method's own learning rate (MethodConfig.lr), not an argument of its loss

# dotted key prefix -> the field of a unimodal run's config (RunConfig) that holds it; the longest prefix wins
RUN_SECTIONS = {"model.encoder": "encoder", "model.head": "head", "augment": "augment",
                "train.optimizer": "optimizer", "train.stream": "stream", "probe": "probe", "train": "train",
                "data.root": "data_root", "data.long_tailed_order": "long_tailed_order"}
# the same for an image-text run's config (BimodalRunConfig)
BIMODAL_SECTIONS = {"bimodal.image_encoder": "image_encoder", "bimodal.text_encoder": "text_encoder",
                    "bimodal.stream": "stream", "bimodal": "train"}


def check_knob(method: str, loss: str, knob: str, value: Any) -> None:
    """``methods.<method>.<knob>`` = ``value``: finite, a number where the loss's default is one, a bool where it
    is a bool; ``lr`` (the method's own rate) a number > 0."""
    key = f"methods.{method}.{knob}"
    check_finite(value, key)
    if knob == LR:
        if value is not None:
            check_number(key, value, "float")
            if not value > 0:
                raise ConfigError(f"{key}: the method's learning rate must be > 0, got {value!r}")
        return
    default = inspect.signature(LOSSES[loss]).parameters.get(knob)
    default = None if default is None else default.default
    if isinstance(default, int | float) and not isinstance(default, bool) and value is not None:
        check_number(key, value, "float")
    elif isinstance(default, bool) and not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")


def with_knobs(method, knobs: dict[str, Any]):
    """``method`` (a :class:`~isogclr.config.core.MethodConfig`) at ``knobs``: ``lr`` sets the method's own rate,
    every other knob its loss's argument; each is checked as ``methods.<name>.<knob>``."""
    for knob, value in knobs.items():
        check_knob(method.name, method.loss, knob, value)
    kwargs = {**method.kwargs, **{k: v for k, v in knobs.items() if k != LR}}
    return dataclasses.replace(method, kwargs=kwargs, lr=knobs.get(LR, method.lr))


def check_loss(method, origin: str = "") -> None:
    """Build ``method``'s loss once on 2 samples, so that an argument its loss refuses fails here, before any
    compute, naming ``methods.<name>`` after ``origin`` (the study or candidate that set it, with its ``: ``)."""
    try:
        method.build(num_samples=2)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{origin}methods.{method.name}: {err}") from err


def _section(key: str, sections: dict[str, str]) -> tuple[str, str]:
    """The prefix of ``key`` that names a section of a run config (the longest), and the field that holds it."""
    for prefix in sorted(sections, key=len, reverse=True):
        if key == prefix or key.startswith(prefix + "."):
            return prefix, sections[prefix]
    raise ConfigError(f"{key.split('.')[0]} is not a section of params.yaml that a run reads (key {key!r}; "
                      f"settable: {sorted(sections)} and methods.<method>.<knob>)")


def apply_setting(cfg: Any, key: str, value: Any, where: str, sections: dict[str, str] = RUN_SECTIONS) -> Any:
    """``cfg`` (a resolved run config) with the dotted key ``key`` of params.yaml set to ``value``; ``where``
    names the setting's origin (``studies.<s>.knob``, ``train.by_dataset.<d>``) in any error. A key of a
    section replaces that field, a section's key the whole section (its unset fields at their defaults);
    ``methods.<method>.<knob>`` sets a knob of the run's method (:func:`with_knobs`) and leaves the runs of
    other methods as they are."""
    try:
        if key.startswith("methods."):
            _, name, knob = (key.split(".", 2) + ["", ""])[:3]
            if not knob or "." in knob:
                raise ConfigError(f"{key}: expected methods.<method>.<knob>")
            if name != cfg.method.name:  # another method's setting (train.by_dataset holds every method's)
                return cfg
            return method_rate(dataclasses.replace(cfg, method=with_knobs(cfg.method, {knob: value})))
        prefix, field = _section(key, sections)
        current = getattr(cfg, field)
        if not dataclasses.is_dataclass(current):  # a plain value (data.root), or a section the run leaves unset
            if key != prefix or current is None:
                raise ConfigError(f"{key}: not set in this run ({prefix} is {current!r})")
            return dataclasses.replace(cfg, **{field: type(current)(value)})
        if key == prefix:
            return method_rate(dataclasses.replace(cfg, **{field: typed_section(type(current), value, prefix)}))
        leaf = key.removeprefix(prefix + ".")
        values = {f.name: getattr(current, f.name) for f in dataclasses.fields(current)}
        if "." in leaf or leaf not in values:
            raise ConfigError(f"{key}: unknown key of {prefix} (allowed: {sorted(values)})")
        section = typed_section(type(current), {**values, leaf: value}, prefix)
        return method_rate(dataclasses.replace(cfg, **{field: section}))
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err


def method_rate(cfg: Any) -> Any:
    """A unimodal run's optimizer at its method's own learning rate (``methods.<m>.lr``), when it sets one: the
    method's rate replaces ``train.optimizer.lr`` whatever set either."""
    if cfg.method.lr is None or not hasattr(cfg, "optimizer") or cfg.optimizer.lr == cfg.method.lr:
        return cfg
    return dataclasses.replace(cfg, optimizer=dataclasses.replace(cfg.optimizer, lr=cfg.method.lr))
