"""Every run the profile defines, resolved once into its typed config: the plan of a params.yaml.

A run's config is resolved by the function its command calls, each a typed resolution with overlays
(:mod:`.overlay`): a grid run (:func:`isogclr.config.selection.grid_run_config`: ``run_config``, at the
selection when its section says ``tuned``), a candidate of a selection
(:func:`isogclr.config.tuning.candidate_run_configs`), a study's run
(:func:`isogclr.config.studies.study_run_config`), an image-text run and an image-text study's run
(:mod:`.bimodal`). :func:`plan` lists them all, each once with the folder it writes, as the pipeline runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bimodal import (
    BimodalRunConfig,
    bimodal_run_config,
    bimodal_runs,
    bimodal_study_run_config,
    bimodal_study_spec,
)
from .core import TABLE_SECTIONS, RunConfig
from .selection import TUNING_DIR, grid_run_config
from .studies import study_run_config, study_spec
from .tuning import TUNING_SECTIONS, candidate_run_configs, tuning_spec
from .typed import ConfigError

# the folder each kind of run writes (relative to the project root), under which is its config's run_id
RUN_ROOTS = {**dict.fromkeys(TABLE_SECTIONS, "runs"), **dict.fromkeys(TUNING_SECTIONS, TUNING_DIR),
             "studies": "studies", "bimodal": "runs_bimodal", "bimodal_studies": "studies"}


@dataclass(frozen=True)
class PlannedRun:
    """One run of the profile: the section of params.yaml that asks for it, the folder it writes, its config."""

    section: str  # a table section, a selection section, studies, bimodal or bimodal_studies
    run_dir: str
    config: RunConfig | BimodalRunConfig


def plan(params: dict[str, Any], tuning_dir: Path | str = TUNING_DIR) -> list[PlannedRun]:
    """Every run ``params`` (validated) defines, in the order of its sections: the table sections' grids
    (method x dataset x seed), every selection candidate, the studies' runs (method x value x seed), the
    image-text runs and the image-text studies' runs. The runs of a ``tuned`` section read the selection in
    ``tuning_dir`` (a :class:`ConfigError` naming its stage when it is missing). A run that two sections ask for
    (the same folder) must resolve to the same config; it is listed once."""
    runs: dict[str, PlannedRun] = {}

    def add(section: str, cfg: RunConfig | BimodalRunConfig) -> None:
        run = PlannedRun(section, f"{RUN_ROOTS[section]}/{cfg.run_id}", cfg)
        if run.run_dir in runs and runs[run.run_dir].config != cfg:
            raise ConfigError(f"{section}: run {run.run_dir} is also a run of {runs[run.run_dir].section}, "
                              "with another config")
        runs.setdefault(run.run_dir, run)

    for section in TABLE_SECTIONS:
        table = params.get(section)
        for method in (table or {}).get("methods") or []:
            for dataset in table["datasets"]:
                for seed in table["seeds"]:
                    add(section, grid_run_config(params, method, dataset, seed, bool(table.get("tuned")),
                                                 tuning_dir))
    for section in TUNING_SECTIONS:
        for method in (tuning_spec(params, section).methods if params.get(section) else {}):
            for cfg in candidate_run_configs(params, method):
                add(section, cfg)
    for name in params.get("studies") or {}:
        spec = study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                for seed in spec.seeds:
                    add("studies", study_run_config(params, name, method, value, seed, spec.tuned, tuning_dir))
    bimodal = params.get("bimodal") or {}
    tuned = set(bimodal.get("methods") or []) if bimodal.get("tuned") else set()  # the side methods are not tuned
    for method, seeds in bimodal_runs(params).items():
        for seed in seeds:
            add("bimodal", bimodal_run_config(params, method, seed, method in tuned, tuning_dir))
    for name in params.get("bimodal_studies") or {}:
        spec = bimodal_study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                for seed in spec.seeds:
                    add("bimodal_studies", bimodal_study_run_config(params, name, method, value, seed, spec.tuned,
                                                                    tuning_dir))
    return list(runs.values())
