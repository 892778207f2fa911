"""The keys params.yaml may hold, at every level, and the names and seeds it may give: :func:`check_keys`.

An unknown key (``trian:``, ``table1.seedz``, ``train.by_dataset.synth10: {train.epochz: 3}``) would otherwise be
read by nothing and change nothing, silently. The known keys are those of the dataclass each section is read into
(so a field added to a config is a known key at once), and, for ``methods.<name>``, the arguments of the loss it
names. The sections that hold maps of user-chosen names (``methods``, ``studies``, ``bimodal_studies``) check those
names instead: they become folder names (``runs/<method>-<dataset>-s<seed>``, ``studies/<study>/...``,
``tuning/<method>/``), so each must be a plain name (:func:`check_name`). Every seed (``seed``, ``seeds``,
``side_seeds``, ``random_inits``) is a non-negative integer.

Called first by :func:`isogclr.config.validate.validate_params`, which every command that reads params.yaml runs. The
sections' config classes are imported when the keys are first checked, so that :func:`check_name` (the command
line's check of the names it is given) costs what :mod:`.core` costs.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import re
from typing import Any

from ..data import DATASETS
from ..dataset_specs import GENERATED
from ..import_table import Registry
from ..losses import LOSSES
from .core import PIN, SEARCH, TABLE_SECTIONS, UNTUNED
from .overlay import LR
from .typed import ConfigError, check_seed

# a name that becomes a folder name: no separator, no leading dot, no "..", no space
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
VALUE = re.compile(r"[A-Za-z0-9_.+-]+")  # a study value as its run folders spell it (0.1, 1e-05, resnet18, True)
SEED_KEYS = ("seed", "seeds", "side_seeds", "random_inits")


class _Any:
    """A value whose inside is not checked here: a leaf, or a mapping read as data (``per_class``,
    ``paper_rows``)."""


class _Names:
    """A mapping from user-chosen names (each a plain name, :func:`check_name`) to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


class _Datasets:
    """A mapping from registered dataset names to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


class _Dotted:
    """A mapping from dotted keys of params.yaml (``train.epochs``) to the values they set."""


class _Method:
    """``methods.<name>``: ``loss``, ``search``, ``untuned``, ``pin``, ``lr`` and the arguments of the loss."""


ANY, DOTTED, METHOD = _Any(), _Dotted(), _Method()


def _fields(cls: type, **inner: Any) -> dict[str, Any]:
    """The keys of the section read into dataclass ``cls``: its fields (leaves unless given in ``inner``)."""
    keys = {f.name: ANY for f in dataclasses.fields(cls)}
    unknown = set(inner) - set(keys)
    if unknown:
        raise AssertionError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    return {**keys, **inner}


def _generated_sections() -> dict[str, Any]:
    """``data.<name>`` of each generated folder with a section of its own (:data:`isogclr.dataset_specs.GENERATED`):
    the fields of its spec dataclass (``per_class``, keyed by class count, is any mapping)."""
    sections = {}
    for generator in GENERATED.values():
        if not generator.shares:
            cls = Registry.load(generator.spec_type)
            per_class = {"per_class": ANY} if "per_class" in {f.name for f in dataclasses.fields(cls)} else {}
            sections[generator.name] = _fields(cls, **per_class)
    return sections


@functools.cache
def _schema() -> dict[str, Any]:
    """Every key params.yaml may hold, as a tree (built from the dataclasses its sections are read into); not to
    be modified (cached)."""
    from ..data.augment import AugmentConfig
    from ..data.base import StreamConfig
    from ..eval.linear_probe import ProbeConfig
    from ..models import EncoderConfig, HeadConfig
    from ..models.text import TextEncoderConfig
    from .bimodal import BIMODAL_LISTS, BimodalTrainConfig
    from .convergence import ConvergenceConfig, ConvergenceStudy
    from .core import OptimConfig, TrainConfig
    from .sections import TableSpec
    from .studies import BimodalStudySpec, StudySpec
    from .tuning import TUNING_SECTIONS, TuningSpec

    table = _fields(TableSpec, paper_rows=ANY)
    study = {"overrides": DOTTED}
    return {
        "profile": ANY,
        "launcher": ANY,
        "data": {"root": ANY, "long_tailed_order": ANY, **_generated_sections()},
        "methods": _Names(METHOD),
        "model": {"encoder": _fields(EncoderConfig), "head": _fields(HeadConfig)},
        "augment": _fields(AugmentConfig),
        "train": {**_fields(TrainConfig, epochs_by_dataset=_Datasets(ANY)), "optimizer": _fields(OptimConfig),
                  "by_dataset": _Datasets(DOTTED), "stream": _fields(StreamConfig)},
        "probe": _fields(ProbeConfig),
        **{section: _fields(TuningSpec) for section in TUNING_SECTIONS},
        **{section: table for section in TABLE_SECTIONS},
        "temperatures": {"methods": ANY, "datasets": ANY},  # its seeds are table1's
        "bimodal": {**_fields(BimodalTrainConfig), **dict.fromkeys(BIMODAL_LISTS, ANY), "paper_rows": ANY,
                    "tuned": ANY, "image_encoder": _fields(EncoderConfig), "text_encoder": _fields(TextEncoderConfig),
                    "stream": _fields(StreamConfig)},
        "studies": _Names(_fields(StudySpec, **study)),
        "bimodal_studies": _Names(_fields(BimodalStudySpec, **study)),
        "emc2_convergence": {**_fields(ConvergenceConfig), **_fields(ConvergenceStudy)},
    }


def check_name(key: str, name: Any, what: str = "name") -> str:
    """``name`` as a folder name may hold it: letters, digits, ``_``, ``.`` and ``-``, not starting with ``.``
    or ``-`` and without ``..``; else a :class:`ConfigError` naming ``key``."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise ConfigError(f"{key}: {name!r} is not a plain {what} (letters, digits, '_', '.' and '-', not starting "
                          "with '.' or '-', no '..'): it names a folder of the run's outputs")
    return name


def _unknown(key: str, known: Any) -> ConfigError:
    """The error of an unknown ``key`` (dotted), with the nearest known key suggested."""
    parent, _, leaf = key.rpartition(".")
    close = difflib.get_close_matches(leaf, [str(k) for k in known], n=1)
    hint = f"did you mean {(parent + '.' if parent else '') + close[0]!r}?" if close else \
        f"known keys here: {sorted(map(str, known))}"
    return ConfigError(f"{key}: unknown key ({hint})")


def _loss_keys(loss: Any) -> set[str] | None:
    """The arguments of loss ``loss``'s constructor (besides ``num_samples``); None when it takes any keyword or
    is not a registered loss (the loss itself is checked by the method's config)."""
    if not isinstance(loss, str) or loss not in LOSSES:
        return None
    parameters = list(inspect.signature(LOSSES[loss]).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters[1:]}


def _check_method(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        return
    knobs = _loss_keys(spec.get("loss"))
    if knobs is None:
        return
    known = {"loss", SEARCH, UNTUNED, PIN, LR, *knobs}
    for key in spec:
        if key not in known:
            raise _unknown(f"{where}.{key}", known)
    space = spec.get(SEARCH)
    candidates = [space] if isinstance(space, dict) else space if isinstance(space, list) else []
    for i, candidate in enumerate(candidates):
        for key in candidate if isinstance(candidate, dict) else ():
            if key not in {LR, *knobs}:
                raise _unknown(f"{where}.{SEARCH}{f'[{i}]' if isinstance(space, list) else ''}.{key}", {LR, *knobs})


def _check_seeds(key: str, value: Any) -> None:
    leaf = key.rpartition(".")[2]
    if leaf == "seed":
        check_seed(key, value)
    elif leaf in SEED_KEYS and isinstance(value, list):
        for seed in value:
            check_seed(key, seed)


def _walk(value: Any, schema: Any, where: str, params: dict[str, Any]) -> None:
    """Check ``value`` (the params.yaml subtree at dotted key ``where``) against ``schema``."""
    if isinstance(schema, _Any) or not isinstance(value, dict):
        return
    if isinstance(schema, _Method):
        _check_method(value, where)
    elif isinstance(schema, _Dotted):
        for key, setting in value.items():
            _check_dotted(params, str(key), setting, where)
    elif isinstance(schema, _Names | _Datasets):
        for name, inner in value.items():
            if isinstance(schema, _Datasets) and name not in DATASETS:
                close = difflib.get_close_matches(str(name), list(DATASETS), n=1)
                raise ConfigError(f"{where}.{name}: unknown dataset (" + (f"did you mean {close[0]!r}?" if close else
                                                                          f"registered: {sorted(DATASETS)}") + ")")
            check_name(f"{where}.{name}", name)
            _walk(inner, schema.inner, f"{where}.{name}", params)
    else:
        for key, inner in value.items():
            here = f"{where}.{key}" if where else str(key)
            if key not in schema:
                raise _unknown(here, schema)
            _check_seeds(here, inner)
            _walk(inner, schema[key], here, params)


def _check_dotted(params: dict[str, Any], key: str, value: Any, where: str) -> None:
    """A dotted key of params.yaml set by ``where`` (``train.by_dataset.<dataset>``, a study's ``overrides`` or
    ``knob``) must be a known key; the value it sets is checked as if written there."""
    schema: Any = _schema()
    node: Any = params
    parts = key.split(".")
    for i, part in enumerate(parts):
        path = ".".join(parts[:i + 1])
        if isinstance(schema, _Any):
            return
        if isinstance(schema, _Method):
            knobs = _loss_keys((node or {}).get("loss") if isinstance(node, dict) else None)
            if knobs is not None and part not in {LR, *knobs} or i < len(parts) - 1:
                known = {LR, *(knobs or ())}
                raise ConfigError(f"{where}: {path!r} is not a knob of its loss"
                                  + (f" (did you mean {'.'.join([*parts[:i], close[0]])!r}?)"
                                     if (close := difflib.get_close_matches(part, sorted(known), n=1)) else ""))
            return
        if isinstance(schema, _Names | _Datasets):
            schema, node = schema.inner, (node or {}).get(part) if isinstance(node, dict) else None
            continue
        if isinstance(schema, _Dotted) or not isinstance(schema, dict):
            raise ConfigError(f"{where}: {path!r} is not a section of params.yaml")
        if part not in schema:
            err = _unknown(path, schema)
            raise ConfigError(f"{where}: {err}") from None
        schema, node = schema[part], (node or {}).get(part) if isinstance(node, dict) else None
    try:
        _check_seeds(key, value)
        _walk(value, schema, key, params)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def _check_study(params: dict[str, Any], section: str, name: str, spec: Any) -> None:
    """A study's knob (``{method}`` standing for each of its methods) is a known key, and its values spell
    plain folder names (``studies/<name>/<method>-<value>-s<seed>``)."""
    if not isinstance(spec, dict):
        return
    where = f"{section}.{name}"
    knob, methods = spec.get("knob"), spec.get("methods")
    if isinstance(knob, str) and isinstance(methods, list):
        for method in methods:
            check_name(f"{where}.methods", method, "method name")
            _check_dotted(params, knob.replace("{method}", method), None, f"{where}.knob")
    for value in spec.get("values") or [] if isinstance(spec.get("values"), list) else []:
        if not VALUE.fullmatch(str(value)) or ".." in str(value):
            raise ConfigError(f"{where}.values: {value!r} cannot be part of a run folder's name "
                              f"(studies/{name}/<method>-<value>-s<seed>): use numbers or plain words")


def check_keys(params: dict[str, Any]) -> None:
    """Refuse an unknown key at any level of ``params`` (suggesting the nearest known one), a name that
    cannot be a folder name, and a seed that is not a non-negative integer; each error names its key."""
    if not isinstance(params, dict):
        raise ConfigError(f"expected a mapping at the top level, got {params!r}")
    _walk(params, _schema(), "", params)
    for section in ("studies", "bimodal_studies"):
        for name, spec in (params.get(section) or {}).items():
            _check_study(params, section, name, spec)
