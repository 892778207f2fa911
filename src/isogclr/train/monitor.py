"""What every trainer watches at every step: a finite loss, the loss's weights, the gradient norm.

A moving-average loss (SogCLR, iSogCLR and their bimodal forms) weights each negative by
w_iz = exp(h_iz / tau_i) / s_i (iSogCLR eq. 13, SogCLR eq. 10). With a stale s_i these weights can
grow by orders of magnitude; the losses cap the exponent against float32 overflow and raise
:class:`~isogclr.losses.numerics.TrainingDiverged` when the cap is reached. The monitor

* re-raises that error, and any non-finite loss, with the run, the method and the step, so a run
  that diverges stops and says why instead of training on;
* keeps, per epoch, the largest weight the loss reports (``loss_fn.step_stats()["max_weight"]``,
  for the losses that have it) and the largest L2 norm of the parameters' gradient: the
  ``max_weight`` and ``grad_norm`` columns of ``train_log.csv``.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ..losses.base import ContrastiveLoss
from ..losses.numerics import TrainingDiverged


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
