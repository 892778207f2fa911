"""The one training engine: epochs of steps, the learning-rate schedule, checkpoint and resume, the log.

Every kind of run (unimodal pre-training, image-text pre-training, a run of EMC2's convergence study) is a
:class:`Task`: it owns its data, model, loss and evaluation, and says how one step computes the loss.
:func:`fit` does everything that is the same for all of them:

* the step loop over ``epochs x steps_per_epoch`` steps, the warm-up + cosine factor set on every
  parameter group (``group["lr"] = group["base_lr"] * factor``) before each step (``warmup_steps=0,
  final_lr_fraction=1`` make the factor exactly 1: a constant rate);
* the optimizer step (through a ``torch.amp.GradScaler``, a no-op unless fp16 on CUDA), after the gradient's
  global L2 norm is clipped to ``clip_grad_norm`` when that is positive (``train.optimizer.clip_grad_norm``),
  with the loss and the gradient watched by :class:`StepMonitor` (a diverging run stops and says why; per-epoch
  ``max_weight`` and ``grad_norm`` columns; see below);
* one row per epoch (``epoch, step, samples_seen, loss, lr`` and the task's own columns: no wall clock,
  so a rerun with the same results writes the same files), preceded by an epoch-0 row of the initial model
  for a task that has ``initial_columns`` (see :class:`Task`), written to DVCLive as it goes
  (:mod:`isogclr.train.curves`) and printed with samples/s and an ETA;
* the epochs' wall-clock ``seconds`` and ``samples_per_s``, kept in the checkpoint beside the rows and
  written to the timing record ``timing.csv`` (:mod:`isogclr.epoch_times`) when the run finishes;
* a checkpoint (model, optimizer, loss state, scaler, monitor, step, rows, timings, the task's own state such as
  RNG states) written atomically at the end of every epoch and every ``checkpoint_every`` steps, and a
  resume from it that gives the same result as an uninterrupted run. The checkpoint keeps the run's settings
  (``settings``) and a resume under other settings is refused, naming the keys that differ: a checkpoint
  left by a crash must not be continued by a run whose params changed since. The checkpoint holds tensors, numbers,
  strings and plain containers only and is read with ``weights_only=True`` (:func:`isogclr.io.load_torch`):
  a checkpoint folder is named by the user, and a planted pickle must not run code;
* a lock on the checkpoint (``<checkpoint>.lock``) and one on the run folder (``<run folder>/local/run.lock``),
  :func:`isogclr.io.held_by_one`, for the whole run: a second process training the same run, with the same
  checkpoint folder or another one, is refused, naming the first.

**What every step is watched for** (:class:`StepMonitor`). A moving-average loss (SogCLR, iSogCLR and their
bimodal forms) weights each negative by w_iz = exp(h_iz / tau_i) / s_i (iSogCLR eq. 13, SogCLR eq. 10). With a
stale s_i these weights can grow by orders of magnitude; the losses cap the exponent against float32 overflow and raise
:class:`~isogclr.losses.numerics.TrainingDiverged` when the cap is reached. The monitor

* re-raises that error, and any non-finite loss, with the run, the method and the step, so a run
  that diverges stops and says why instead of training on;
* keeps, per epoch, the largest weight the loss reports (``loss_fn.step_stats()["max_weight"]``,
  for the losses that have it) and the largest L2 norm of the parameters' gradient: the
  ``max_weight`` and ``grad_norm`` columns of ``train_log.csv``.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn
from tqdm import tqdm

from .. import epoch_times
from ..io import held_by_one, load_torch, save_torch
from ..losses.base import ContrastiveLoss
from ..losses.numerics import TrainingDiverged
from .curves import log_epoch, open_curves
from .optim import warmup_cosine

# keys of a run's settings that say where or how fast it runs, not what it trains: a run may resume under others
EXECUTION_KEYS = frozenset({"device", "num_threads", "checkpoint_every", "data_root", "probe", "eval_batch_size",
                            "num_workers", "prefetch_factor", "pin_memory"})


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``settings`` as dotted keys (``method.kwargs.tau``), without the :data:`EXECUTION_KEYS` at any depth."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in EXECUTION_KEYS:
            continue
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def check_settings(saved: dict[str, Any] | None, settings: dict[str, Any] | None, run_id: str,
                   ckpt_path: Path) -> None:
    """Refuse to resume ``ckpt_path`` when it was written under other settings than ``settings`` (the keys that
    differ, both values, and what to do); a checkpoint without settings (written before they were kept) or a
    task without them is not checked."""
    if saved is None or settings is None:
        return
    old, new = _flat(saved), _flat(settings)
    differ = [f"{k}: {old.get(k, '(absent)')!r} in the checkpoint, {new.get(k, '(absent)')!r} now"
              for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    if differ:
        raise ValueError(f"run {run_id}: the checkpoint {ckpt_path} was written under other settings ("
                         + "; ".join(differ[:5]) + (f"; {len(differ) - 5} more" if len(differ) > 5 else "")
                         + f"). Resuming would mix two runs: move it aside (`mv {ckpt_path} {ckpt_path}.bad`) "
                         "and start the run over, or restore the settings it was written under")


class StepMonitor:
    """Per-epoch maxima of the loss's largest weight and of the gradient norm; divergence checks.

    Args:
        run_id: the run's name, for messages.
        method: the ``methods.<name>`` entry of params.yaml the loss comes from.
        loss_fn: the loss module (its ``step_stats()`` is read after each step).
        ckpt_path: the run's checkpoint, named in the message as the last good state.
    """

    def __init__(self, run_id: str, method: str, loss_fn: ContrastiveLoss, ckpt_path: Path) -> None:
        self.run_id, self.method, self.loss_fn, self.ckpt_path = run_id, method, loss_fn, Path(ckpt_path)
        self._stats = loss_fn.step_stats
        self.reset()

    def reset(self) -> None:
        self.max_weight, self.grad_norm = -math.inf, -math.inf

    def _where(self, step: int) -> str:
        last = self.ckpt_path if self.ckpt_path.exists() else "none (no checkpoint written yet)"
        return f"[{self.run_id}] method {self.method!r}, step {step} (last good checkpoint: {last})"

    def loss(self, step: int, compute) -> torch.Tensor:  # noqa: ANN001
        """``compute()`` (the loss's forward), re-raising divergence with the run, method and step."""
        try:
            loss = compute()
        except TrainingDiverged as err:
            raise TrainingDiverged(f"{self._where(step)}: {err}") from err
        if not torch.isfinite(loss):
            raise TrainingDiverged(f"{self._where(step)}: non-finite loss {loss.item()}; lower the learning rate "
                                   f"or change methods.{self.method}'s temperature bounds")
        if self._stats is not None:
            weight = self._stats().get("max_weight")
            if weight is not None:
                self.max_weight = max(self.max_weight, float(weight))
        return loss

    def gradients(self, parameters) -> None:  # noqa: ANN001
        """Record the L2 norm of the gradient of all ``parameters`` (after backward, before the step)."""
        grads = [p.grad for p in parameters if p.grad is not None]
        if grads:
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))).item()
            self.grad_norm = max(self.grad_norm, norm)

    def state_dict(self) -> dict[str, float]:
        """The running epoch's maxima, checkpointed so a resumed epoch reports what an uninterrupted one does."""
        return {"max_weight": self.max_weight, "grad_norm": self.grad_norm}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.max_weight, self.grad_norm = state["max_weight"], state["grad_norm"]

    def epoch_columns(self) -> dict[str, float]:
        """The epoch's ``max_weight`` (if the loss reports weights) and ``grad_norm``; then start a new epoch."""
        row = {}
        if math.isfinite(self.max_weight):
            row["max_weight"] = self.max_weight
        if math.isfinite(self.grad_norm):
            row["grad_norm"] = self.grad_norm
        self.reset()
        return row


class Task(Protocol):
    """What a kind of run gives the engine (see :mod:`isogclr.train.loop`, :mod:`isogclr.train.bimodal`,
    :mod:`isogclr.train.convergence`).

    Optional: ``initial_columns() -> dict[str, float]``, the columns of an epoch-0 row (``epoch`` and
    ``step`` 0) evaluated on the initial model before the first step of a run that starts afresh.
    """

    run_id: str
    method: str  # the methods.<name> entry, for messages
    model: nn.Module
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    steps_per_epoch: int
    epochs: int
    batch_size: int  # the global batch, for samples_seen and samples/s

    def begin_epoch(self, epoch: int, start: int) -> None:
        """Prepare epoch ``epoch`` (0-based) from its batch ``start`` (non-zero after a resume)."""

    def loss(self, batch: int) -> torch.Tensor:
        """The loss of batch ``batch`` of the current epoch (forward only; the engine steps)."""

    def epoch_columns(self, epoch: int) -> dict[str, float]:
        """The task's own columns of the epoch's row (temperatures, periodic evaluation)."""

    def state_dict(self) -> dict[str, Any]:
        """The task's own checkpointed state (RNG states, metrics so far)."""

    def load_state_dict(self, state: dict[str, Any], step: int) -> None:
        """Restore :meth:`state_dict`'s state when resuming at ``step``."""


def _hms(seconds: float) -> str:
    """``H:MM:SS`` for the per-epoch log line."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def log(message: str) -> None:
    """A line of a run's log (stdout, flushed: DVC and torchrun show it as it comes)."""
    print(message, flush=True)


def fit(task: Task, *, total_steps: int, warmup_steps: int, final_lr_fraction: float, ckpt_path: Path,
        curves_dir: Path | None, checkpoint_every: int = 0, describe: Callable[[dict], str] = lambda row: "",
        barrier: Callable[[], None] = lambda: None, is_main: bool = True,
        on_epoch_end: Callable[[int], None] = lambda epoch: None, timing_run: str | None = None,
        timing_by: str = "epoch", run_dir: Path | None = None, settings: dict[str, Any] | None = None,
        clip_grad_norm: float = 0.0) -> list[dict]:
    """Train ``task`` to ``total_steps``, resuming from ``ckpt_path`` if it exists; return the epoch rows.

    ``curves_dir``: the DVCLive folder (None on the processes that write nothing); ``describe``: the
    task's part of the log line; ``barrier``: called after each checkpoint (the processes of a
    distributed run wait for rank 0's write); ``on_epoch_end``: called with the epoch number after its
    checkpoint (a hook for the tests that interrupt a run); ``timing_run``: the run's key in the timing
    record (its output folder, :func:`isogclr.epoch_times.run_key`), where the main process writes every epoch's
    seconds and samples/s when the run finishes (None: not recorded); ``timing_by="step"`` records each epoch
    as ``step`` (the step at its end) and ``seconds`` instead (the convergence study's form); ``run_dir``: the
    run's output folder, locked for the run (``<run_dir>/local/run.lock``, beside the run's untracked files; None:
    no folder lock, as for the convergence study, which writes no run folder); ``settings``: what the run trains
    (its config as a dict), kept in the checkpoint and compared on resume (:func:`check_settings`);
    ``clip_grad_norm``: when positive, the gradient of all the model's parameters is rescaled to at most this global
    L2 norm before each step (after the monitor records its norm: ``grad_norm`` is the norm before clipping).
    """
    if timing_by not in ("epoch", "step"):
        raise ValueError(f"timing_by must be 'epoch' or 'step', got {timing_by!r}")
    ckpt_path = Path(ckpt_path)
    run = _Fit(task, total_steps, warmup_steps, final_lr_fraction, ckpt_path, curves_dir, checkpoint_every, describe,
               barrier, is_main, on_epoch_end, timing_run, timing_by, settings, clip_grad_norm)
    if not is_main:  # the main process holds the run's lock for all of them
        return run.run()
    with contextlib.ExitStack() as locks:
        locks.enter_context(held_by_one(ckpt_path.with_name(ckpt_path.name + ".lock"),
                                        f"run {task.run_id} (checkpoint {ckpt_path})"))
        if run_dir is not None:
            locks.enter_context(held_by_one(Path(run_dir) / "local" / "run.lock",
                                            f"run {task.run_id} (run folder {run_dir})"))
        return run.run()


# what every checkpoint :func:`fit` writes holds (``timings`` and ``settings`` are read when present)
CHECKPOINT_KEYS = ("model", "optimizer", "loss", "scaler", "monitor", "step", "log_rows", "epoch_losses", "task")


@dataclass
class _Fit:
    """One call of :func:`fit` (its arguments, less the locks'), run by :meth:`run` in steps: resume, the epochs'
    training steps, each epoch's row, log line and checkpoint, and the timing record."""

    task: Task
    total_steps: int
    warmup_steps: int
    final_lr_fraction: float
    ckpt_path: Path
    curves_dir: Path | None
    checkpoint_every: int
    describe: Callable[[dict], str]
    barrier: Callable[[], None]
    is_main: bool
    on_epoch_end: Callable[[int], None]
    timing_run: str | None
    timing_by: str
    settings: dict[str, Any] | None
    clip_grad_norm: float

    def run(self) -> list[dict]:
        """Train to ``total_steps`` from the checkpoint or the start; return the epoch rows."""
        task = self.task
        self.monitor = StepMonitor(task.run_id, task.method, task.loss_fn, self.ckpt_path)
        for group in task.optimizer.param_groups:
            group.setdefault("base_lr", group["lr"])
        # the progress, as checkpointed: the step reached, the epoch rows, the epoch's step losses so far, the timings
        self.step, self.rows, self.losses, self.timings = 0, [], [], []
        self._resume()
        task.model.train()
        if self.step == 0 and hasattr(task, "initial_columns"):  # the initial model's row (a fresh start only)
            self.rows.append({"epoch": 0, "step": 0, "samples_seen": 0, **task.initial_columns()})
        live = open_curves(self.curves_dir, self.rows) if self.curves_dir is not None else None
        # the log line's elapsed time and ETA count from here (the start, or the restart after a resume):
        # ETA = mean epoch time so far (wall clock, evaluation and checkpoints included) x epochs left
        loop_start, loop_first_step = time.perf_counter(), self.step
        while self.step < self.total_steps:
            epoch, start = divmod(self.step, task.steps_per_epoch)
            t0 = time.perf_counter()
            factor = self._train_epoch(epoch, start)
            row, samples_per_s = self._end_epoch(epoch, start, time.perf_counter() - t0, factor)
            if live is not None:
                log_epoch(live, row)
                live.make_summary()
            if self.is_main:
                self._log_line(row, samples_per_s, time.perf_counter() - loop_start, self.step - loop_first_step)
            self._checkpoint()
            self.on_epoch_end(epoch + 1)
        if self.is_main and self.timing_run is not None:  # the epochs' seconds (by step: the convergence study's)
            timings = self.timings
            if self.timing_by == "step":
                timings = [{"step": t["epoch"] * task.steps_per_epoch, "seconds": t["seconds"]} for t in timings]
            epoch_times.record(self.timing_run, timings)
        return self.rows

    def _resume(self) -> None:
        """Restore the progress, the model, optimizer, loss, scaler, monitor and task from the checkpoint, if any."""
        task, ckpt_path = self.task, self.ckpt_path
        if not ckpt_path.exists():
            return
        state = load_torch(ckpt_path, f"checkpoint of run {task.run_id}",
                           f"move it aside (`mv {ckpt_path} {ckpt_path}.bad`) and start the run over",
                           map_location=next(task.model.parameters()).device, required=CHECKPOINT_KEYS)
        check_settings(state.get("settings"), self.settings, task.run_id, ckpt_path)
        task.model.load_state_dict(state["model"])
        task.optimizer.load_state_dict(state["optimizer"])
        task.loss_fn.load_state_dict(state["loss"])
        task.scaler.load_state_dict(state["scaler"])
        self.monitor.load_state_dict(state["monitor"])
        self.step, self.rows, self.losses = state["step"], state["log_rows"], state["epoch_losses"]
        self.timings = state.get("timings", [])
        if "timings" not in state:  # a checkpoint of the former layout: its rows carried the wall clock
            self.timings = [{"epoch": r["epoch"], **{k: r[k] for k in ("seconds", "samples_per_s") if k in r}}
                            for r in self.rows if "seconds" in r]
            self.rows = [{k: v for k, v in r.items() if k not in ("seconds", "samples_per_s")} for r in self.rows]
        task.load_state_dict(state["task"], self.step)
        log(f"[{task.run_id}] resumed from {ckpt_path} at step {self.step}/{self.total_steps}")

    def _checkpoint(self) -> None:
        """Write the checkpoint (on the main process; every rank gives its task state), then pass the barrier."""
        task = self.task
        task_state = task.state_dict()  # on every rank: a task may gather its ranks' states (RNGs)
        if self.is_main:
            save_torch({"model": task.model.state_dict(), "optimizer": task.optimizer.state_dict(),
                        "loss": task.loss_fn.state_dict(), "scaler": task.scaler.state_dict(),
                        "monitor": self.monitor.state_dict(), "step": self.step, "log_rows": self.rows,
                        "epoch_losses": self.losses, "timings": self.timings, "task": task_state,
                        "settings": self.settings}, self.ckpt_path)
        self.barrier()

    def _train_epoch(self, epoch: int, start: int) -> float:
        """The steps of epoch ``epoch`` from its batch ``start`` (a checkpoint every ``checkpoint_every`` steps);
        returns the learning-rate factor of the last."""
        task = self.task
        task.begin_epoch(epoch, start)
        interactive = sys.stderr.isatty() and self.is_main
        for b in tqdm(range(start, task.steps_per_epoch), desc=f"{task.run_id} epoch {epoch + 1}/{task.epochs}",
                      disable=not interactive, leave=False):
            factor = warmup_cosine(self.step, self.total_steps, self.warmup_steps, self.final_lr_fraction)
            self._step(b, factor)
            if self.checkpoint_every and self.step % self.checkpoint_every == 0 and self.step < self.total_steps:
                self._checkpoint()
        return factor

    def _step(self, batch: int, factor: float) -> None:
        """One optimizer step on batch ``batch`` at learning-rate factor ``factor``, watched by the monitor."""
        task, monitor, optimizer, scaler = self.task, self.monitor, self.task.optimizer, self.task.scaler
        for group in optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor
        loss = monitor.loss(self.step, lambda: task.loss(batch))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        monitor.gradients(task.model.parameters())
        if self.clip_grad_norm > 0:
            scaler.unscale_(optimizer)  # a no-op unless fp16 on CUDA: the norm is clipped on the true gradient
            torch.nn.utils.clip_grad_norm_(task.model.parameters(), self.clip_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        self.losses.append(loss.item())
        self.step += 1

    def _end_epoch(self, epoch: int, start: int, seconds: float, factor: float) -> tuple[dict, float]:
        """Epoch ``epoch``'s row and timing from its ``seconds``, appended; returns the row and its samples/s."""
        task = self.task
        row = {"epoch": epoch + 1, "step": self.step, "samples_seen": self.step * task.batch_size,
               "loss": sum(self.losses) / max(len(self.losses), 1),
               "lr": task.optimizer.param_groups[0]["base_lr"] * factor}
        samples_per_s = round((task.steps_per_epoch - start) * task.batch_size / max(seconds, 1e-9), 1)
        self.timings.append({"epoch": epoch + 1, "seconds": round(seconds, 3), "samples_per_s": samples_per_s})
        row.update(task.epoch_columns(epoch))
        row.update(self.monitor.epoch_columns())
        self.rows.append(row)
        self.losses = []
        return row, samples_per_s

    def _log_line(self, row: dict, samples_per_s: float, elapsed: float, steps_done: int) -> None:
        """The epoch's log line, with the time since the (re)start and an ETA from the ``steps_done`` since then."""
        steps_per_epoch = self.task.steps_per_epoch
        epoch_seconds = elapsed * steps_per_epoch / steps_done  # a resumed epoch counts partly
        eta = epoch_seconds * (self.total_steps - self.step) / steps_per_epoch
        log(f"[{self.task.run_id}] epoch {row['epoch']}/{self.task.epochs} loss {row['loss']:.4f} lr {row['lr']:.3g} "
            f"{samples_per_s:.0f} samples/s{self.describe(row)} elapsed {_hms(elapsed)} eta {_hms(eta)}")
