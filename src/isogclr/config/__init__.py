"""params.yaml -> typed configs, validated before any compute: the one reader of params.yaml.

Every error names the key it comes from (``methods.isogclr.rho: ...``), so a bad ablation fails in a second
instead of after an hour of training. The parts, each a module of this package (import from the package):

* :mod:`.core`: the shared sections (model, augment, train, probe, methods, data) and a unimodal run's config;
* :mod:`.studies`: one-knob studies and the epochs a run resolves;
* :mod:`.bimodal`: the image-text runs;
* :mod:`.tuning`: the selection on a validation split (``tuning``, ``bimodal_tuning``);
* :mod:`.reports`: the typed sections the report notebooks read;
* :mod:`.convergence`: EMC2's convergence study;

and :func:`validate_params`, which checks them all.
"""

from __future__ import annotations

from typing import Any

from ..data import DATASETS
from .bimodal import (
    BIMODAL_LISTS,
    BimodalRunConfig,
    BimodalTrainConfig,
    bimodal_paper_rows,
    bimodal_run_config,
    bimodal_run_id,
    bimodal_runs,
    bimodal_settings,
    bimodal_study_run_config,
    bimodal_study_spec,
    validate_bimodal,
)
from .convergence import (
    CONVERGENCE_METHODS,
    ConvergenceConfig,
    ConvergenceStudy,
    convergence_config,
    convergence_study,
    validate_convergence,
)
from .core import (
    TABLE_SECTIONS,
    ConfigError,
    MethodConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
    _by_dataset,
    _method,
    _shared_sections,
    fashion_mnist_mini_spec,
    load_params,
    merge_profile,
    missing_datasets,
    pair_spec,
    profile_text,
    run_config,
    run_id,
    search_points,
    synthetic_spec,
)
from .reports import TableSpec, TemperatureSpec, method_settings, profile_name, table_spec, temperature_spec
from .studies import (
    BimodalStudySpec,
    OneKnob,
    StudySpec,
    pretraining_epochs,
    study_run_config,
    study_run_dir,
    study_spec,
)
from .tuning import (
    TUNING_DIR,
    TUNING_SECTIONS,
    TuningSpec,
    selection_path,
    tuning_candidates,
    tuning_run_config,
    tuning_section,
    tuning_spec,
    validate_tuning,
    with_selection,
)

__all__ = [
    "BIMODAL_LISTS",
    "BimodalRunConfig",
    "BimodalStudySpec",
    "BimodalTrainConfig",
    "CONVERGENCE_METHODS",
    "ConfigError",
    "ConvergenceConfig",
    "ConvergenceStudy",
    "MethodConfig",
    "OneKnob",
    "OptimConfig",
    "RunConfig",
    "StudySpec",
    "TABLE_SECTIONS",
    "TUNING_DIR",
    "TUNING_SECTIONS",
    "TableSpec",
    "TemperatureSpec",
    "TrainConfig",
    "TuningSpec",
    "bimodal_paper_rows",
    "bimodal_run_config",
    "bimodal_run_id",
    "bimodal_runs",
    "bimodal_settings",
    "bimodal_study_run_config",
    "bimodal_study_spec",
    "convergence_config",
    "convergence_study",
    "fashion_mnist_mini_spec",
    "load_params",
    "merge_profile",
    "method_settings",
    "missing_datasets",
    "pair_spec",
    "pretraining_epochs",
    "profile_name",
    "profile_text",
    "run_config",
    "run_id",
    "search_points",
    "selection_path",
    "study_run_config",
    "study_run_dir",
    "study_spec",
    "synthetic_spec",
    "table_spec",
    "temperature_spec",
    "tuning_candidates",
    "tuning_run_config",
    "tuning_section",
    "tuning_spec",
    "validate_bimodal",
    "validate_convergence",
    "validate_tuning",
    "with_selection",
    "validate_params",
]



def validate_params(params: dict[str, Any]) -> None:
    """Check every section and every run the tables ask for; raise :class:`ConfigError` naming the key."""
    synthetic_spec(params)
    pair_spec(params)
    fashion_mnist_mini_spec(params)
    for name in params.get("methods") or {}:
        _method(params, name)
    for section in TABLE_SECTIONS:
        table = params.get(section)
        if table is None:
            continue
        for key in ("methods", "datasets", "seeds"):
            if not isinstance(table.get(key), list) or not table[key]:
                raise ConfigError(f"{section}.{key}: expected a non-empty list")
        for m in table["methods"]:
            if m not in (params.get("methods") or {}):
                raise ConfigError(f"{section}.methods: unknown method {m!r} (defined under methods: "
                                  f"{sorted(params.get('methods') or {})})")
        for d in table["datasets"]:
            if d not in DATASETS:
                raise ConfigError(f"{section}.datasets: unknown dataset {d!r} (registered: {sorted(DATASETS)})")
        for s in table["seeds"]:
            if not isinstance(s, int) or s < 0:
                raise ConfigError(f"{section}.seeds: seeds are non-negative integers, got {s!r}")
        for m in table.get("paper_rows") or {}:
            if m not in table["methods"]:
                raise ConfigError(f"{section}.paper_rows: {m!r} is not in {section}.methods")
    temperatures = params.get("temperatures")
    if temperatures is not None:  # reuses Table 1's runs: its methods and datasets must be among them
        table = params.get("table1") or {}
        for key in ("methods", "datasets"):
            for value in temperatures.get(key) or []:
                if value not in (table.get(key) or []):
                    raise ConfigError(f"temperatures.{key}: {value!r} is not in table1.{key} (its runs are reused)")
    _shared_sections(params)
    for name in (params.get("train") or {}).get("by_dataset") or {}:
        _shared_sections(_by_dataset(params, name))
    validate_bimodal(params)
    validate_tuning(params)
    validate_convergence(params)
    for name in params.get("studies") or {}:
        spec = study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                study_run_config(params, name, method, value, spec.seeds[0])
    shared = sorted(set(params.get("studies") or {}) & set(params.get("bimodal_studies") or {}))
    if shared:
        raise ConfigError(f"bimodal_studies: {shared} also defined under studies (both write studies/<name>/)")
    for name in params.get("bimodal_studies") or {}:
        spec = bimodal_study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                bimodal_study_run_config(params, name, method, value, spec.seeds[0])
