"""The image-text runs (``bimodal``, ``bimodal_studies``): their training settings and each run's config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.base import StreamConfig
from ..data.pair_semantics import PairSpec
from ..models import EncoderConfig
from .core import MethodConfig, method_config, run_config_dict
from .overlay import BIMODAL_SECTIONS
from .selection import TUNING_DIR, with_selection
from .studies import BimodalStudySpec, check_state_knob, check_study_run, study_run_dir, with_study
from .typed import ConfigError, check_seed, typed_section


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
    state_device: str = "model"  # the per-pair state (s, u, tau): on the model's device, or "cpu" (train.state_offload)
    checkpoint_every: int = 0  # steps between checkpoints; 0 = at the end of every epoch only
    sync_bn: bool = False  # the image encoder's BatchNorm over the global batch under torchrun (SyncBatchNorm)

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
        for key in ("warmup_iters", "eval_every", "num_threads", "checkpoint_every"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key} must be an integer >= 0, got {value!r}")
        if not 0 < self.crop_scale_min <= 1 or not 0 <= self.flip_p <= 1:
            raise ValueError(f"need crop_scale_min in (0, 1] and flip_p in [0, 1], got {self.crop_scale_min}, "
                             f"{self.flip_p}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.state_device not in ("model", "cpu"):
            raise ValueError(f"state_device must be model or cpu, got {self.state_device!r}")
        if not isinstance(self.sync_bn, bool):
            raise ValueError(f"sync_bn must be true or false, got {self.sync_bn!r}")
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
        out = run_config_dict(self)
        if out["train"]["state_device"] == "model":  # the default: the same config.json as before the option
            del out["train"]["state_device"]
        return out


# bimodal's run lists: the central comparison (methods x seeds, tuned when bimodal.tuned) and the side
# methods, run at side_seeds (default: the first seed)
BIMODAL_LISTS = ("methods", "seeds", "side_methods", "side_seeds")


def bimodal_run_id(method: str, seed: int) -> str:
    return f"{method}-s{seed}"


def _bimodal_sections(params: dict[str, Any]) -> tuple[BimodalTrainConfig, EncoderConfig, Any]:
    from ..models.text import TextEncoderConfig

    section = params.get("bimodal")
    if not isinstance(section, dict):
        raise ConfigError("bimodal: expected a mapping (the image-text runs' settings)")
    rest = {k: v for k, v in section.items() if k not in (*BIMODAL_LISTS, "paper_rows", "tuned", "image_encoder",
                                                               "text_encoder", "stream")}
    train = typed_section(BimodalTrainConfig, rest, "bimodal")
    image = typed_section(EncoderConfig, section.get("image_encoder"), "bimodal.image_encoder")
    text = typed_section(TextEncoderConfig, section.get("text_encoder"), "bimodal.text_encoder")
    return train, image, text


def bimodal_settings(params: dict[str, Any]) -> BimodalTrainConfig:
    """The ``bimodal`` section's training settings, typed (epochs, batch size, data folder...), as every run
    of the section resolves them."""
    return _bimodal_sections(params)[0]


def bimodal_paper_rows(params: dict[str, Any]) -> dict[str, str]:
    """``bimodal.paper_rows``: which paper row a method is compared with (default: its own name)."""
    validate_bimodal(params)
    return dict((params.get("bimodal") or {}).get("paper_rows") or {})


def bimodal_method_config(params: dict[str, Any], name: str) -> MethodConfig:
    return _check_method(method_config(params, name))


def _check_method(method: MethodConfig) -> MethodConfig:
    """``method`` as an image-text run's: a bimodal loss, the shared rate."""
    from ..losses import BIMODAL_LOSSES

    if method.lr is not None:
        raise ConfigError(f"methods.{method.name}.lr: an image-text method's rate is bimodal.lr (the same for every "
                          "method); a method's own lr is for the unimodal runs")
    if method.loss not in BIMODAL_LOSSES:
        raise ConfigError(f"bimodal.methods: method {method.name!r} uses the unimodal loss {method.loss!r} "
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
            bimodal_run_config(params, name, 0)
    for key in ("seeds", "side_seeds"):
        for s in section.get(key) or []:
            check_seed(f"bimodal.{key}", s)
    rows = section.get("paper_rows") or {}
    if not isinstance(rows, dict):
        raise ConfigError(f"bimodal.paper_rows: expected a mapping method -> paper row, got {rows!r}")
    for name in rows:
        if name not in bimodal_runs(params):
            raise ConfigError(f"bimodal.paper_rows: {name!r} is not in bimodal.methods or bimodal.side_methods")


def bimodal_run_config(params: dict[str, Any], method: str, seed: int, tuned: bool = False,
                       tuning_dir: Path | str = TUNING_DIR) -> BimodalRunConfig:
    """The resolved config of image-text run (method, seed), validated; at the selection when ``tuned``."""
    train, image, text = _bimodal_sections(params)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed: expected a non-negative integer, got {seed!r}")
    stream = (params.get("bimodal") or {}).get("stream")
    stream = None if stream is None else typed_section(StreamConfig, stream, "bimodal.stream")
    cfg = _checked(BimodalRunConfig(run_id=bimodal_run_id(method, seed), method=bimodal_method_config(params, method),
                                    seed=int(seed), train=train, image_encoder=image, text_encoder=text,
                                    stream=stream))
    return _checked(with_selection(params, cfg, tuning_dir)) if tuned else cfg


def _checked(cfg: BimodalRunConfig) -> BimodalRunConfig:
    """What an image-text run's sections must agree on, checked on the resolved config (after any overlay)."""
    _check_method(cfg.method)
    text, stream = cfg.text_encoder, cfg.stream
    if text.dim % text.n_heads:
        raise ConfigError(f"bimodal.text_encoder.dim: {text.dim} is not divisible by n_heads={text.n_heads}")
    if min(text.vocab_size, text.dim, text.n_layers, text.n_heads, text.hidden_dim, text.max_length) < 1:
        raise ConfigError(f"bimodal.text_encoder: sizes must be >= 1, got {text}")
    if stream is not None and stream.image_size != cfg.train.image_size:
        raise ConfigError(f"bimodal.stream.image_size: {stream.image_size} differs from bimodal.image_size "
                          f"{cfg.train.image_size} (the training crop); set them equal")
    if stream is not None and not text.pretrained:
        raise ConfigError("bimodal.stream: streamed pairs need a pretrained tokenizer "
                          "(bimodal.text_encoder.pretrained); a WordPiece trained here reads every caption first")
    return cfg


def bimodal_study_spec(params: dict[str, Any], name: str) -> BimodalStudySpec:
    studies = params.get("bimodal_studies") or {}
    if name not in studies:
        raise ConfigError(f"bimodal_studies.{name}: not defined (defined: {sorted(studies)})")
    return typed_section(BimodalStudySpec, studies[name], f"bimodal_studies.{name}")


def bimodal_study_run_config(params: dict[str, Any], study: str, method: str, value: Any, seed: int,
                             tuned: bool = False, tuning_dir: Path | str = TUNING_DIR) -> BimodalRunConfig:
    """One image-text study run: the run of ``method`` (at the selection when ``tuned``) with the study's overrides
    and knob = value (typed overlays, :func:`isogclr.config.studies.with_study`), in studies/<study>/."""
    spec = bimodal_study_spec(params, study)
    where = f"bimodal_studies.{study}"
    check_study_run(spec, where, method, value)
    try:
        cfg = bimodal_run_config(params, method, seed, tuned, tuning_dir)
    except ConfigError as err:
        raise ConfigError(f"{where} ({method}, value {value!r}): {err}") from err
    cfg = _checked(with_study(cfg, spec, where, value, BIMODAL_SECTIONS))
    check_state_knob(where, spec, method, cfg.method.loss, cfg.train.epochs, epochs_key="bimodal.epochs")
    return dataclasses.replace(cfg, run_id=study_run_dir(study, method, value, seed).removeprefix("studies/"))


def pair_spec(params: dict[str, Any]) -> PairSpec:
    """``data.synthetic_pairs``: the spec of the generated image-text pairs (:mod:`isogclr.data.pair_semantics`)."""
    return typed_section(PairSpec, (params.get("data") or {}).get("synthetic_pairs"), "data.synthetic_pairs")
