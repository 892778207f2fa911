"""Optimizers (LARS, SGD, AdamW) and the warm-up + cosine learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from ..config.core import OptimConfig  # the typed ``train.optimizer`` section

__all__ = ["LARS", "OptimConfig", "adamw_with_loss_params", "build_optimizer", "param_groups", "warmup_cosine"]


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


def adamw_with_loss_params(model: nn.Module, loss_fn: nn.Module, lr: float, weight_decay: float,
                           loss_lr: float | None = None) -> torch.optim.AdamW:
    """AdamW of the image-text runs: weight decay on the model's weight matrices only (:func:`param_groups`);
    the loss's own parameters (learned log-temperatures of ``clip`` with ``learn_tau`` and
    ``clip_individual_tau``) in a group without decay at ``loss_lr`` (None: ``lr``).

    Every group carries its ``base_lr``, which the engine multiplies by the warm-up + cosine factor.
    """
    groups = param_groups(model, weight_decay)
    for g in groups:
        g.pop("lars", None)
        g["base_lr"] = lr
    loss_params = [p for p in loss_fn.parameters() if p.requires_grad]
    if loss_params:
        groups.append({"params": loss_params, "weight_decay": 0.0, "base_lr": loss_lr or lr})
    return torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)


def warmup_cosine(step: int, total_steps: int, warmup_steps: int, final_fraction: float = 0.0) -> float:
    """Multiplier of the base rate: linear warm-up from 1/warmup to 1, then cosine decay to ``final_fraction``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
