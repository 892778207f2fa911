"""params.yaml -> typed configs, validated before any compute.

Every error names the key it comes from (``methods.isogclr.rho: ...``), so a bad
ablation fails in a second instead of after an hour of training.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .data import DATASETS
from .data.augment import AugmentConfig
from .data.fashion_mnist import FashionMnistMiniSpec
from .data.streaming import STREAMS, StreamConfig
from .data.synthetic import SyntheticSpec
from .data.synthetic_pairs import PairSpec
from .eval.linear_probe import ProbeConfig
from .losses import LOSSES, build_loss
from .models import EncoderConfig, HeadConfig

TABLE_SECTIONS = ("table1", "table1_real", "table3")  # grids of methods x datasets x seeds, runs in runs/<run-id>


# ------------------------------------------------------------------------------- typed report sections
# The report notebooks read the table grids, the temperature study, the methods' settings and the profile
# through these, never params.yaml's raw dict; every error names its key (``table1.seeds: ...``).
_TABLE_KEYS = ("methods", "datasets", "seeds", "paper_rows", "tuned")


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
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{section}.seeds: seeds are non-negative integers, got {seed!r}")
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
    return TableSpec(methods=methods, datasets=datasets, seeds=tuple(seeds), paper_rows=dict(paper_rows), tuned=tuned)


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
    return copy.deepcopy(dict(_method(params, name).kwargs))


def profile_name(params: dict[str, Any]) -> str:
    """The profile's name (``profile``: mini, smoke, paper...), ``"?"`` when it has none."""
    name = params.get("profile", "?")
    if not isinstance(name, str):
        raise ConfigError(f"profile: expected a name, got {name!r}")
    return name


@dataclass(frozen=True)
class OptimConfig:
    """``train.optimizer`` in params.yaml. ``lr`` is the base rate; see ``lr_scaling``.

    The warm-up is counted either in epochs (``warmup_epochs``, the papers' unit, may be
    fractional) or in optimizer steps (``warmup_iters``, as the bimodal trainer counts it);
    at most one of the two may be non-zero, so a params.yaml never says two different things.
    """

    name: str = "lars"
    lr: float = 0.8
    weight_decay: float = 1e-4
    momentum: float = 0.9
    lr_scaling: str = "none"  # "none", "linear" (lr * B / 256) or "sqrt" (lr * sqrt(B), SogCLR)
    warmup_epochs: float = 10.0
    warmup_iters: int = 0  # warm-up length in steps; needs warmup_epochs: 0
    final_lr_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in ("lars", "sgd", "adamw"):
            raise ValueError(f"train.optimizer.name must be lars, sgd or adamw, got {self.name!r}")
        if self.lr_scaling not in ("none", "linear", "sqrt"):
            raise ValueError(f"train.optimizer.lr_scaling must be none, linear or sqrt, got {self.lr_scaling!r}")
        if self.lr <= 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError(f"train.optimizer: need lr > 0, weight_decay >= 0, warmup_epochs >= 0, got {self}")
        if isinstance(self.warmup_iters, bool) or not isinstance(self.warmup_iters, int) or self.warmup_iters < 0:
            raise ValueError(f"train.optimizer.warmup_iters must be an integer >= 0, got {self.warmup_iters!r}")
        if self.warmup_epochs and self.warmup_iters:
            raise ValueError(f"train.optimizer.warmup_epochs ({self.warmup_epochs}) and train.optimizer.warmup_iters "
                             f"({self.warmup_iters}) are both non-zero; set one of them to 0")

    def warmup_steps(self, steps_per_epoch: int) -> int:
        """The warm-up length in optimizer steps: ``warmup_iters``, or ``warmup_epochs`` epochs rounded to steps."""
        return self.warmup_iters or round(self.warmup_epochs * steps_per_epoch)

    def scaled_lr(self, batch_size: int) -> float:
        return {"none": self.lr, "linear": self.lr * batch_size / 256, "sqrt": self.lr * math.sqrt(batch_size)}[
            self.lr_scaling]



class ConfigError(ValueError):
    """An invalid value in params.yaml; the message starts with the key."""


def _typed(cls: type, values: Any, key: str):
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{key}: expected a mapping, got {values!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (allowed: {sorted(names)})")
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**converted)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{key}: {err}") from err


@dataclass(frozen=True)
class TrainConfig:
    """``train`` in params.yaml (the optimizer is ``train.optimizer``)."""

    epochs: int = 400
    epochs_by_dataset: dict[str, int] | None = None  # per-dataset override of ``epochs``
    batch_size: int = 128
    checkpoint_every: int = 0  # steps between checkpoints; 0 = at the end of every epoch only
    device: str = "auto"
    num_threads: int = 0  # torch CPU threads; 0 = torch's default
    precision: str = "fp32"  # "bf16" / "fp16": autocast on GPU (ignored on CPU, where it would only slow down)
    channels_last: bool = False
    compile: bool = False  # torch.compile the model
    sync_bn: bool = False  # SyncBatchNorm across processes (DDP)
    eval_every: int = 0  # epochs between 1-NN evaluations logged in train_log.csv (accuracy vs samples seen); 0 = off

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError(f"need epochs >= 1 and batch_size >= 2, got {self.epochs}, {self.batch_size}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        for name, epochs in (self.epochs_by_dataset or {}).items():
            if not isinstance(epochs, int) or epochs < 1:
                raise ValueError(f"epochs_by_dataset.{name} must be an integer >= 1, got {epochs!r}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0, got {self.eval_every}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, got {self.precision!r}")


@dataclass(frozen=True)
class MethodConfig:
    name: str
    loss: str
    kwargs: dict[str, Any]

    def build(self, num_samples: int):
        # `convention` (preset) and `conventions` (a mapping of single switches) go to the loss as they are:
        # the moving-average losses validate both and name the bad switch or value
        return build_loss(self.loss, num_samples, **dict(self.kwargs))


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run needs; written to ``runs/<run_id>/config.json``."""

    run_id: str
    method: MethodConfig
    dataset: str
    seed: int
    data_root: str
    encoder: EncoderConfig
    head: HeadConfig
    augment: AugmentConfig
    optimizer: OptimConfig
    train: TrainConfig
    probe: ProbeConfig
    stream: StreamConfig | None = None  # train.stream, for a dataset with a streaming loader; None: in memory
    # > 0: a tuning run: trains on the training split minus a stratified validation part of this size and is
    # evaluated on that part (isogclr.data.splits); the test split is not read. 0: train, then test.
    validation_fraction: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["stream"] is None:  # in-memory runs: the same config.json as before streaming existed
            del out["stream"]
        if not out["validation_fraction"]:
            del out["validation_fraction"]
        return out


def load_params(path: Path | str = "params.yaml") -> dict[str, Any]:
    """params.yaml (or a profile) as a dict; a missing file or malformed YAML is a one-line ConfigError
    naming the file, line and column."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    try:
        with path.open() as f:
            params = yaml.safe_load(f)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return params


def missing_datasets(params: dict[str, Any]) -> list[str]:
    """The datasets the profile reads that are neither on disk nor generated by the pipeline.

    One line each: the key that asks for the dataset, the path that is missing and how to get it.
    The generated datasets (``synth*``, the Fashion-MNIST subset once its source is installed, the
    default image-text pairs) are written by the pipeline's data stages and are not checked.
    """
    root = Path((params.get("data") or {}).get("root", "data"))
    used: dict[str, str] = {}  # dataset -> the first key that asks for it
    for section in (*TABLE_SECTIONS, "temperatures"):
        for name in (params.get(section) or {}).get("datasets") or []:
            used.setdefault(name, f"{section}.datasets")
    for study, spec in (params.get("studies") or {}).items():
        if isinstance(spec, dict) and spec.get("dataset"):
            used.setdefault(spec["dataset"], f"studies.{study}.dataset")
    by_problem: dict[str, list[str]] = {}  # e.g. cifar10 and cifar10_lt both need data/cifar-10-batches-py
    for name, key in used.items():
        problem = _dataset_missing(name, root)
        if problem is not None:
            by_problem.setdefault(problem, []).append(f"{key} {name}")
    missing = [f"{', '.join(users)}: {problem}" for problem, users in by_problem.items()]
    bimodal = params.get("bimodal")
    if isinstance(bimodal, dict) and bimodal.get("methods"):
        pairs = Path(bimodal.get("data", "data/synthetic_pairs"))
        if pairs != root / "synthetic_pairs" and not pairs.is_dir() and not pairs.with_suffix(".json").is_file():
            missing.append(f"bimodal.data: {pairs} not found: arrange the image-text pairs as the generated folder is "
                           "(train/captions.tsv, retrieval_*/dataset.json, zeroshot/), e.g. CC3M for the paper profile")
    return missing


def _dataset_missing(name: str, root: Path) -> str | None:
    """What is missing for dataset ``name`` under ``root`` and how to get it; None when present or generated."""
    from .data import cifar, fashion_mnist, folder, inaturalist, stl10
    from .data.manifest import manifest_path, up_to_date

    if name.startswith("cifar"):
        classes = 100 if name.startswith("cifar100") else 10
        path = root / cifar.FOLDERS[classes]
        return None if path.is_dir() else f"{path} not found: {cifar._obtain_hint(root, classes)}"
    if name.startswith("fashion_mnist"):
        mini = root / fashion_mnist.MINI_FOLDER
        if name.startswith("fashion_mnist_mini") and (up_to_date(mini) or (mini.is_dir() and
                                                                              not manifest_path(mini).is_file())):
            return None  # the subset on disk (stale or missing with a manifest: rebuilt from the source below)
        searched = [fashion_mnist.raw_folder(root), root / "fashion_mnist", fashion_mnist.SYSTEM_DIR]
        if any(all((d / f).is_file() or (d / f"{f}.gz").is_file() for f in fashion_mnist.FILES) for d in searched):
            return None
        return (f"Fashion-MNIST not found in {', '.join(map(str, searched))}: install it with "
                f"`{fashion_mnist.INSTALL_HINT}`")
    if name == "imagenet100":
        if (root / "imagenet100").is_dir() or (root / "imagenet").is_dir():
            return None
        return f"{root / 'imagenet100'} (or {root / 'imagenet'}) not found: {folder.IMAGENET_HINT}"
    if name == "inaturalist":
        base = root / inaturalist.INATURALIST_FOLDER
        return None if base.is_dir() else f"{base} not found: {inaturalist._hint(base)}"
    if name.startswith("stl10"):
        path = root / stl10.STL10_FOLDER
        return None if path.is_dir() else f"{path} not found: {stl10._obtain_hint(root)}"
    return None  # generated by the pipeline (synth*), or a dataset registered elsewhere: its loader says


def _method(params: dict[str, Any], name: str) -> MethodConfig:
    methods = params.get("methods") or {}
    if name not in methods:
        raise ConfigError(f"methods.{name}: not defined (defined: {sorted(methods)})")
    spec = dict(methods[name] or {})
    loss = spec.pop("loss", None)
    if loss not in LOSSES:
        raise ConfigError(f"methods.{name}.loss: unknown loss {loss!r} (registered: {sorted(LOSSES)})")
    method = MethodConfig(name=name, loss=loss, kwargs=spec)
    try:
        method.build(num_samples=2)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"methods.{name}: {err}") from err
    return method


def synthetic_spec(params: dict[str, Any]) -> SyntheticSpec:
    raw = dict((params.get("data") or {}).get("synthetic") or {})
    if "per_class" in raw:
        raw["per_class"] = {int(k): tuple(v) for k, v in raw["per_class"].items()}
    return _typed(SyntheticSpec, raw, "data.synthetic")


def fashion_mnist_mini_spec(params: dict[str, Any]) -> FashionMnistMiniSpec:
    raw = dict((params.get("data") or {}).get("fashion_mnist_mini") or {})
    if "per_class" in raw:
        raw["per_class"] = tuple(raw["per_class"])
    return _typed(FashionMnistMiniSpec, raw, "data.fashion_mnist_mini")


def pair_spec(params: dict[str, Any]) -> PairSpec:
    return _typed(PairSpec, (params.get("data") or {}).get("synthetic_pairs"), "data.synthetic_pairs")


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


def run_id(method: str, dataset: str, seed: int) -> str:
    return f"{method}-{dataset}-s{seed}"


def _shared_sections(params: dict[str, Any]) -> dict[str, Any]:
    """The typed sections every run shares (model, augment, train, probe)."""
    model = params.get("model") or {}
    train = dict(params.get("train") or {})
    optimizer = train.pop("optimizer", {})
    train.pop("by_dataset", None)  # applied by run_config (_by_dataset)
    stream = train.pop("stream", None)
    return {
        "data_root": str((params.get("data") or {}).get("root", "data")),
        "encoder": _typed(EncoderConfig, model.get("encoder"), "model.encoder"),
        "head": _typed(HeadConfig, model.get("head"), "model.head"),
        "augment": _typed(AugmentConfig, params.get("augment"), "augment"),
        "optimizer": _typed(OptimConfig, optimizer, "train.optimizer"),
        "train": _typed(TrainConfig, train, "train"),
        "probe": _typed(ProbeConfig, params.get("probe"), "probe"),
        "stream": None if stream is None else _typed(StreamConfig, stream, "train.stream"),
    }


def _by_dataset(params: dict[str, Any], dataset: str) -> dict[str, Any]:
    """``params`` with ``train.by_dataset.<dataset>`` applied: dotted keys of params.yaml set for every run on
    ``dataset`` (the ImageNet-scale tables' encoder, batch, learning rate, resolution)."""
    table = (params.get("train") or {}).get("by_dataset") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"train.by_dataset: expected a mapping dataset -> {{dotted key: value}}, got {table!r}")
    for name, settings in table.items():
        if name not in DATASETS:
            raise ConfigError(f"train.by_dataset.{name}: unknown dataset (registered: {sorted(DATASETS)})")
        if not isinstance(settings, dict):
            raise ConfigError(f"train.by_dataset.{name}: expected a mapping of dotted keys, got {settings!r}")
    if not table.get(dataset):
        return params
    params = copy.deepcopy(params)
    for key, value in table[dataset].items():
        if key.startswith("train.by_dataset"):
            raise ConfigError(f"train.by_dataset.{dataset}.{key}: cannot set train.by_dataset itself")
        _set_dotted(params, key, value, f"train.by_dataset.{dataset}")
    return params


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
    return run_config(params, method, dataset, 0).train.epochs


def run_config(params: dict[str, Any], method: str, dataset: str, seed: int) -> RunConfig:
    """The resolved config of run (method, dataset, seed), validated."""
    if dataset not in DATASETS:
        raise ConfigError(f"dataset: unknown dataset {dataset!r} (registered: {sorted(DATASETS)})")
    params = _by_dataset(params, dataset)
    sections = _shared_sections(params)
    if sections["stream"] is not None and dataset not in STREAMS:
        sections["stream"] = None  # the small sets stay in memory
    train = sections["train"]
    epochs = (train.epochs_by_dataset or {}).get(dataset, train.epochs)
    sections["train"] = dataclasses.replace(train, epochs=epochs, epochs_by_dataset=None)
    return RunConfig(run_id=run_id(method, dataset, seed), method=_method(params, method), dataset=dataset,
                     seed=int(seed), **sections)


@dataclass(frozen=True)
class OneKnob:
    """What every one-knob ablation has: methods x values x seeds, the ``knob`` and fixed ``overrides``.

    ``knob`` is a dotted key of params.yaml in which ``{method}`` stands for each method's name
    (``methods.{method}.rho``, ``train.batch_size``, ``bimodal.epochs``). ``overrides`` are dotted
    keys set for every run of the study (``train.epochs: 40``); setting ``train.epochs`` (by knob or
    override) replaces ``train.epochs_by_dataset``. Runs are written to
    ``studies/<name>/<method>-<value>-s<seed>``, one namespace for ``studies`` and ``bimodal_studies``.
    ``report`` names the report notebook that reads the study: the generated pipeline
    (:mod:`isogclr.pipeline`) makes that report depend on the study's runs and parameters.
    """

    methods: tuple[str, ...]
    knob: str
    values: tuple
    seeds: tuple[int, ...] = (0,)
    overrides: dict[str, Any] | None = None
    report: str = ""
    tuned: bool = False  # the runs use each method's selection on the validation split (tuning/<method>)

    def __post_init__(self) -> None:
        if not self.methods or not self.values or not self.seeds:
            raise ValueError("methods, values and seeds must be non-empty lists")
        if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ValueError(f"seeds are non-negative integers, got {list(self.seeds)}")


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
    return _typed(StudySpec, studies[name], f"studies.{name}")


def study_run_dir(study: str, method: str, value: Any, seed: int) -> str:
    """The run directory of one study run, relative to the project root (as in dvc.yaml)."""
    return f"studies/{study}/{method}-{value}-s{seed}"


def _set_dotted(params: dict[str, Any], key: str, value: Any, where: str) -> None:
    node = params
    *parents, leaf = key.split(".")
    for i, part in enumerate(parents):
        if not isinstance(node.get(part), dict):
            raise ConfigError(f"{where}: {'.'.join(parents[:i + 1])} is not a section of params.yaml (key {key!r})")
        node = node[part]
    node[leaf] = value


def _study_params(params: dict[str, Any], spec: OneKnob, where: str, method: str, value: Any) -> dict[str, Any]:
    """A copy of ``params`` with the study's overrides and its knob set to ``value`` for ``method``."""
    if method not in spec.methods:
        raise ConfigError(f"{where}.methods: {method!r} is not one of {list(spec.methods)}")
    if value not in spec.values:
        raise ConfigError(f"{where}.values: {value!r} is not one of {list(spec.values)}")
    params = copy.deepcopy(params)
    settings = {key: (setting, f"{where}.overrides.{key}") for key, setting in (spec.overrides or {}).items()}
    settings[spec.knob.replace("{method}", method)] = (value, f"{where}.knob")
    for key, (setting, origin) in settings.items():
        _set_dotted(params, key, setting, origin)
        if key == "train.epochs":
            params["train"].pop("epochs_by_dataset", None)
        for settings in ((params.get("train") or {}).get("by_dataset") or {}).values():
            (settings or {}).pop(key, None)  # the study's setting wins over a dataset's
    return params


def study_run_config(params: dict[str, Any], study: str, method: str, value: Any, seed: int) -> RunConfig:
    """The resolved config of one study run: ``params`` with the study's overrides and knob = value."""
    spec = study_spec(params, study)
    where = f"studies.{study}"
    params = _study_params(params, spec, where, method, value)
    try:
        cfg = run_config(params, method, spec.dataset, seed)
    except ConfigError as err:
        raise ConfigError(f"{where} ({method}, value {value!r}): {err}") from err
    return dataclasses.replace(cfg, run_id=study_run_dir(study, method, value, seed).removeprefix("studies/"))


# ------------------------------------------------------------------------------------------------ tuning

TUNING_DIR = "tuning"
# the selection sections of params.yaml: the unimodal comparison's (scored by linear-probe top-1 on a
# stratified validation part of tuning.dataset) and the image-text comparison's (scored by the mean of IR@1
# and TR@1 on validation pairs whose images are held out of bimodal.data's training pairs); the column of
# candidates.csv and the key of selected.json that hold the score
TUNING_SECTIONS = {"tuning": "val_top1", "bimodal_tuning": "val_r1"}


@dataclass(frozen=True)
class TuningSpec:
    """``tuning`` (or ``bimodal_tuning``) in params.yaml: every tuned method of the section gets the same number
    of candidates (``candidates``), each trained for ``epochs`` with ``validation_fraction`` of the training
    set held out (``tuning``: a stratified part of ``dataset``'s training split, scored by linear-probe top-1;
    ``bimodal_tuning``: the captions of a cluster-stratified part of the training images of ``bimodal.data``,
    scored by the mean of image and text retrieval R@1 among them), averaged over ``seeds``.

    ``methods`` maps a method (a key of ``methods``) to its search space over its own knobs: either a
    grid (``{tau: [0.1, 0.2, 0.3, 0.5]}``; when the grid has more points than ``candidates``, a seeded
    sample of ``candidates`` of them) or an explicit list of candidates (``[{rho: 0.3, eta: 0.01}, ...]``).
    The selection is written to ``tuning/<method>/selected.json``; runs whose section or study says
    ``tuned: true`` use it (the test split is read once, by those runs).
    """

    epochs: int
    validation_fraction: float
    candidates: int
    methods: dict[str, Any]
    seeds: tuple[int, ...] = (0,)
    dataset: str | None = None  # tuning: required; bimodal_tuning: none (the pairs are bimodal.data)

    def __post_init__(self) -> None:
        if self.dataset is not None and self.dataset not in DATASETS:
            raise ValueError(f"dataset: unknown dataset {self.dataset!r} (registered: {sorted(DATASETS)})")
        if not 0 < self.validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in (0, 1), got {self.validation_fraction}")
        if self.epochs < 1 or self.candidates < 1 or not self.seeds or not self.methods:
            raise ValueError("need epochs >= 1, candidates >= 1, and non-empty seeds and methods")


def tuning_spec(params: dict[str, Any], section: str = "tuning") -> TuningSpec | None:
    raw = params.get(section)
    if raw is None:
        return None
    spec = _typed(TuningSpec, raw, section)
    if (section == "tuning") != (spec.dataset is not None):
        raise ConfigError(f"{section}.dataset: " + ("required (the unimodal set the candidates train on)"
                                                    if section == "tuning" else
                                                    "not allowed (the candidates train on bimodal.data's pairs)"))
    return spec


def tuning_section(params: dict[str, Any], method: str) -> str:
    """The selection section (``tuning`` or ``bimodal_tuning``) whose ``methods`` has ``method``."""
    for section in TUNING_SECTIONS:
        if method in ((params.get(section) or {}).get("methods") or {}):
            return section
    tuned = [m for s in TUNING_SECTIONS for m in ((params.get(s) or {}).get("methods") or {})]
    raise ConfigError(f"tuning.methods.{method}: not defined (tuned methods: {sorted(tuned)})")


def tuning_candidates(params: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The candidates of ``method`` (a list of {knob: value}), each validated as a loss of that method."""
    section = tuning_section(params, method)
    spec = tuning_spec(params, section)
    where = f"{section}.methods.{method}"
    space = spec.methods[method]
    if isinstance(space, dict) and space and all(isinstance(v, list) and v for v in space.values()):
        grid = [dict(zip(space, combo, strict=True)) for combo in itertools.product(*space.values())]
        found = grid if len(grid) <= spec.candidates else random.Random(0).sample(grid, spec.candidates)
    elif isinstance(space, list) and space and all(isinstance(c, dict) and c for c in space):
        found = [dict(c) for c in space]
    else:
        raise ConfigError(f"{where}: expected a grid {{knob: [values]}} or a list of {{knob: value}}, got {space!r}")
    if len(found) != spec.candidates:
        raise ConfigError(f"{where}: {len(found)} candidates, but every method gets {section}.candidates = "
                          f"{spec.candidates} (the same budget for every method)")
    for i, candidate in enumerate(found):
        try:
            (_bimodal_method if section == "bimodal_tuning" else _method)(_with_knobs(params, method, candidate),
                                                                          method)
        except ConfigError as err:
            raise ConfigError(f"{where} (candidate {i}: {candidate}): {err}") from err
    return found


def _with_knobs(params: dict[str, Any], method: str, knobs: dict[str, Any]) -> dict[str, Any]:
    params = copy.deepcopy(params)
    params["methods"][method] = {**(params["methods"].get(method) or {}), **knobs}
    return params


def tuning_run_config(params: dict[str, Any], method: str, candidate: int,
                      seed: int) -> RunConfig | BimodalRunConfig:
    """The run of candidate ``candidate`` of ``method`` at ``seed``: the section's ``epochs`` on the training
    data minus the validation part, evaluated on that part (``tuning/<method>/runs/c<candidate>-s<seed>``)."""
    section = tuning_section(params, method)
    spec = tuning_spec(params, section)
    tuned = _with_knobs(params, method, tuning_candidates(params, method)[candidate])
    if section == "bimodal_tuning":
        tuned["bimodal"] = {**tuned["bimodal"], "epochs": spec.epochs}
        cfg = bimodal_run_config(tuned, method, seed)
    else:
        tuned["train"] = {**tuned["train"], "epochs": spec.epochs}
        tuned["train"].pop("epochs_by_dataset", None)
        cfg = run_config(tuned, method, spec.dataset, seed)
    return dataclasses.replace(cfg, run_id=f"{method}/runs/c{candidate}-s{seed}",
                               validation_fraction=spec.validation_fraction)


def selection_path(method: str, tuning_dir: Path | str = TUNING_DIR) -> Path:
    return Path(tuning_dir) / method / "selected.json"


def with_selection(params: dict[str, Any], method: str, tuning_dir: Path | str = TUNING_DIR) -> dict[str, Any]:
    """``params`` with ``methods.<method>`` updated by the knobs selected on the validation split."""
    path = selection_path(method, tuning_dir)
    if not path.is_file():
        raise ConfigError(f"{path}: not found; the tuning stage writes it "
                          f"(dvc repro pipelines/tune/dvc.yaml:tune@{method})")
    return _with_knobs(params, method, json.loads(path.read_text())["knobs"])


def validate_tuning(params: dict[str, Any]) -> None:
    """The selection sections, and that every section or study that says ``tuned: true`` runs tuned methods
    only (the image-text ones with methods of ``bimodal_tuning``, the others with methods of ``tuning``)."""
    specs = {section: tuning_spec(params, section) for section in TUNING_SECTIONS}
    tuned = {section: set(spec.methods) if spec else set() for section, spec in specs.items()}
    both = tuned["tuning"] & tuned["bimodal_tuning"]
    if both:
        raise ConfigError(f"bimodal_tuning.methods: {sorted(both)} also under tuning.methods (one selection each)")
    for method in (*tuned["tuning"], *tuned["bimodal_tuning"]):
        tuning_candidates(params, method)
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


# ----------------------------------------------------------------------------------------------- bimodal


@dataclass(frozen=True)
class BimodalTrainConfig:
    """The training settings of ``bimodal`` in params.yaml (image-text runs; iSogCLR section 6.2).

    The schedule is counted in iterations, as the paper's: the rate rises linearly to ``lr`` over
    ``warmup_iters`` steps, then follows a cosine to ``final_lr`` (2e-4 -> 1e-6, 1000 warm-up
    iterations at paper scale). ``data`` is the folder written by ``python -m isogclr synthetic-pairs``
    (train/captions.tsv, retrieval_{a,b}/dataset.json, zeroshot/...). ``eval_every`` epochs the
    image retrieval R@1 on ``retrieval_a`` is logged (the convergence curve of Figure 1, right).
    """

    data: str = "data/synthetic_pairs"
    image_size: int = 32
    epochs: int = 30
    batch_size: int = 512
    lr: float = 2e-4
    weight_decay: float = 0.02
    warmup_iters: int = 1000
    final_lr: float = 1e-6
    proj_dim: int = 256
    crop_scale_min: float = 0.5  # random resized crop scale range (crop_scale_min, 1)
    flip_p: float = 0.5
    tau_lr: float | None = None  # rate of learned (log-)temperatures, the losses' own parameters; None = lr
    eval_every: int = 1  # 0 = evaluate only at the end
    eval_batch_size: int = 256
    device: str = "auto"
    precision: str = "bf16"  # autocast on GPU only
    num_threads: int = 0  # torch CPU threads; 0 = torch's default

    def __post_init__(self) -> None:
        for key in ("image_size", "epochs", "batch_size", "proj_dim", "eval_batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be >= 2 (a contrastive batch), got {self.batch_size}")
        if not (self.lr > 0 and self.weight_decay >= 0 and 0 <= self.final_lr <= self.lr):
            raise ValueError(f"need lr > 0, weight_decay >= 0 and 0 <= final_lr <= lr, got lr={self.lr}, "
                             f"weight_decay={self.weight_decay}, final_lr={self.final_lr}")
        if self.tau_lr is not None and not self.tau_lr > 0:
            raise ValueError(f"tau_lr must be > 0 (or null: the model's lr), got {self.tau_lr!r}")
        if self.warmup_iters < 0 or self.eval_every < 0 or self.num_threads < 0:
            raise ValueError("warmup_iters, eval_every and num_threads must be >= 0")
        if not 0 < self.crop_scale_min <= 1 or not 0 <= self.flip_p <= 1:
            raise ValueError(f"need crop_scale_min in (0, 1] and flip_p in [0, 1], got {self.crop_scale_min}, "
                             f"{self.flip_p}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be fp32 or bf16, got {self.precision!r}")


@dataclass(frozen=True)
class BimodalRunConfig:
    """Everything one image-text run needs; written to ``<run>/artifacts/config.json``."""

    run_id: str
    method: MethodConfig
    seed: int
    train: BimodalTrainConfig
    image_encoder: EncoderConfig
    text_encoder: Any  # models.text.TextEncoderConfig (imported lazily: transformers is slow to import)
    stream: StreamConfig | None = None  # bimodal.stream: stream the training pairs (tsv or shards); None: in memory
    validation_fraction: float = 0.0  # > 0: a selection run (bimodal_tuning), scored on held-out training pairs

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["stream"] is None:  # in-memory runs: the same config.json as before streaming existed
            del out["stream"]
        if not out["validation_fraction"]:
            del out["validation_fraction"]
        return out


# bimodal's run lists: the central comparison (methods x seeds, tuned when bimodal.tuned) and the side
# methods, run at side_seeds (default: the first seed)
BIMODAL_LISTS = ("methods", "seeds", "side_methods", "side_seeds")


def bimodal_run_id(method: str, seed: int) -> str:
    return f"{method}-s{seed}"


def _bimodal_sections(params: dict[str, Any]) -> tuple[BimodalTrainConfig, EncoderConfig, Any]:
    from .models.text import TextEncoderConfig

    section = params.get("bimodal")
    if not isinstance(section, dict):
        raise ConfigError("bimodal: expected a mapping (the image-text runs' settings)")
    rest = {k: v for k, v in section.items() if k not in (*BIMODAL_LISTS, "paper_rows", "tuned", "image_encoder",
                                                               "text_encoder", "stream")}
    train = _typed(BimodalTrainConfig, rest, "bimodal")
    image = _typed(EncoderConfig, section.get("image_encoder"), "bimodal.image_encoder")
    text = _typed(TextEncoderConfig, section.get("text_encoder"), "bimodal.text_encoder")
    if text.dim % text.n_heads:
        raise ConfigError(f"bimodal.text_encoder.dim: {text.dim} is not divisible by n_heads={text.n_heads}")
    if min(text.vocab_size, text.dim, text.n_layers, text.n_heads, text.hidden_dim, text.max_length) < 1:
        raise ConfigError(f"bimodal.text_encoder: sizes must be >= 1, got {text}")
    return train, image, text


def _bimodal_method(params: dict[str, Any], name: str) -> MethodConfig:
    from .losses import BIMODAL_LOSSES

    method = _method(params, name)
    if method.loss not in BIMODAL_LOSSES:
        raise ConfigError(f"bimodal.methods: method {name!r} uses the unimodal loss {method.loss!r} "
                          f"(bimodal losses: {list(BIMODAL_LOSSES)})")
    return method


def bimodal_runs(params: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every image-text run of the ``bimodal`` section: method -> its seeds (the central methods at ``seeds``,
    the ``side_methods`` at ``side_seeds``, by default the first of ``seeds``)."""
    section = params.get("bimodal") or {}
    seeds = tuple(section.get("seeds") or ())
    side_seeds = tuple(section.get("side_seeds") or seeds[:1])
    return {**{m: seeds for m in section.get("methods") or []},
            **{m: side_seeds for m in section.get("side_methods") or []}}


def validate_bimodal(params: dict[str, Any]) -> None:
    """Check the ``bimodal`` section (if present) and every run it asks for; errors name the key."""
    section = params.get("bimodal")
    if section is None:
        return
    _bimodal_sections(params)
    for key in BIMODAL_LISTS:
        if key in ("methods", "seeds") or section.get(key) is not None:
            if not isinstance(section.get(key), list) or not section[key]:
                raise ConfigError(f"bimodal.{key}: expected a non-empty list")
    both = set(section["methods"]) & set(section.get("side_methods") or [])
    if both:
        raise ConfigError(f"bimodal.side_methods: {sorted(both)} also in bimodal.methods")
    for key in ("methods", "side_methods"):
        for name in section.get(key) or []:
            if name not in (params.get("methods") or {}):
                raise ConfigError(f"bimodal.{key}: unknown method {name!r} (defined under methods: "
                                  f"{sorted(params.get('methods') or {})})")
            _bimodal_method(params, name)
    for key in ("seeds", "side_seeds"):
        for s in section.get(key) or []:
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ConfigError(f"bimodal.{key}: seeds are non-negative integers, got {s!r}")
    rows = section.get("paper_rows") or {}
    if not isinstance(rows, dict):
        raise ConfigError(f"bimodal.paper_rows: expected a mapping method -> paper row, got {rows!r}")
    for name in rows:
        if name not in bimodal_runs(params):
            raise ConfigError(f"bimodal.paper_rows: {name!r} is not in bimodal.methods or bimodal.side_methods")


def bimodal_run_config(params: dict[str, Any], method: str, seed: int) -> BimodalRunConfig:
    """The resolved config of image-text run (method, seed), validated."""
    train, image, text = _bimodal_sections(params)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed: expected a non-negative integer, got {seed!r}")
    stream = (params.get("bimodal") or {}).get("stream")
    stream = None if stream is None else _typed(StreamConfig, stream, "bimodal.stream")
    if stream is not None and stream.image_size != train.image_size:
        raise ConfigError(f"bimodal.stream.image_size: {stream.image_size} differs from bimodal.image_size "
                          f"{train.image_size} (the training crop); set them equal")
    if stream is not None and not text.pretrained:
        raise ConfigError("bimodal.stream: streamed pairs need a pretrained tokenizer "
                          "(bimodal.text_encoder.pretrained); a WordPiece trained here reads every caption first")
    return BimodalRunConfig(run_id=bimodal_run_id(method, seed), method=_bimodal_method(params, method),
                            seed=int(seed), train=train, image_encoder=image, text_encoder=text, stream=stream)


def bimodal_study_spec(params: dict[str, Any], name: str) -> BimodalStudySpec:
    studies = params.get("bimodal_studies") or {}
    if name not in studies:
        raise ConfigError(f"bimodal_studies.{name}: not defined (defined: {sorted(studies)})")
    return _typed(BimodalStudySpec, studies[name], f"bimodal_studies.{name}")


def bimodal_study_run_config(params: dict[str, Any], study: str, method: str, value: Any,
                             seed: int) -> BimodalRunConfig:
    """One image-text study run: ``params`` with the study's overrides and knob = value, in studies/<study>/."""
    spec = bimodal_study_spec(params, study)
    where = f"bimodal_studies.{study}"
    params = _study_params(params, spec, where, method, value)
    try:
        cfg = bimodal_run_config(params, method, seed)
    except ConfigError as err:
        raise ConfigError(f"{where} ({method}, value {value!r}): {err}") from err
    return dataclasses.replace(cfg, run_id=study_run_dir(study, method, value, seed).removeprefix("studies/"))


# --- emc2_convergence: EMC2's convergence study (isogclr.train.convergence runs it) ---

CONVERGENCE_METHODS = ("simclr", "sogclr", "emc2")  # the methods the study can train


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
    ``infinite_augmentation``, EMC2 with fresh views every step (the reference of EMC2's Figure 3)."""

    augmentation_values: tuple[int, ...] = (2, 4, 8)
    infinite_augmentation: bool = False

    def __post_init__(self) -> None:
        values = self.augmentation_values
        if (not isinstance(values, tuple) or not values
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 2 for v in values)):
            raise ValueError(f"augmentation_values: must be a non-empty list of integers >= 2, got {values!r}")
        if not isinstance(self.infinite_augmentation, bool):
            raise ValueError(f"infinite_augmentation: must be true or false, got {self.infinite_augmentation!r}")


_CONVERGENCE_SOURCES = {"data_root": "data.root", "beta": "methods.emc2.beta", "gamma": "methods.sogclr.gamma",
                        "encoder": "model.encoder", "head": "model.head", "augment": "augment"}


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
              "gamma": (methods.get("sogclr") or {}).get("gamma", 0.9),
              "encoder": _typed(EncoderConfig, model.get("encoder"), "model.encoder"),
              "head": _typed(HeadConfig, model.get("head"), "model.head"),
              "augment": _typed(AugmentConfig, params.get("augment"), "augment")}
    values = {k: float(v) if k in ("beta", "gamma") and isinstance(v, int | float) else v for k, v in values.items()}
    section = params.get("emc2_convergence") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"emc2_convergence: expected a mapping, got {section!r}")
    study_keys = {f.name for f in dataclasses.fields(ConvergenceStudy)}
    section = {k: v for k, v in section.items() if k not in study_keys}
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


def validate_convergence(params: dict[str, Any]) -> None:
    """Check the section ``emc2_convergence`` if present (:func:`convergence_config`, :func:`convergence_study`)."""
    if params.get("emc2_convergence") is not None:
        convergence_config(params)
        convergence_study(params)
