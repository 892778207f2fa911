"""Evaluation protocols: linear probe on frozen features."""

from .linear_probe import ProbeConfig, extract_features, linear_probe

__all__ = ["ProbeConfig", "extract_features", "linear_probe"]
