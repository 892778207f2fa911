"""SimCLR augmentations applied to whole batches of tensors (on the model's device).

The distribution is torchvision's SimCLR recipe, ``Compose([RandomResizedCrop(size, scale=(m, 1)),
RandomHorizontalFlip(), RandomApply([ColorJitter(s, s, s, s / 4)], p), RandomGrayscale(p), Normalize])``,
with every image of a batch drawing its own parameters:

* crop + flip: the crop box is torchvision's ``RandomResizedCrop.get_params`` (ten tries of an area in
  ``[m, 1]`` and a log-uniform aspect ratio in ``[3/4, 4/3]``, the first that fits, then the centre crop),
  vectorised in :func:`crop_boxes`; the crop, the bilinear resize and the flip are one batched
  ``torch.nn.functional.grid_sample`` over an affine grid
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

Every image's draws are one row of uniform numbers, ``u`` (B, :data:`SIMCLR_DRAWS`), passed by the caller: the
trainers pass :func:`isogclr.data.keyed.uniforms` of (seed, epoch, index, view), so an image's view does not
depend on the batch it is in, the process that holds it or where a run resumed. Without ``u`` the row is drawn
from torch's global CPU generator. The columns: 0-9 the crop's areas, 10-19 its log aspect ratios, 20-21 its
position, 22 the flip, 23 jitter or not, 24-27 the jitter factors, 28-31 the jitter order, 32 grayscale or not,
33 blur or not, 34 the blur's sigma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from kornia.color import hls_to_rgb, rgb_to_grayscale, rgb_to_hls
from kornia.enhance import (
    adjust_brightness_accumulative,
    adjust_contrast_with_mean_subtraction,
    adjust_saturation_with_gray_subtraction,
)
from kornia.filters import gaussian_blur2d
from torch import nn

MEAN, STD = 0.5, 0.25
CROP_DRAWS = 22  # 10 tries of (area, log ratio), then the box's position
SIMCLR_DRAWS = CROP_DRAWS + 13  # + flip, jitter (select, 4 factors, 4 order keys), grayscale, blur (select, sigma)
CROP_FLIP_DRAWS = CROP_DRAWS + 1


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


def crop_boxes(u: torch.Tensor, height: int, width: int, scale: tuple[float, float],
               ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> tuple[torch.Tensor, ...]:
    """torchvision's ``RandomResizedCrop.get_params`` for B images of ``height`` x ``width`` from their draws
    ``u`` (B, :data:`CROP_DRAWS`) in [0, 1): (left, top, box width, box height), float (B,) tensors of integers.

    Ten tries of a target area ``H W U(scale)`` and an aspect ratio ``exp(U(log ratio))``, the box
    ``round(sqrt(area * ratio)) x round(sqrt(area / ratio))``; the first try that fits the image is placed
    uniformly (``randint(0, H - h + 1)``); if none fits, the centre crop of the ratio clamped to ``ratio``.
    Computed in float64 (``round`` is half-to-even, as Python's)."""
    u = u.double()
    area = float(height * width)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    target = area * (scale[0] + (scale[1] - scale[0]) * u[:, :10])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * u[:, 10:20])
    w, h = torch.sqrt(target * aspect).round(), torch.sqrt(target / aspect).round()
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.to(torch.uint8).argmax(1, keepdim=True)  # the first try that fits (argmax: the first maximum)
    found = fits.any(1)
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fallback_w, fallback_h = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        fallback_w, fallback_h = round(height * ratio[1]), height
    else:
        fallback_w, fallback_h = width, height
    w = torch.where(found, w.gather(1, first).squeeze(1), float(fallback_w))
    h = torch.where(found, h.gather(1, first).squeeze(1), float(fallback_h))
    top = torch.where(found, torch.minimum((u[:, 20] * (height - h + 1)).floor(), height - h), (height - h) // 2)
    left = torch.where(found, torch.minimum((u[:, 21] * (width - w + 1)).floor(), width - w), (width - w) // 2)
    return left.float(), top.float(), w.float(), h.float()


def grid_crop(x: torch.Tensor, size: int, left: torch.Tensor, top: torch.Tensor, width: torch.Tensor,
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
    unit = (torch.arange(size, dtype=torch.float32) + 0.5) / size  # output pixel centres in [0, 1]

    def coords(start: torch.Tensor, length: torch.Tensor, extent: int) -> torch.Tensor:
        pixel = (start[:, None] + unit * length[:, None]).clamp_(start[:, None] + 0.5,
                                                                 start[:, None] + length[:, None] - 0.5)
        return pixel * (2 / extent) - 1  # grid_sample's coordinates (align_corners=False)

    gx, gy = coords(left, width, w), coords(top, height, h)
    gx = torch.where(flip[:, None], gx.flip(1), gx)
    grid = torch.empty(b, size, size, 2, device=x.device, dtype=x.dtype)
    grid[..., 0] = gx.to(x.device, x.dtype)[:, None, :]
    grid[..., 1] = gy.to(x.device, x.dtype)[:, :, None]
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


class SimCLRAugment(nn.Module):
    """float images in [0, 1] (B, 3, H, W) -> one random view each, (B, 3, size, size), normalised."""

    def __init__(self, cfg: AugmentConfig, image_size: int) -> None:
        super().__init__()
        self.cfg, self.size = cfg, image_size
        s = cfg.jitter_strength
        self.jitter_low = torch.tensor([max(0.0, 1 - s)] * 3 + [-s / 4])
        self.jitter_high = torch.tensor([1 + s] * 3 + [s / 4])
        self.blur_kernel = 2 * (image_size // 20) + 1

    def forward(self, x: torch.Tensor, u: torch.Tensor | None = None) -> torch.Tensor:
        """``u``: each image's draws (B, :data:`SIMCLR_DRAWS`) in [0, 1) on the CPU; None: from torch's generator."""
        b, _, h, w = x.shape
        cfg, device = self.cfg, x.device
        u = torch.rand(b, SIMCLR_DRAWS) if u is None else u
        if u.shape != (b, SIMCLR_DRAWS):
            raise ValueError(f"SimCLRAugment: draws of shape {tuple(u.shape)} for {b} images, "
                             f"need ({b}, {SIMCLR_DRAWS})")
        x = grid_crop(x, self.size, *crop_boxes(u[:, :CROP_DRAWS], h, w, (cfg.crop_scale_min, 1.0)),
                      u[:, 22] < cfg.flip_p)
        if cfg.jitter_p > 0 and cfg.jitter_strength > 0:
            selected = _subset(u[:, 23] < cfg.jitter_p, device)
            if selected is not None:
                factors, order = self.jitter_params(u[:, 24:32][selected.cpu()])
                x.index_copy_(0, selected, self.jitter(x.index_select(0, selected), factors, order))
        if cfg.grayscale_p > 0:
            selected = _subset(u[:, 32] < cfg.grayscale_p, device)
            if selected is not None:
                x.index_copy_(0, selected, rgb_to_grayscale(x.index_select(0, selected)).expand(-1, 3, -1, -1))
        if cfg.blur_p > 0:
            selected = _subset(u[:, 33] < cfg.blur_p, device)
            if selected is not None:
                sigma = (0.1 + 1.9 * u[selected.cpu(), 34:35]).expand(-1, 2).to(device, x.dtype)
                k = self.blur_kernel
                x.index_copy_(0, selected, gaussian_blur2d(x.index_select(0, selected), (k, k), sigma))
        return x.sub_(MEAN).div_(STD)  # x is our own tensor (grid_sample's output)

    def jitter_params(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """torchvision's ColorJitter draws for n images from their uniforms ``u`` (n, 8): (n, 4) factors
        (brightness, contrast, saturation, hue in turns) and (n, 4) step orders, a uniform random permutation of
        the four steps per image (the argsort of four uniforms)."""
        factors = self.jitter_low + u[:, :4] * (self.jitter_high - self.jitter_low)
        order = u[:, 4:].argsort(dim=1, stable=True)
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


class CropFlip(nn.Module):
    """The image-text runs' light augmentation (iSogCLR section 6.2): float images in [0, 1] (B, 3, S, S) ->
    torchvision's random resized crop (scale ``(crop_scale_min, 1)``, :func:`crop_boxes`) and horizontal flip,
    drawn per image from ``u`` (B, :data:`CROP_FLIP_DRAWS`), normalised with ``mean`` / ``std`` (the image
    encoder's, :func:`isogclr.models.bimodal.image_normalization`)."""

    def __init__(self, image_size: int, crop_scale_min: float, flip_p: float, mean: tuple[float, ...],
                 std: tuple[float, ...]) -> None:
        super().__init__()
        self.size, self.scale, self.flip_p = image_size, (crop_scale_min, 1.0), flip_p
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor, u: torch.Tensor | None = None) -> torch.Tensor:
        b, _, h, w = x.shape
        u = torch.rand(b, CROP_FLIP_DRAWS) if u is None else u
        if u.shape != (b, CROP_FLIP_DRAWS):
            raise ValueError(f"CropFlip: draws of shape {tuple(u.shape)} for {b} images, need ({b}, {CROP_FLIP_DRAWS})")
        x = grid_crop(x, self.size, *crop_boxes(u[:, :CROP_DRAWS], h, w, self.scale), u[:, CROP_DRAWS] < self.flip_p)
        return (x - self.mean) / self.std


def crop_flip_augmentation(image_size: int, crop_scale_min: float, flip_p: float, mean: tuple[float, ...],
                           std: tuple[float, ...]) -> nn.Module:
    """The image-text runs' augmentation, :class:`CropFlip`."""
    return CropFlip(image_size, crop_scale_min, flip_p, mean, std)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, C, H, W) -> float in [0, 1] with 3 channels (grayscale images are repeated)."""
    x = images / 255.0  # uint8 -> float32 in one pass
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def eval_transform(images: torch.Tensor) -> torch.Tensor:
    """The deterministic view used for evaluation: scale and normalise as the training views."""
    return to_float(images).sub(MEAN).div_(STD)
