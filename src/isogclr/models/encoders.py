"""Image encoders from timm, with the CIFAR stem and a width setting for small-scale runs."""

from __future__ import annotations

from dataclasses import dataclass

import timm
from torch import nn


@dataclass(frozen=True)
class EncoderConfig:
    """``model.encoder`` in params.yaml."""

    arch: str = "resnet18"
    width: int = 64  # channels of the first stage; 64 is the standard ResNet
    cifar_stem: bool = True  # 3x3 conv, stride 1, no max-pool (for 32x32 inputs)
    pretrained: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ("resnet18", "resnet34", "resnet50"):
            raise ValueError(f"model.encoder.arch must be resnet18, resnet34 or resnet50, got {self.arch!r}")
        if self.width < 4 or self.width % 2:
            raise ValueError(f"model.encoder.width must be an even number >= 4, got {self.width}")


def build_encoder(cfg: EncoderConfig) -> nn.Module:
    """A timm ResNet without classifier (``num_features`` output dims after global pooling).

    With ``cifar_stem`` the stem is one 3x3 convolution of ``width`` channels, stride 1, and
    no max-pool, as in the CIFAR experiments of both papers.
    """
    w = cfg.width
    kwargs = {"num_classes": 0, "channels": (w, 2 * w, 4 * w, 8 * w)}
    if cfg.cifar_stem:  # a deep stem makes timm size the first stage from stem_width; we then replace it
        kwargs.update(stem_type="deep", stem_width=w // 2)
    elif w != 64:
        raise ValueError("model.encoder.width other than 64 needs cifar_stem: true (timm's 7x7 stem has 64 channels)")
    if cfg.pretrained:
        if w != 64 or cfg.cifar_stem:
            raise ValueError("model.encoder.pretrained needs width 64 and cifar_stem: false (ImageNet weights)")
        try:
            return timm.create_model(cfg.arch, pretrained=True, num_classes=0)
        except Exception as err:  # noqa: BLE001  (no network / no cached weights)
            raise RuntimeError(f"ImageNet weights for timm model {cfg.arch!r} are not available offline "
                               f"(HF_HUB_OFFLINE={__import__('os').environ.get('HF_HUB_OFFLINE')}); put them in "
                               f"the Hugging Face cache or set model.encoder.pretrained: false") from err
    model = timm.create_model(cfg.arch, pretrained=False, **kwargs)
    if cfg.cifar_stem:
        model.conv1 = nn.Conv2d(3, w, kernel_size=3, stride=1, padding=1, bias=False)
        model.bn1 = nn.BatchNorm2d(w)
        model.maxpool = nn.Identity()
    return model
