"""Optimizers (LARS, SGD, AdamW) and the warm-up + cosine learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn


class LARS(torch.optim.Optimizer):
    r"""Layer-wise adaptive rate scaling (You et al., 2017) with momentum, as in SimCLR and VICReg.

    For a parameter group with ``lars=True``: g <- g + wd * w, then
    g <- trust * ||w|| / ||g|| * g (when both norms are positive), then heavy-ball momentum.
    Biases and normalisation parameters go in a group with ``lars=False, weight_decay=0``
    (see :func:`param_groups`).
    """

    def __init__(self, params: Iterable, lr: float, momentum: float = 0.9, weight_decay: float = 1e-4,
                 trust_coefficient: float = 0.001) -> None:
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                    "trust_coefficient": trust_coefficient, "lars": True}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if group["weight_decay"]:
                    grad = grad.add(p, alpha=group["weight_decay"])
                if group["lars"]:
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(grad)
                    trust = torch.where((w_norm > 0) & (g_norm > 0),
                                        group["trust_coefficient"] * w_norm / g_norm, torch.ones_like(w_norm))
                    grad = grad.mul(trust)
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.clone(grad).detach()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                p.add_(state["momentum_buffer"], alpha=-group["lr"])
        return loss


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weights of linear/conv layers get weight decay (and LARS); biases and norm parameters do not."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0, "lars": False}]


@dataclass(frozen=True)
class OptimConfig:
    """``train.optimizer`` in params.yaml. ``lr`` is the base rate; see ``lr_scaling``.

    The warm-up is counted either in epochs (``warmup_epochs``, the papers' unit, may be
    fractional) or in optimizer steps (``warmup_iters``, as the bimodal trainer counts it);
    at most one of the two may be non-zero, so a params.yaml never says two different things.
    """

    name: str = "lars"
    lr: float = 0.8
    weight_decay: float = 1e-4
    momentum: float = 0.9
    lr_scaling: str = "none"  # "none", "linear" (lr * B / 256) or "sqrt" (lr * sqrt(B), SogCLR)
    warmup_epochs: float = 10.0
    warmup_iters: int = 0  # warm-up length in steps; needs warmup_epochs: 0
    final_lr_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in ("lars", "sgd", "adamw"):
            raise ValueError(f"train.optimizer.name must be lars, sgd or adamw, got {self.name!r}")
        if self.lr_scaling not in ("none", "linear", "sqrt"):
            raise ValueError(f"train.optimizer.lr_scaling must be none, linear or sqrt, got {self.lr_scaling!r}")
        if self.lr <= 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ValueError(f"train.optimizer: need lr > 0, weight_decay >= 0, warmup_epochs >= 0, got {self}")
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


def build_optimizer(model: nn.Module, cfg: OptimConfig, batch_size: int) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg.weight_decay)
    lr = cfg.scaled_lr(batch_size)
    if cfg.name == "lars":
        return LARS(groups, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    for g in groups:
        g.pop("lars", None)
    if cfg.name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(groups, lr=lr, weight_decay=cfg.weight_decay)


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, final_fraction: float = 0.0) -> float:
    """Multiplier of the base rate: linear warm-up from 1/warmup to 1, then cosine decay to ``final_fraction``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
