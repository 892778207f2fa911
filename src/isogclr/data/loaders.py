"""The machinery of the streamed datasets: listings held as packed strings, the map-style datasets that decode one
file per sample (:class:`StreamingImages`, unimodal; :class:`StreamingPairs`, image-text), and the loaders of an epoch
(:func:`epoch_loader`: distinct indices across processes, each sample's views keyed by (seed, epoch, index)) and of an
evaluation pass (:func:`eval_loader`). What a stream is made of per dataset: :mod:`isogclr.data.streaming`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from .keyed import epoch_generator, sample_rng
from .transforms import Transform, decode_rgb


class PackedStrings:
    """Strings in one UTF-8 buffer with int64 offsets: two numpy arrays instead of a Python object per sample,
    so the listing of millions of samples costs its bytes (plus 8 per sample), and forked DataLoader workers
    share it instead of copying the pages that reference counting would touch."""

    def __init__(self, strings: Sequence[str]) -> None:
        encoded = [s.encode("utf-8") for s in strings]
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=self.offsets[1:])
        self.buffer = np.frombuffer(b"".join(encoded), dtype=np.uint8) if encoded else np.zeros(0, np.uint8)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:
        return self.buffer[self.offsets[i]:self.offsets[i + 1]].tobytes().decode("utf-8")

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes + self.offsets.nbytes


class StreamingImages(Dataset):
    """``dataset[i] -> (views uint8 (2, 3, S, S), label, i)``: file ``root / paths[i]`` decoded and augmented twice
    (``views=1``: one ``(3, S, S)`` image, the evaluation view of :func:`eval_transform`).

    An unreadable file raises ``OSError`` naming it (no silent skip: a skipped sample would leave a hole
    in the per-sample state); check a dataset once with :func:`verify_files` before a long run.
    """

    def __init__(self, root: Path | str, paths: Sequence[str], labels: Sequence[int], class_names: list[str],
                 transform: Transform, views: int = 2) -> None:
        if views not in (1, 2):
            raise ValueError(f"views must be 1 or 2, got {views}")
        if len(paths) != len(labels):
            raise ValueError(f"{len(paths)} paths but {len(labels)} labels")
        if not len(paths):
            raise FileNotFoundError(f"no images listed under {root}")
        self.root = Path(root)
        self.paths = PackedStrings(paths)
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
        self.class_names = class_names
        self.transform = transform
        self.views = views
        self.superclass = None  # the ImageData fields a run's outputs read
        self.source_index = torch.arange(len(self.paths))

    def with_transform(self, transform: Transform, views: int) -> StreamingImages:
        """The same listing with another transform (e.g. the evaluation view of the training split)."""
        other = StreamingImages.__new__(StreamingImages)
        other.__dict__.update(self.__dict__, transform=transform, views=views)
        return other

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def path(self, i: int) -> Path:
        return self.root / self.paths[i]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        path = self.path(i)
        try:
            image = decode_rgb(path)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
            raise OSError(f"sample {i}: cannot decode {path}: {err}") from err
        if self.views == 1:
            return self.transform(image), int(self.labels[i]), i
        return torch.stack([self.transform(image), self.transform(image)]), int(self.labels[i]), i


class StreamingPairs(Dataset):
    """``dataset[i] -> (image uint8 (3, S, S), caption, i)`` from a ``caption<TAB>image path`` file."""

    def __init__(self, root: Path | str, paths: Sequence[str], captions: Sequence[str], transform: Transform) -> None:
        if len(paths) != len(captions):
            raise ValueError(f"{len(paths)} paths but {len(captions)} captions")
        self.root = Path(root)
        self.paths = PackedStrings(paths)
        self.captions = PackedStrings(captions)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.paths)

    def caption(self, i: int) -> str:
        return self.captions[i]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, str, int]:
        path = self.root / self.paths[i]
        try:
            image = decode_rgb(path)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
            raise OSError(f"pair {i}: cannot decode {path}: {err}") from err
        return self.transform(image), self.caption(i), i


def verify_files(dataset: StreamingImages | StreamingPairs, limit: int | None = None) -> None:
    """Check that the listed files exist (all, or the first ``limit``); raise naming the first missing one."""
    n = len(dataset) if limit is None else min(limit, len(dataset))
    for i in range(n):
        path = dataset.root / dataset.paths[i]
        if not path.is_file():
            raise FileNotFoundError(f"sample {i}: {path} not found")


@dataclass(frozen=True)
class LoaderSpec:
    """How one process reads its share of a map-style stream (``train.loader`` of a paper-scale run)."""

    batch_size: int  # the global batch; each of ``world_size`` processes takes batch_size / world_size
    num_workers: int = 2  # decoding processes per training process
    prefetch_factor: int = 4  # batches decoded ahead by each worker
    pin_memory: bool = False  # True on GPU machines

    def __post_init__(self) -> None:
        if self.batch_size < 2 or self.num_workers < 0 or self.prefetch_factor < 1:
            raise ValueError(f"need batch_size >= 2, num_workers >= 0, prefetch_factor >= 1, got {self}")


def collate_views(batch: list[tuple]) -> tuple:
    """Stack ``(tensor, label or caption, index)`` samples: tensors and indices stacked, captions as a list."""
    images, second, index = zip(*batch, strict=True)
    second = torch.as_tensor(second) if isinstance(second[0], int) else list(second)
    return torch.stack(images), second, torch.as_tensor(index, dtype=torch.int64)


class KeyedEpoch(Dataset):
    """``dataset[i]`` of one epoch, built with torch's generator seeded from ``(seed, epoch, i)``
    (:func:`isogclr.data.keyed.sample_rng`): a sample's random views are a function of its key only."""

    def __init__(self, dataset: Dataset, seed: int, epoch: int) -> None:
        self.dataset, self.seed, self.epoch = dataset, seed, epoch

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple:
        with sample_rng(self.seed, self.epoch, i):
            return self.dataset[i]


def epoch_loader(dataset: Dataset, spec: LoaderSpec, epoch: int, seed: int, rank: int = 0,
                 world_size: int = 1, start_batch: int = 0) -> DataLoader:
    """This process's batches of one epoch: ``len(dataset) // batch_size`` local batches of
    ``batch_size / world_size`` samples, the same number on every rank.

    A :class:`~torch.utils.data.DistributedSampler` (shuffle without replacement, seed ``seed``, reshuffled by
    ``set_epoch(epoch)``, the permutation's tail dropped) gives each rank a disjoint share of one permutation, so
    within an epoch every index is seen at most once across all processes, and exactly once except for the
    ``n mod batch_size`` samples of the permutation's tail (different ones every epoch). ``start_batch`` skips
    the first batches without decoding them (a run resumed mid-epoch). Each sample's augmentation is drawn
    with torch's generator seeded from ``(seed, epoch, index)`` (:class:`KeyedEpoch`), so it does not depend on
    ``num_workers``, ``world_size`` or ``start_batch``.
    """
    if spec.batch_size % world_size:
        raise ValueError(f"train.batch_size={spec.batch_size} is not divisible by the {world_size} processes")
    if len(dataset) < spec.batch_size:
        raise ValueError(f"train.batch_size={spec.batch_size} exceeds the {len(dataset)} training samples")
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=True)
    sampler.set_epoch(epoch)
    local = spec.batch_size // world_size
    order = list(sampler)[start_batch * local:]
    # the workers' base seed (which no draw uses), given so the loader leaves the trainer's generator alone
    generator = epoch_generator(seed, epoch)
    workers = spec.num_workers
    return DataLoader(KeyedEpoch(dataset, seed, epoch), batch_size=local, sampler=order, drop_last=True,
                      num_workers=workers, collate_fn=collate_views, pin_memory=spec.pin_memory,
                      prefetch_factor=spec.prefetch_factor if workers else None, generator=generator,
                      persistent_workers=False)


def eval_loader(dataset: Dataset, batch_size: int, num_workers: int) -> DataLoader:
    """The dataset in index order, for feature extraction (no shuffling, nothing dropped)."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                      collate_fn=collate_views)


def check_distinct(index: torch.Tensor, num_samples: int) -> None:
    """A global batch's gathered indices must be distinct and in ``[0, num_samples)`` (the per-sample state's key)."""
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_samples):
        raise IndexError(f"dataset index out of range [0, {num_samples}): min {int(index.min())}, "
                         f"max {int(index.max())}")
    unique = torch.unique(index)
    if unique.numel() != index.numel():
        counts = torch.bincount(index - index.min())
        repeated = int(torch.argmax(counts)) + int(index.min())
        raise RuntimeError(f"the global batch holds {index.numel() - unique.numel()} repeated dataset index(es) "
                           f"(e.g. {repeated}): two processes read the same sample; the per-sample state needs "
                           "distinct indices (check the shard split)")
