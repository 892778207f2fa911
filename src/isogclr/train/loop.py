"""One training run: contrastive pre-training, then the linear probe; resumable at any checkpoint.

A run writes into ``out_dir``:

* ``metrics.json``: linear-probe top-1 on the test split (and the random-init baseline, if asked);
* ``train_log.csv``: one line per epoch (loss, learning rate, throughput, temperature stats);
* ``artifacts/config.json``: the resolved :class:`~isogclr.config.RunConfig`;
* ``artifacts/tau.csv``: the learned per-sample temperatures with dataset indices and labels (iSogCLR);
* ``artifacts/encoder.pt``: the encoder's state_dict.

While it runs, ``ckpt_dir/checkpoint.pt`` holds model, optimizer, loss state (s, u, tau),
step and RNG state, rewritten atomically at the end of every epoch (and every
``train.checkpoint_every`` steps); a restarted run continues from it, and the
checkpoint is removed once the run's outputs are written.
"""

from __future__ import annotations

import csv
import io
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..config import RunConfig
from ..data import IndexedImageDataset, load_dataset
from ..data.augment import simclr_augmentation, to_float
from ..eval.linear_probe import extract_features, linear_probe
from ..models import ContrastiveModel
from .checkpoint import save_json, save_text, save_torch
from .optim import build_optimizer, warmup_cosine


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device is 'cuda' but no GPU is visible; set train.device: auto or cpu")
    return torch.device(name)


def _log(message: str) -> None:
    print(message, flush=True)


def train_run(cfg: RunConfig, out_dir: Path, ckpt_dir: Path, random_init_baseline: bool = False) -> dict:
    """Train ``cfg`` and evaluate it; return the metrics written to ``out_dir/metrics.json``."""
    out_dir, ckpt_dir = Path(out_dir), Path(ckpt_dir)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    device = resolve_device(cfg.train.device)
    train_data = load_dataset(cfg.dataset, cfg.data_root, "train")
    test_data = load_dataset(cfg.dataset, cfg.data_root, "test")
    n, batch_size = len(train_data), cfg.train.batch_size
    if n < batch_size:
        raise ValueError(f"train.batch_size={batch_size} exceeds the {n} training samples of {cfg.dataset}")
    steps_per_epoch = n // batch_size  # the last incomplete batch is dropped: contrastive batches keep size B
    total_steps = steps_per_epoch * cfg.train.epochs
    warmup_steps = round(cfg.optimizer.warmup_epochs * steps_per_epoch)

    torch.manual_seed(cfg.seed)
    model = ContrastiveModel(cfg.encoder, cfg.head).to(device)
    loss_fn = cfg.method.build(n).to(device)
    normalize = getattr(loss_fn, "expects_normalized", True)
    optimizer = build_optimizer(model, cfg.optimizer, batch_size)
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    augment = simclr_augmentation(cfg.augment, train_data.images.shape[-1]).to(device)
    dataset = IndexedImageDataset(train_data)

    metrics: dict = {}
    if random_init_baseline:
        metrics["random_init_top1"] = _probe(model, train_data, test_data, cfg, device)["top1"]

    step, log_rows, losses = 0, [], []
    ckpt_path = ckpt_dir / "checkpoint.pt"
    if ckpt_path.exists():
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loss_fn.load_state_dict(state["loss"])
        torch.set_rng_state(state["rng"])
        step, log_rows, losses = state["step"], state["log_rows"], state["epoch_losses"]
        metrics.update(state.get("metrics", {}))
        _log(f"[{cfg.run_id}] resumed from {ckpt_path} at step {step}/{total_steps}")

    def checkpoint() -> None:
        save_torch({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loss": loss_fn.state_dict(),
                    "rng": torch.get_rng_state(), "step": step, "log_rows": log_rows, "epoch_losses": losses,
                    "metrics": metrics}, ckpt_path)

    model.train()
    interactive = sys.stderr.isatty()
    while step < total_steps:
        epoch, start = divmod(step, steps_per_epoch)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(cfg.seed * 100_003 + epoch))
        t0 = time.perf_counter()
        bar = tqdm(range(start, steps_per_epoch), desc=f"{cfg.run_id} epoch {epoch + 1}/{cfg.train.epochs}",
                   disable=not interactive, leave=False)
        for b in bar:
            images, _, index = dataset.__getitems__(order[b * batch_size:(b + 1) * batch_size].tolist())
            images, index = images.to(device, non_blocking=True), index.to(device, non_blocking=True)
            factor = warmup_cosine(step, total_steps, warmup_steps, cfg.optimizer.final_lr_fraction)
            for group, lr in zip(optimizer.param_groups, base_lrs, strict=True):
                group["lr"] = lr * factor
            x = to_float(images)
            _, proj = model(torch.cat([augment(x), augment(x)]))
            z1, z2 = proj.float().chunk(2)
            if normalize:
                z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
            loss = loss_fn(z1, z2, index)
            if not torch.isfinite(loss):
                last = ckpt_path if ckpt_path.exists() else "none (no checkpoint written yet)"
                raise FloatingPointError(f"[{cfg.run_id}] non-finite loss {loss.item()} at step {step}; "
                                         f"last good checkpoint: {last}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if cfg.train.checkpoint_every and step % cfg.train.checkpoint_every == 0 and step < total_steps:
                checkpoint()
        seconds = time.perf_counter() - t0
        row = {"epoch": epoch + 1, "step": step, "loss": sum(losses) / max(len(losses), 1),
               "lr": base_lrs[0] * factor, "seconds": round(seconds, 3),
               "samples_per_s": round(len(losses) * batch_size / max(seconds, 1e-9), 1)}
        tau = getattr(loss_fn, "tau", None)
        if isinstance(tau, torch.Tensor):
            row.update(tau_mean=tau.mean().item(), tau_std=tau.std().item())
        log_rows.append(row)
        losses = []
        _log(f"[{cfg.run_id}] epoch {row['epoch']}/{cfg.train.epochs} loss {row['loss']:.4f} "
             f"lr {row['lr']:.3g} {row['samples_per_s']:.0f} samples/s"
             + (f" tau {row['tau_mean']:.3f}+-{row['tau_std']:.3f}" if "tau_mean" in row else ""))
        checkpoint()

    metrics.update(_probe(model, train_data, test_data, cfg, device))
    _write_outputs(cfg, out_dir, model, loss_fn, train_data, log_rows, metrics)
    ckpt_path.unlink(missing_ok=True)
    _log(f"[{cfg.run_id}] linear probe top-1 {metrics['top1']:.2f}%")
    return metrics


def _probe(model: ContrastiveModel, train_data, test_data, cfg: RunConfig, device: torch.device) -> dict:
    train_x = extract_features(model.encoder, train_data.images, device)
    test_x = extract_features(model.encoder, test_data.images, device)
    return linear_probe(train_x, train_data.labels, test_x, test_data.labels, train_data.num_classes, cfg.probe,
                        seed=cfg.seed)


def _write_outputs(cfg: RunConfig, out_dir: Path, model, loss_fn, train_data, log_rows, metrics) -> None:
    artifacts = out_dir / "artifacts"
    save_json(cfg.to_dict(), artifacts / "config.json")
    save_text(_csv(log_rows), out_dir / "train_log.csv")
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
