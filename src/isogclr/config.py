"""params.yaml -> typed configs, validated before any compute.

Every error names the key it comes from (``methods.isogclr.rho: ...``), so a bad
ablation fails in a second instead of after an hour of training.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .data import DATASETS
from .data.augment import AugmentConfig
from .data.synthetic import SyntheticSpec
from .data.synthetic_pairs import PairSpec
from .eval.linear_probe import ProbeConfig
from .losses import LOSSES, MovingAverageConventions, build_loss
from .models import EncoderConfig, HeadConfig
from .train.optim import OptimConfig

TABLE_SECTIONS = ("table1",)


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

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError(f"need epochs >= 1 and batch_size >= 2, got {self.epochs}, {self.batch_size}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        for name, epochs in (self.epochs_by_dataset or {}).items():
            if not isinstance(epochs, int) or epochs < 1:
                raise ValueError(f"epochs_by_dataset.{name} must be an integer >= 1, got {epochs!r}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, got {self.precision!r}")


@dataclass(frozen=True)
class MethodConfig:
    name: str
    loss: str
    kwargs: dict[str, Any]

    def build(self, num_samples: int):
        kwargs = dict(self.kwargs)
        if "conventions" in kwargs:
            kwargs["conventions"] = MovingAverageConventions(**kwargs["conventions"])
        return build_loss(self.loss, num_samples, **kwargs)


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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_params(path: Path | str = "params.yaml") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found")
    with path.open() as f:
        params = yaml.safe_load(f)
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return params


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


def pair_spec(params: dict[str, Any]) -> PairSpec:
    return _typed(PairSpec, (params.get("data") or {}).get("synthetic_pairs"), "data.synthetic_pairs")


def validate_params(params: dict[str, Any]) -> None:
    """Check every section and every run the tables ask for; raise :class:`ConfigError` naming the key."""
    synthetic_spec(params)
    pair_spec(params)
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


def run_id(method: str, dataset: str, seed: int) -> str:
    return f"{method}-{dataset}-s{seed}"


def _shared_sections(params: dict[str, Any]) -> dict[str, Any]:
    """The typed sections every run shares (model, augment, train, probe)."""
    model = params.get("model") or {}
    train = dict(params.get("train") or {})
    optimizer = train.pop("optimizer", {})
    return {
        "data_root": str((params.get("data") or {}).get("root", "data")),
        "encoder": _typed(EncoderConfig, model.get("encoder"), "model.encoder"),
        "head": _typed(HeadConfig, model.get("head"), "model.head"),
        "augment": _typed(AugmentConfig, params.get("augment"), "augment"),
        "optimizer": _typed(OptimConfig, optimizer, "train.optimizer"),
        "train": _typed(TrainConfig, train, "train"),
        "probe": _typed(ProbeConfig, params.get("probe"), "probe"),
    }


def run_config(params: dict[str, Any], method: str, dataset: str, seed: int) -> RunConfig:
    """The resolved config of run (method, dataset, seed), validated."""
    if dataset not in DATASETS:
        raise ConfigError(f"dataset: unknown dataset {dataset!r} (registered: {sorted(DATASETS)})")
    sections = _shared_sections(params)
    train = sections["train"]
    epochs = (train.epochs_by_dataset or {}).get(dataset, train.epochs)
    sections["train"] = dataclasses.replace(train, epochs=epochs, epochs_by_dataset=None)
    return RunConfig(run_id=run_id(method, dataset, seed), method=_method(params, method), dataset=dataset,
                     seed=int(seed), **sections)
