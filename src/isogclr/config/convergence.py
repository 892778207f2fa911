"""EMC2's convergence study (``emc2_convergence``; :mod:`isogclr.train.convergence` runs it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..data import DATASETS
from ..data.augment import AugmentConfig
from ..models import EncoderConfig, HeadConfig
from .core import method_config
from .typed import ConfigError, typed_section

CONVERGENCE_METHODS = ("simclr", "sogclr", "emc2")  # the methods the study can train
FRESH_VIEWS = 0  # num_augmentations of a run that draws fresh views every step (infinite augmentation)
AUGMENTATION_METHODS = ("emc2",)  # the augmentation study's methods: trained at every A of augmentation_values
REFERENCE_METHODS = ("simclr",)  # and its references: trained at A = num_augmentations only


@dataclass(frozen=True)
class ConvergenceConfig:
    """One convergence run's settings (:mod:`isogclr.train.convergence`); a bad field raises ``ValueError``
    whose message starts with ``<field>:``.

    Defaults: EMC2's Figure 7 problem on synth10 (first 500 training images, A = 2 views), the
    project's mini model (a narrow ResNet-18, CIFAR stem, 3-layer 512-d head, as ``params.yaml``
    ``model``), beta 5 (EMC2's, tau 0.2 = the project's SimCLR / SogCLR tau), SogCLR gamma 0.9, plain SGD
    at a constant learning rate. The schedule is cut to a CPU budget of about 4 minutes for the whole
    report on 2 shared cores (batch 8, 6 epochs, learning rate 0.05, exact evaluation every 2 epochs) where
    EMC2's Figure 7 uses batch 4 and learning rate 1e-3 on a GPU.
    """

    dataset: str = "synth10"
    data_root: str = "data"
    num_images: int = 500
    num_augmentations: int = 2
    methods: tuple[str, ...] = CONVERGENCE_METHODS
    beta: float = 5.0  # inverse temperature of EMC2 and of F; tau = 1 / beta for SimCLR, SogCLR and F
    gamma: float = 0.9  # SogCLR's moving-average weight
    batch_size: int = 8  # EMC2 uses 4; 8 halves the per-sample cost of a CPU step
    epochs: int = 6
    eval_every: int = 2  # epochs between exact evaluations (epoch 0, the initial model, is always evaluated)
    lr: float = 0.05  # EMC2 uses 1e-3 (many more steps); see isogclr.train.convergence
    momentum: float = 0.0
    weight_decay: float = 1e-4
    encoder: EncoderConfig = dataclasses.field(
        default_factory=lambda: EncoderConfig(arch="resnet18", width=16, cifar_stem=True))
    head: HeadConfig = dataclasses.field(default_factory=lambda: HeadConfig(layers=3, hidden_dim=512, out_dim=512))
    augment: AugmentConfig = dataclasses.field(default_factory=lambda: AugmentConfig(crop_scale_min=0.5))
    seed: int = 0
    eval_chunk: int = 256
    num_threads: int = 0  # 0: leave torch's setting alone

    def __post_init__(self) -> None:
        def integer(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        def number(value: Any) -> bool:
            return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

        for name in ("num_images", "num_augmentations", "batch_size", "epochs", "eval_every", "eval_chunk"):
            if not integer(getattr(self, name)) or getattr(self, name) < 1:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        for name in ("seed", "num_threads"):
            if not integer(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"{name}: must be an integer >= 0, got {getattr(self, name)!r}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset: unknown dataset {self.dataset!r} (registered: {sorted(DATASETS)})")
        if self.num_augmentations < 2:
            raise ValueError(f"num_augmentations: must be >= 2 (a positive pair needs two views), "
                             f"got {self.num_augmentations}")
        if self.batch_size < 2 or self.batch_size > self.num_images:
            raise ValueError(f"batch_size: must be in [2, num_images={self.num_images}], got {self.batch_size}")
        if (not isinstance(self.methods, tuple) or not self.methods or len(set(self.methods)) != len(self.methods)
                or any(m not in CONVERGENCE_METHODS for m in self.methods)):
            raise ValueError(f"methods: must be distinct names from {CONVERGENCE_METHODS}, got {self.methods!r}")
        for name in ("beta", "lr"):
            if not number(getattr(self, name)) or getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be a positive number, got {getattr(self, name)!r}")
        if not number(self.gamma) or not 0 < self.gamma <= 1:
            raise ValueError(f"gamma: must be in (0, 1], got {self.gamma!r}")
        if not number(self.momentum) or not 0 <= self.momentum < 1:
            raise ValueError(f"momentum: must be in [0, 1), got {self.momentum!r}")
        if not number(self.weight_decay) or self.weight_decay < 0:
            raise ValueError(f"weight_decay: must be a number >= 0, got {self.weight_decay!r}")
        for name, cls in (("encoder", EncoderConfig), ("head", HeadConfig), ("augment", AugmentConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name}: must be a {cls.__name__}, got {getattr(self, name)!r}")

    @property
    def tau(self) -> float:
        return 1.0 / self.beta


@dataclass(frozen=True)
class ConvergenceStudy:
    """Which runs the ``emc2_convergence`` report makes besides the convergence runs (the CLI and the report
    read them): EMC2 at every number of pre-computed views in ``augmentation_values`` and, with
    ``infinite_augmentation``, EMC2 with fresh views every step (the reference of EMC2's Figure 3); all of it
    once per seed of ``seeds`` (each seed its own initial weights, views and batches, shared by its methods)."""

    augmentation_values: tuple[int, ...] = (2, 4, 8)
    infinite_augmentation: bool = False
    seeds: tuple[int, ...] = (0,)  # the whole study once per seed (ConvergenceConfig.seed), paired by seed

    def __post_init__(self) -> None:
        seeds = self.seeds
        if (not isinstance(seeds, tuple) or not seeds or len(set(seeds)) != len(seeds)
                or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds)):
            raise ValueError(f"seeds: must be a non-empty list of distinct integers >= 0, got {seeds!r}")
        values = self.augmentation_values
        if (not isinstance(values, tuple) or not values
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 2 for v in values)):
            raise ValueError(f"augmentation_values: must be a non-empty list of integers >= 2, got {values!r}")
        if not isinstance(self.infinite_augmentation, bool):
            raise ValueError(f"infinite_augmentation: must be true or false, got {self.infinite_augmentation!r}")


_CONVERGENCE_SOURCES = {"data_root": "data.root", "beta": "methods.emc2.beta", "gamma": "methods.sogclr.gamma",
                        "encoder": "model.encoder", "head": "model.head", "augment": "augment"}


def convergence_run_name(method: str, num_augmentations: int, seed: int) -> str:
    """``<method>-A<num_augmentations>-s<seed>`` (A0: fresh views): the folder name of one run of the EMC2
    convergence study, and its key in the timing record."""
    return f"{method}-A{int(num_augmentations)}-s{int(seed)}"


def convergence_config(params: dict[str, Any], **overrides: Any) -> ConvergenceConfig:
    """The :class:`ConvergenceConfig` of ``params``: the model, augmentation, data root and the methods'
    temperature settings of params.yaml, then the section ``emc2_convergence`` (less the
    :class:`ConvergenceStudy` keys), then ``overrides``. SimCLR and SogCLR run at tau = 1 / beta of
    ``methods.emc2`` (one objective F for all methods), whatever their own tau in params.yaml.

    Raises :class:`ConfigError` naming the key (``emc2_convergence.<field>``, or where a field comes from).
    """
    methods = params.get("methods") or {}
    model = params.get("model") or {}
    values = {"data_root": str((params.get("data") or {}).get("root", "data")),
              "beta": (methods.get("emc2") or {}).get("beta", 5.0),
              "gamma": method_config(params, "sogclr").kwargs.get("gamma", 0.9) if "sogclr" in methods else 0.9,
              "encoder": typed_section(EncoderConfig, model.get("encoder"), "model.encoder"),
              "head": typed_section(HeadConfig, model.get("head"), "model.head"),
              "augment": typed_section(AugmentConfig, params.get("augment"), "augment")}
    values = {k: float(v) if k in ("beta", "gamma") and isinstance(v, int | float) else v for k, v in values.items()}
    section = params.get("emc2_convergence") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"emc2_convergence: expected a mapping, got {section!r}")
    if "seed" in section:
        raise ConfigError("emc2_convergence.seed: replaced by emc2_convergence.seeds, a list (the study runs once "
                          "per seed)")
    study_keys = {f.name for f in dataclasses.fields(ConvergenceStudy)}
    seeds = section.get("seeds")
    section = {k: v for k, v in section.items() if k not in study_keys}
    if isinstance(seeds, list) and seeds and "seed" not in overrides:
        section["seed"] = seeds[0]  # one run's config: the first seed (write_study replaces it per seed)
    known = {f.name for f in dataclasses.fields(ConvergenceConfig)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"emc2_convergence.{unknown[0]}: unknown key (known: {sorted(known | study_keys)})")
    values.update(section)
    values.update(overrides)
    if isinstance(values.get("methods"), list):
        values["methods"] = tuple(values["methods"])
    try:
        return ConvergenceConfig(**values)
    except (TypeError, ValueError) as err:
        name = str(err).split(":", 1)[0]
        key = f"emc2_convergence.{name}" if name in section or name not in _CONVERGENCE_SOURCES else \
            _CONVERGENCE_SOURCES[name]
        raise ConfigError(f"{key}: {str(err).split(':', 1)[-1].strip()}") from err


def convergence_study(params: dict[str, Any]) -> ConvergenceStudy:
    """The :class:`ConvergenceStudy` keys of the section ``emc2_convergence`` (defaults where absent)."""
    section = params.get("emc2_convergence") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"emc2_convergence: expected a mapping, got {section!r}")
    values = {f.name: section[f.name] for f in dataclasses.fields(ConvergenceStudy) if f.name in section}
    try:
        return ConvergenceStudy(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
    except ValueError as err:
        raise ConfigError(f"emc2_convergence.{err}") from err


def augmentation_runs(num_augmentations: int, augmentation_values: tuple[int, ...],
                      augmentation_methods: tuple[str, ...], reference_methods: tuple[str, ...],
                      infinite_augmentation: bool) -> list[tuple[str, int]]:
    """The (method, A) rows of the pre-computed augmentation study, in order: ``augmentation_methods`` at every A
    of ``augmentation_values``, EMC2 with fresh views (A = :data:`FRESH_VIEWS`) with ``infinite_augmentation``,
    then ``reference_methods`` at A = ``num_augmentations``. ``ValueError`` for an augmentation method that is not
    one of :data:`CONVERGENCE_METHODS`."""
    if any(m not in CONVERGENCE_METHODS for m in augmentation_methods):
        raise ValueError(f"augmentation_methods must be names from {CONVERGENCE_METHODS}, got {augmentation_methods}")
    rows = [(m, a) for m in augmentation_methods for a in augmentation_values]
    rows += [("emc2", FRESH_VIEWS)] if infinite_augmentation else []
    return rows + [(m, num_augmentations) for m in reference_methods if (m, num_augmentations) not in rows]


def study_runs(cfg: ConvergenceConfig, spec: ConvergenceStudy) -> list[tuple[str, int]]:
    """The (method, A) of every run one seed of the study trains (:func:`isogclr.train.convergence.write_study`), in
    order: ``cfg.methods`` at A = ``cfg.num_augmentations``, then the augmentation study's rows not among them (a
    run of both is trained once)."""
    return list(dict.fromkeys([(m, cfg.num_augmentations) for m in cfg.methods] + augmentation_runs(
        cfg.num_augmentations, spec.augmentation_values, AUGMENTATION_METHODS, REFERENCE_METHODS,
        spec.infinite_augmentation)))


@dataclass(frozen=True)
class ConvergenceRun:
    """One run of the study as the plan lists it: ``method`` on ``num_augmentations`` pre-computed views
    (:data:`FRESH_VIEWS`: fresh views every step), with the settings the trainer gives it (``config``: the study's at
    the run's seed, its ``num_augmentations`` the views F is evaluated on)."""

    method: str
    num_augmentations: int
    config: ConvergenceConfig

    @property
    def run_id(self) -> str:
        return convergence_run_name(self.method, self.num_augmentations, self.config.seed)

    def knobs(self) -> dict[str, Any]:
        """The run's loss settings: tau = 1 / beta for every method, and SogCLR's gamma."""
        return {"loss": self.method, "tau": self.config.tau, **({"gamma": self.config.gamma}
                                                                 if self.method == "sogclr" else {})}


def convergence_run(params: dict[str, Any], method: str, num_augmentations: int, seed: int) -> ConvergenceRun:
    """The run ``<method>-A<num_augmentations>-s<seed>`` of the study (:func:`study_runs`), resolved as the trainer
    resolves it: the study's config at ``seed``, at ``num_augmentations`` views unless it draws fresh ones."""
    cfg = dataclasses.replace(convergence_config(params), seed=seed)
    if num_augmentations != FRESH_VIEWS:
        cfg = dataclasses.replace(cfg, num_augmentations=num_augmentations)
    return ConvergenceRun(method, num_augmentations, cfg)


def validate_convergence(params: dict[str, Any]) -> None:
    """Check the section ``emc2_convergence`` if present (:func:`convergence_config`, :func:`convergence_study`)."""
    if params.get("emc2_convergence") is not None:
        convergence_config(params)
        convergence_study(params)
