"""The step monitor of both trainers: divergence stops the run with its method and step; per-epoch maxima."""

from __future__ import annotations

import math

import pytest
import torch

from isogclr.losses.base import ContrastiveLoss
from isogclr.losses.numerics import TrainingDiverged
from isogclr.train.engine import StepMonitor


class _Loss(ContrastiveLoss):
    def __init__(self, weights):
        super().__init__()
        self.weights = list(weights)
        self.last = None

    def forward(self):
        self.last = self.weights.pop(0)
        if self.last == "cap":
            raise TrainingDiverged("a weight reached the cap; raise methods.isogclr.tau_min")
        return torch.tensor(float(self.last))

    def step_stats(self):
        return {"max_weight": float(self.last)}


def test_a_loss_that_hits_the_cap_stops_with_run_method_step_and_knob(tmp_path):
    loss = _Loss([1.0, "cap"])
    monitor = StepMonitor("isogclr-synth10-s0", "isogclr", loss, tmp_path / "checkpoint.pt")
    monitor.loss(0, loss)
    with pytest.raises(TrainingDiverged, match=r"\[isogclr-synth10-s0\] method 'isogclr', step 1 .*tau_min"):
        monitor.loss(1, loss)


def test_a_non_finite_loss_stops_naming_the_checkpoint(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    monitor = StepMonitor("r", "sogclr", ContrastiveLoss(), tmp_path / "checkpoint.pt")
    with pytest.raises(TrainingDiverged, match=r"step 7 \(last good checkpoint: .*\): non-finite loss nan"):
        monitor.loss(7, lambda: torch.tensor(math.nan))


def test_epoch_columns_are_the_epochs_maxima_and_reset(tmp_path):
    loss = _Loss([3.0, 40.0, 5.0])
    monitor = StepMonitor("r", "isogclr", loss, tmp_path / "c.pt")
    model = torch.nn.Linear(2, 1, bias=False)
    for step, scale in enumerate((1.0, 3.0)):
        monitor.loss(step, loss)
        model.weight.grad = torch.full_like(model.weight, scale)  # norm sqrt(2) * scale
        monitor.gradients(model.parameters())
    row = monitor.epoch_columns()
    assert row == {"max_weight": 40.0, "grad_norm": pytest.approx(3.0 * math.sqrt(2))}
    state = monitor.state_dict()
    monitor.loss(2, loss)
    assert monitor.epoch_columns() == {"max_weight": 5.0}  # a new epoch; no gradient recorded in it
    monitor.load_state_dict(state)  # a resumed epoch continues from the checkpointed maxima
    assert monitor.epoch_columns() == {}


def test_losses_without_weights_log_only_the_gradient_norm(tmp_path):
    monitor = StepMonitor("r", "simclr", ContrastiveLoss(), tmp_path / "c.pt")
    monitor.loss(0, lambda: torch.tensor(1.0))
    assert "max_weight" not in monitor.epoch_columns()
