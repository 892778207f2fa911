"""One training run: contrastive pre-training, then the linear probe; resumable at any checkpoint.

A run writes into ``out_dir``:

* ``metrics.json``: linear-probe top-1 and 1-NN top-1 on the test split (and the random-init probe, if asked);
* ``train_log.csv``: one line per epoch (loss, learning rate, samples seen, seconds, throughput, temperature
  stats, and the 1-NN test accuracy every ``train.eval_every`` epochs: accuracy against samples seen and time);
* ``dvclive/``: the same curves (step = epoch) and the final metrics as DVCLive files, for ``dvc plots show``
  and ``dvc exp show`` (:mod:`isogclr.train.curves`; rebuilt from the checkpointed rows, never appended twice);
* ``artifacts/config.json``: the resolved :class:`~isogclr.config.RunConfig`, plus ``encoder.timm_name``: the
  timm name that loads ``encoder.pt`` (see :mod:`isogclr.models.encoders`);
* ``artifacts/tau.csv``: the learned per-sample temperatures with dataset indices and labels (iSogCLR);
* ``artifacts/encoder.pt``: the encoder's state_dict;
* ``artifacts/features.pt``: frozen encoder features and labels of the train and test splits.

While it runs, ``ckpt_dir/checkpoint.pt`` holds model, optimizer, loss state (s, u, tau),
step and RNG state, rewritten atomically at the end of every epoch (and every
``train.checkpoint_every`` steps); a restarted run continues from it, and the
checkpoint is removed once the run's outputs are written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from ..config import RunConfig
from ..data import IndexedImageDataset, load_dataset
from ..data.augment import simclr_augmentation, to_float
from ..eval.knn import knn_accuracy
from ..eval.linear_probe import extract_features, linear_probe
from ..models import ContrastiveModel, timm_name
from . import distributed
from .checkpoint import save_json, save_text, save_torch
from .curves import log_epoch, open_curves, write_curves
from .distributed import gather_no_grad, gather_with_grad
from .optim import build_optimizer, warmup_cosine


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device is 'cuda' but no GPU is visible; set train.device: auto or cpu")
    return torch.device(name)


def _log(message: str) -> None:
    print(message, flush=True)


def _hms(seconds: float) -> str:
    """``H:MM:SS`` for the per-epoch log line."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def train_run(cfg: RunConfig, out_dir: Path, ckpt_dir: Path, random_init_baseline: bool = False) -> dict:
    """Train ``cfg`` and evaluate it; return the metrics written to ``out_dir/metrics.json``.

    Under torchrun each process takes ``batch_size / world_size`` samples of every global batch;
    features and indices are gathered so the loss (and the per-sample state) is the global
    batch's on every rank. Rank 0 writes checkpoints and outputs.
    """
    out_dir, ckpt_dir = Path(out_dir), Path(ckpt_dir)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    ctx = distributed.setup(resolve_device(cfg.train.device))
    device = ctx.device
    train_data = load_dataset(cfg.dataset, cfg.data_root, "train")
    test_data = load_dataset(cfg.dataset, cfg.data_root, "test")
    n, batch_size = len(train_data), cfg.train.batch_size
    if n < batch_size:
        raise ValueError(f"train.batch_size={batch_size} exceeds the {n} training samples of {cfg.dataset}")
    if batch_size % ctx.world_size:
        raise ValueError(f"train.batch_size={batch_size} is not divisible by the {ctx.world_size} processes")
    local = batch_size // ctx.world_size
    steps_per_epoch = n // batch_size  # the last incomplete batch is dropped: contrastive batches keep size B
    total_steps = steps_per_epoch * cfg.train.epochs
    warmup_steps = cfg.optimizer.warmup_steps(steps_per_epoch)

    torch.manual_seed(cfg.seed)  # the same initial model on every rank
    memory_format = torch.channels_last if cfg.train.channels_last else torch.preserve_format
    loss_fn = cfg.method.build(n).to(device)
    # a loss may need extra encoder outputs (TaU+SimCLR: one uncertainty logit per view), appended to the head
    extra = getattr(loss_fn, "extra_outputs", 0)
    head = dataclasses.replace(cfg.head, out_dim=cfg.head.out_dim + extra)
    model = ContrastiveModel(cfg.encoder, head).to(device, memory_format=memory_format)
    if cfg.train.sync_bn and ctx.world_size > 1:
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    normalize = getattr(loss_fn, "expects_normalized", True)
    optimizer = build_optimizer(model, cfg.optimizer, batch_size)
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    forward = DistributedDataParallel(model) if ctx.world_size > 1 else model
    if cfg.train.compile:
        forward = torch.compile(forward)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.train.precision)
    use_amp = amp_dtype is not None and device.type == "cuda"  # on CPU autocast only slows the step down
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp and amp_dtype == torch.float16)
    augment = simclr_augmentation(cfg.augment, train_data.images.shape[-1]).to(device)
    dataset = IndexedImageDataset(train_data)
    if ctx.rank:
        torch.manual_seed(cfg.seed * 1000 + ctx.rank)  # other augmentations on other ranks

    metrics: dict = {}
    if random_init_baseline and ctx.is_main:
        metrics["random_init_top1"] = _evaluate(model, train_data, test_data, cfg, device)["top1"]

    step, log_rows, losses = 0, [], []
    ckpt_path = ckpt_dir / "checkpoint.pt"
    if ckpt_path.exists():
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loss_fn.load_state_dict(state["loss"])
        scaler.load_state_dict(state["scaler"])
        if ctx.is_main:
            torch.set_rng_state(state["rng"])
        else:  # rank 0's generator is the checkpointed one; the others are re-derived from the step
            torch.manual_seed(cfg.seed * 1000 + ctx.rank + state["step"])
        step, log_rows, losses = state["step"], state["log_rows"], state["epoch_losses"]
        metrics.update(state.get("metrics", {}))
        _log(f"[{cfg.run_id}] resumed from {ckpt_path} at step {step}/{total_steps}")

    def checkpoint() -> None:
        if ctx.is_main:
            save_torch({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "loss": loss_fn.state_dict(), "scaler": scaler.state_dict(), "rng": torch.get_rng_state(),
                        "step": step, "log_rows": log_rows, "epoch_losses": losses, "metrics": metrics}, ckpt_path)
        distributed.barrier()

    live = open_curves(out_dir / "dvclive", log_rows) if ctx.is_main else None
    model.train()
    interactive = sys.stderr.isatty() and ctx.is_main
    # the log line's elapsed time and ETA count from here (the start, or the restart after a resume):
    # ETA = mean epoch time so far (wall clock, evaluation and checkpoints included) x epochs left
    loop_start, loop_first_step = time.perf_counter(), step
    while step < total_steps:
        epoch, start = divmod(step, steps_per_epoch)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed * 100_003 + epoch))
        t0 = time.perf_counter()
        bar = tqdm(range(start, steps_per_epoch), desc=f"{cfg.run_id} epoch {epoch + 1}/{cfg.train.epochs}",
                   disable=not interactive, leave=False)
        for b in bar:
            batch = order[b * batch_size:(b + 1) * batch_size][ctx.rank * local:(ctx.rank + 1) * local]
            images, _, index = dataset.__getitems__(batch.tolist())
            images, index = images.to(device, non_blocking=True), index.to(device, non_blocking=True)
            factor = warmup_cosine(step, total_steps, warmup_steps, cfg.optimizer.final_lr_fraction)
            for group, lr in zip(optimizer.param_groups, base_lrs, strict=True):
                group["lr"] = lr * factor
            x = to_float(images)
            views = torch.cat([augment(x), augment(x)]).contiguous(memory_format=memory_format)
            with torch.autocast(device.type, dtype=amp_dtype or torch.bfloat16, enabled=use_amp):
                _, proj = forward(views)
            proj, kwargs = proj.float(), {}
            if extra:  # the last column is the per-view logit e of TaU+SimCLR
                proj, e = proj[:, :-1], proj[:, -1]
                e1, e2 = e.chunk(2)
                kwargs = {"e1": gather_with_grad(e1), "e2": gather_with_grad(e2)}
            z1, z2 = proj.chunk(2)
            if normalize:
                z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
            loss = loss_fn(gather_with_grad(z1), gather_with_grad(z2), gather_no_grad(index), **kwargs)
            if not torch.isfinite(loss):
                last = ckpt_path if ckpt_path.exists() else "none (no checkpoint written yet)"
                raise FloatingPointError(f"[{cfg.run_id}] non-finite loss {loss.item()} at step {step}; "
                                         f"last good checkpoint: {last}")
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
            step += 1
            if cfg.train.checkpoint_every and step % cfg.train.checkpoint_every == 0 and step < total_steps:
                checkpoint()
        seconds = time.perf_counter() - t0
        row = {"epoch": epoch + 1, "step": step, "samples_seen": step * batch_size,
               "loss": sum(losses) / max(len(losses), 1), "lr": base_lrs[0] * factor, "seconds": round(seconds, 3),
               "samples_per_s": round((step - epoch * steps_per_epoch - start) * batch_size / max(seconds, 1e-9), 1)}
        tau = getattr(loss_fn, "tau", None)
        if isinstance(tau, torch.Tensor):
            row.update(tau_mean=tau.mean().item(), tau_std=tau.std().item())
        if cfg.train.eval_every and (epoch + 1) % cfg.train.eval_every == 0 and ctx.is_main:
            row["knn1_top1"] = _knn_now(model, train_data, test_data, device)
        log_rows.append(row)
        losses = []
        if live is not None:
            log_epoch(live, row)
            live.make_summary()
        if ctx.is_main:
            elapsed = time.perf_counter() - loop_start
            epoch_seconds = elapsed * steps_per_epoch / (step - loop_first_step)  # a resumed epoch counts partly
            eta = epoch_seconds * (total_steps - step) / steps_per_epoch
            _log(f"[{cfg.run_id}] epoch {row['epoch']}/{cfg.train.epochs} loss {row['loss']:.4f} "
                 f"lr {row['lr']:.3g} {row['samples_per_s']:.0f} samples/s"
                 + (f" tau {row['tau_mean']:.3f}+-{row['tau_std']:.3f}" if "tau_mean" in row else "")
                 + f" elapsed {_hms(elapsed)} eta {_hms(eta)}")
        checkpoint()

    if not ctx.is_main:
        return metrics
    evaluation = _evaluate(model, train_data, test_data, cfg, device, features_to=out_dir / "artifacts")
    metrics.update(evaluation)
    _write_outputs(cfg, out_dir, model, loss_fn, train_data, log_rows, metrics)
    ckpt_path.unlink(missing_ok=True)
    _log(f"[{cfg.run_id}] linear probe top-1 {metrics['top1']:.2f}%, 1-NN {metrics['knn1_top1']:.2f}%")
    return metrics


def _knn_now(model: ContrastiveModel, train_data, test_data, device: torch.device) -> float:
    """1-NN test accuracy of the current encoder (EMC2's metric against samples seen); no RNG is consumed."""
    train_x = extract_features(model.encoder, train_data.images, device)
    test_x = extract_features(model.encoder, test_data.images, device)
    return knn_accuracy(train_x, train_data.labels, test_x, test_data.labels, k=1)


def _evaluate(model: ContrastiveModel, train_data, test_data, cfg: RunConfig, device: torch.device,
              features_to: Path | None = None) -> dict:
    """Linear probe and 1-NN on frozen encoder features; optionally export the features."""
    train_x = extract_features(model.encoder, train_data.images, device)
    test_x = extract_features(model.encoder, test_data.images, device)
    if features_to is not None:
        save_torch({"train": train_x, "train_labels": train_data.labels, "test": test_x,
                    "test_labels": test_data.labels}, features_to / "features.pt")
    metrics = linear_probe(train_x, train_data.labels, test_x, test_data.labels, train_data.num_classes, cfg.probe,
                           seed=cfg.seed)
    metrics["knn1_top1"] = knn_accuracy(train_x, train_data.labels, test_x, test_data.labels, k=1)
    return metrics


def _write_outputs(cfg: RunConfig, out_dir: Path, model, loss_fn, train_data, log_rows, metrics) -> None:
    artifacts = out_dir / "artifacts"
    config = cfg.to_dict()
    config["encoder"]["timm_name"] = timm_name(cfg.encoder)
    save_json(config, artifacts / "config.json")
    save_text(_csv(log_rows), out_dir / "train_log.csv")
    write_curves(out_dir / "dvclive", log_rows, metrics)  # rebuilt: the same files as an uninterrupted run
    tau = getattr(loss_fn, "tau", None)
    if isinstance(tau, torch.Tensor):
        superclass = train_data.superclass if train_data.superclass is not None else torch.full_like(
            train_data.labels, -1)
        rows = [{"index": i, "source_index": int(s), "label": int(y), "superclass": int(c), "tau": float(t)}
                for i, (s, y, c, t) in enumerate(zip(train_data.source_index, train_data.labels, superclass,
                                                     tau.cpu(), strict=True))]
        save_text(_csv(rows), artifacts / "tau.csv")
    save_torch(model.encoder.state_dict(), artifacts / "encoder.pt")
    save_json({k: round(v, 4) for k, v in metrics.items()}, out_dir / "metrics.json")


def _csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
