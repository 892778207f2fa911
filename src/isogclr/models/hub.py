"""Where pretrained weights come from, and what to do when they are not on this machine.

Pretrained weights are read from the Hugging Face cache (timm's ImageNet ResNets, DistilBERT); nothing is
downloaded at run time (``HF_HUB_OFFLINE=1``). When a file is missing, :func:`missing_weights` builds the
error that names the repository, the files to place and the folder they go in.
"""

from __future__ import annotations

import os
from pathlib import Path


def hub_cache() -> Path:
    """The Hugging Face hub cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def missing_weights(what: str, repo_id: str, files: tuple[str, ...], key: str) -> RuntimeError:
    """The error for pretrained weights that are not in the cache: what to place, where, and the knob."""
    folder = hub_cache() / f"models--{repo_id.replace('/', '--')}"
    return RuntimeError(
        f"{what}: the pretrained weights of {repo_id!r} are not in the Hugging Face cache and the hub is offline "
        f"(HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', 'unset')}). Place {', '.join(files)} of {repo_id!r} "
        f"under {folder} (on a machine with network: `huggingface-cli download {repo_id}`, then copy "
        f"{folder} here), or set {key}: false|null to train from scratch")
