"""The per-sample image transforms of the streamed datasets (decoded with PIL in DataLoader workers): the SimCLR
view, the image-text runs' light augmentation and the evaluation view, each to uint8; :func:`to_normalized` brings a
batch to the in-memory path's scale on the device."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from PIL import Image, ImageFilter
from torchvision.transforms import v2

from .augment import MEAN, STD, AugmentConfig

Transform = Callable[[Image.Image], torch.Tensor]


class PILGaussianBlur:
    """Gaussian blur with sigma drawn uniformly from ``sigma`` per call, by PIL's ``ImageFilter.GaussianBlur``
    (the MoCo v2 / SimCLR-PyTorch form; ~15x faster on a 224-px image than torchvision's convolution)."""

    def __init__(self, sigma: tuple[float, float] = (0.1, 2.0)) -> None:
        self.sigma = sigma

    def __call__(self, image: Image.Image) -> Image.Image:
        low, high = self.sigma
        radius = low + (high - low) * float(torch.rand(()))  # torch's generator: seeded per sample (KeyedEpoch)
        return image.filter(ImageFilter.GaussianBlur(radius=radius))


def simclr_transform(aug: AugmentConfig, size: int) -> Transform:
    """One SimCLR view of an RGB PIL image as uint8 (3, size, size), with ``augment``'s parameters.

    torchvision's recipe (the one :mod:`isogclr.data.augment` batches on the device), on PIL images (faster
    than on tensors at 224 px: colour jitter 9 vs 22 ms): RandomResizedCrop (scale ``(crop_scale_min, 1)``,
    bilinear), horizontal flip, colour jitter (s, s, s, s/4) with probability ``jitter_p``, grayscale with
    ``grayscale_p``, Gaussian blur (sigma in [0.1, 2], :class:`PILGaussianBlur`) with ``blur_p``; then
    ``PILToTensor``. Normalisation is left to the device (:func:`to_normalized`).
    """
    s = aug.jitter_strength
    steps: list = [v2.RandomResizedCrop(size, scale=(aug.crop_scale_min, 1.0), antialias=True),
                   v2.RandomHorizontalFlip(aug.flip_p),
                   v2.RandomApply([v2.ColorJitter(s, s, s, s / 4)], p=aug.jitter_p),
                   v2.RandomGrayscale(aug.grayscale_p)]
    if aug.blur_p > 0:
        steps.append(v2.RandomApply([PILGaussianBlur((0.1, 2.0))], p=aug.blur_p))
    return v2.Compose([*steps, v2.PILToTensor()])


def pair_transform(size: int, crop_scale_min: float, flip_p: float) -> Transform:
    """The image-text runs' light augmentation: RandomResizedCrop (scale (crop_scale_min, 1)) and flip."""
    return v2.Compose([v2.RandomResizedCrop(size, scale=(crop_scale_min, 1.0), antialias=True),
                       v2.RandomHorizontalFlip(flip_p), v2.PILToTensor()])


def eval_transform(size: int) -> Transform:
    """The evaluation view: shorter side to ``size * 256 / 224`` (bilinear, antialiased), centre crop ``size``."""
    return v2.Compose([v2.Resize(round(size * 256 / 224), antialias=True), v2.CenterCrop(size), v2.PILToTensor()])


def to_normalized(images: torch.Tensor) -> torch.Tensor:
    """uint8 images from a streaming loader -> float ``(x / 255 - 0.5) / 0.25``, the in-memory path's scale."""
    return (images.float().div_(255.0) - MEAN) / STD


def decode_rgb(path: Path | str) -> Image.Image:
    """One image file decoded with PIL to an RGB image, at full resolution."""
    with Image.open(path) as img:
        return img.convert("RGB")
