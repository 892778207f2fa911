"""Image encoders from timm, with the CIFAR stem and a width setting for small-scale runs.

The CIFAR-stem encoders are also registered in timm's model registry (on import of
:mod:`isogclr.models`), so an exported run loads without this project's config code::

    import timm
    import isogclr.models  # registers isogclr_resnet{18,34,50}_cifar

    encoder = timm.create_model("isogclr_resnet18_cifar", width=16, num_classes=0,
                                checkpoint_path="runs/<run>/artifacts/encoder.pt")

``width`` is ``model.encoder.width`` of the run; the run's ``artifacts/config.json`` holds it
and the model name (``encoder.width``, ``encoder.timm_name``). An encoder trained with
``cifar_stem: false`` is timm's own ``resnet18``/``resnet34``/``resnet50`` (width 64), loaded the
same way by that name without ``width``. The registered names have no pretrained weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import timm
from timm.models import register_model
from torch import nn

from .hub import missing_weights

ARCHS = ("resnet10", "resnet18", "resnet34", "resnet50")
# resnet10: ResNet-18 with one basic block per stage instead of two (the mini profile's shallow, wider encoder)
_LAYERS = {"resnet10": (1, 1, 1, 1)}


@dataclass(frozen=True)
class EncoderConfig:
    """``model.encoder`` in params.yaml."""

    arch: str = "resnet18"
    width: int = 64  # channels of the first stage; 64 is the standard ResNet
    cifar_stem: bool = True  # 3x3 conv, stride 1, no max-pool (for 32x32 inputs)
    pretrained: bool = False
    # a state_dict file (an encoder.pt a run wrote, e.g. runs/<run>/local/encoder.pt) to start from instead of a
    # random initialization: the pipeline's own pre-training of the image-text runs' image encoder
    init: str | None = None

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"model.encoder.arch must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.width < 4 or self.width % 2:
            raise ValueError(f"model.encoder.width must be an even number >= 4, got {self.width}")


def timm_name(cfg: EncoderConfig) -> str:
    """The timm model name that rebuilds this encoder (pass ``width=cfg.width`` for the CIFAR-stem names)."""
    return f"isogclr_{cfg.arch}_cifar" if cfg.cifar_stem else cfg.arch


def build_encoder(cfg: EncoderConfig, **timm_kwargs: Any) -> nn.Module:
    """A timm ResNet without classifier (``num_features`` output dims after global pooling).

    With ``cifar_stem`` the stem is one 3x3 convolution of ``width`` channels, stride 1, and
    no max-pool, as in the CIFAR experiments of both papers. ``timm_kwargs`` go to
    ``timm.create_model`` (the registered timm entrypoints pass theirs, e.g. ``num_classes``,
    ``drop_rate``); training uses none, so the encoder has no classifier.
    """
    w = cfg.width
    kwargs: dict[str, Any] = {"num_classes": 0, "channels": (w, 2 * w, 4 * w, 8 * w), **timm_kwargs}
    if cfg.cifar_stem:  # a deep stem makes timm size the first stage from stem_width; we then replace it
        kwargs.update(stem_type="deep", stem_width=w // 2)
    elif w != 64:
        raise ValueError("model.encoder.width other than 64 needs cifar_stem: true (timm's 7x7 stem has 64 channels)")
    if cfg.pretrained:
        if w != 64 or cfg.cifar_stem:
            raise ValueError("model.encoder.pretrained needs width 64 and cifar_stem: false (ImageNet weights)")
        try:
            return timm.create_model(cfg.arch, pretrained=True, **{"num_classes": 0, **timm_kwargs})
        except Exception as err:  # noqa: BLE001  (no network / no cached weights)
            repo = getattr(timm.models.get_pretrained_cfg(cfg.arch), "hf_hub_id", None) or f"timm/{cfg.arch}"
            raise missing_weights(f"model.encoder ({cfg.arch})", repo, ("model.safetensors", "config.json"),
                                  "model.encoder.pretrained") from err
    if cfg.arch in _LAYERS:
        kwargs["layers"] = _LAYERS[cfg.arch]
    model = timm.create_model("resnet18" if cfg.arch in _LAYERS else cfg.arch, pretrained=False, **kwargs)
    if cfg.cifar_stem:
        model.conv1 = nn.Conv2d(3, w, kernel_size=3, stride=1, padding=1, bias=False)
        model.bn1 = nn.BatchNorm2d(w)
        model.maxpool = nn.Identity()
    if cfg.init is not None:
        _load_init(model, cfg.init)
    return model


def _load_init(model: nn.Module, path: str) -> None:
    """Load the encoder weights ``path`` (a state_dict of the same architecture) into ``model``, strictly."""
    from ..io import load_torch

    if not Path(path).is_file():
        raise FileNotFoundError(f"model.encoder.init: {path} not found (the run that writes it, e.g. the "
                                f"image encoder's pre-training stage, has not run)")
    state = load_torch(path, "encoder (model.encoder.init, bimodal.image_encoder.init)",
                       "rerun the stage that writes it (the image encoder's pre-training, `dvc repro --force "
                       "pipelines/train_pretrain/dvc.yaml`, or the run that exported it)")
    try:
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    except RuntimeError as err:
        raise ValueError(f"model.encoder.init: {path} does not fit the configured encoder (arch, width, "
                         f"cifar_stem): {err}") from err


def _cifar_entrypoint(arch: str, pretrained: bool, width: int, kwargs: dict[str, Any]) -> nn.Module:
    """What the registered ``isogclr_<arch>_cifar`` names build: :func:`build_encoder` with the CIFAR stem.

    timm's factory passes ``pretrained_cfg``, ``pretrained_cfg_overlay`` and ``cache_dir`` (possibly
    ``None``) with the caller's kwargs; they are forwarded to the underlying timm ResNet.
    """
    if pretrained:
        raise ValueError(f"isogclr_{arch}_cifar has no pretrained weights; load a run's encoder.pt with "
                         f"checkpoint_path=... instead")
    return build_encoder(EncoderConfig(arch=arch, width=width, cifar_stem=True), **kwargs)


@register_model
def isogclr_resnet10_cifar(pretrained: bool = False, width: int = 64, **kwargs: Any) -> nn.Module:
    """ResNet-10 (one basic block per stage) with the CIFAR stem and first-stage width ``width``
    (``model.encoder.arch: resnet10``)."""
    return _cifar_entrypoint("resnet10", pretrained, width, kwargs)


@register_model
def isogclr_resnet18_cifar(pretrained: bool = False, width: int = 64, **kwargs: Any) -> nn.Module:
    """ResNet-18 with the CIFAR stem and first-stage width ``width`` (``model.encoder.arch: resnet18``)."""
    return _cifar_entrypoint("resnet18", pretrained, width, kwargs)


@register_model
def isogclr_resnet34_cifar(pretrained: bool = False, width: int = 64, **kwargs: Any) -> nn.Module:
    """ResNet-34 with the CIFAR stem and first-stage width ``width`` (``model.encoder.arch: resnet34``)."""
    return _cifar_entrypoint("resnet34", pretrained, width, kwargs)


@register_model
def isogclr_resnet50_cifar(pretrained: bool = False, width: int = 64, **kwargs: Any) -> nn.Module:
    """ResNet-50 with the CIFAR stem and first-stage width ``width`` (``model.encoder.arch: resnet50``)."""
    return _cifar_entrypoint("resnet50", pretrained, width, kwargs)
