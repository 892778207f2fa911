"""Projection heads: MLPs with BatchNorm and ReLU between linear layers."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class HeadConfig:
    """``model.head`` in params.yaml.

    The iSogCLR unimodal runs use VICReg's head (3 layers of 8192 units); SogCLR uses 2 layers
    with 128-d output; bimodal runs use a single linear layer to 256-d.
    """

    layers: int = 3
    hidden_dim: int = 8192
    out_dim: int = 8192

    def __post_init__(self) -> None:
        if self.layers < 1 or self.hidden_dim < 1 or self.out_dim < 1:
            raise ValueError(f"model.head needs layers, hidden_dim, out_dim >= 1, got {self}")


def build_head(in_dim: int, cfg: HeadConfig) -> nn.Sequential:
    """Linear -> BN -> ReLU repeated ``layers - 1`` times, then a final Linear (no bias after BN)."""
    blocks: list[nn.Module] = []
    dim = in_dim
    for _ in range(cfg.layers - 1):
        blocks += [nn.Linear(dim, cfg.hidden_dim, bias=False), nn.BatchNorm1d(cfg.hidden_dim), nn.ReLU(inplace=True)]
        dim = cfg.hidden_dim
    blocks.append(nn.Linear(dim, cfg.out_dim))
    return nn.Sequential(*blocks)
