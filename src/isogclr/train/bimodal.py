"""One image-text (bimodal) training run and its zero-shot evaluation; resumable mid-epoch.

The iSogCLR paper's bimodal setting (section 6.2) at any scale: an image encoder (timm ResNet) and a
text encoder (DistilBERT), each with a linear projection to ``proj_dim``, features L2-normalised;
AdamW (weight decay on weight matrices only; biases, norms and learned temperatures without), the
rate warmed up linearly over ``warmup_iters`` iterations then cosine-decayed to ``final_lr``; a
light augmentation of the images (random resized crop + horizontal flip, drawn per image on
batched tensors from the pair's key (seed, epoch, index), :mod:`isogclr.data.keyed`); the loss of
``methods.<name>`` (``clip``, ``cyclip``, ``sogclr_bimodal``, ``isogclr_bimodal``, ``clip_individual_tau``),
called as ``loss_fn(I, T, index)`` with the pairs' dataset indices for the per-pair state.

A run writes into ``out_dir``:

* ``metrics.json``: IR/TR R@1/5/10 (%) on every retrieval set (``retrieval_a_ir_r1``, ...) and
  zero-shot top-1/3/5 (%) on every zero-shot set (``synth10_top1``, ...), at the end of training (a
  selection run, ``validation_fraction`` > 0, has one retrieval set, ``validation``: held-out training pairs,
  :func:`isogclr.data.splits.holdout_pairs`, and reads no test set);
* ``knobs.json``: the method's knobs the run used (after the selection; :meth:`~isogclr.config.MethodConfig.knobs`);
* ``train_log.csv``: per epoch the mean training loss, the last learning rate, the temperatures' mean and
  std (per-pair: ``tau_image_*``, ``tau_text_*``; global: ``tau``) and, every ``eval_every`` epochs,
  IR@1 / TR@1 on the first retrieval set (the convergence curve); no wall clock: the epochs' seconds and
  samples/s go to the timing record ``timing.csv`` (:mod:`isogclr.epoch_times`);
* ``dvclive/``: the same curves and the final metrics as DVCLive files (:mod:`isogclr.train.curves`);
* ``artifacts/config.json``, ``artifacts/tokenizer.json`` (the WordPiece trained on the training
  captions, loadable with ``PreTrainedTokenizerFast(tokenizer_file=...)``), ``artifacts/machine.json`` (the machine
  that made the run, :mod:`isogclr.machine`);
* ``artifacts/tau.csv`` (losses with per-pair temperatures): index, image, cluster,
  cluster_frequency, mismatched, caption, tau_image, tau_text;
* ``local/model.pt``: the model's state_dict, for the user's own use (never tracked, ``.gitignore``).

``ckpt_dir/checkpoint.pt`` (model, optimizer, loss state, RNG states, step, log) is rewritten
atomically at the end of every epoch and every ``bimodal.checkpoint_every`` steps, and removed once the outputs
are written; a restarted run continues from it (streamed shards: from its batch, skipping the samples before it
undecoded) with the same result as an uninterrupted one. On CUDA the forward runs under
bf16 autocast (``precision: bf16``); the losses compute in float32 (``full_precision``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .. import epoch_times, machine
from ..config.bimodal import BimodalRunConfig
from ..data import keyed
from ..data.augment import CROP_FLIP_DRAWS, crop_flip_augmentation
from ..data.loaders import check_distinct
from ..data.pairs_folder import PairsFolder, TrainPairsStream, load_pairs_folder
from ..data.splits import holdout_pairs
from ..data.transforms import pair_transform
from ..eval.retrieval import (
    class_embeddings,
    encode_batches,
    retrieval_chance,
    retrieval_recall,
    zero_shot_accuracy,
    zero_shot_chance,
)
from ..io import csv_text, save_json, save_text, save_torch
from ..models.bimodal import BimodalModel, build_tokenizer, image_normalization, tokenize, trim
from . import distributed
from .curves import write_curves
from .distributed import gather_no_grad, gather_with_grad, resolve_device
from .engine import fit, log
from .optim import adamw_with_loss_params
from .state_offload import HostStateLoss


def on_epoch_end(run_id: str, epoch: int) -> None:
    """Called after each epoch's checkpoint is written (a hook for tests that interrupt a run)."""


class _Encoders(nn.Module):
    """Both encoders in one ``forward``, so that DistributedDataParallel averages every parameter's gradient."""

    def __init__(self, model: BimodalModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.encode_image(images), self.model.encode_text(input_ids, attention_mask)


def global_loss(loss_fn: nn.Module, image_x: torch.Tensor, text_x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The loss of the global batch on every rank: every rank's features gathered *with* gradients, the pairs'
    dataset indices without (:mod:`isogclr.train.distributed`); the loss (and its per-pair state update) is then
    the same on every rank. On one process it is ``loss_fn(image_x, text_x, index)``."""
    return loss_fn(gather_with_grad(image_x), gather_with_grad(text_x), gather_no_grad(index))


def build_placed_loss(cfg: BimodalRunConfig, num_samples: int, device: torch.device) -> nn.Module:
    """The method's loss for ``num_samples`` pairs; with ``bimodal.state_device: cpu`` its per-pair state in host
    memory (:class:`~isogclr.train.state_offload.HostStateLoss`), else on ``device``."""
    if cfg.train.state_device == "cpu":
        return HostStateLoss(cfg.method.build, num_samples, cfg.train.batch_size, device)
    return cfg.method.build(num_samples).to(device)


def temperatures(loss_fn: nn.Module) -> dict[str, torch.Tensor]:
    """The loss's temperatures: per pair (``tau_image``, ``tau_text``, shape (n,)) or global (``tau``)."""
    return {k: v.detach().float().cpu() for k, v in loss_fn.temperatures().items()}


class Evaluator:
    """Zero-shot retrieval and classification on the folder's evaluation sets (tokenised once)."""

    def __init__(self, data: PairsFolder, tokenizer, cfg: BimodalRunConfig, device: torch.device) -> None:
        self.data, self.cfg, self.device = data, cfg, device
        self.max_length = cfg.text_encoder.max_length
        self.texts = {name: tokenize(tokenizer, ret.captions, self.max_length) for name, ret in data.retrieval.items()}
        self.prompts = {name: tokenize(tokenizer, [p for ps in zs.prompts() for p in ps], self.max_length)
                        for name, zs in data.zeroshot.items()}
        mean, std = image_normalization(cfg.image_encoder)
        self.mean, self.std = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)

    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16,
                              enabled=self.device.type == "cuda" and self.cfg.train.precision == "bf16")

    @torch.no_grad()
    def images(self, model: BimodalModel, images) -> torch.Tensor:
        """Features of an evaluation set's images (in memory or streamed: its ``batches``, one code path)."""
        def encode(chunk: torch.Tensor) -> torch.Tensor:
            x = ((chunk.float() / 255.0 - self.mean) / self.std).to(self.device)
            with self._autocast():
                return model.encode_image(x)

        return encode_batches(encode, images.batches(self.cfg.train.eval_batch_size))

    @torch.no_grad()
    def texts_of(self, model: BimodalModel, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out, bs = [], self.cfg.train.eval_batch_size
        for i in range(0, len(ids), bs):
            chunk_ids, chunk_mask = trim(ids[i:i + bs], mask[i:i + bs])
            with self._autocast():
                out.append(model.encode_text(chunk_ids.to(self.device), chunk_mask.to(self.device)).cpu())
        return torch.cat(out)

    def retrieval(self, model: BimodalModel, name: str) -> dict[str, float]:
        ret = self.data.retrieval[name]
        return retrieval_recall(self.images(model, ret), self.texts_of(model, *self.texts[name]),
                                ret.image_index)

    def zeroshot(self, model: BimodalModel, name: str) -> dict[str, float]:
        zs = self.data.zeroshot[name]
        prompts = self.texts_of(model, *self.prompts[name]).split(len(zs.templates))
        return zero_shot_accuracy(self.images(model, zs), zs.labels, class_embeddings(list(prompts)))

    def chance(self) -> dict[str, float]:
        """Every metric of :meth:`__call__` for a random ranking (the no-learning row of the image-text tables)."""
        out = {}
        for name, ret in self.data.retrieval.items():
            per_image = len(ret.captions) // len(ret.images)
            out.update({f"{name}_{k}": v for k, v in retrieval_chance(len(ret.images), per_image).items()})
        for name, zs in self.data.zeroshot.items():
            out.update({f"{name}_{k}": v for k, v in zero_shot_chance(len(zs.classnames)).items()})
        return out

    def __call__(self, model: BimodalModel, only_first_retrieval: bool = False) -> dict[str, float]:
        was_training = model.training
        model.eval()
        metrics = {}
        names = list(self.data.retrieval)[:1] if only_first_retrieval else list(self.data.retrieval)
        for name in names:
            metrics.update({f"{name}_{k}": v for k, v in self.retrieval(model, name).items()})
        if not only_first_retrieval:
            for name in self.data.zeroshot:
                metrics.update({f"{name}_{k}": v for k, v in self.zeroshot(model, name).items()})
        model.train(was_training)
        return metrics


class _BimodalTask:
    """The image-text run as an engine :class:`~isogclr.train.engine.Task`: a step draws a batch of pairs (a
    fresh permutation per epoch), augments the images, encodes both sides and returns the loss.

    Under torchrun each process takes ``batch_size / world_size`` pairs of every global batch (in memory: its
    slice of the permutation's batch; streamed: its shards) and :func:`global_loss` gathers the features, so
    the loss and the per-pair state are the global batch's on every rank."""

    def __init__(self, cfg: BimodalRunConfig, data: PairsFolder, tokenizer, evaluator: Evaluator,
                 ctx: distributed.DistContext, pairs: TrainPairsStream | None = None) -> None:
        t, device = cfg.train, ctx.device
        self.cfg, self.data, self.evaluator, self.ctx, self.device = cfg, data, evaluator, ctx, device
        self.run_id, self.method, self.epochs, self.batch_size = cfg.run_id, cfg.method.name, t.epochs, t.batch_size
        self.pairs, self.tokenizer = pairs, tokenizer  # pairs: the streamed training pairs (bimodal.stream)
        if t.batch_size % ctx.world_size:
            raise ValueError(f"bimodal.batch_size={t.batch_size} is not divisible by the {ctx.world_size} processes")
        self.local = t.batch_size // ctx.world_size
        self.n = len(data.train.captions) if pairs is None else len(pairs)
        # the last incomplete batch is dropped: batches keep size B (streamed shards: the epochs' fewest batches)
        self.steps_per_epoch = self.n // t.batch_size if pairs is None else pairs.steps(t.epochs)
        if pairs is None:
            self.input_ids, self.attention_mask = tokenize(tokenizer, data.train.captions, cfg.text_encoder.max_length)
        else:  # crop + flip happen in the workers; the device only normalises
            mean, std = image_normalization(cfg.image_encoder)
            self.mean = torch.tensor(mean, device=device).view(1, 3, 1, 1)
            self.std = torch.tensor(std, device=device).view(1, 3, 1, 1)
        torch.manual_seed(cfg.seed)  # the same initial model on every rank
        self.model = BimodalModel(cfg.image_encoder, cfg.text_encoder, t.proj_dim, len(tokenizer)).to(device)
        if t.sync_bn and ctx.world_size > 1:  # else each process normalises its own share of the batch
            self.model = distributed.sync_batchnorm(self.model, device)
        self.loss_fn = build_placed_loss(cfg, self.n, device)
        self.optimizer = adamw_with_loss_params(self.model, self.loss_fn, t.lr, t.weight_decay, t.tau_lr)
        self.scaler = torch.amp.GradScaler(device.type, enabled=False)  # bf16 autocast needs no scaling
        self.augment = crop_flip_augmentation(t.image_size, t.crop_scale_min, t.flip_p,
                                              *image_normalization(cfg.image_encoder)).to(device)
        self.use_amp = device.type == "cuda" and t.precision == "bf16"
        self.encoders = DistributedDataParallel(_Encoders(self.model)) if ctx.world_size > 1 else None
        if ctx.rank:  # the text encoder's dropout masks (text_encoder.dropout): per-rank streams
            torch.manual_seed(cfg.seed * 1000 + ctx.rank)

    def begin_epoch(self, epoch: int, start: int) -> None:
        self.epoch = epoch
        if self.pairs is not None:
            self.batches = self.pairs.epoch(epoch, start, self.ctx.rank, self.ctx.world_size)
            return
        self.order = torch.randperm(self.n, generator=keyed.epoch_generator(self.cfg.seed, epoch))

    def loss(self, batch: int) -> torch.Tensor:
        if self.pairs is None:
            index = self.order[batch * self.batch_size:(batch + 1) * self.batch_size]
            index = index[self.ctx.rank * self.local:(self.ctx.rank + 1) * self.local]  # this rank's share
            train = self.data.train
            x = train.images[train.image_index[index]]  # each caption's image
            draws = keyed.uniforms(self.cfg.seed, self.epoch, index, 0, CROP_FLIP_DRAWS)  # by (seed, epoch, pair)
            x = self.augment(x.to(self.device, non_blocking=True).float() / 255.0, draws)
            ids, mask = trim(self.input_ids[index], self.attention_mask[index])
        else:  # decoded, cropped and flipped in the workers; captions tokenised per batch
            images, captions, index = next(self.batches)
            check_distinct(gather_no_grad(index), self.n)  # the state's key: distinct across processes
            x = (images.to(self.device, non_blocking=True).float() / 255.0 - self.mean) / self.std
            ids, mask = trim(*tokenize(self.tokenizer, captions, self.cfg.text_encoder.max_length))
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_amp):
            if self.encoders is None:
                image_x = self.model.encode_image(x)
                text_x = self.model.encode_text(ids.to(self.device), mask.to(self.device))
            else:
                image_x, text_x = self.encoders(x, ids.to(self.device), mask.to(self.device))
        return global_loss(self.loss_fn, image_x, text_x, index.to(self.device))

    def epoch_columns(self, epoch: int) -> dict[str, float]:
        row = {}
        for name, tau in temperatures(self.loss_fn).items():
            row.update({name: tau.item()} if tau.dim() == 0 else
                       {f"{name}_mean": tau.mean().item(), f"{name}_std": tau.std().item()})
        t = self.cfg.train
        if t.eval_every and (epoch + 1) % t.eval_every == 0 and self.data.retrieval and self.ctx.is_main:
            row.update(self.evaluator(self.model, only_first_retrieval=True))
        return row

    def state_dict(self) -> dict:
        """The RNG states (called on every rank: under torchrun each rank's generator is gathered, so a resumed
        run draws the dropout masks an uninterrupted one would; augmentations are keyed by pair)."""
        state = {"rng": torch.get_rng_state(),
                 "cuda_rng": torch.cuda.get_rng_state() if self.device.type == "cuda" else None}
        if self.ctx.world_size > 1:
            state["rank_rng"] = distributed.all_gather_object(state)
        return state

    def load_state_dict(self, state: dict, step: int) -> None:
        if self.ctx.world_size > 1:
            state = state["rank_rng"][self.ctx.rank]
        torch.set_rng_state(state["rng"])
        if self.device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"])


def _describe(row: dict) -> str:
    return (f" tau_image {row['tau_image_mean']:.4f}+-{row['tau_image_std']:.4f}" if "tau_image_mean" in row
            else "")


def train_bimodal_run(cfg: BimodalRunConfig, out_dir: Path, ckpt_dir: Path, untrained_baseline: bool = False) -> dict:
    """Train ``cfg`` and evaluate it; return the metrics written to ``out_dir/metrics.json``.

    ``untrained_baseline``: also the no-learning rows of the image-text tables, ``chance_<metric>`` (a random
    ranking) and ``untrained_<metric>`` (the pair of encoders before any image-text step: the image encoder as
    loaded, the text encoder and projections as initialized by the seed).

    Under torchrun (``launcher`` in params.yaml) rank 0 writes checkpoints and outputs and every rank returns
    its metrics (see :class:`_BimodalTask` for the distributed batch).
    """
    out_dir, ckpt_dir, t = Path(out_dir), Path(ckpt_dir), cfg.train
    if t.num_threads:
        torch.set_num_threads(t.num_threads)
    ctx = distributed.setup(resolve_device(t.device))
    device = ctx.device
    pairs = None
    if cfg.stream is None:
        data = load_pairs_folder(t.data, t.image_size, evaluation=not cfg.validation_fraction)
        if cfg.validation_fraction:  # a selection run: scored on held-out training pairs, the test sets unread
            data = holdout_pairs(data, cfg.validation_fraction)
    elif cfg.validation_fraction:
        raise ValueError("bimodal_tuning with bimodal.stream: a held-out split of streamed pairs is not supported")
    else:  # CC3M scale: training pairs streamed (train/*.tar or train/captions.tsv), evaluation sets streamed too
        data = load_pairs_folder(t.data, t.image_size, train=False, stream_eval=True,
                                 num_workers=cfg.stream.num_workers)
        pairs = TrainPairsStream(t.data, pair_transform(t.image_size, t.crop_scale_min, t.flip_p), t.batch_size,
                                 cfg.seed, cfg.stream.num_workers, cfg.stream.prefetch_factor,
                                 cfg.stream.pin_memory and device.type == "cuda")
    n = len(data.train.captions) if pairs is None else len(pairs)
    if n < t.batch_size:
        raise ValueError(f"bimodal.batch_size={t.batch_size} exceeds the {n} training pairs of {t.data}")
    tokenizer = build_tokenizer(cfg.text_encoder, data.train.captions)
    task = _BimodalTask(cfg, data, tokenizer, Evaluator(data, tokenizer, cfg, device), ctx, pairs)
    baseline = {}
    if untrained_baseline and ctx.is_main:  # before fit: the initial model (a checkpoint is loaded by fit)
        baseline = {f"untrained_{k}": v for k, v in task.evaluator(task.model).items()}
        baseline.update({f"chance_{k}": v for k, v in task.evaluator.chance().items()})
    log_rows = fit(task, total_steps=task.steps_per_epoch * t.epochs, warmup_steps=t.warmup_iters,
                   final_lr_fraction=t.final_lr / t.lr, ckpt_path=ckpt_dir / "checkpoint.pt",
                   checkpoint_every=t.checkpoint_every,
                   curves_dir=out_dir / "dvclive" if ctx.is_main else None, describe=_describe,
                   barrier=distributed.barrier, is_main=ctx.is_main,
                   on_epoch_end=lambda epoch: on_epoch_end(cfg.run_id, epoch), timing_run=epoch_times.run_key(out_dir),
                   run_dir=out_dir, settings=cfg.to_dict())
    metrics = None
    if ctx.is_main:
        metrics = {**task.evaluator(task.model), **baseline}
        _write_outputs(cfg, out_dir, task.model, task.loss_fn, tokenizer, data, log_rows, metrics)
        (ckpt_dir / "checkpoint.pt").unlink(missing_ok=True)
        summary = ", ".join(f"{k} {v:.1f}" for k, v in metrics.items() if k.endswith(("_ir_r1", "_tr_r1", "_top1")))
        log(f"[{cfg.run_id}] {summary}")
    return distributed.broadcast_object(metrics)  # every rank returns rank 0's (a selection scores them)


def _write_outputs(cfg: BimodalRunConfig, out_dir: Path, model: BimodalModel, loss_fn: nn.Module, tokenizer,
                   data: PairsFolder, log_rows: list[dict], metrics: dict) -> None:
    artifacts = out_dir / "artifacts"
    save_json(cfg.to_dict(), artifacts / "config.json")
    machine.record(artifacts)
    save_text(tokenizer.backend_tokenizer.to_str(), artifacts / "tokenizer.json")
    save_text(csv_text(log_rows), out_dir / "train_log.csv")
    write_curves(out_dir / "dvclive", log_rows, metrics)
    taus = temperatures(loss_fn)
    if "tau_image" in taus and cfg.stream is not None:  # streamed pairs: no image ids / meta in memory
        save_text(csv_text([{"index": i, "tau_image": float(a), "tau_text": float(b)}
                            for i, (a, b) in enumerate(zip(taus["tau_image"], taus["tau_text"], strict=True))]),
                  artifacts / "tau.csv")
    elif "tau_image" in taus:
        train = data.train
        rows = [{"index": i, "image": train.image_ids[int(train.image_index[i])],
                 "cluster": int(meta["cluster"]), "cluster_frequency": int(meta["cluster_frequency"]),
                 "mismatched": int(meta["mismatched"]), "caption": caption,
                 "tau_image": float(taus["tau_image"][i]), "tau_text": float(taus["tau_text"][i])}
                for i, (caption, meta) in enumerate(zip(train.captions, _caption_meta(data), strict=True))]
        save_text(csv_text(rows), artifacts / "tau.csv")
    save_torch(model.state_dict(), out_dir / "local" / "model.pt")
    save_json({k: round(v, 4) for k, v in metrics.items()}, out_dir / "metrics.json")
    save_json(cfg.method.knobs(), out_dir / "knobs.json")


def _caption_meta(data: PairsFolder) -> list[dict[str, str]]:
    """The meta row of each caption's image."""
    return [data.train_meta[int(i)] for i in data.train.image_index]

