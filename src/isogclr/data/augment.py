"""SimCLR augmentations applied to whole batches of tensors (on the model's device) with kornia.

Each image in a batch gets its own random parameters; kornia draws them from torch's
global generator, which the trainer seeds and checkpoints, so runs are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import kornia.augmentation as K
import torch
from torch import nn


@dataclass(frozen=True)
class AugmentConfig:
    """``augment`` in params.yaml: SimCLR's augmentation with the papers' CIFAR parameters."""

    crop_scale_min: float = 0.08
    jitter_strength: float = 0.4  # brightness, contrast, saturation = s; hue = s / 4
    jitter_p: float = 0.8
    grayscale_p: float = 0.2
    blur_p: float = 0.0  # SimCLR uses 0.5 on ImageNet-size inputs, none on CIFAR
    flip_p: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.crop_scale_min <= 1:
            raise ValueError(f"augment.crop_scale_min must be in (0, 1], got {self.crop_scale_min}")
        for key in ("jitter_p", "grayscale_p", "blur_p", "flip_p"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(f"augment.{key} must be a probability, got {getattr(self, key)}")


def simclr_augmentation(cfg: AugmentConfig, image_size: int) -> nn.Module:
    """float images in [0, 1] (B, 3, H, W) -> one random view each, same size, normalised."""
    s = cfg.jitter_strength
    ops: list[nn.Module] = [
        K.RandomResizedCrop((image_size, image_size), scale=(cfg.crop_scale_min, 1.0)),
        K.RandomHorizontalFlip(p=cfg.flip_p),
        K.ColorJiggle(s, s, s, s / 4, p=cfg.jitter_p),
        K.RandomGrayscale(p=cfg.grayscale_p),
    ]
    if cfg.blur_p > 0:
        kernel = 2 * (image_size // 20) + 1
        ops.append(K.RandomGaussianBlur((kernel, kernel), (0.1, 2.0), p=cfg.blur_p))
    ops.append(K.Normalize(mean=torch.full((3,), 0.5), std=torch.full((3,), 0.25)))
    return nn.Sequential(*ops)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float in [0, 1] with 3 channels (grayscale images are repeated)."""
    x = images.float() / 255.0
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def eval_transform(images: torch.Tensor) -> torch.Tensor:
    """The deterministic view used for evaluation: scale and normalise as the training views."""
    return (to_float(images) - 0.5) / 0.25
