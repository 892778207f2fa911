"""The selection on a validation split (``tuning``, ``bimodal_tuning``): search spaces and candidate runs (the
tuned runs read the selection through :mod:`.selection`).

The image-text config (:mod:`.bimodal`) is imported through a registry (:data:`IMAGE_TEXT`) when a
``bimodal_tuning`` method is used, so that a unimodal selection imports no image-text code and its pipeline stage
does not depend on it (the image-text stages list :mod:`.bimodal` among their entry modules).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..data import DATASETS
from ..dataset_specs import source
from ..import_table import Registry
from .core import (
    SEARCH,
    TABLE_SECTIONS,
    MethodConfig,
    RunConfig,
    method_config,
    pinned_knobs,
    run_config,
    search_points,
)
from .overlay import BIMODAL_SECTIONS, RUN_SECTIONS, apply_setting, check_loss, method_rate, with_knobs
from .typed import ConfigError, typed_section

if TYPE_CHECKING:  # annotations only
    from .bimodal import BimodalRunConfig

# the selection sections of params.yaml: the unimodal comparison's (scored by linear-probe top-1 on a
# stratified validation part of tuning.dataset) and the image-text comparison's (scored by the mean of IR@1
# and TR@1 on validation pairs whose images are held out of bimodal.data's training pairs); the column of
# candidates.csv and the key of selected.json that hold the score
TUNING_SECTIONS = {"tuning": "val_top1", "bimodal_tuning": "val_recall"}


CARVED, SPLIT = "carved", "split"  # tuning.validation


@dataclass(frozen=True)
class TuningSpec:
    """``tuning`` (or ``bimodal_tuning``) in params.yaml: every tuned method of the section gets the same number
    of candidates (``candidates``), each trained for ``epochs`` with ``validation_fraction`` of the training
    set held out (``tuning``: a stratified part of ``dataset``'s training split, scored by linear-probe top-1;
    ``bimodal_tuning``: the captions of a cluster-stratified part of the training images of ``bimodal.data``,
    scored by the mean of image and text retrieval R@1, R@5 and R@10 among them), averaged over ``seeds``.
    ``validation: split`` (``tuning`` on a generated set whose ``data.synthetic.per_class`` has a third count)
    instead trains each candidate on the whole training split, as the tuned runs, and scores it on the set's
    generated validation split (balanced, as the test split; ``validation_fraction`` is then not set).

    ``methods`` lists the methods the section selects (in params.yaml, a list of names); each one's search
    space lives with the method, ``methods.<m>.search``, over its own knobs: either a grid
    (``{tau: [0.1, 0.2, 0.3, 0.5]}``; when the grid has more points than ``candidates``, a seeded sample of
    ``candidates`` of them) or an explicit list of candidates (``[{rho: 0.3, eta: 0.01}, ...]``). Here
    ``methods`` maps each method to that space. The selection is written to ``tuning/<method>/selected.json``;
    runs whose section or study says ``tuned: true`` use it (the test split is read once, by those runs).
    """

    epochs: int
    candidates: int
    methods: dict[str, Any]
    validation_fraction: float = 0.0
    seeds: tuple[int, ...] = (0,)
    dataset: str | None = None  # tuning: required; bimodal_tuning: none (the pairs are bimodal.data)
    validation: str = CARVED  # CARVED: held out of the training split; SPLIT: the dataset's generated validation split

    def __post_init__(self) -> None:
        if self.dataset is not None and self.dataset not in DATASETS:
            raise ValueError(f"dataset: unknown dataset {self.dataset!r} (registered: {sorted(DATASETS)})")
        if self.validation not in (CARVED, SPLIT):
            raise ValueError(f"validation: {CARVED!r} or {SPLIT!r}, got {self.validation!r}")
        if self.validation == CARVED and not 0 < self.validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in (0, 1), got {self.validation_fraction}")
        if self.validation == SPLIT and self.validation_fraction:
            raise ValueError(f"validation_fraction: nothing is held out with validation: {SPLIT} (delete it)")
        if self.epochs < 1 or self.candidates < 1 or not self.seeds or not self.methods:
            raise ValueError("need epochs >= 1, candidates >= 1, and non-empty seeds and methods")

    def record(self) -> dict[str, Any]:
        """The settings of a selection as ``tuning/<method>/selected.json`` records them (a selection recorded with
        other settings than params.yaml's is stale): ``validation`` only when it is not carved."""
        out = {"dataset": self.dataset, "epochs": self.epochs, "validation_fraction": self.validation_fraction,
               "seeds": list(self.seeds), "candidates": self.candidates}
        if self.dataset is None:
            del out["dataset"]
        return out | ({"validation": self.validation} if self.validation != CARVED else {})


def tuning_spec(params: dict[str, Any], section: str = "tuning") -> TuningSpec | None:
    raw = params.get(section)
    if raw is None:
        return None
    names = raw.get("methods") if isinstance(raw, dict) else None
    if not isinstance(names, list) or not all(isinstance(m, str) for m in names):
        raise ConfigError(f"{section}.methods: expected a list of method names (each one's search space is "
                          f"methods.<method>.{SEARCH}), got {names!r}")
    methods = params.get("methods") or {}
    for m in names:
        if SEARCH not in (methods.get(m) or {}):
            raise ConfigError(f"{section}.methods: {m!r} has no search space (methods.{m}.{SEARCH}: a grid "
                              f"{{knob: [values]}} or a list of candidates)")
    spec = typed_section(TuningSpec, {**raw, "methods": {m: methods[m][SEARCH] for m in names}}, section)
    if (section == "tuning") != (spec.dataset is not None):
        raise ConfigError(f"{section}.dataset: " + ("required (the unimodal set the candidates train on)"
                                                    if section == "tuning" else
                                                    "not allowed (the candidates train on bimodal.data's pairs)"))
    if spec.validation == SPLIT:
        _check_validation_split(params, section, spec)
    return spec


def _check_validation_split(params: dict[str, Any], section: str, spec: TuningSpec) -> None:
    """``validation: split`` needs a generated set whose ``data.synthetic.per_class`` count has a validation count."""
    where = f"{section}.validation"
    if section != "tuning":
        raise ConfigError(f"{where}: {SPLIT!r} is for the unimodal selection (image-text pairs hold out pairs)")
    dataset = source(spec.dataset)  # SPECS says which sets have one, and their class count
    if not dataset.validation_split:
        raise ConfigError(f"{where}: {spec.dataset} has no generated validation split (only the generated synth* "
                          f"sets do); use {CARVED!r} with a validation_fraction")
    counts = ((((params.get("data") or {}).get(dataset.generator) or {}).get("per_class")) or {}).get(dataset.classes)
    if counts is None or len(counts) != 3:
        raise ConfigError(f"{where}: data.{dataset.generator}.per_class.{dataset.classes} is {counts!r}; give it a "
                          "third count, [train, test, val] images per class, to generate the validation split")


def tuning_section(params: dict[str, Any], method: str) -> str:
    """The selection section (``tuning`` or ``bimodal_tuning``) whose ``methods`` has ``method``."""
    for section in TUNING_SECTIONS:
        if method in ((params.get(section) or {}).get("methods") or {}):
            return section
    tuned = [m for s in TUNING_SECTIONS for m in ((params.get(s) or {}).get("methods") or {})]
    raise ConfigError(f"tuning.methods: {method!r} is not tuned (tuned methods: {sorted(tuned)})")


# the image-text config's readers, imported when a ``bimodal_tuning`` method is used (see the module's doc)
IMAGE_TEXT = Registry("image-text config reader", {
    "method_config": "isogclr.config.bimodal:bimodal_method_config",
    "run_config": "isogclr.config.bimodal:bimodal_run_config",
})


def tuning_candidates(params: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The candidates of ``method`` (a list of {knob: value}), each checked as ``methods.<method>.<knob>``
    (whether they build the loss is checked once, by :func:`validate_tuning`)."""
    return [knobs for knobs, _ in _candidates(params, method)]


def _candidates(params: dict[str, Any], method: str) -> list[tuple[dict[str, Any], MethodConfig]]:
    """Each candidate of ``method`` and the method at it (:func:`with_knobs`), its pinned knobs over it."""
    section = tuning_section(params, method)
    spec = tuning_spec(params, section)
    where = f"methods.{method}.{SEARCH}"
    space = spec.methods[method]
    found = search_points(space, where)
    if isinstance(space, dict) and len(found) > spec.candidates:  # a grid larger than the budget: a seeded sample
        found = random.Random(0).sample(found, spec.candidates)
    pin = pinned_knobs(params["methods"][method], method)
    found = [{**candidate, **pin} for candidate in found]  # an ablation's pinned knobs, in every candidate
    if len(found) != spec.candidates:
        raise ConfigError(f"{where}: {len(found)} candidates, but every method gets {section}.candidates = "
                          f"{spec.candidates} (the same budget for every method)")
    base = (IMAGE_TEXT["method_config"] if section == "bimodal_tuning" else method_config)(params, method)
    out = []
    for i, candidate in enumerate(found):
        try:
            at = with_knobs(base, candidate)
            if section == "bimodal_tuning" and at.lr is not None:
                raise ConfigError(f"methods.{method}.lr: an image-text method's rate is bimodal.lr")
        except ConfigError as err:
            raise ConfigError(f"{where} (candidate {i}: {candidate}): {err}") from err
        out.append((candidate, at))
    return out


def candidate_run_configs(params: dict[str, Any], method: str) -> list[RunConfig | BimodalRunConfig]:
    """Every candidate run of ``method``, each resolved once: candidate by candidate, at every seed of its
    section (:func:`tuning_run_config`)."""
    seeds = tuning_spec(params, tuning_section(params, method)).seeds
    return [_candidate_run(params, method, i, at, seed) for i, (_, at) in enumerate(_candidates(params, method))
            for seed in seeds]


def tuning_run_config(params: dict[str, Any], method: str, candidate: int,
                      seed: int) -> RunConfig | BimodalRunConfig:
    """The run of candidate ``candidate`` of ``method`` at ``seed``: the section's ``epochs`` on the training
    data minus the validation part, evaluated on that part (``tuning/<method>/runs/c<candidate>-s<seed>``)."""
    return _candidate_run(params, method, candidate, _candidates(params, method)[candidate][1], seed)


def candidate_run_id(method: str, candidate: int, seed: int) -> str:
    """A candidate run's folder under ``tuning/``: ``<method>/runs/c<candidate>-s<seed>``."""
    return f"{method}/runs/c{candidate}-s{seed}"


def _candidate_run(params: dict[str, Any], method: str, candidate: int, at: MethodConfig,
                   seed: int) -> RunConfig | BimodalRunConfig:
    """The run of ``method`` at candidate number ``candidate`` (``at``: the method at its knobs), at ``seed``."""
    section = tuning_section(params, method)
    spec = tuning_spec(params, section)
    if section == "bimodal_tuning":
        cfg, epochs, sections = IMAGE_TEXT["run_config"](params, method, seed), "bimodal.epochs", BIMODAL_SECTIONS
    else:
        cfg, epochs, sections = run_config(params, method, spec.dataset, seed), "train.epochs", RUN_SECTIONS
    cfg = method_rate(dataclasses.replace(cfg, method=at, run_id=candidate_run_id(method, candidate, seed),
                                          validation_fraction=spec.validation_fraction,
                                          **({"validation_split": True} if spec.validation == SPLIT else {})))
    return apply_setting(cfg, epochs, spec.epochs, f"{section}.epochs", sections)


def validate_tuning(params: dict[str, Any]) -> None:
    """The selection sections, and that every section or study that says ``tuned: true`` runs tuned methods
    only (the image-text ones with methods of ``bimodal_tuning``, the others with methods of ``tuning``)."""
    specs = {section: tuning_spec(params, section) for section in TUNING_SECTIONS}
    tuned = {section: set(spec.methods) if spec else set() for section, spec in specs.items()}
    both = tuned["tuning"] & tuned["bimodal_tuning"]
    if both:
        raise ConfigError(f"bimodal_tuning.methods: {sorted(both)} also under tuning.methods (one selection each)")
    for method in (*tuned["tuning"], *tuned["bimodal_tuning"]):
        for i, (candidate, at) in enumerate(_candidates(params, method)):
            check_loss(at, f"methods.{method}.{SEARCH} (candidate {i}: {candidate}): ")
    for method, spec in (params.get("methods") or {}).items():
        if SEARCH in (spec or {}) and method not in tuned["tuning"] | tuned["bimodal_tuning"]:
            raise ConfigError(f"methods.{method}.{SEARCH}: {method} is in neither tuning.methods nor "
                              "bimodal_tuning.methods (add it to the one of its modality, or delete the search)")
    sections = [*((s, params.get(s), "tuning") for s in TABLE_SECTIONS),
                *((f"studies.{n}", v, "tuning") for n, v in (params.get("studies") or {}).items()),
                ("bimodal", params.get("bimodal"), "bimodal_tuning"),
                *((f"bimodal_studies.{n}", v, "bimodal_tuning")
                  for n, v in (params.get("bimodal_studies") or {}).items())]
    for where, section, selection in sections:
        if isinstance(section, dict) and section.get("tuned"):
            untuned = [m for m in section.get("methods") or [] if m not in tuned[selection]]
            if untuned:
                raise ConfigError(f"{where}.tuned: {untuned} have no search space under {selection}.methods")
