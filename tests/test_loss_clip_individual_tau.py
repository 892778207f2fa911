"""CLIP with per-sample learnable temperatures (iSogCLR appendix C.3) against a float64 reference."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.clip import CLIPLoss
from isogclr.losses.clip_individual_tau import CLIPIndividualTauLoss

B, D, N = 6, 5, 11


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    text = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return image, text


def ref_loss(image, text, tau_image, tau_text):
    b = len(image)
    total = 0.0
    for i in range(b):
        ti, tt = tau_image[i], tau_text[i]
        to_text = sum(torch.exp(image[i] @ text[j] / ti) for j in range(b))
        to_image = sum(torch.exp(image[j] @ text[i] / tt) for j in range(b))
        total = total - torch.log(torch.exp(image[i] @ text[i] / ti) / to_text)
        total = total - torch.log(torch.exp(image[i] @ text[i] / tt) / to_image)
    return total / (2 * b)


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


def make(index_values=None):
    loss_fn = CLIPIndividualTauLoss(N, tau_init=0.05, tau_min=None).double()
    with torch.no_grad():
        loss_fn.log_tau_image.copy_(torch.linspace(-3.5, -1.0, N, dtype=torch.float64))
        loss_fn.log_tau_text.copy_(torch.linspace(-1.2, -4.0, N, dtype=torch.float64))
    return loss_fn


def test_matches_reference_and_gradient_reaches_only_the_batch_temperatures():
    image, text = features()
    loss_fn = make()
    index = torch.tensor([7, 0, 3, 10, 4, 1])
    loss = loss_fn(image, text, index)
    log_ti = loss_fn.log_tau_image.detach().clone().requires_grad_()
    log_tt = loss_fn.log_tau_text.detach().clone().requires_grad_()
    ref = ref_loss(image, text, log_ti[index].exp(), log_tt[index].exp())
    torch.testing.assert_close(loss, ref)
    got = grads(loss, image, text, loss_fn.log_tau_image, loss_fn.log_tau_text)
    assert_close(got, grads(ref, image, text, log_ti, log_tt))
    untouched = torch.ones(N, dtype=torch.bool)
    untouched[index] = False
    assert (got[2][untouched] == 0).all() and (got[2][index] != 0).all()


def test_equal_temperatures_give_clip():
    image, text = features(1)
    loss_fn = CLIPIndividualTauLoss(N, tau_init=0.1).double()
    loss = loss_fn(image, text, torch.arange(B))
    clip = CLIPLoss(tau=loss_fn.tau_image[0].item())(image, text)  # the same (float32-rounded) temperature
    torch.testing.assert_close(loss, clip)
    assert_close(grads(loss, image, text), grads(clip, image, text))


@pytest.mark.parametrize("noise", [0.3, 3.0])
def test_temperature_gradient_sign_follows_the_hardest_negative(noise):
    """Gradient descent raises tau_i exactly for anchors with a negative more similar than the
    positive (some h > 0, the upward drift reported in the appendix), lowers it otherwise."""
    g = torch.Generator().manual_seed(2)
    image = F.normalize(torch.randn(B, D, generator=g, dtype=torch.float64), dim=1)
    text = F.normalize(image + noise * torch.randn(B, D, generator=g, dtype=torch.float64), dim=1)
    sim = image @ text.T
    hardest = {
        "image": (sim - sim.diagonal()[:, None]).fill_diagonal_(-9).max(1).values,
        "text": (sim.T - sim.diagonal()[:, None]).fill_diagonal_(-9).max(1).values,
    }
    loss_fn = CLIPIndividualTauLoss(B, tau_init=0.05, positive_in_denominator=False).double()
    loss_fn(image, text, torch.arange(B)).backward()
    for name, grad in (("image", loss_fn.log_tau_image.grad), ("text", loss_fn.log_tau_text.grad)):
        assert torch.equal(grad < 0, hardest[name] > 0), name
    assert (hardest["image"] > 0).any() == (noise > 1)  # the noisy pairs have hard negatives


def test_clamp_and_state_round_trip():
    loss_fn = CLIPIndividualTauLoss(N, tau_init=0.001)  # below the default tau_min = 0.005
    image, text = (z.detach().float() for z in features(3))
    loss_fn(image, text, torch.arange(B)).backward()
    assert (loss_fn.log_tau_image.grad == 0).all()  # clamped: no gradient
    assert torch.allclose(loss_fn.tau_image, torch.full((N,), 0.005))
    buffer = io.BytesIO()
    torch.save(loss_fn.state_dict(), buffer)
    buffer.seek(0)
    restored = CLIPIndividualTauLoss(N)
    restored.load_state_dict(torch.load(buffer))
    assert torch.equal(restored.log_tau_text, loss_fn.log_tau_text)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tau_0005_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    image, text = z.clone().requires_grad_(), (sign * z).requires_grad_()
    loss_fn = CLIPIndividualTauLoss(N, tau_init=0.005)
    loss = loss_fn(image, text, torch.arange(B))
    assert torch.isfinite(loss)
    assert all(torch.isfinite(g).all() for g in grads(loss, image, text, loss_fn.log_tau_image))


def test_bf16_autocast_matches_float32():
    image, text = (z.detach().float() for z in features(4, b=16, d=8))
    results = []
    for enabled in (False, True):
        a, b = image.clone().requires_grad_(), text.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = CLIPIndividualTauLoss(16, tau_init=0.005)(a, b, torch.arange(16))
        results.append((loss.detach(), *grads(loss, a, b)))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["clip_individual_tau"] is CLIPIndividualTauLoss
    loss_fn = build_loss("clip_individual_tau", 10)
    assert loss_fn.log_tau_image.shape == (10,) and abs(loss_fn.tau_text[0].item() - 0.01) < 1e-8
    with pytest.raises(ValueError, match="repeated"):
        loss_fn(*features(), torch.tensor([0, 0, 1, 2, 3, 4]))
    with pytest.raises(ValueError, match="tau_init"):
        CLIPIndividualTauLoss(10, tau_init=0.0)
