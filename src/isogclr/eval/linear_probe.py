"""Linear evaluation: a linear classifier on frozen encoder features (computed once)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..data.augment import eval_transform


@dataclass(frozen=True)
class ProbeConfig:
    """``probe`` in params.yaml. Defaults: the iSogCLR paper's protocol (Sec. 6.1).

    SGD with Nesterov momentum, batch 256, 100 epochs, lr 30 decayed by 0.2 at epochs
    40, 60, 80. The reported accuracy is the final epoch's (``report: final``), never the
    best test epoch unless ``report: best`` is set. ``feature_norm: standardize`` z-scores
    features with training-set statistics (not in the paper; recorded in every run's config).
    """

    epochs: int = 100
    lr: float = 30.0
    batch_size: int = 256
    momentum: float = 0.9
    weight_decay: float = 0.0
    milestones: tuple[int, ...] = (40, 60, 80)
    gamma: float = 0.2
    feature_norm: str = "none"
    report: str = "final"

    def __post_init__(self) -> None:
        if self.feature_norm not in ("none", "standardize"):
            raise ValueError(f"probe.feature_norm must be none or standardize, got {self.feature_norm!r}")
        if self.report not in ("final", "best"):
            raise ValueError(f"probe.report must be final or best, got {self.report!r}")
        if self.epochs < 1 or self.lr <= 0 or self.batch_size < 1:
            raise ValueError(f"probe: need epochs >= 1, lr > 0, batch_size >= 1, got {self}")


@torch.no_grad()
def extract_features(encoder: nn.Module, images: torch.Tensor, device: torch.device,
                     batch_size: int = 512) -> torch.Tensor:
    """Encoder features (after global pooling) of uint8 images, in eval mode, as float32 on the CPU."""
    was_training = encoder.training
    encoder.eval()
    out = [encoder(eval_transform(images[i:i + batch_size].to(device))).float().cpu()
           for i in range(0, len(images), batch_size)]
    encoder.train(was_training)
    return torch.cat(out)


def linear_probe(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor,
                 num_classes: int, cfg: ProbeConfig, seed: int = 0) -> dict[str, float]:
    """Train the linear classifier; return top-1 (%) at the final and the best epoch, and the one reported."""
    if cfg.feature_norm == "standardize":
        mean, std = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
        train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    gen = torch.Generator().manual_seed(seed)
    clf = nn.Linear(train_x.shape[1], num_classes)
    with torch.no_grad():
        clf.weight.normal_(0, 0.01, generator=gen)
        clf.bias.zero_()
    opt = torch.optim.SGD(clf.parameters(), lr=cfg.lr, momentum=cfg.momentum, nesterov=True,
                          weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)
    accs = []
    for _ in range(cfg.epochs):
        order = torch.randperm(len(train_x), generator=gen)
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            loss = F.cross_entropy(clf(train_x[idx]), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sched.step()
        with torch.no_grad():
            accs.append(100.0 * (clf(test_x).argmax(1) == test_y).float().mean().item())
    final, best = accs[-1], max(accs)
    return {"top1": final if cfg.report == "final" else best, "top1_final": final, "top1_best": best}
