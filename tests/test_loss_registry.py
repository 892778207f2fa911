"""The registry knows each loss's modality; every loss declares expects_normalized in its class."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from isogclr.losses import BIMODAL_LOSSES, LOSSES, MODALITY, UNIMODAL_LOSSES, build_loss, losses_of, register_loss
from isogclr.losses.registry import ModalityT


def test_every_loss_has_a_modality_and_the_lists_are_derived():
    assert set(MODALITY) == set(LOSSES)
    assert UNIMODAL_LOSSES == losses_of("unimodal") and BIMODAL_LOSSES == losses_of("bimodal")
    assert set(UNIMODAL_LOSSES) | set(BIMODAL_LOSSES) == set(LOSSES)
    assert not set(UNIMODAL_LOSSES) & set(BIMODAL_LOSSES)
    assert {"sogclr_bimodal", "isogclr_bimodal", "clip", "cyclip", "clip_individual_tau"} == set(BIMODAL_LOSSES)
    for name, cls in LOSSES.items():
        assert cls.modality == MODALITY[name] and cls.registry_name == name


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_expects_normalized_is_declared_in_the_class(name):
    cls = LOSSES[name]
    assert isinstance(cls.expects_normalized, bool)
    assert any("expects_normalized" in vars(c) for c in cls.__mro__ if c is not nn.Module)
    assert cls.expects_normalized is (name not in ("barlow_twins", "vicreg"))


@pytest.mark.parametrize("name", sorted(UNIMODAL_LOSSES))
def test_unimodal_losses_take_two_views(name):
    """Each registered unimodal loss runs on (z1, z2, index), the call the unimodal trainer makes."""
    if name == "tau_simclr":
        pytest.skip("needs the encoder's extra outputs e1, e2 (tested in test_loss_tau_simclr.py)")
    loss_fn = build_loss(name, 16, **({"dim": 8} if name == "negcache" else {}))
    z1, z2 = (torch.nn.functional.normalize(torch.randn(4, 8), dim=1) for _ in range(2))
    assert torch.isfinite(loss_fn(z1, z2, torch.arange(4)))


def test_bad_modality_and_missing_attribute_are_errors():
    bad: ModalityT = "trimodal"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="modality of loss 'x' must be 'unimodal' or 'bimodal', got 'trimodal'"):
        register_loss("x", bad)
    with pytest.raises(ValueError, match="modality must be 'unimodal' or 'bimodal'"):
        losses_of(bad)

    class NoAttribute(nn.Module):
        pass

    with pytest.raises(TypeError, match="NoAttribute must declare the class attribute expects_normalized"):
        register_loss("no_attribute", "unimodal")(NoAttribute)
    assert "no_attribute" not in LOSSES
