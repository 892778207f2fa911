"""Every run the profile defines, resolved once into its typed config: the plan of a params.yaml.

:func:`plan_keys` is the one enumeration of a profile's runs: each run's section, folder and place on its section's
lists (method, dataset, value, seed), read from params.yaml without resolving a config, so that the validation
(:mod:`.validate`) and the pipeline (:mod:`isogclr.pipeline`, through :func:`plan_axes`) use it before any selection
exists. :func:`plan` resolves each key by the function its command calls, each a typed resolution with overlays
(:mod:`.overlay`): a grid run (:func:`isogclr.config.selection.grid_run_config`: ``run_config``, at the selection
when its section says ``tuned``), a candidate of a selection (:func:`isogclr.config.tuning.tuning_run_config`), a
study's run (:func:`isogclr.config.studies.study_run_config`), an image-text run and an image-text study's run
(:mod:`.bimodal`), a run of EMC2's convergence study (:func:`isogclr.config.convergence.convergence_run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bimodal import (
    BimodalRunConfig,
    bimodal_run_config,
    bimodal_run_id,
    bimodal_runs,
    bimodal_study_run_config,
    bimodal_study_spec,
)
from .convergence import ConvergenceRun, convergence_config, convergence_run, convergence_run_name, convergence_study
from .convergence import study_runs as convergence_study_runs
from .core import TABLE_SECTIONS, RunConfig, run_id
from .selection import TUNING_DIR, grid_run_config
from .studies import study_run_config, study_run_dir, study_spec
from .tuning import TUNING_SECTIONS, candidate_run_id, tuning_run_config, tuning_spec
from .typed import ConfigError

CONVERGENCE = "emc2_convergence"  # the section of EMC2's convergence study
# the folder each kind of run writes (relative to the project root), under which is its config's run_id (a
# convergence run's folder is its key in the timing record: the study writes its tables to runs_convergence/)
RUN_ROOTS = {**dict.fromkeys(TABLE_SECTIONS, "runs"), **dict.fromkeys(TUNING_SECTIONS, TUNING_DIR),
             "studies": "studies", "bimodal": "runs_bimodal", "bimodal_studies": "studies",
             CONVERGENCE: "runs_convergence"}
STUDY_SECTIONS = ("studies", "bimodal_studies")
VALUED_SECTIONS = (*TUNING_SECTIONS, *STUDY_SECTIONS, CONVERGENCE)  # the sections whose runs have a value
SIDE = "bimodal.side_methods"  # the group of the image-text side runs (bimodal.side_methods at bimodal.side_seeds)


@dataclass(frozen=True)
class RunKey:
    """One run of the profile before its config is resolved: the section that asks for it, its group (the lists
    of params.yaml that span it: the section, a study's ``studies.<name>`` or ``bimodal_studies.<name>``, or
    :data:`SIDE`), the folder it writes, and its place on the group's lists."""

    section: str
    group: str
    run_dir: str
    method: str
    seed: int
    dataset: str | None = None  # a grid run's, a unimodal study's or selection's, the convergence study's
    value: Any = None  # a study's value, a selection candidate's number, a convergence run's views
    tuned: bool = False  # at its method's selection (tuning/<method>/selected.json)

    @property
    def study(self) -> str:
        """A study run's study name (its group ``<section>.<name>``)."""
        return self.group.removeprefix(f"{self.section}.")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the profile: the section of params.yaml that asks for it, the folder it writes, its config."""

    section: str  # a table section, a selection section, studies, bimodal, bimodal_studies or emc2_convergence
    run_dir: str
    config: RunConfig | BimodalRunConfig | ConvergenceRun


@dataclass(frozen=True)
class Axes:
    """The lists a group of planned runs spans, each in the order of params.yaml: its methods, datasets (none for
    image-text runs), values (a study's, a selection's candidate numbers, the convergence runs' views; none for a
    grid or image-text run) and seeds."""

    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    values: tuple
    seeds: tuple[int, ...]


def plan_keys(params: dict[str, Any]) -> list[RunKey]:
    """Every run ``params`` (validated) asks for, in the order of its sections: the table sections' grids (method x
    dataset x seed), every selection candidate (method x candidate x seed), the studies' runs (method x value x
    seed), the image-text runs, the image-text studies' runs and the convergence study's runs (seed x its runs).
    A run that two sections ask for is listed by each (:func:`plan` lists it once)."""
    keys: list[RunKey] = []

    def add(section: str, group: str, name: str, method: str, seed: int, **place: Any) -> None:
        keys.append(RunKey(section, group, f"{RUN_ROOTS[section]}/{name}", method, seed, **place))

    for section in TABLE_SECTIONS:
        table = params.get(section) or {}
        for method in table.get("methods") or []:
            for dataset in table["datasets"]:
                for seed in table["seeds"]:
                    add(section, section, run_id(method, dataset, seed), method, seed, dataset=dataset,
                        tuned=bool(table.get("tuned")))
    for section in TUNING_SECTIONS:
        spec = tuning_spec(params, section)
        for method in spec.methods if spec else {}:
            for candidate in range(spec.candidates):
                for seed in spec.seeds:
                    add(section, section, candidate_run_id(method, candidate, seed), method, seed,
                        dataset=spec.dataset, value=candidate)
    for name in params.get("studies") or {}:
        spec = study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                for seed in spec.seeds:
                    add("studies", f"studies.{name}", study_run_dir(name, method, value, seed).removeprefix(
                        "studies/"), method, seed, dataset=spec.dataset, value=value, tuned=spec.tuned)
    bimodal = params.get("bimodal") or {}
    tuned = set(bimodal.get("methods") or []) if bimodal.get("tuned") else set()  # the side methods are not tuned
    side = set(bimodal.get("side_methods") or [])
    for method, seeds in bimodal_runs(params).items():
        for seed in seeds:
            add("bimodal", SIDE if method in side else "bimodal", bimodal_run_id(method, seed), method, seed,
                tuned=method in tuned)
    for name in params.get("bimodal_studies") or {}:
        spec = bimodal_study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                for seed in spec.seeds:
                    add("bimodal_studies", f"bimodal_studies.{name}", study_run_dir(name, method, value, seed)
                        .removeprefix("studies/"), method, seed, value=value, tuned=spec.tuned)
    if CONVERGENCE in params:
        cfg, spec = convergence_config(params), convergence_study(params)
        for seed in spec.seeds:
            for method, views in convergence_study_runs(cfg, spec):
                add(CONVERGENCE, CONVERGENCE, convergence_run_name(method, views, seed), method, seed,
                    dataset=cfg.dataset, value=views)
    return keys


def plan_axes(keys: list[RunKey]) -> dict[str, Axes]:
    """The :class:`Axes` of each group of ``keys`` (:func:`plan_keys`), by group, in the order of the keys."""
    groups: dict[str, list[RunKey]] = {}
    for key in keys:
        groups.setdefault(key.group, []).append(key)

    def distinct(values: Any) -> tuple:
        return tuple(dict.fromkeys(values))

    return {group: Axes(methods=distinct(k.method for k in mine),
                        datasets=distinct(k.dataset for k in mine if k.dataset is not None),
                        values=distinct(k.value for k in mine) if mine[0].section in VALUED_SECTIONS else (),
                        seeds=distinct(k.seed for k in mine)) for group, mine in groups.items()}


def resolve(params: dict[str, Any], key: RunKey,
            tuning_dir: Path | str = TUNING_DIR) -> RunConfig | BimodalRunConfig | ConvergenceRun:
    """The config of the run ``key``, resolved by the function its command calls (a ``tuned`` run reads its
    selection in ``tuning_dir``: a :class:`ConfigError` naming its stage when it is missing)."""
    if key.section in TABLE_SECTIONS:
        return grid_run_config(params, key.method, key.dataset, key.seed, key.tuned, tuning_dir)
    if key.section in TUNING_SECTIONS:
        return tuning_run_config(params, key.method, key.value, key.seed)
    if key.section == "studies":
        return study_run_config(params, key.study, key.method, key.value, key.seed, key.tuned, tuning_dir)
    if key.section == "bimodal":
        return bimodal_run_config(params, key.method, key.seed, key.tuned, tuning_dir)
    if key.section == "bimodal_studies":
        return bimodal_study_run_config(params, key.study, key.method, key.value, key.seed, key.tuned, tuning_dir)
    return convergence_run(params, key.method, key.value, key.seed)


def plan(params: dict[str, Any], tuning_dir: Path | str = TUNING_DIR) -> list[PlannedRun]:
    """Every run ``params`` (validated) defines (:func:`plan_keys`), each resolved once (:func:`resolve`) with the
    folder it writes. A run that two sections ask for (the same folder) must resolve to the same config; it is
    listed once, under the first."""
    runs: dict[str, PlannedRun] = {}
    for key in plan_keys(params):
        cfg = resolve(params, key, tuning_dir)
        if key.run_dir in runs and runs[key.run_dir].config != cfg:
            raise ConfigError(f"{key.section}: run {key.run_dir} is also a run of {runs[key.run_dir].section}, "
                              "with another config")
        runs.setdefault(key.run_dir, PlannedRun(key.section, key.run_dir, cfg))
    return list(runs.values())
