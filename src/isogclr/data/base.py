"""In-memory image datasets that return each sample's dataset index, and the registries of them by name
(:data:`DATASETS`, :data:`STREAMS`, derived from the declarations :data:`isogclr.dataset_specs.SPECS`).

Per-sample state (s_i, u_i, tau_i) is indexed by the position of a sample in the
training split, so every dataset returns ``(image, label, index)``; a subset (such as
a long-tailed one) keeps ``source_index``, its positions in the full split.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..dataset_specs import SPECS, source
from ..import_table import Registry


@dataclass(frozen=True)
class StreamConfig:
    """``train.stream`` in params.yaml: stream the datasets that have a stream loader (:data:`STREAMS`) at
    ``image_size`` pixels instead of holding them in memory; the small sets stay in memory whatever this says.
    A run with a stream imports :mod:`isogclr.data.streaming` by name (an in-memory run never does)."""

    image_size: int = 224  # RandomResizedCrop size of the training views; the evaluation view's centre crop
    num_workers: int = 8  # decoding processes per training process
    prefetch_factor: int = 4
    pin_memory: bool = True  # used on GPU only
    eval_batch_size: int = 256

    def __post_init__(self) -> None:
        if self.image_size < 8 or self.num_workers < 0 or self.prefetch_factor < 1 or self.eval_batch_size < 1:
            raise ValueError(f"need image_size >= 8, num_workers >= 0, prefetch_factor >= 1, eval_batch_size >= 1, "
                             f"got {self}")


@dataclass
class ImageData:
    """A split held in memory: uint8 images (N, 3, H, W), labels and metadata per sample."""

    images: torch.Tensor
    labels: torch.Tensor
    class_names: list[str]
    source_index: torch.Tensor
    superclass: torch.Tensor | None = None
    superclass_names: list[str] | None = None
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.images)
        if self.images.dtype != torch.uint8 or self.images.dim() != 4 or self.images.shape[1] not in (1, 3):
            raise ValueError(f"images must be uint8 (N, C, H, W) with C in (1, 3), got {self.images.dtype} "
                             f"{tuple(self.images.shape)}")
        if len(self.labels) != n or len(self.source_index) != n:
            raise ValueError("images, labels and source_index must have the same length")

    def __len__(self) -> int:
        return len(self.images)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def subset(self, positions: Sequence[int] | np.ndarray | torch.Tensor) -> ImageData:
        idx = torch.as_tensor(np.asarray(positions), dtype=torch.long)
        return ImageData(
            images=self.images[idx], labels=self.labels[idx], class_names=self.class_names,
            source_index=self.source_index[idx],
            superclass=None if self.superclass is None else self.superclass[idx],
            superclass_names=self.superclass_names,
            extra={k: v[idx.numpy()] for k, v in self.extra.items()},
        )


class IndexedImageDataset(Dataset):
    """``dataset[i] -> (image uint8 (C, H, W), label, i)``; batched access through ``__getitems__``."""

    def __init__(self, data: ImageData) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        return self.data.images[i], int(self.data.labels[i]), i

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return self.data.images[idx], self.data.labels[idx], idx


def long_tailed_positions(labels: np.ndarray, imbalance_ratio: float = 100.0,
                          order: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Exponential profile of Cao et al. (2019): the class of rank r keeps int(n_max * (1/ratio)^(r/(C-1))) samples.

    ``order`` lists the class ids from head (rank 0) to tail (ids absent from ``labels`` are skipped); by default
    the classes in id order (class 0 is the head), as Cao et al. Within a class the first samples in split order
    are kept, so the subset is deterministic and nested across ratios.
    """
    labels = np.asarray(labels)
    classes = np.unique(labels)
    ranked = classes if order is None else np.asarray([c for c in order if c in set(classes.tolist())])
    if sorted(ranked.tolist()) != classes.tolist():
        raise ValueError(f"order must list each class of the labels once, got {ranked.tolist()} for classes "
                         f"{classes.tolist()}")
    n_max = int(np.bincount(labels).max())
    keep = []
    for rank, c in enumerate(ranked):
        n_c = int(n_max * (1.0 / imbalance_ratio) ** (rank / max(len(classes) - 1, 1)))
        keep.append(np.flatnonzero(labels == c)[:n_c])
    return np.sort(np.concatenate(keep))


def long_tailed_order(num_classes: int, seed: int | None) -> np.ndarray:
    """The class ids from head to tail of a long-tailed set: id order for ``seed`` None (``data.long_tailed_order:
    fixed``), else a permutation drawn from ``seed`` alone (``by_seed``: the runs of one seed share it, whatever
    their method, so a comparison stays paired; over seeds every class is frequent in some and rare in others,
    which unties a class's difficulty from its frequency)."""
    if seed is None:
        return np.arange(num_classes)
    return np.random.default_rng([seed, num_classes]).permutation(num_classes)


Loader = Callable[[Path, str], ImageData]

# Derived from the declarations of the datasets (isogclr.dataset_specs.SPECS), where a dataset is added.
# name -> the loader of its data ``(root, split) -> ImageData`` (a long-tailed set's: its balanced set's, which
# :func:`load_dataset` subsets); ``DATASETS[name]`` imports the loader's module and no other, so a run imports the
# code of its own dataset only, and the pipeline (:mod:`isogclr.pipeline`) makes a run's stage depend on that module
# (``DATASETS.module_of(name)``) and no other dataset's
DATASETS = Registry("dataset", {name: source(name).loader for name in SPECS})

# the datasets too large for memory that stream at ``train.stream.image_size`` (:class:`StreamConfig`): name -> its
# stream loader ``(root, split, transform, views) -> StreamingImages``; checking ``train.stream`` imports none
STREAMS = Registry("stream", {name: spec.stream for name, spec in SPECS.items() if spec.stream})


def load_dataset(name: str, root: Path | str, split: str, order_seed: int | None = None) -> ImageData:
    """Load split ``"train"``, ``"test"`` or ``"val"`` (the generated sets' validation split, when generated) of the
    dataset declared as ``name`` from ``root``: its loader's split, and for a long-tailed set the
    :func:`long_tailed_positions` of its balanced set's training split (its test and validation splits are the
    balanced set's), its classes ranked by :func:`long_tailed_order` (``order_seed``: None for id order, else the
    run's seed)."""
    DATASETS.target(name)  # KeyError listing the known ones
    spec = SPECS[name]
    if split not in ("train", "test", "val"):
        raise ValueError(f"split must be 'train', 'test' or 'val', got {split!r}")
    data = DATASETS[name](Path(root), split)
    if spec.balanced is not None and split == "train":
        order = None if order_seed is None else long_tailed_order(data.num_classes, order_seed)
        data = data.subset(long_tailed_positions(data.labels.numpy(), spec.imbalance_ratio, order))
    return data
