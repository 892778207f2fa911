"""Encoders (timm ResNets) and projection heads.

Importing this package registers the CIFAR-stem encoders in timm as ``isogclr_resnet18_cifar``,
``isogclr_resnet34_cifar`` and ``isogclr_resnet50_cifar`` (see :mod:`isogclr.models.encoders`).
"""

from __future__ import annotations

import torch
from torch import nn

from .encoders import EncoderConfig, build_encoder, timm_name
from .heads import HeadConfig, build_head


class ContrastiveModel(nn.Module):
    """Encoder + projection head; ``forward`` returns (backbone features, projections)."""

    def __init__(self, encoder_cfg: EncoderConfig, head_cfg: HeadConfig) -> None:
        super().__init__()
        self.encoder = build_encoder(encoder_cfg)
        self.head = build_head(self.encoder.num_features, head_cfg)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        return h, self.head(h)


__all__ = ["ContrastiveModel", "EncoderConfig", "HeadConfig", "build_encoder", "build_head", "timm_name"]
