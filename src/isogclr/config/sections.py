"""The typed report sections: the table grids, the temperature study, a method's settings, the profile.

The report notebooks read params.yaml through these, never its raw dict; every error names its key
(``table1.seeds: ...``).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from ..data import DATASETS
from .core import TABLE_SECTIONS, method_config
from .overlay import check_loss
from .typed import ConfigError, check_seed

# ------------------------------------------------------------------------------- typed report sections
# The report notebooks read the table grids, the temperature study, the methods' settings and the profile
# through these, never params.yaml's raw dict; every error names its key (``table1.seeds: ...``).
_TABLE_KEYS = ("methods", "datasets", "seeds", "paper_rows", "tuned", "random_inits")


@dataclass(frozen=True)
class TableSpec:
    """A table section (``table1``, ``table1_real``, ``table3``): the runs ``runs/<run-id>`` of every method
    x dataset x seed. ``paper_rows`` maps a method to the paper's row it is compared with (default: its own
    name, see :meth:`paper_row`); ``tuned``: the runs use each method's selection on the validation split."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]
    paper_rows: dict[str, str] = dataclasses.field(default_factory=dict)
    tuned: bool = False
    random_inits: tuple[int, ...] = ()  # ``references`` only: the seeds of the random-init encoders probed

    def paper_row(self, method: str) -> str:
        return self.paper_rows.get(method, method)


@dataclass(frozen=True)
class TemperatureSpec:
    """``temperatures``: learned tau against semantic frequency (iSogCLR Sec. 6.3), read from Table 1's runs of
    ``methods`` on ``datasets`` (each among table1's) at Table 1's ``seeds``."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    seeds: tuple[int, ...]


def _name_list(raw: dict[str, Any], key: str, where: str, allowed, what: str) -> tuple:  # noqa: ANN001
    """``raw[key]`` as a tuple: a non-empty list of names, each in ``allowed`` (named ``what`` in the error)."""
    values = raw.get(key)
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}.{key}: expected a non-empty list, got {values!r}")
    for value in values:
        if not isinstance(value, str) or value not in allowed:
            raise ConfigError(f"{where}.{key}: {value!r} is not {what} ({sorted(allowed)})")
    return tuple(values)


def _section(params: dict[str, Any], section: str, keys: tuple[str, ...]) -> dict[str, Any] | None:
    raw = params.get(section)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{section}: expected a mapping, got {raw!r}")
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ConfigError(f"{section}.{unknown[0]}: unknown key (allowed: {sorted(keys)})")
    return raw


def table_spec(params: dict[str, Any], section: str) -> TableSpec | None:
    """The table section ``section`` (one of :data:`TABLE_SECTIONS`) of ``params``, typed and validated;
    None when the profile has no such section."""
    if section not in TABLE_SECTIONS:
        raise ConfigError(f"{section}: not a table section (the table sections: {list(TABLE_SECTIONS)})")
    raw = _section(params, section, _TABLE_KEYS)
    if raw is None:
        return None
    methods = _name_list(raw, "methods", section, set(params.get("methods") or {}), "a method defined under methods")
    datasets = _name_list(raw, "datasets", section, set(DATASETS), "a registered dataset")
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise ConfigError(f"{section}.seeds: expected a non-empty list, got {seeds!r}")
    for seed in seeds:
        check_seed(f"{section}.seeds", seed)
    paper_rows = raw.get("paper_rows") or {}
    if not isinstance(paper_rows, dict):
        raise ConfigError(f"{section}.paper_rows: expected a mapping method -> paper row, got {paper_rows!r}")
    for method, row in paper_rows.items():
        if method not in methods:
            raise ConfigError(f"{section}.paper_rows: {method!r} is not in {section}.methods")
        if not isinstance(row, str):
            raise ConfigError(f"{section}.paper_rows.{method}: expected the name of a paper row, got {row!r}")
    tuned = raw.get("tuned", False)
    if not isinstance(tuned, bool):
        raise ConfigError(f"{section}.tuned: expected true or false, got {tuned!r}")
    inits = raw.get("random_inits", [])
    if (section == "references") != bool(inits) or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                                       for s in inits):
        raise ConfigError(f"{section}.random_inits: expected a non-empty list of seeds in `references` only, "
                          f"got {inits!r}")
    return TableSpec(methods=methods, datasets=datasets, seeds=tuple(seeds), paper_rows=dict(paper_rows), tuned=tuned,
                     random_inits=tuple(inits))


def references_spec(params: dict[str, Any]) -> TableSpec:
    """``references``: the reference rows of every table of learned representations. Its ``methods`` (the
    supervised reference) run as a table's grid; the no-learning rows of each of its ``datasets`` (chance, raw
    pixels, the encoders initialized by ``random_inits``) are :func:`isogclr.train.references.no_learning`'s."""
    spec = table_spec(params, "references")
    if spec is None:
        raise ConfigError("references: the profile has no references section (reference rows of the tables)")
    return spec


def temperature_spec(params: dict[str, Any]) -> TemperatureSpec | None:
    """``temperatures`` of ``params``, typed and validated (its methods and datasets among table1's, whose runs
    and seeds it reuses); None when the profile has no such section."""
    raw = _section(params, "temperatures", ("methods", "datasets"))
    if raw is None:
        return None
    table = table_spec(params, "table1")
    if table is None:
        raise ConfigError("temperatures: reuses the runs of table1, but the profile has no table1 section")
    methods = _name_list(raw, "methods", "temperatures", set(table.methods), "in table1.methods (its runs are reused)")
    datasets = _name_list(raw, "datasets", "temperatures", set(table.datasets),
                          "in table1.datasets (its runs are reused)")
    return TemperatureSpec(methods=methods, datasets=datasets, seeds=table.seeds)


def method_settings(params: dict[str, Any], name: str) -> dict[str, Any]:
    """The arguments of method ``name``'s loss as its runs get them (``method.kwargs`` of a run's config.json:
    ``methods.<name>`` without ``loss``), validated by building the loss; a copy."""
    method = method_config(params, name)
    check_loss(method)
    return copy.deepcopy(dict(method.kwargs))


def profile_name(params: dict[str, Any]) -> str:
    """The profile's name (``profile``: mini, smoke, paper...), ``"?"`` when it has none."""
    name = params.get("profile", "?")
    if not isinstance(name, str):
        raise ConfigError(f"profile: expected a name, got {name!r}")
    return name
