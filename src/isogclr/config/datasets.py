"""The sections of the generated datasets (``data.synthetic``, ``data.fashion_mnist_mini``): what the data commands
generate. A training run reads the generated files, not these sections, so its code does not depend on them.
"""

from __future__ import annotations

from typing import Any

from ..data.fashion_mnist import FashionMnistMiniSpec
from ..data.synthetic import SyntheticSpec
from .typed import typed_section


def synthetic_spec(params: dict[str, Any]) -> SyntheticSpec:
    """``data.synthetic`` as a :class:`~isogclr.data.synthetic.SyntheticSpec` (errors name the key)."""
    raw = dict((params.get("data") or {}).get("synthetic") or {})
    if "per_class" in raw:
        raw["per_class"] = {int(k): tuple(v) for k, v in raw["per_class"].items()}
    return typed_section(SyntheticSpec, raw, "data.synthetic")


def fashion_mnist_mini_spec(params: dict[str, Any]) -> FashionMnistMiniSpec:
    """``data.fashion_mnist_mini`` as a :class:`~isogclr.data.fashion_mnist.FashionMnistMiniSpec`."""
    raw = dict((params.get("data") or {}).get("fashion_mnist_mini") or {})
    if "per_class" in raw:
        raw["per_class"] = tuple(raw["per_class"])
    return typed_section(FashionMnistMiniSpec, raw, "data.fashion_mnist_mini")
