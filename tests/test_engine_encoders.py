"""The CIFAR-stem encoders load by name through timm (``isogclr_<arch>_cifar``), from an exported state_dict."""

from __future__ import annotations

import pytest
import timm
import torch

from isogclr.models import EncoderConfig, build_encoder, timm_name


@pytest.mark.parametrize(("arch", "width"), [("resnet18", 16), ("resnet50", 8)])
def test_exported_encoder_loads_by_timm_name(tmp_path, arch, width):
    """build_encoder -> state_dict on disk -> timm.create_model(name, width, checkpoint_path): same outputs."""
    cfg = EncoderConfig(arch=arch, width=width, cifar_stem=True)
    torch.manual_seed(0)
    encoder = build_encoder(cfg).eval()
    path = tmp_path / "encoder.pt"
    torch.save(encoder.state_dict(), path)
    assert timm_name(cfg) == f"isogclr_{arch}_cifar" and timm.is_model(timm_name(cfg))
    torch.manual_seed(1)  # a different initialisation: the outputs must come from the checkpoint
    loaded = timm.create_model(timm_name(cfg), width=width, num_classes=0, checkpoint_path=str(path)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), encoder(x), rtol=0, atol=0)
    assert loaded.num_features == encoder.num_features


def test_timm_names_build_what_build_encoder_builds():
    """One code path: the same modules and parameter shapes, and timm's kwargs (num_classes) pass through."""
    ours = build_encoder(EncoderConfig(arch="resnet18", width=8))
    by_name = timm.create_model("isogclr_resnet18_cifar", width=8, num_classes=0)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in by_name.state_dict().items()}
    assert timm.create_model("isogclr_resnet18_cifar", width=8, num_classes=10)(torch.randn(1, 3, 16, 16)).shape \
        == (1, 10)
    assert timm_name(EncoderConfig(width=64, cifar_stem=False)) == "resnet18"


def test_timm_names_reject_pretrained_and_bad_width():
    with pytest.raises(ValueError, match="no pretrained weights"):
        timm.create_model("isogclr_resnet18_cifar", pretrained=True)
    with pytest.raises(ValueError, match="model.encoder.width"):
        timm.create_model("isogclr_resnet18_cifar", width=5)
