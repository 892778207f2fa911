"""The shared sections (model, augment, train, probe, methods, data), one unimodal run's config, and the
helpers every part of the configuration uses are :mod:`.typed` (:class:`ConfigError`, :func:`typed_section`);
reading params.yaml and the profiles is :mod:`.profiles`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Any

from ..data import DATASETS
from ..data.augment import AugmentConfig
from ..data.base import STREAMS, StreamConfig
from ..dataset_specs import SPECS
from ..eval.linear_probe import ProbeConfig
from ..losses import LOSSES, build_loss
from ..models import EncoderConfig, HeadConfig
from .overlay import LR, RUN_SECTIONS, apply_setting, check_knob, method_rate
from .typed import ConfigError, typed_section

# data.long_tailed_order: the classes of a long-tailed set ranked in id order (Cao et al.; the paper profile), or by
# a permutation drawn from each run's seed (so a class's difficulty is not its frequency in every seed)
FIXED_ORDER, BY_SEED_ORDER = "fixed", "by_seed"
LONG_TAILED_ORDERS = (FIXED_ORDER, BY_SEED_ORDER)

# grids of methods x datasets x seeds, runs in runs/<run-id> (references: the supervised reference rows;
# pretrain: the image-text runs' image encoder, bimodal.image_encoder.init)
TABLE_SECTIONS = ("table1", "table1_real", "table3", "references", "pretrain")


@dataclass(frozen=True)
class OptimConfig:
    """``train.optimizer`` in params.yaml. ``lr`` is the base rate; see ``lr_scaling``.

    The warm-up is counted either in epochs (``warmup_epochs``, the papers' unit, may be
    fractional) or in optimizer steps (``warmup_iters``, as the bimodal trainer counts it);
    at most one of the two may be non-zero, so a params.yaml never says two different things.

    ``clip_grad_norm``: before each step the gradients of all the model's parameters are rescaled so that their
    global L2 norm is at most this value (``torch.nn.utils.clip_grad_norm_``; 0: no clipping). It is the testbed's
    lever against chaos (docs/reproducibility.md): two runs of one seed stay paired across methods.
    """

    name: str = "lars"
    lr: float = 0.8
    weight_decay: float = 1e-4
    momentum: float = 0.9
    lr_scaling: str = "none"  # "none", "linear" (lr * B / 256) or "sqrt" (lr * sqrt(B), SogCLR)
    warmup_epochs: float = 10.0
    warmup_iters: int = 0  # warm-up length in steps; needs warmup_epochs: 0
    final_lr_fraction: float = 0.0
    clip_grad_norm: float = 0.0  # the largest global L2 norm of the gradient before a step; 0: no clipping

    def __post_init__(self) -> None:
        if self.name not in ("lars", "sgd", "adamw"):
            raise ValueError(f"train.optimizer.name must be lars, sgd or adamw, got {self.name!r}")
        if self.lr_scaling not in ("none", "linear", "sqrt"):
            raise ValueError(f"train.optimizer.lr_scaling must be none, linear or sqrt, got {self.lr_scaling!r}")
        if self.lr <= 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError(f"train.optimizer: need lr > 0, weight_decay >= 0, warmup_epochs >= 0, got {self}")
        if isinstance(self.clip_grad_norm, bool) or not isinstance(self.clip_grad_norm, (int, float)) \
                or not self.clip_grad_norm >= 0:
            raise ValueError(f"train.optimizer.clip_grad_norm must be a number >= 0 (0: no clipping), got "
                             f"{self.clip_grad_norm!r}")
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



# a tuned method's search space (its candidates) and the candidate its untuned runs use: keys of methods.<m>
SEARCH, UNTUNED = "search", "untuned"
# methods.<m>.pin: {knob: value}: a searched knob held at one value in every run of the method (its selection's
# candidates, its tuned and its untuned runs), for an ablation of a tuned method (pinned_knobs)
PIN = "pin"
# methods.<m>.<knob>: selected marks a searched knob where a reader (and `dvc exp run -S`) looks for it: its value
# comes from the search (the selection, or candidate `untuned`); any other value there is refused, naming the pin
SELECTED = "selected"


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
        if self.num_threads < 0:
            raise ValueError(f"num_threads must be >= 0 (0: torch's default), got {self.num_threads}")
        if self.precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, got {self.precision!r}")


@dataclass(frozen=True)
class MethodConfig:
    """``methods.<name>``: its loss and the loss's arguments (``kwargs``), and ``lr``, the method's own learning
    rate: ``methods.<name>.lr`` replaces ``train.optimizer.lr`` in its runs (None: the shared rate). It is a knob
    like the loss's, so a method's search may set it, under the same budget as every other method's. The mini
    profile sets none: it brings SogCLR and iSogCLR to SimCLR's gradient scale with ``loss_over_tau`` instead,
    because the selection's 4 epochs prefer other rates than Table 1's 12 do (docs/losses.md, "The gradient's
    scale")."""

    name: str
    loss: str
    kwargs: dict[str, Any]
    lr: float | None = None

    def knobs(self) -> dict[str, Any]:
        """What a run of this method used: its loss, the loss's arguments (after the selection: a tuned run's
        are the selected candidate's) and its own learning rate if it sets one; each run writes them to
        ``knobs.json``, which the pipeline declares as metrics, so that ``dvc exp show`` lists them."""
        return {"loss": self.loss, **self.kwargs, **({} if self.lr is None else {"lr": self.lr})}

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
    # True: a tuning run on the whole training split, evaluated on the dataset's generated validation split
    # (tuning.validation: split; load_dataset(..., "val")); the test split is not read
    validation_split: bool = False
    # data.long_tailed_order: which class of a long-tailed set is frequent (isogclr.data.base.long_tailed_order)
    long_tailed_order: str = FIXED_ORDER

    def __post_init__(self) -> None:
        if self.long_tailed_order not in LONG_TAILED_ORDERS:
            raise ConfigError(f"data.long_tailed_order: expected one of {list(LONG_TAILED_ORDERS)}, got "
                              f"{self.long_tailed_order!r}")

    @property
    def order_seed(self) -> int | None:
        """The seed of the long-tailed class order of this run (``load_dataset(..., order_seed)``): None for id
        order (``fixed``), the run's seed for ``by_seed``."""
        return self.seed if self.long_tailed_order == BY_SEED_ORDER else None

    def to_dict(self) -> dict[str, Any]:
        return run_config_dict(self)


def run_config_dict(cfg: Any) -> dict[str, Any]:
    """A run config (unimodal or image-text) as its ``config.json``: the dataclass as a dict, without ``stream``
    when the run is held in memory and without ``validation_fraction`` when it is not a selection run, so that
    in-memory, non-selection runs write the same file as before those options existed (``validation_split`` only
    when True, ``long_tailed_order`` only for a long-tailed set whose classes are not in id order,
    ``optimizer.clip_grad_norm`` only when it clips)."""
    out = dataclasses.asdict(cfg)
    if out["method"]["lr"] is None:  # the shared rate: optimizer.lr says it
        del out["method"]["lr"]
    if out["stream"] is None:
        del out["stream"]
    if not out["validation_fraction"]:
        del out["validation_fraction"]
    if not out.get("validation_split", True):
        del out["validation_split"]
    if "optimizer" in out and not out["optimizer"].get("clip_grad_norm", 1):
        del out["optimizer"]["clip_grad_norm"]
    order = out.get("long_tailed_order")
    if order is not None and (order == FIXED_ORDER or SPECS[cfg.dataset].balanced is None):
        del out["long_tailed_order"]  # written where it applies (a long-tailed set) and is not id order
    return out


def search_points(space: Any, where: str) -> list[dict[str, Any]]:
    """The candidates a search space lists, in order: a grid ``{knob: [values]}`` in ``itertools.product``
    order, or a list ``[{knob: value}, ...]`` as written; every candidate sets the same knobs."""
    if isinstance(space, dict) and space and all(isinstance(v, list) and v for v in space.values()):
        return [dict(zip(space, combo, strict=True)) for combo in itertools.product(*space.values())]
    if isinstance(space, list) and space and all(isinstance(c, dict) and c for c in space):
        for i, candidate in enumerate(space):
            if set(candidate) != set(space[0]):
                raise ConfigError(f"{where}: candidate {i} sets {sorted(candidate)}, candidate 0 sets "
                                  f"{sorted(space[0])}; every candidate sets the same knobs")
        return [dict(c) for c in space]
    raise ConfigError(f"{where}: expected a grid {{knob: [values]}} or a list of {{knob: value}}, got {space!r}")


def pinned_knobs(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """``methods.<name>.pin`` (``{}`` when unset), checked: each pinned knob is one of the method's searched knobs
    (a knob that is not searched is set directly, ``methods.<name>.<knob>``, so pinning it is refused as
    ambiguous), and the method has a search."""
    pin = spec.get(PIN)
    if pin is None:
        return {}
    where = f"methods.{name}.{PIN}"
    if not isinstance(pin, dict) or not pin:
        raise ConfigError(f"{where}: expected a mapping {{knob: value}} of searched knobs, got {pin!r}")
    if spec.get(SEARCH) is None:
        raise ConfigError(f"{where}: {name} has no search (methods.{name}.{SEARCH}): set its knobs directly, "
                          f"methods.{name}.<knob>, instead of pinning them")
    searched = set(search_points(spec[SEARCH], f"methods.{name}.{SEARCH}")[0])
    for knob in pin:
        if knob not in searched:
            raise ConfigError(f"{where}.{knob}: not a searched knob of {name} (searched: {sorted(searched)}); set "
                              f"it directly, methods.{name}.{knob}, which every run of {name} uses")
    return dict(pin)


def method_config(params: dict[str, Any], name: str) -> MethodConfig:
    """``methods.<name>`` as a loss and its arguments. A tuned method's searched knobs are written once, in
    ``search`` (the candidates of its selection): a run that is not tuned takes them from candidate ``untuned``
    (default 0; a tuned run takes the selected candidate over it, :func:`isogclr.config.selection.with_selection`),
    and the same knob set beside ``search`` is refused, naming the key. ``pin`` holds searched knobs at one value
    in every run (:func:`pinned_knobs`). Each knob is checked by type here; whether the knobs build the loss is
    checked once, by :func:`isogclr.config.overlay.check_loss` in the validation of params.yaml."""
    methods = params.get("methods") or {}
    if name not in methods:
        raise ConfigError(f"methods.{name}: not defined (defined: {sorted(methods)})")
    spec = dict(methods[name] or {})
    loss = spec.pop("loss", None)
    if loss not in LOSSES:
        raise ConfigError(f"methods.{name}.loss: unknown loss {loss!r} (registered: {sorted(LOSSES)})")
    space, untuned = spec.pop(SEARCH, None), spec.pop(UNTUNED, None)
    pin = pinned_knobs(methods[name] or {}, name)
    spec.pop(PIN, None)
    if space is None and untuned is not None:
        raise ConfigError(f"methods.{name}.{UNTUNED}: a candidate of methods.{name}.{SEARCH}, which is not set")
    where = f"methods.{name}.{SEARCH}"
    points = search_points(space, where) if space is not None else [{}]
    for knob in sorted(k for k, v in spec.items() if v == SELECTED):
        if knob not in points[0]:
            raise ConfigError(f"methods.{name}.{knob}: {SELECTED!r} marks a knob of {where}, and {knob} is not one "
                              f"(searched: {sorted(points[0]) or 'none'}); give it a value")
        del spec[knob]
    if space is not None:
        both = sorted(set(points[0]) & set(spec))
        if both:
            raise ConfigError(
                f"methods.{name}.{both[0]}: {spec[both[0]]!r}, but it is a knob of {where}, which sets it (write "
                f"{SELECTED!r} there, or nothing): tuned runs take the selected "
                f"candidate (tuning/{name}/selected.json), the other runs candidate methods.{name}.{UNTUNED} "
                f"(now {untuned or 0}). To hold it at {spec[both[0]]!r} in every run of {name} (an ablation), pin "
                f"it: methods.{name}.{PIN}: {{{both[0]}: {spec[both[0]]}}} (dvc exp run -S "
                f"'+methods.{name}.{PIN}.{both[0]}={spec[both[0]]}'); or change the candidates in {where}")
        if untuned is None:
            untuned = 0
        if isinstance(untuned, bool) or not isinstance(untuned, int) or not 0 <= untuned < len(points):
            raise ConfigError(f"methods.{name}.{UNTUNED}: the index of a candidate of {where} "
                              f"(0 to {len(points) - 1}), got {untuned!r}")
        spec.update(points[untuned])
        spec.update(pin)
    lr = spec.pop(LR, None)
    for knob, value in (*spec.items(), (LR, lr)):
        check_knob(name, loss, knob, value)
    return MethodConfig(name=name, loss=loss, kwargs=spec, lr=lr)


def run_id(method: str, dataset: str, seed: int) -> str:
    return f"{method}-{dataset}-s{seed}"


def shared_sections(params: dict[str, Any]) -> dict[str, Any]:
    """The typed sections every run shares (model, augment, train, probe)."""
    model = params.get("model") or {}
    train = dict(params.get("train") or {})
    optimizer = train.pop("optimizer", {})
    train.pop("by_dataset", None)  # applied by run_config (dataset_settings)
    stream = train.pop("stream", None)
    return {
        "data_root": str((params.get("data") or {}).get("root", "data")),
        "long_tailed_order": (params.get("data") or {}).get("long_tailed_order", FIXED_ORDER),
        "encoder": typed_section(EncoderConfig, model.get("encoder"), "model.encoder"),
        "head": typed_section(HeadConfig, model.get("head"), "model.head"),
        "augment": typed_section(AugmentConfig, params.get("augment"), "augment"),
        "optimizer": typed_section(OptimConfig, optimizer, "train.optimizer"),
        "train": typed_section(TrainConfig, train, "train"),
        "probe": typed_section(ProbeConfig, params.get("probe"), "probe"),
        "stream": None if stream is None else typed_section(StreamConfig, stream, "train.stream"),
    }


def dataset_settings(params: dict[str, Any], dataset: str) -> dict[str, Any]:
    """``train.by_dataset.<dataset>``, checked: dotted keys of params.yaml set for every run on ``dataset`` (the
    ImageNet-scale tables' encoder, batch, learning rate, resolution), applied by :func:`run_config`."""
    table = (params.get("train") or {}).get("by_dataset") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"train.by_dataset: expected a mapping dataset -> {{dotted key: value}}, got {table!r}")
    for name, settings in table.items():
        if name not in DATASETS:
            raise ConfigError(f"train.by_dataset.{name}: unknown dataset (registered: {sorted(DATASETS)})")
        if not isinstance(settings, dict):
            raise ConfigError(f"train.by_dataset.{name}: expected a mapping of dotted keys, got {settings!r}")
        for key in settings:
            if key.startswith("train.by_dataset"):
                raise ConfigError(f"train.by_dataset.{name}.{key}: cannot set train.by_dataset itself")
    return dict(table.get(dataset) or {})


def run_config(params: dict[str, Any], method: str, dataset: str, seed: int) -> RunConfig:
    """The resolved config of run (method, dataset, seed), validated: the shared sections and the method, with
    ``train.by_dataset.<dataset>`` applied as typed overlays (:func:`apply_setting`), then the dataset's epochs
    (``train.epochs_by_dataset``)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed: expected a non-negative integer, got {seed!r}")
    if dataset not in DATASETS:
        raise ConfigError(f"dataset: unknown dataset {dataset!r} (registered: {sorted(DATASETS)})")
    sections = shared_sections(params)
    if sections["stream"] is not None and dataset not in STREAMS:
        sections["stream"] = None  # the small sets stay in memory
    cfg = method_rate(RunConfig(run_id=run_id(method, dataset, seed), method=method_config(params, method),
                                dataset=dataset, seed=int(seed), **sections))
    for key, value in dataset_settings(params, dataset).items():
        cfg = apply_setting(cfg, key, value, f"train.by_dataset.{dataset}", RUN_SECTIONS)
    train = cfg.train
    epochs = (train.epochs_by_dataset or {}).get(dataset, train.epochs)
    return dataclasses.replace(cfg, train=dataclasses.replace(train, epochs=epochs, epochs_by_dataset=None))
