"""One training run: contrastive pre-training, then the linear probe; resumable at any checkpoint.

A run writes into ``out_dir``:

* ``metrics.json``: linear-probe top-1 and 1-NN top-1 on the test split (and the random-init probe, if asked);
* ``knobs.json``: the method's knobs the run used (after the selection; :meth:`~isogclr.config.MethodConfig.knobs`);
* ``train_log.csv``: one line per epoch (loss, learning rate, samples seen, temperature stats, and the 1-NN
  test accuracy every ``train.eval_every`` epochs: accuracy against samples seen); no wall clock: the epochs'
  seconds and samples/s go to the timing record ``timing.csv`` (:mod:`isogclr.epoch_times`, key = ``out_dir``);
* ``dvclive/``: the same curves (step = epoch) and the final metrics as DVCLive files, for ``dvc plots show``
  and ``dvc exp show`` (:mod:`isogclr.train.curves`; rebuilt from the checkpointed rows, never appended twice);
* ``artifacts/config.json``: the resolved :class:`~isogclr.config.core.RunConfig`, plus ``encoder.timm_name``: the
  timm name that loads ``encoder.pt`` (see :mod:`isogclr.models.encoders`);
* ``artifacts/machine.json``: the machine that made the run (:mod:`isogclr.machine`: CPU, the kernels torch and
  numpy's BLAS used, versions), since another CPU type draws other training noise;
* ``artifacts/tau.csv``: the learned per-sample temperatures with dataset indices and labels (iSogCLR);
* only with ``export=True`` (the first Table 1 seeds, ``train --export-seed``): ``artifacts/encoder.pt``, the
  encoder's state_dict with floating tensors in float16 (small enough to commit; timm's
  ``create_model(..., checkpoint_path=...)`` loads it), and ``artifacts/features.pt``, the frozen
  features (float16) and labels (int64) of the test split, ``{"test", "test_labels"}``, plus those of the
  train split (``train``, ``train_labels``, aligned with ``tau.csv``) for a loss with per-sample temperatures.

Everything above is small and committed in git. For the user's own use, never tracked (``.gitignore``):

* ``local/encoder.pt``: the encoder's float32 state_dict;
* ``local/state.pt``: ``{"head": ..., "loss": ...}``, the projection head's and the loss's float32 state_dicts
  (the per-sample state: SogCLR's log u_i, iSogCLR's tau_i and moving averages), what an analysis of the final
  per-sample state reads beside ``encoder.pt``;
* ``local/features.pt``: frozen float32 features and labels of the train and test splits.

While it runs, ``ckpt_dir/checkpoint.pt`` holds model, optimizer, loss state (s, u, tau),
step and RNG state, rewritten atomically at the end of every epoch (and every
``train.checkpoint_every`` steps); a restarted run continues from it, and the
checkpoint is removed once the run's outputs are written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from .. import epoch_times, machine
from ..config.core import RunConfig
from ..data import STREAMS, ImageData, IndexedImageDataset, keyed, load_dataset
from ..data.augment import SIMCLR_DRAWS, simclr_augmentation, to_float
from ..data.splits import validation_split
from ..dataset_specs import SPECS
from ..eval.knn import knn_accuracy
from ..eval.linear_probe import extract_features, linear_probe
from ..io import csv_text, save_json, save_text, save_torch
from ..models import ContrastiveModel, timm_name
from . import distributed
from .curves import write_curves
from .distributed import gather_no_grad, gather_with_grad, resolve_device
from .engine import fit, log
from .optim import build_optimizer


def _streaming(cfg: RunConfig) -> ModuleType:
    """The module of the run's stream loader (:data:`isogclr.data.STREAMS`; its transforms and loaders beside it),
    imported through the registry: only a run with ``train.stream`` on a streamed dataset needs it, so an in-memory
    run's stage does not depend on the paper-scale loaders (:func:`isogclr.code_deps.run_modules` adds it where a
    section streams)."""
    return STREAMS.module(cfg.dataset)


class UnimodalTask:
    """A unimodal run as an engine :class:`~isogclr.train.engine.Task`.

    Under torchrun each process takes ``batch_size / world_size`` samples of every global batch;
    features and indices are gathered so the loss (and the per-sample state) is the global batch's
    on every rank. Small sets are held in memory and augmented in batches on the device; streamed
    sets are decoded and augmented per sample in DataLoader workers (:mod:`isogclr.data.streaming`).
    """

    def __init__(self, cfg: RunConfig, ctx, train_data, test_data, train_eval, random_init_baseline: bool) -> None:
        self.cfg, self.ctx, self.device = cfg, ctx, ctx.device
        self.train_data, self.test_data, self.train_eval = train_data, test_data, train_eval
        self.run_id, self.method, self.epochs = cfg.run_id, cfg.method.name, cfg.train.epochs
        self.n, self.batch_size = len(train_data), cfg.train.batch_size
        if self.n < self.batch_size:
            raise ValueError(f"train.batch_size={self.batch_size} exceeds the {self.n} training samples of "
                             f"{cfg.dataset}")
        if self.batch_size % ctx.world_size:
            raise ValueError(f"train.batch_size={self.batch_size} is not divisible by the {ctx.world_size} processes")
        self.local = self.batch_size // ctx.world_size
        self.steps_per_epoch = self.n // self.batch_size  # the last incomplete batch is dropped: batches keep size B
        device = self.device

        torch.manual_seed(cfg.seed)  # the same initial model on every rank
        self.memory_format = torch.channels_last if cfg.train.channels_last else torch.preserve_format
        self.loss_fn = cfg.method.build(self.n).to(device)
        # a loss may need extra encoder outputs (TaU+SimCLR: one uncertainty logit per view), appended to the head
        self.extra = self.loss_fn.extra_outputs
        # the supervised reference: the head is the classifier (its width = the number of classes)
        self.needs_labels = self.loss_fn.needs_labels
        out_dim = train_data.num_classes if self.needs_labels else cfg.head.out_dim + self.extra
        head = dataclasses.replace(cfg.head, out_dim=out_dim)
        model = ContrastiveModel(cfg.encoder, head).to(device, memory_format=self.memory_format)
        if cfg.train.sync_bn and ctx.world_size > 1:
            model = distributed.sync_batchnorm(model, device)
        self.model = model
        self.normalize = self.loss_fn.expects_normalized
        self.optimizer = build_optimizer(model, cfg.optimizer, self.batch_size)
        self.forward = DistributedDataParallel(model) if ctx.world_size > 1 else model
        if cfg.train.compile:
            self.forward = torch.compile(self.forward)
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.train.precision)
        self.use_amp = self.amp_dtype is not None and device.type == "cuda"  # on CPU autocast only slows the step
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.use_amp and self.amp_dtype == torch.float16)
        if cfg.stream is None:
            self.augment = simclr_augmentation(cfg.augment, train_data.images.shape[-1]).to(device)
            self.dataset = IndexedImageDataset(train_data)
        else:
            self.loader_spec = _streaming(cfg).LoaderSpec(self.batch_size, cfg.stream.num_workers,
                                                       cfg.stream.prefetch_factor,
                                                       cfg.stream.pin_memory and device.type == "cuda")
        self.metrics: dict = {}
        if random_init_baseline and ctx.is_main:
            self.metrics["random_init_top1"] = evaluate_encoder(model, train_eval, test_data, cfg, device)["top1"]

    def begin_epoch(self, epoch: int, start: int) -> None:
        cfg, ctx = self.cfg, self.ctx
        self.epoch = epoch
        self.order = torch.randperm(self.n, generator=keyed.epoch_generator(cfg.seed, epoch))
        self.streamed = None if cfg.stream is None else iter(_streaming(cfg).epoch_loader(
            self.train_data, self.loader_spec, epoch, cfg.seed, ctx.rank, ctx.world_size, start_batch=start))

    def loss(self, b: int) -> torch.Tensor:
        rank, local, device = self.ctx.rank, self.local, self.device
        if self.streamed is None:
            batch = self.order[b * self.batch_size:(b + 1) * self.batch_size][rank * local:(rank + 1) * local]
            images, labels, index = self.dataset.__getitems__(batch.tolist())
            # each image's draws, keyed by (seed, epoch, index, view): independent of the rank and the batch
            draws = [keyed.uniforms(self.cfg.seed, self.epoch, index, v, SIMCLR_DRAWS) for v in (0, 1)]
        else:  # (local, 2 views, 3, S, S) uint8, augmented in the workers (keyed the same way)
            images, labels, index = next(self.streamed)
        images, index = images.to(device, non_blocking=True), index.to(device, non_blocking=True)
        if self.streamed is None:
            x = to_float(images)
            views = torch.cat([self.augment(x, u) for u in draws]).contiguous(memory_format=self.memory_format)
        else:  # [all first views, all second views], as the in-memory path
            streaming = _streaming(self.cfg)
            views = streaming.to_normalized(images.transpose(0, 1).flatten(0, 1)).contiguous(
                memory_format=self.memory_format)
            # the per-sample state's key: distinct across processes
            streaming.check_distinct(gather_no_grad(index), self.n)
        with torch.autocast(device.type, dtype=self.amp_dtype or torch.bfloat16, enabled=self.use_amp):
            _, proj = self.forward(views)
        proj, kwargs = proj.float(), {}
        if self.extra:  # the last column is the per-view logit e of TaU+SimCLR
            proj, e = proj[:, :-1], proj[:, -1]
            e1, e2 = e.chunk(2)
            kwargs = {"e1": gather_with_grad(e1), "e2": gather_with_grad(e2)}
        if self.needs_labels:
            kwargs["labels"] = gather_no_grad(torch.as_tensor(labels).to(device, non_blocking=True))
        z1, z2 = proj.chunk(2)
        if self.normalize:
            z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
        return self.loss_fn(gather_with_grad(z1), gather_with_grad(z2), gather_no_grad(index), **kwargs)

    def epoch_columns(self, epoch: int) -> dict[str, float]:
        row = {}
        tau = self.loss_fn.temperatures().get("tau")  # per sample (n,), iSogCLR's; None for a fixed one
        if isinstance(tau, torch.Tensor):
            row.update(tau_mean=tau.mean().item(), tau_std=tau.std().item())
        if self.cfg.train.eval_every and (epoch + 1) % self.cfg.train.eval_every == 0 and self.ctx.is_main:
            row["knn1_top1"] = _knn_now(self.model, self.train_eval, self.test_data, self.device, self.cfg)
        return row

    def state_dict(self) -> dict:
        return {"rng": torch.get_rng_state(), "metrics": self.metrics}

    def load_state_dict(self, state: dict, step: int) -> None:
        torch.set_rng_state(state["rng"])  # rank 0's, the same on every rank (augmentations are keyed by sample)
        self.metrics.update(state["metrics"])


def _describe(row: dict) -> str:
    return f" tau {row['tau_mean']:.3f}+-{row['tau_std']:.3f}" if "tau_mean" in row else ""


def train_run(cfg: RunConfig, out_dir: Path, ckpt_dir: Path, random_init_baseline: bool = False,
              export: bool = False) -> dict:
    """Train ``cfg`` and evaluate it; return the metrics written to ``out_dir/metrics.json``.

    ``export``: also write the committed float16 ``artifacts/encoder.pt`` and ``artifacts/features.pt``.

    Rank 0 writes checkpoints and outputs (see :class:`UnimodalTask` for the distributed batch).
    """
    out_dir, ckpt_dir = Path(out_dir), Path(ckpt_dir)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    ctx = distributed.setup(resolve_device(cfg.train.device))
    device = ctx.device
    train_data, test_data, train_eval = load_splits(cfg)
    task = UnimodalTask(cfg, ctx, train_data, test_data, train_eval, random_init_baseline)
    ckpt_path = ckpt_dir / "checkpoint.pt"
    steps_per_epoch = task.steps_per_epoch
    log_rows = fit(task, total_steps=steps_per_epoch * cfg.train.epochs,
                   warmup_steps=cfg.optimizer.warmup_steps(steps_per_epoch),
                   final_lr_fraction=cfg.optimizer.final_lr_fraction, ckpt_path=ckpt_path,
                   curves_dir=out_dir / "dvclive" if ctx.is_main else None,
                   checkpoint_every=cfg.train.checkpoint_every, describe=_describe, barrier=distributed.barrier,
                   is_main=ctx.is_main, timing_run=epoch_times.run_key(out_dir), run_dir=out_dir,
                   settings={**cfg.to_dict(), "random_init_baseline": random_init_baseline},
                   clip_grad_norm=cfg.optimizer.clip_grad_norm)
    metrics = task.metrics
    if not ctx.is_main:
        return metrics
    # Figure 5's input: the train features of a run with learned temperatures on a long-tailed set (the figure marks
    # the rare classes' tau); a balanced set's 20,000 train features would add 5 MB a run for no figure
    export_train = export and "tau" in task.loss_fn.temperatures() and SPECS[cfg.dataset].balanced is not None
    evaluation = evaluate_encoder(task.model, train_eval, test_data, cfg, device, features_to=out_dir, export=export,
                           export_train=export_train)
    metrics.update(evaluation)
    _write_outputs(cfg, out_dir, task.model, task.loss_fn, train_data, log_rows, metrics, export=export)
    ckpt_path.unlink(missing_ok=True)
    log(f"[{cfg.run_id}] linear probe top-1 {metrics['top1']:.2f}%, 1-NN {metrics['knn1_top1']:.2f}%")
    return metrics


def load_splits(cfg: RunConfig):
    """(training data, evaluation data, training data as the probe sees it) of run ``cfg``.

    Small sets are held in memory whole; a tuning run evaluates on a validation part of the training split
    (``validation_fraction``), or trains on all of it and evaluates on the generated validation split
    (``validation_split``), and never reads the test split. Paper-scale sets are listed, decoded and augmented
    per sample in worker processes (:mod:`isogclr.data.streaming`).
    """
    if cfg.stream is None:
        train_data = load_dataset(cfg.dataset, cfg.data_root, "train", cfg.order_seed)
        if cfg.validation_fraction:
            train_data, test_data = validation_split(train_data, cfg.validation_fraction)
        elif cfg.validation_split:
            test_data = load_dataset(cfg.dataset, cfg.data_root, "val")
        else:
            test_data = load_dataset(cfg.dataset, cfg.data_root, "test")
        return train_data, test_data, train_data
    if cfg.validation_fraction or cfg.validation_split:
        raise ValueError(f"{cfg.run_id}: a validation split of a streamed dataset ({cfg.dataset}) is not "
                         "supported; tune on an in-memory dataset")
    size, streaming = cfg.stream.image_size, _streaming(cfg)
    train_data = streaming.load_stream(cfg.dataset, cfg.data_root, "train",
                                       streaming.simclr_transform(cfg.augment, size))
    test_data = streaming.load_stream(cfg.dataset, cfg.data_root, "test", streaming.eval_transform(size), views=1)
    return train_data, test_data, train_data.with_transform(streaming.eval_transform(size), views=1)


def _features(encoder: torch.nn.Module, data, device: torch.device, cfg: RunConfig) -> torch.Tensor:
    """Frozen features of a split held in memory, or of a streamed one (evaluation views decoded by workers)."""
    if isinstance(data, ImageData):
        return extract_features(encoder, data.images, device)
    batches = _streaming(cfg).eval_loader(data, cfg.stream.eval_batch_size, cfg.stream.num_workers)
    return torch.cat([extract_features(encoder, images, device) for images, _, _ in batches])


def _knn_now(model: ContrastiveModel, train_data, test_data, device: torch.device,
             cfg: RunConfig) -> float:
    """1-NN test accuracy of the current encoder (EMC2's metric against samples seen); no RNG is consumed."""
    train_x = _features(model.encoder, train_data, device, cfg)
    test_x = _features(model.encoder, test_data, device, cfg)
    return knn_accuracy(train_x, train_data.labels, test_x, test_data.labels, k=1)


def evaluate_encoder(model: ContrastiveModel, train_data, test_data, cfg: RunConfig, device: torch.device,
              features_to: Path | None = None, export: bool = False, export_train: bool = False) -> dict:
    """Linear probe and 1-NN on frozen encoder features; optionally save the features of run folder
    ``features_to``: all of them in ``local/features.pt`` and, with ``export``, the test split's in float16
    in ``artifacts/features.pt`` (and the train split's with ``export_train``)."""
    train_x = _features(model.encoder, train_data, device, cfg)
    test_x = _features(model.encoder, test_data, device, cfg)
    if features_to is not None:
        save_torch({"train": train_x, "train_labels": train_data.labels, "test": test_x,
                    "test_labels": test_data.labels}, features_to / "local" / "features.pt")
        if export:
            splits = {"test": (test_x, test_data), **({"train": (train_x, train_data)} if export_train else {})}
            save_torch({key: value for name, (x, data) in splits.items()
                        for key, value in ((name, x.detach().cpu().to(torch.float16)),
                                           (f"{name}_labels", torch.as_tensor(data.labels).cpu().to(torch.int64)))},
                       features_to / "artifacts" / "features.pt")
    metrics = linear_probe(train_x, train_data.labels, test_x, test_data.labels, train_data.num_classes, cfg.probe,
                           seed=cfg.seed)
    metrics["knn1_top1"] = knn_accuracy(train_x, train_data.labels, test_x, test_data.labels, k=1)
    return metrics


def _half(state: dict) -> dict:
    """A state_dict with its floating tensors in float16 (integer buffers such as BatchNorm's count kept)."""
    return {k: v.detach().cpu().to(torch.float16) if v.is_floating_point() else v.detach().cpu()
            for k, v in state.items()}


def _write_outputs(cfg: RunConfig, out_dir: Path, model, loss_fn, train_data, log_rows, metrics,
                   export: bool = False) -> None:
    artifacts = out_dir / "artifacts"
    config = cfg.to_dict()
    config["encoder"]["timm_name"] = timm_name(cfg.encoder)
    save_json(config, artifacts / "config.json")
    machine.record(artifacts)
    save_text(csv_text(log_rows), out_dir / "train_log.csv")
    write_curves(out_dir / "dvclive", log_rows, metrics)  # rebuilt: the same files as an uninterrupted run
    tau = loss_fn.temperatures().get("tau")
    if isinstance(tau, torch.Tensor):
        superclass = train_data.superclass if train_data.superclass is not None else torch.full_like(
            train_data.labels, -1)
        rows = [{"index": i, "source_index": int(s), "label": int(y), "superclass": int(c), "tau": float(t)}
                for i, (s, y, c, t) in enumerate(zip(train_data.source_index, train_data.labels, superclass,
                                                     tau.cpu(), strict=True))]
        save_text(csv_text(rows), artifacts / "tau.csv")
    encoder_state = model.encoder.state_dict()
    save_torch(encoder_state, out_dir / "local" / "encoder.pt")  # float32, never tracked
    save_torch({"head": model.head.state_dict(), "loss": loss_fn.state_dict()}, out_dir / "local" / "state.pt")
    if export:
        save_torch(_half(encoder_state), artifacts / "encoder.pt")
    else:  # a rerun of a folder exported before (outside DVC, which clears outputs) keeps no stale export
        for name in ("encoder.pt", "features.pt"):
            (artifacts / name).unlink(missing_ok=True)
    save_json({k: round(v, 4) for k, v in metrics.items()}, out_dir / "metrics.json")
    save_json(cfg.method.knobs(), out_dir / "knobs.json")

