"""A validation split carved out of a training split, for hyperparameter selection.

The papers select hyperparameters on held-out data; the test split is read once, by the reported runs.
:func:`validation_split` takes, in every class, ``round(fraction * n_c)`` samples (at least one when the
class has two or more) as validation and leaves the rest for training. The choice depends only on the
labels and ``seed`` (not on the run's seed), so every method and candidate sees the same split.
"""

from __future__ import annotations

import numpy as np

from .base import ImageData


def validation_positions(labels: np.ndarray, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sorted positions (train part, validation part) of a stratified split of ``labels``."""
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction}")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    held = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        take = max(1, round(fraction * len(members))) if len(members) > 1 else 0
        held.append(rng.permutation(members)[:take])
    val = np.sort(np.concatenate(held)) if held else np.array([], dtype=int)
    train = np.setdiff1d(np.arange(len(labels)), val)
    return train, val


def validation_split(data: ImageData, fraction: float, seed: int = 0) -> tuple[ImageData, ImageData]:
    """(training part, validation part) of ``data``, stratified by label."""
    train, val = validation_positions(data.labels.numpy(), fraction, seed)
    return data.subset(train), data.subset(val)
