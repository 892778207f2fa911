"""The smallest :class:`~isogclr.train.engine.Task`, for tests of the engine itself (resume, locks, the clip)."""

from __future__ import annotations

import torch
from torch import nn

from isogclr.losses.base import ContrastiveLoss


class TinyTask:
    """A linear layer pulled towards zero: ``epochs x steps_per_epoch`` steps of plain SGD (lr 0.1) on the mean
    square of its output for 4 fixed inputs of scale ``x_scale`` (10 gives a gradient of norm well above 1)."""

    run_id, method, epochs, steps_per_epoch, batch_size = "tiny", "tiny", 2, 2, 4

    def __init__(self, x_scale: float = 1.0) -> None:
        torch.manual_seed(0)
        self.model = nn.Linear(3, 2)
        self.loss_fn = ContrastiveLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)
        self.x = x_scale * torch.randn(4, 3)

    def begin_epoch(self, epoch: int, start: int) -> None:
        pass

    def loss(self, batch: int) -> torch.Tensor:
        return self.model(self.x).pow(2).mean()

    def epoch_columns(self, epoch: int) -> dict:
        return {}

    def state_dict(self) -> dict:
        return {"rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict, step: int) -> None:
        torch.set_rng_state(state["rng"])
