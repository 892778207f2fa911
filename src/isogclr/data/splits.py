"""A validation split carved out of a training split, for hyperparameter selection.

The papers select hyperparameters on held-out data; the test split is read once, by the reported runs.
:func:`validation_split` takes, in every class, ``round(fraction * n_c)`` samples (at least one when the
class has two or more) as validation and leaves the rest for training. The choice depends only on the
labels and ``seed`` (not on the run's seed), so every method and candidate sees the same split.

For image-text pairs, :func:`holdout_pairs` holds out whole images (stratified by their semantic cluster when
the folder has one, so no validation image is ever seen in training) with all their captions, as a retrieval
set named ``validation``; the folder's own retrieval and zero-shot sets (its test sets) are dropped. It builds
its results with the types of its arguments (``type(data)(...)``), so this module imports no image-text
module: a unimodal run, which imports it for :func:`validation_split`, does not depend on the caption code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from .base import ImageData

if TYPE_CHECKING:  # annotations only: a unimodal run imports no image-text module (nor depends on one)
    from .captions import CaptionData
    from .pairs_folder import PairsFolder


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


def _pairs_of(data: CaptionData, images: np.ndarray) -> CaptionData:
    """The captions of ``images`` (sorted positions into ``data.images``), re-indexed to the kept images."""
    new_position = torch.full((len(data.images),), -1, dtype=torch.int64)
    new_position[torch.from_numpy(images)] = torch.arange(len(images))
    kept = torch.nonzero(new_position[data.image_index] >= 0).flatten()
    return type(data)(data.images[torch.from_numpy(images)], [data.captions[i] for i in kept.tolist()],
                      new_position[data.image_index[kept]], [data.image_ids[i] for i in images.tolist()])


def holdout_pairs(data: PairsFolder, fraction: float, seed: int = 0) -> PairsFolder:
    """``data`` with ``fraction`` of its training images (and their captions) moved to a retrieval set
    ``validation``; the other evaluation sets removed. Stratified by ``cluster`` of the training meta when
    every image has one (generated pairs), else a plain seeded draw."""
    meta = data.train_meta
    clusters = [m.get("cluster", "-1") for m in meta]
    labels = np.array([int(c) for c in clusters]) if meta and "-1" not in clusters else np.zeros(len(data.train.images))
    train, val = validation_positions(labels, fraction, seed)
    return type(data)(_pairs_of(data.train, train), [meta[i] for i in train.tolist()] if meta else [],
                      {"validation": _pairs_of(data.train, val)}, {})
