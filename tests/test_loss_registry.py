"""A loss is one module named after it and one line of its modality's table; every loss declares the interface the
trainers read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from isogclr.losses import BIMODAL_LOSSES, LOSSES, MODALITY, UNIMODAL_LOSSES, build_loss, losses_of, register_loss
from isogclr.losses.base import ContrastiveLoss
from isogclr.losses.loss_table import BIMODAL, UNIMODAL, ModalityT

from .conftest import printed_by


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
    assert any("expects_normalized" in vars(c) for c in cls.__mro__ if c not in (nn.Module, ContrastiveLoss))
    assert cls.expects_normalized is (name not in ("barlow_twins", "vicreg", "supervised"))


@pytest.mark.parametrize("name", sorted(UNIMODAL_LOSSES))
def test_unimodal_losses_take_two_views(name):
    """Each registered unimodal loss runs on (z1, z2, index), the call the unimodal trainer makes."""
    if name == "tau_simclr":
        pytest.skip("needs the encoder's extra outputs e1, e2 (tested in test_loss_tau_simclr.py)")
    if name == "supervised":
        pytest.skip("needs the labels (tested in test_references.py)")
    loss_fn = build_loss(name, 16, **({"dim": 8} if name == "negcache" else {}))
    z1, z2 = (torch.nn.functional.normalize(torch.randn(4, 8), dim=1) for _ in range(2))
    assert torch.isfinite(loss_fn(z1, z2, torch.arange(4)))


def test_bad_modality_and_missing_attribute_are_errors():
    bad: ModalityT = "trimodal"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="modality of a loss must be 'unimodal' or 'bimodal', got 'trimodal'"):
        register_loss(bad)
    with pytest.raises(ValueError, match="modality must be 'unimodal' or 'bimodal'"):
        losses_of(bad)

    class NoAttribute(ContrastiveLoss):
        pass

    with pytest.raises(TypeError, match="NoAttribute must declare the class attribute expects_normalized"):
        register_loss("unimodal")(NoAttribute)

    class NoBase(nn.Module):
        expects_normalized = True

    with pytest.raises(TypeError, match="NoBase must derive from isogclr.losses.base.ContrastiveLoss"):
        register_loss("unimodal")(NoBase)

    class OutsideThePackage(ContrastiveLoss):  # defined in this test module, not in isogclr.losses.<name>
        expects_normalized = True

    with pytest.raises(ValueError, match=r"OutsideThePackage \(tests.test_loss_registry\) is not in the table of "
                                         r"unimodal losses: .*\"test_loss_registry\": \"tests.test_loss_registry:"
                                         r"OutsideThePackage\" in UNIMODAL"):
        register_loss("unimodal")(OutsideThePackage)
    with pytest.raises(KeyError, match=r"unknown loss 'no_such_loss'; known: \['barlow_twins', "):
        build_loss("no_such_loss", 4)
    with pytest.raises(KeyError, match="unknown loss 'two_views'"):  # a helper module holds no loss
        LOSSES.module_of("two_views")


def test_the_tables_name_each_loss_by_its_module_and_modality():
    """Every line is ``"<name>": "isogclr.losses.<name>:<Class>"``, its class declares the table's modality, and
    every module of the package with a registered class has its line."""
    import isogclr.losses.loss_table as reg

    assert not set(UNIMODAL) & set(BIMODAL) and list(LOSSES) == sorted({**UNIMODAL, **BIMODAL})
    for name in LOSSES:
        assert LOSSES.module_of(name) == f"isogclr.losses.{name}" and LOSSES[name].__module__ == LOSSES.module_of(name)
    # a class registered as bimodal while its line is unimodal is refused, naming the table
    with pytest.raises(ValueError, match=r"SimCLRLoss \(isogclr.losses.simclr\) is not in the table of bimodal"):
        register_loss("bimodal")(LOSSES["simclr"])
    files = {p.stem for p in Path(reg.__file__).parent.glob("*.py")}
    assert set(LOSSES) <= files and {"base", "two_views", "loss_table", "numerics"} & set(LOSSES) == set()
    decorated = {p.stem for p in Path(reg.__file__).parent.glob("*.py") if "\n@register_loss(" in p.read_text()}
    assert decorated == set(LOSSES)


# --- the interface the trainers read (isogclr.losses.base.ContrastiveLoss), one test per registered loss ---

_KWARGS = {"negcache": {"dim": 8}}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_loss_declares_the_interface(name):
    """The trainers read expects_normalized, extra_outputs, temperatures() and step_stats() without probing."""
    cls = LOSSES[name]
    assert issubclass(cls, ContrastiveLoss) and cls.registry_name == name and cls.modality == MODALITY[name]
    assert cls.__module__ == LOSSES.module_of(name)
    assert isinstance(cls.extra_outputs, int) and cls.extra_outputs == (1 if name == "tau_simclr" else 0)
    loss = build_loss(name, 16, **_KWARGS.get(name, {}))
    taus = loss.temperatures()
    assert isinstance(taus, dict) and all(isinstance(t, torch.Tensor) for t in taus.values())
    expected = {"isogclr": {"tau"}, "clip": {"tau"}, "cyclip": {"tau"}, "isogclr_bimodal": {"tau_image", "tau_text"},
                "clip_individual_tau": {"tau_image", "tau_text"}}.get(name, set())
    assert set(taus) == expected
    for key, tau in taus.items():  # per sample (n,) or one global 0-d temperature
        assert tau.shape == ((16,) if key != "tau" or name == "isogclr" else ())
        assert bool((tau > 0).all())
    assert isinstance(loss.step_stats(), dict)


@pytest.mark.parametrize("name", ["isogclr", "isogclr_bimodal"])
def test_per_sample_temperatures_are_the_state_itself(name):
    """temperatures() returns the buffers (the state that is checkpointed), not copies."""
    loss = build_loss(name, 16)
    buffers = dict(loss.named_buffers())
    assert all(any(t is b for b in buffers.values()) for t in loss.temperatures().values())


@pytest.mark.parametrize("name", ["sogclr", "isogclr", "sogclr_bimodal", "isogclr_bimodal"])
def test_moving_average_losses_report_their_largest_weight(name):
    loss = build_loss(name, 16)
    x, y = (torch.nn.functional.normalize(torch.randn(4, 8), dim=1) for _ in range(2))
    loss(x, y, torch.arange(4))
    assert set(loss.step_stats()) == {"max_weight"} and loss.step_stats()["max_weight"] > 0


@pytest.mark.parametrize("name", ["simclr", "vicreg", "clip"])
def test_other_losses_report_no_step_statistics(name):
    assert build_loss(name, 16).step_stats() == {}


def test_importing_the_package_imports_no_loss_and_building_one_imports_its_module_only():
    """Run in a fresh interpreter: the registry imports a loss's module when the loss is built."""

    code = ("import sys; import isogclr.losses as L\n"
            "before = {m for m in sys.modules if m.startswith('isogclr.losses.')}\n"
            "L.build_loss('simclr', 4); after = {m for m in sys.modules if m.startswith('isogclr.losses.')}\n"
            "print(sorted(before)); print(sorted(after - before))")
    out = printed_by(code).split("\n")
    assert out[0] == str(["isogclr.losses.base", "isogclr.losses.loss_table", "isogclr.losses.numerics"])
    assert out[1] == str(["isogclr.losses.simclr", "isogclr.losses.two_views"])
    from isogclr.losses.cyclip import CyCLIPLoss

    assert CyCLIPLoss is LOSSES["cyclip"]
