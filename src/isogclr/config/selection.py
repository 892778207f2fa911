"""A tuned run's selection as a typed overlay: the knobs selected on a validation split
(``tuning/<method>/selected.json``, written by the selection stage, :mod:`isogclr.train.tuning`) applied to a
resolved run config, its method's pinned knobs over them; and a grid run resolved with it when tuned.

It reads the selection and nothing of the selection sections (:mod:`.tuning`), so that a study's or a
report's resolution of a run depends on this module only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..io import read_json
from .core import RunConfig, pinned_knobs, run_config
from .overlay import method_rate, with_knobs
from .typed import ConfigError

TUNING_DIR = "tuning"


def selection_path(method: str, tuning_dir: Path | str = TUNING_DIR) -> Path:
    return Path(tuning_dir) / method / "selected.json"


def selected_knobs(method: str, tuning_dir: Path | str = TUNING_DIR) -> dict[str, Any]:
    """The knobs of ``method`` selected on the validation split (``tuning/<method>/selected.json``)."""
    path = selection_path(method, tuning_dir)
    if not path.is_file():
        raise ConfigError(f"{path}: not found; the tuning stage writes it "
                          f"(dvc repro pipelines/tune/dvc.yaml:tune@{method})")
    return dict(read_json(path)["knobs"])


def with_selection(params: dict[str, Any], cfg: Any, tuning_dir: Path | str = TUNING_DIR) -> Any:
    """``cfg`` (a resolved run of a tuned method, unimodal or image-text) at the knobs selected for its method,
    its pinned knobs (``methods.<method>.pin``) over them."""
    name = cfg.method.name
    knobs = {**selected_knobs(name, tuning_dir), **pinned_knobs(params["methods"][name] or {}, name)}
    return method_rate(dataclasses.replace(cfg, method=with_knobs(cfg.method, knobs)))


def grid_run_config(params: dict[str, Any], method: str, dataset: str, seed: int, tuned: bool = False,
                    tuning_dir: Path | str = TUNING_DIR) -> RunConfig:
    """A grid run (Table 1 and its kin, a study's run before its knob): :func:`run_config`, at the selection when
    ``tuned``."""
    cfg = run_config(params, method, dataset, seed)
    return with_selection(params, cfg, tuning_dir) if tuned else cfg
