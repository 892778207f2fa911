"""The batched SimCLR augmentation (isogclr.data.augment) against its contract and torchvision's recipe."""

from __future__ import annotations

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from isogclr.data import keyed
from isogclr.data.augment import (
    CROP_DRAWS,
    CROP_FLIP_DRAWS,
    SIMCLR_DRAWS,
    AugmentConfig,
    crop_boxes,
    crop_flip_augmentation,
    eval_transform,
    grid_crop,
    simclr_augmentation,
    to_float,
)

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
    x = torch.rand(5, 3, 32, 32)
    left, top = torch.tensor([0.0, 3, 10, 0, 5]), torch.tensor([0.0, 2, 7, 20, 5])
    width, height = torch.tensor([32.0, 10, 22, 5, 1]), torch.tensor([32.0, 12, 25, 12, 3])
    flip = torch.tensor([False, True, False, True, False])
    out = grid_crop(x, 32, left, top, width, height, flip)
    for i in range(5):
        ref = TF.resized_crop(x[i], int(top[i]), int(left[i]), int(height[i]), int(width[i]), [32, 32])
        ref = TF.horizontal_flip(ref) if flip[i] else ref
        torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=0)


def test_jitter_is_torchvision_colorjitter_with_a_per_image_order():
    augment = simclr_augmentation(AugmentConfig(), SIZE)
    torch.manual_seed(0)
    x = to_float(_images(64))
    factors, order = augment.jitter_params(torch.rand(64, 8))
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


@pytest.mark.parametrize(("height", "width", "scale"),
                         [(32, 32, (0.08, 1.0)), (24, 40, (0.5, 1.0)), (40, 12, (0.2, 1.0))])
def test_crop_boxes_follow_torchvision_get_params(height, width, scale):
    """The vectorised sampler against torchvision's ``RandomResizedCrop.get_params``: the same distribution of
    box sizes and positions (4,000 boxes each; quantiles within sampling error), every box inside the image."""
    from torchvision.transforms import RandomResizedCrop

    n = 4000
    left, top, w, h = crop_boxes(keyed.uniforms(0, 0, range(n), 0, CROP_DRAWS), height, width, scale)
    assert (left >= 0).all() and (top >= 0).all() and (left + w <= width).all() and (top + h <= height).all()
    assert (w >= 1).all() and (h >= 1).all() and torch.equal(w, w.round()) and torch.equal(left, left.round())
    torch.manual_seed(0)
    ref = torch.tensor([RandomResizedCrop.get_params(torch.empty(1, height, width), list(scale), [3 / 4, 4 / 3])
                        for _ in range(n)], dtype=torch.float32)  # (top, left, h, w)
    q = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9])
    for ours, theirs, extent in ((w, ref[:, 3], width), (h, ref[:, 2], height), (top, ref[:, 0], height),
                                 (left, ref[:, 1], width)):
        assert (ours.quantile(q) - theirs.quantile(q)).abs().max() <= max(2.0, 0.08 * extent)
        assert abs(ours.mean() - theirs.mean()) < 0.04 * extent


def test_crop_boxes_fall_back_to_the_centre_crop():
    """No try fits (all draws at the largest area and the most extreme ratio): the centre crop of the clamped ratio."""
    u = torch.zeros(1, CROP_DRAWS)
    u[:, 10:20] = 0.999  # the whole area at ratio ~4/3: too wide for a 40 x 12 image, every try fails
    left, top, w, h = crop_boxes(u, 40, 12, (1.0, 1.0))
    # torchvision: the image's ratio 12/40 < 3/4, so the full width and height round(12 / (3/4)) = 16, centred
    assert (int(left), int(top), int(w), int(h)) == (0, (40 - 16) // 2, 12, 16)


def test_a_view_depends_on_its_key_not_on_its_batch():
    """The trainers' convention: an image's view is a function of (seed, epoch, index, view) only, so the same
    image augmented in another batch (another process's share, a resumed epoch) comes out the same."""
    images = to_float(_images(16))
    augment = simclr_augmentation(AugmentConfig(blur_p=0.5), SIZE)
    index = torch.arange(100, 116)
    whole = augment(images, keyed.uniforms(7, 3, index, 0, SIMCLR_DRAWS))
    part = augment(images[5:9], keyed.uniforms(7, 3, index[5:9], 0, SIMCLR_DRAWS))
    assert torch.equal(whole[5:9], part)
    for other in (keyed.uniforms(7, 4, index, 0, SIMCLR_DRAWS), keyed.uniforms(7, 3, index, 1, SIMCLR_DRAWS),
                  keyed.uniforms(8, 3, index, 0, SIMCLR_DRAWS)):  # another epoch, view or seed: other views
        assert (augment(images, other) - whole).flatten(1).abs().amax(1).min() > 1e-3
    with pytest.raises(ValueError, match="need \\(16, 35\\)"):
        augment(images, torch.rand(16, 3))


def test_crop_flip_is_the_crop_and_flip_of_simclr_then_the_encoder_normalisation():
    images = to_float(_images(8))
    u = keyed.uniforms(0, 1, range(8), 0, CROP_FLIP_DRAWS)
    out = crop_flip_augmentation(SIZE, 0.5, 0.5, (0.4, 0.5, 0.6), (0.2, 0.25, 0.3))(images, u)
    ref = grid_crop(images, SIZE, *crop_boxes(u[:, :CROP_DRAWS], SIZE, SIZE, (0.5, 1.0)), u[:, CROP_DRAWS] < 0.5)
    mean, std = torch.tensor([0.4, 0.5, 0.6]).view(1, 3, 1, 1), torch.tensor([0.2, 0.25, 0.3]).view(1, 3, 1, 1)
    torch.testing.assert_close(out, (ref - mean) / std)
    assert not torch.equal(ref, images)
