"""SimCLR augmentations applied to whole batches of tensors (on the model's device).

The distribution is torchvision's SimCLR recipe, ``Compose([RandomResizedCrop(size, scale=(m, 1)),
RandomHorizontalFlip(), RandomApply([ColorJitter(s, s, s, s / 4)], p), RandomGrayscale(p), Normalize])``,
with every image of a batch drawing its own parameters:

* crop + flip: the crop boxes come from kornia's ``ResizedCropGenerator`` (torchvision's sampler: ten tries
  of an area in ``[m, 1]`` and a log-uniform aspect ratio in ``[3/4, 4/3]``, then the centre crop); the crop,
  the bilinear resize and the flip are one batched ``torch.nn.functional.grid_sample`` over an affine grid
  (pixel-centre mapping, ``align_corners=False``, as PIL's resize of the box).
* colour jitter, on the images selected with probability ``jitter_p`` only: torchvision's formulas
  (brightness multiplies, contrast blends with the mean luma, saturation blends with the luma image, hue
  shifts the HSV/HLS hue angle; each step clamps to ``[0, 1]``), from ``kornia.enhance`` and ``kornia.color``.
  The four steps run in a random order drawn **per image**, as ``torchvision.transforms.ColorJitter`` does
  (it draws ``randperm(4)`` on every call, i.e. per image in a per-image pipeline). kornia's ``ColorJitter``
  module uses the same formulas but one order per batch, and ``ColorJiggle`` uses kornia's own formulas
  (additive brightness, HSV saturation, also one order per batch), so neither reproduces the per-image recipe
  that the papers (and our PIL reference) use; we apply the steps position by position, each step to the
  subset of images that has it at that position.
* grayscale: luma (``kornia.color.rgb_to_grayscale``, ITU-R 601 weights as torchvision) on the selected subset.
* optional Gaussian blur (``kornia.filters.gaussian_blur2d``, sigma in ``[0.1, 2]`` per image) on its subset.
* normalisation ``(x - 0.5) / 0.25``, the same as :func:`eval_transform`.

All random numbers are drawn on the CPU from torch's global generator (whatever the device of the images),
which the trainer seeds and checkpoints, so runs are reproducible and resumable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import kornia.augmentation as K
import torch
import torch.nn.functional as F
from kornia.augmentation.random_generator import ResizedCropGenerator
from kornia.color import hls_to_rgb, rgb_to_grayscale, rgb_to_hls
from kornia.enhance import (
    adjust_brightness_accumulative,
    adjust_contrast_with_mean_subtraction,
    adjust_saturation_with_gray_subtraction,
)
from kornia.filters import gaussian_blur2d
from torch import nn

MEAN, STD = 0.5, 0.25


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


def _adjust_hue(x: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """torchvision's hue step: shift each image's hue by ``turns`` (B,) of the colour circle.

    Through kornia's HLS pair rather than ``kornia.enhance.adjust_hue``'s HSV pair: the hue is the same angle in
    both models and a hue shift keeps max and min of R, G, B (so lightness and HLS saturation), so the result is
    the same (to 2e-6); ``hls_to_rgb`` is branch-free (it wraps the hue itself) where ``hsv_to_rgb`` is a chain of
    ``torch.where``, which makes this ~20% faster on CPU.
    """
    hls = rgb_to_hls(x)
    hls[:, 0] += (turns * (2 * math.pi))[:, None, None]
    return hls_to_rgb(hls).clamp_(0.0, 1.0)


# torchvision's ColorJitter steps, in its index order (brightness, contrast, saturation, hue)
_JITTER_STEPS = (adjust_brightness_accumulative, adjust_contrast_with_mean_subtraction,
                 adjust_saturation_with_gray_subtraction, _adjust_hue)


def _subset(mask: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """Indices (on ``device``) of the True entries of a CPU mask, or None if there are none."""
    index = mask.nonzero().squeeze(1)
    return index.to(device) if len(index) else None


class SimCLRAugment(nn.Module):
    """float images in [0, 1] (B, 3, H, W) -> one random view each, (B, 3, size, size), normalised."""

    def __init__(self, cfg: AugmentConfig, image_size: int) -> None:
        super().__init__()
        self.cfg, self.size = cfg, image_size
        self.crop_params = ResizedCropGenerator((image_size, image_size), scale=torch.tensor((cfg.crop_scale_min, 1.0)),
                                                ratio=torch.tensor((3 / 4, 4 / 3)))
        self.crop_params.set_rng_device_and_dtype(torch.device("cpu"), torch.float32)
        s = cfg.jitter_strength
        self.jitter_low = torch.tensor([max(0.0, 1 - s)] * 3 + [-s / 4])
        self.jitter_high = torch.tensor([1 + s] * 3 + [s / 4])
        self.blur_kernel = 2 * (image_size // 20) + 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        cfg, device = self.cfg, x.device
        box = self.crop_params((b, 3, h, w))["src"]  # corners (x, y) of the inclusive pixel box, (B, 4, 2)
        flip = torch.rand(b) < cfg.flip_p
        x = self.crop(x, box[:, 0, 0], box[:, 0, 1], box[:, 1, 0] - box[:, 0, 0] + 1,
                      box[:, 2, 1] - box[:, 0, 1] + 1, flip)
        if cfg.jitter_p > 0 and cfg.jitter_strength > 0:
            selected = _subset(torch.rand(b) < cfg.jitter_p, device)
            if selected is not None:
                factors, order = self.jitter_params(len(selected))
                x.index_copy_(0, selected, self.jitter(x.index_select(0, selected), factors, order))
        if cfg.grayscale_p > 0:
            selected = _subset(torch.rand(b) < cfg.grayscale_p, device)
            if selected is not None:
                x.index_copy_(0, selected, rgb_to_grayscale(x.index_select(0, selected)).expand(-1, 3, -1, -1))
        if cfg.blur_p > 0:
            selected = _subset(torch.rand(b) < cfg.blur_p, device)
            if selected is not None:
                sigma = (0.1 + 1.9 * torch.rand(len(selected), 1)).expand(-1, 2).to(device, x.dtype)
                k = self.blur_kernel
                x.index_copy_(0, selected, gaussian_blur2d(x.index_select(0, selected), (k, k), sigma))
        return x.sub_(MEAN).div_(STD)  # x is our own tensor (grid_sample's output)

    def crop(self, x: torch.Tensor, left: torch.Tensor, top: torch.Tensor, width: torch.Tensor,
             height: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
        """Crop each image to its pixel box, resize it to (size, size) and mirror it where ``flip``: one batched
        ``grid_sample``. Equals torchvision's ``resized_crop`` (bilinear, ``align_corners=False``; the crops are
        never larger than the image, so never downscaled and antialiasing has nothing to do) then ``hflip``.

        Box and flip are (B,) CPU tensors; the sampling grid is separable, so it is built from two (B, size)
        coordinate vectors by broadcasting (``affine_grid``'s batched matmul is ~15x slower on CPU). Sample
        coordinates are clamped to the box's first and last pixel centres, i.e. the box edge is replicated, as
        resizing the cropped image does.
        """
        b, _, h, w = x.shape
        unit = (torch.arange(self.size, dtype=torch.float32) + 0.5) / self.size  # output pixel centres in [0, 1]

        def coords(start: torch.Tensor, length: torch.Tensor, extent: int) -> torch.Tensor:
            pixel = (start[:, None] + unit * length[:, None]).clamp_(start[:, None] + 0.5,
                                                                     start[:, None] + length[:, None] - 0.5)
            return pixel * (2 / extent) - 1  # grid_sample's coordinates (align_corners=False)

        gx, gy = coords(left, width, w), coords(top, height, h)
        gx = torch.where(flip[:, None], gx.flip(1), gx)
        grid = torch.empty(b, self.size, self.size, 2, device=x.device, dtype=x.dtype)
        grid[..., 0] = gx.to(x.device, x.dtype)[:, None, :]
        grid[..., 1] = gy.to(x.device, x.dtype)[:, :, None]
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

    def jitter_params(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """torchvision's ColorJitter draws for n images: (n, 4) factors (brightness, contrast, saturation, hue
        in turns) and (n, 4) step orders, a uniform random permutation of the four steps per image."""
        factors = self.jitter_low + torch.rand(n, 4) * (self.jitter_high - self.jitter_low)
        order = torch.rand(n, 4).argsort(dim=1)
        return factors, order

    @staticmethod
    def jitter(x: torch.Tensor, factors: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        """Apply the four jitter steps to every image of x, in place, image i's steps in the order ``order[i]``:
        at each of the four positions, each step runs once on the subset of images that has it there."""
        factors = factors.to(x.device, x.dtype)
        for position in range(4):
            for step, fn in enumerate(_JITTER_STEPS):
                index = _subset(order[:, position] == step, x.device)
                if index is not None:
                    x.index_copy_(0, index, fn(x.index_select(0, index), factors[index, step]))
        return x


def simclr_augmentation(cfg: AugmentConfig, image_size: int) -> nn.Module:
    """float images in [0, 1] (B, 3, H, W) -> one random view each, same size, normalised."""
    return SimCLRAugment(cfg, image_size)


def crop_flip_augmentation(image_size: int, crop_scale_min: float, flip_p: float, mean: tuple[float, ...],
                           std: tuple[float, ...]) -> nn.Module:
    """The image-text runs' light augmentation (iSogCLR section 6.2): float images in [0, 1] (B, 3, S, S) ->
    kornia's random resized crop (scale ``(crop_scale_min, 1)``) + horizontal flip, drawn per image,
    normalised with ``mean`` / ``std`` (the image encoder's, :func:`isogclr.models.bimodal.image_normalization`)."""
    return nn.Sequential(K.RandomResizedCrop((image_size, image_size), scale=(crop_scale_min, 1.0)),
                         K.RandomHorizontalFlip(p=flip_p),
                         K.Normalize(mean=torch.tensor(mean), std=torch.tensor(std)))


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float in [0, 1] with 3 channels (grayscale images are repeated)."""
    x = images / 255.0  # uint8 -> float32 in one pass
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def eval_transform(images: torch.Tensor) -> torch.Tensor:
    """The deterministic view used for evaluation: scale and normalise as the training views."""
    return to_float(images).sub(MEAN).div_(STD)
