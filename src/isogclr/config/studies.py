"""One-knob studies (``studies``, ``bimodal_studies``): their specs and each run's config; the epochs a run
resolves.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data import DATASETS
from ..losses import LOSSES
from .core import RunConfig
from .overlay import RUN_SECTIONS, apply_setting
from .selection import TUNING_DIR, grid_run_config
from .typed import ConfigError, typed_section


@dataclass(frozen=True)
class OneKnob:
    """What every one-knob ablation has: methods x values x seeds, the ``knob`` and fixed ``overrides``.

    ``knob`` is a dotted key of params.yaml in which ``{method}`` stands for each method's name
    (``methods.{method}.rho``, ``train.batch_size``, ``bimodal.epochs``). ``overrides`` are dotted
    keys set for every run of the study (``train.epochs: 40``); setting ``train.epochs`` (by knob or
    override) replaces ``train.epochs_by_dataset``. Runs are written to
    ``studies/<name>/<method>-<value>-s<seed>``, one namespace for ``studies`` and ``bimodal_studies``.
    ``report`` names the report notebook that reads the study, or a list of them (the mini profile's
    ``ladder_synth10_lt`` is both the long-tailed budget ladder and Tables 3/4's second budget): the generated
    pipeline (:mod:`isogclr.pipeline`) makes each of them depend on the study's runs and parameters.
    """

    methods: tuple[str, ...]
    knob: str
    values: tuple
    seeds: tuple[int, ...] = (0,)
    overrides: dict[str, Any] | None = None
    report: str | tuple[str, ...] = ""
    tuned: bool = False  # the runs use each method's selection on the validation split (tuning/<method>)

    def __post_init__(self) -> None:
        if not self.methods or not self.values or not self.seeds:
            raise ValueError("methods, values and seeds must be non-empty lists")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds are non-negative integers, got {list(self.seeds)}")
        if not isinstance(self.report, str) and not all(isinstance(r, str) and r for r in self.report):
            raise ValueError(f"report: a report's name or a list of names, got {list(self.report)!r}")


def study_reports(report: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """A study's ``report`` (params.yaml: one report's name or a list of them) as a tuple of names."""
    if not report:
        return ()
    return (report,) if isinstance(report, str) else tuple(report)


@dataclass(frozen=True)
class StudySpec(OneKnob):
    """``studies.<name>`` in params.yaml: a one-knob ablation of the unimodal runs on one ``dataset``."""

    dataset: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r} (registered: {sorted(DATASETS)})")


@dataclass(frozen=True)
class BimodalStudySpec(OneKnob):
    """``bimodal_studies.<name>`` in params.yaml: a one-knob ablation of the image-text runs
    (``bimodal`` section; e.g. ``knob: bimodal.epochs`` for SogCLR Table 4's second budget)."""


def study_spec(params: dict[str, Any], name: str) -> StudySpec:
    studies = params.get("studies") or {}
    if name not in studies:
        raise ConfigError(f"studies.{name}: not defined (defined: {sorted(studies)})")
    return typed_section(StudySpec, studies[name], f"studies.{name}")


def study_run_dir(study: str, method: str, value: Any, seed: int) -> str:
    """The run directory of one study run, relative to the project root (as in dvc.yaml)."""
    return f"studies/{study}/{method}-{value}-s{seed}"



def check_study_run(spec: OneKnob, where: str, method: str, value: Any) -> None:
    """``method`` and ``value`` are among the study's."""
    if method not in spec.methods:
        raise ConfigError(f"{where}.methods: {method!r} is not one of {list(spec.methods)}")
    if value not in spec.values:
        raise ConfigError(f"{where}.values: {value!r} is not one of {list(spec.values)}")


def with_study(cfg: Any, spec: OneKnob, where: str, value: Any, sections: dict[str, str] = RUN_SECTIONS) -> Any:
    """``cfg`` (a resolved run of one of the study's methods) with the study's overrides and its knob set to
    ``value``: typed overlays (:func:`apply_setting`) over everything the run resolved before (the
    selection, ``train.by_dataset``, ``train.epochs_by_dataset``: a study's ``train.epochs`` replaces it)."""
    settings = {key: (setting, f"{where}.overrides.{key}") for key, setting in (spec.overrides or {}).items()}
    settings[spec.knob.replace("{method}", cfg.method.name)] = (value, f"{where}.knob")
    for key, (setting, origin) in settings.items():
        cfg = apply_setting(cfg, key, setting, origin, sections)
    return cfg


def check_state_knob(where: str, spec: OneKnob, method: str, loss: str, epochs: int,
                     epochs_key: str = "train.epochs") -> None:
    """Refuse a study of a knob that acts only through the per-sample state (the loss's ``state_knobs``: SogCLR's
    gamma, iSogCLR's rho, ...) whose overrides set fewer than 2 epochs: every visit would be a first visit, which
    computes the same gradient at every value, so the study would compare identical runs. Epochs the study takes
    from the profile (a smoke run's, a quick run's ``train.epochs: 1``) are that profile's choice."""
    name = spec.knob.replace("{method}", method).rpartition(".")[2]
    if (spec.knob.startswith("methods.") and epochs_key in (spec.overrides or {}) and epochs < 2
            and name in LOSSES[loss].state_knobs):
        raise ConfigError(f"{where}.knob: {name} of {method} ({loss}) acts only from a sample's second visit, but "
                          f"the study's runs train {epochs} epoch(s): every value would give the same run; set "
                          f"{where}.overrides.{epochs_key} to 2 or more")


def study_run_config(params: dict[str, Any], study: str, method: str, value: Any, seed: int, tuned: bool = False,
                     tuning_dir: Path | str = TUNING_DIR) -> RunConfig:
    """The resolved config of one study run: the run of ``method`` on the study's dataset (at the selection when
    ``tuned``), with the study's overrides and knob = value (:func:`with_study`)."""
    spec = study_spec(params, study)
    where = f"studies.{study}"
    check_study_run(spec, where, method, value)
    try:
        cfg = grid_run_config(params, method, spec.dataset, seed, tuned, tuning_dir)
    except ConfigError as err:
        raise ConfigError(f"{where} ({method}, value {value!r}): {err}") from err
    cfg = with_study(cfg, spec, where, value)
    check_state_knob(where, spec, method, cfg.method.loss, cfg.train.epochs)
    return dataclasses.replace(cfg, run_id=study_run_dir(study, method, value, seed).removeprefix("studies/"))


def pretraining_epochs(params: dict[str, Any], *, dataset: str | None = None, study: str | None = None) -> int:
    """The pre-training epochs of the grid runs on ``dataset``, or of the runs of ``study``, as the runs
    themselves resolve them (``train.epochs``, ``train.epochs_by_dataset``, a study's knob or overrides).

    The reports ask this instead of re-deriving the rule.
    """
    if (dataset is None) == (study is None):
        raise ValueError("give exactly one of dataset= or study=")
    if study is not None:
        spec = study_spec(params, study)
        cfg = study_run_config(params, study, spec.methods[0], spec.values[0], spec.seeds[0])
        return cfg.train.epochs
    method = next(iter(params.get("methods") or {}))
    return grid_run_config(params, method, dataset, 0).train.epochs
