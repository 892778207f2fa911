"""params.yaml -> typed configs, validated before any compute: the one reader of params.yaml.

Every error names the key it comes from (``methods.isogclr.rho: ...``), so a bad ablation fails in a second
instead of after an hour of training. The parts, each a module of this package (import from the package):

* :mod:`.core`: the shared sections (model, augment, train, probe, methods, data) and a unimodal run's config;
* :mod:`.typed`: :class:`ConfigError` and the checks of a value by type, with its key;
* :mod:`.profiles`: reading params.yaml and the profiles (overlays merged onto the profile they extend);
* :mod:`.keys`: the keys params.yaml may hold, at every level, and the names and seeds it may give;
* :mod:`.studies`: one-knob studies and the epochs a run resolves;
* :mod:`.bimodal`: the image-text runs;
* :mod:`.tuning`: the selection on a validation split (``tuning``, ``bimodal_tuning``);
* :mod:`.sections`: the typed sections the report notebooks read (table grids, temperatures, the profile);
* :mod:`.convergence`: EMC2's convergence study;
* :mod:`.datasets`: the generated datasets' sections (what the data commands generate);

and :mod:`.validate`: :func:`validate_params`, which checks them all, and :func:`missing_datasets`.

Every name is importable from the package (``from isogclr.config import run_config``); the package imports
the module that defines a name on first access, so a run imports (and its pipeline stage depends on) the
parts it uses, not every section's reader.
"""

from __future__ import annotations

from typing import Any

from ..registry import Registry

# the public names of the package, by the module of this package that defines them
_EXPORTS = {
    "bimodal": (
        "BIMODAL_LISTS", "BimodalRunConfig", "BimodalTrainConfig", "bimodal_paper_rows", "bimodal_run_config",
        "bimodal_run_id", "bimodal_runs", "bimodal_settings", "bimodal_study_run_config", "bimodal_study_spec",
        "pair_spec", "validate_bimodal",
    ),
    "convergence": (
        "CONVERGENCE_METHODS", "ConvergenceConfig", "ConvergenceStudy", "convergence_config", "convergence_study",
        "validate_convergence",
    ),
    "core": (
        "TABLE_SECTIONS", "MethodConfig", "OptimConfig", "RunConfig", "TrainConfig", "pinned_knobs", "run_config",
        "run_id", "search_points",
    ),
    "datasets": ("fashion_mnist_mini_spec", "synthetic_spec"),
    "typed": ("ConfigError", "check_finite", "check_number", "typed_section"),
    "profiles": ("check_profiles", "differences", "load_params", "merge_profile", "profile_text"),
    "sections": (
        "TableSpec", "TemperatureSpec", "method_settings", "profile_name", "references_spec", "table_spec",
        "temperature_spec",
    ),
    "studies": (
        "BimodalStudySpec", "OneKnob", "StudySpec", "pretraining_epochs", "study_reports", "study_run_config",
        "study_run_dir", "study_spec",
    ),
    "tuning": (
        "TUNING_DIR", "TUNING_SECTIONS", "TuningSpec", "selection_path", "tuning_candidates", "tuning_run_config",
        "tuning_section", "tuning_spec", "validate_tuning", "with_selection",
    ),
    "validate": (
        "missing_datasets", "validate_params",
    ),
}
# name -> "isogclr.config.<module>:<name>": what `from isogclr.config import <name>` imports, and what the pipeline's
# dependency reader follows (isogclr.code_deps)
NAMES = Registry("name of isogclr.config", {name: f"{__name__}.{module}:{name}" for module, names in _EXPORTS.items()
                                            for name in names})


def __getattr__(name: str) -> Any:
    if name in NAMES:
        return NAMES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(NAMES)
