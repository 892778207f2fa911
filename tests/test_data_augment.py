"""The batched SimCLR augmentation (isogclr.data.augment) against its contract and torchvision's recipe."""

from __future__ import annotations

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from isogclr.data.augment import AugmentConfig, eval_transform, simclr_augmentation, to_float

SIZE = 16
OFF = AugmentConfig(crop_scale_min=1.0, jitter_p=0.0, grayscale_p=0.0, blur_p=0.0, flip_p=0.0)


def _images(n: int = 8, size: int = SIZE, seed: int = 0) -> torch.Tensor:
    """uint8 (n, 3, size, size): smooth colour gradients plus noise, so crops and jitter change them visibly."""
    g = torch.Generator().manual_seed(seed)
    ramp = torch.linspace(0, 1, size)
    base = torch.rand(n, 3, 1, 1, generator=g) * ramp[None, None, :, None] + torch.rand(n, 3, 1, 1, generator=g)
    noisy = base / 2 + 0.1 * torch.rand(n, 3, size, size, generator=g)
    return (noisy.clamp(0, 1) * 255).round().to(torch.uint8)


@pytest.mark.parametrize("cfg", [AugmentConfig(), AugmentConfig(blur_p=0.5, crop_scale_min=0.5)])
def test_output_shape_dtype_and_normalised_range(cfg):
    torch.manual_seed(0)
    x = to_float(_images(16))
    before = x.clone()
    out = simclr_augmentation(cfg, SIZE)(x)
    assert out.shape == (16, 3, SIZE, SIZE) and out.dtype == torch.float32
    # (x - 0.5) / 0.25 of values in [0, 1]
    assert out.min() >= -2 - 1e-5 and out.max() <= 2 + 1e-5
    assert out.std() > 0.1
    assert torch.equal(x, before)  # the caller's batch is not modified (the trainer augments it twice)


def test_every_image_draws_its_own_parameters():
    torch.manual_seed(0)
    x = to_float(_images(1)).expand(32, -1, -1, -1).contiguous()  # the same image 32 times
    out = simclr_augmentation(AugmentConfig(), SIZE)(x)
    flat = out.flatten(1)
    distinct = torch.cdist(flat, flat)[torch.triu_indices(32, 32, offset=1).unbind()]
    assert (distinct > 1e-3).all()


def test_deterministic_given_the_seed():
    augment = simclr_augmentation(AugmentConfig(blur_p=0.5), SIZE)
    x = to_float(_images(16))
    torch.manual_seed(3)
    a = augment(x)
    torch.manual_seed(3)
    b = augment(x)
    torch.manual_seed(4)
    c = augment(x)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_nothing_random_is_the_eval_transform():
    images = _images(8)
    torch.manual_seed(0)
    out = simclr_augmentation(OFF, SIZE)(to_float(images))
    torch.testing.assert_close(out, eval_transform(images), atol=1e-5, rtol=0)


def test_grayscale_input_is_expanded_to_three_channels():
    images = _images(4)[:, :1]
    torch.manual_seed(0)
    out = simclr_augmentation(OFF, SIZE)(to_float(images))
    assert out.shape == (4, 3, SIZE, SIZE)
    torch.testing.assert_close(out, eval_transform(images), atol=1e-5, rtol=0)


def test_flip_mirrors_the_image():
    images = _images(4)
    torch.manual_seed(0)
    out = simclr_augmentation(AugmentConfig(crop_scale_min=1.0, jitter_p=0, grayscale_p=0, flip_p=1.0), SIZE)(
        to_float(images))
    torch.testing.assert_close(out, eval_transform(images).flip(-1), atol=1e-5, rtol=0)


def test_jitter_changes_colour_statistics():
    images = _images(32)
    torch.manual_seed(0)
    jittered = simclr_augmentation(AugmentConfig(crop_scale_min=1.0, flip_p=0, grayscale_p=0, jitter_p=1.0), SIZE)(
        to_float(images))
    plain = eval_transform(images)
    means_moved = (jittered.mean((2, 3)) - plain.mean((2, 3))).abs()  # per image and channel
    assert (means_moved.amax(1) > 0.02).all()  # every image's colour moved
    assert means_moved.mean() > 0.1


def test_grayscale_gives_equal_channels():
    torch.manual_seed(0)
    out = simclr_augmentation(AugmentConfig(grayscale_p=1.0), SIZE)(to_float(_images(16)))
    assert torch.equal(out[:, 0], out[:, 1]) and torch.equal(out[:, 1], out[:, 2])
    assert out.std() > 0.1


def test_crop_and_flip_match_torchvision_resized_crop():
    augment = simclr_augmentation(AugmentConfig(), 32)
    x = torch.rand(5, 3, 32, 32)
    left, top = torch.tensor([0.0, 3, 10, 0, 5]), torch.tensor([0.0, 2, 7, 20, 5])
    width, height = torch.tensor([32.0, 10, 22, 5, 1]), torch.tensor([32.0, 12, 25, 12, 3])
    flip = torch.tensor([False, True, False, True, False])
    out = augment.crop(x, left, top, width, height, flip)
    for i in range(5):
        ref = TF.resized_crop(x[i], int(top[i]), int(left[i]), int(height[i]), int(width[i]), [32, 32])
        ref = TF.horizontal_flip(ref) if flip[i] else ref
        torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=0)


def test_jitter_is_torchvision_colorjitter_with_a_per_image_order():
    augment = simclr_augmentation(AugmentConfig(), SIZE)
    torch.manual_seed(0)
    x = to_float(_images(64))
    factors, order = augment.jitter_params(64)
    # per image: a permutation of the four steps, and the orders differ between images of one batch
    assert torch.equal(order.sort(1).values, torch.arange(4).expand(64, -1))
    assert len({tuple(o) for o in order.tolist()}) > 10
    s = AugmentConfig().jitter_strength
    assert (factors[:, :3] >= 1 - s).all() and (factors[:, :3] <= 1 + s).all()
    assert (factors[:, 3].abs() <= s / 4).all()
    out = augment.jitter(x.clone(), factors, order)
    for i in range(64):
        steps = [lambda img, f=factors[i]: TF.adjust_brightness(img, f[0].item()),
                 lambda img, f=factors[i]: TF.adjust_contrast(img, f[1].item()),
                 lambda img, f=factors[i]: TF.adjust_saturation(img, f[2].item()),
                 lambda img, f=factors[i]: TF.adjust_hue(img, f[3].item())]
        ref = x[i]
        for step in order[i].tolist():
            ref = steps[step](ref)
        torch.testing.assert_close(out[i], ref, atol=2e-4, rtol=0)


def test_applied_fractions_follow_the_probabilities():
    """Jitter p=0.8 and grayscale p=0.2 per image: count the gray outputs (equal channels)."""
    torch.manual_seed(0)
    x = to_float(_images(1)).expand(2000, -1, -1, -1)
    cfg = AugmentConfig(jitter_p=0.0, grayscale_p=0.2)
    out = simclr_augmentation(cfg, SIZE)(x)
    gray = ((out[:, 0] - out[:, 1]).abs().amax((1, 2)) < 1e-6).float().mean()
    assert abs(gray - 0.2) < 0.04
