"""An image-text data folder for bimodal training and its zero-shot evaluations, read with the real loaders.

The layout is the one :func:`~isogclr.data.synthetic_pairs.write_synthetic_pairs` writes; real data
(CC3M, MSCOCO / Flickr30K Karpathy test splits, CIFAR / ImageNet zero-shot sets) can be arranged in it::

    root/train/captions.tsv                 caption<TAB>image path (load_caption_tsv), the training pairs
    root/train/shard-*.tar                  or, streamed only: webdataset shards + sizes.json (data/webdataset.py)
    root/train/meta.csv                     optional: image, cluster, cluster_frequency, mismatched (generated data)
    root/retrieval_<name>/dataset.json      Karpathy JSON, split "test", images under retrieval_<name>/
    root/zeroshot/<name>/images.npz         ``images`` uint8 (N, H, W, 3), ``labels`` (N,)
    root/zeroshot/<name>/classnames.txt     one class name a line
    root/zeroshot/<name>/templates.txt      one prompt template a line, with ``{}`` for the class name

Every retrieval set and every zero-shot set found is evaluated (sorted by name).

Two readings of the evaluation sets, one interface (``batches(batch_size)``: the set's uint8 images in order, in
batches; ``labels`` / ``captions`` / ``image_index`` in memory, they are small): in memory
(:class:`ZeroShotSet`, :class:`~isogclr.data.captions.CaptionData`, the mini and smoke profiles), or streamed
(``load_pairs_folder(..., stream_eval=True)``, the runs with ``bimodal.stream``: :class:`StreamedZeroShot` reads
``images.npz`` member by chunks of a batch, :class:`~isogclr.data.captions.KarpathyStream` decodes a batch of
images at a time in DataLoader workers). Streamed, memory is flat in the set's size: what an evaluation keeps
is its features (n x d); the images of one batch (per worker in flight) are all that is decoded at a time. The
batches hold the same uint8 values either way, so the metrics are the same
(``tests/test_eval_stream.py``).
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..io import read_text
from .captions import CaptionData, KarpathyStream, karpathy_stream, load_caption_tsv, load_karpathy
from .loaders import LoaderSpec, epoch_loader
from .manifest import ensure_tracked
from .streaming import caption_tsv_stream


@dataclass
class ZeroShotSet:
    images: torch.Tensor  # (N, 3, size, size) uint8
    labels: torch.Tensor  # (N,) int64
    classnames: list[str]
    templates: list[str]

    def prompts(self) -> list[list[str]]:
        """For each class, its prompts (one per template)."""
        return [[t.format(c) for t in self.templates] for c in self.classnames]

    def __len__(self) -> int:
        return len(self.labels)

    def batches(self, batch_size: int) -> Iterator[torch.Tensor]:
        """The images in order, ``batch_size`` at a time."""
        return iter(self.images.split(batch_size))


@dataclass
class StreamedZeroShot:
    """A zero-shot set whose ``images.npz`` is read a batch at a time (labels, class names, templates in memory)."""

    path: Path  # the images.npz
    size: int
    labels: torch.Tensor  # (N,) int64
    classnames: list[str]
    templates: list[str]

    prompts = ZeroShotSet.prompts
    __len__ = ZeroShotSet.__len__

    def batches(self, batch_size: int) -> Iterator[torch.Tensor]:
        """uint8 (b, 3, size, size) batches of ``images`` in order, resized as :func:`load_zeroshot` resizes: the
        npz member is read sequentially (stored or deflated), ``batch_size`` images at a time."""
        with zipfile.ZipFile(self.path) as archive, archive.open("images.npy") as f:
            shape, dtype = _npy_header(f, self.path)
            per_image = int(np.prod(shape[1:])) * dtype.itemsize
            for start in range(0, shape[0], batch_size):
                count = min(batch_size, shape[0] - start)
                data = f.read(count * per_image)
                if len(data) != count * per_image:
                    raise ValueError(f"{self.path}: images.npy ends at image {start + len(data) // per_image} of "
                                     f"{shape[0]}: rewrite the file")
                array = np.frombuffer(data, dtype=dtype).reshape(count, *shape[1:])
                yield _resize(torch.from_numpy(array.transpose(0, 3, 1, 2).copy()), self.size)


def _npy_header(f, path: Path) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read(f)
    if fortran_order or dtype != np.uint8 or len(shape) != 4 or shape[3] != 3:
        raise ValueError(f"{path}: images must be C-ordered uint8 (N, H, W, 3), got {dtype} {shape}"
                         f"{' Fortran-ordered' if fortran_order else ''}: rewrite it with np.savez(images=...)")
    return shape, dtype


@dataclass
class PairsFolder:
    train: CaptionData
    train_meta: list[dict[str, str]]  # per training image (CaptionData order): cluster, cluster_frequency, ...
    retrieval: dict[str, CaptionData | KarpathyStream]
    zeroshot: dict[str, ZeroShotSet | StreamedZeroShot]


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in read_text(path).splitlines() if line.strip()]


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    if images.shape[-1] == size and images.shape[-2] == size:
        return images
    x = F.interpolate(images.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x.round().clamp(0, 255).to(torch.uint8)


def _templates(folder: Path) -> list[str]:
    templates = _lines(folder / "templates.txt")
    if not templates or any("{}" not in t for t in templates):
        raise ValueError(f"{folder / 'templates.txt'}: every template needs a '{{}}' for the class name")
    return templates


def load_zeroshot(folder: Path | str, size: int) -> ZeroShotSet:
    folder = Path(folder)
    with np.load(folder / "images.npz") as npz:
        images = torch.from_numpy(np.ascontiguousarray(npz["images"].transpose(0, 3, 1, 2)))
        labels = torch.from_numpy(npz["labels"].astype(np.int64))
    templates = _templates(folder)
    return ZeroShotSet(_resize(images, size), labels, _lines(folder / "classnames.txt"), templates)


def stream_zeroshot(folder: Path | str, size: int) -> StreamedZeroShot:
    """The zero-shot set of ``folder`` as :func:`load_zeroshot` reads it, its images left on disk (read by
    :meth:`StreamedZeroShot.batches`); only the labels are loaded."""
    folder = Path(folder)
    with np.load(folder / "images.npz") as npz:
        labels = torch.from_numpy(npz["labels"].astype(np.int64))
    with zipfile.ZipFile(folder / "images.npz") as archive, archive.open("images.npy") as f:
        shape, _ = _npy_header(f, folder / "images.npz")
    if shape[0] != len(labels):
        raise ValueError(f"{folder / 'images.npz'}: {shape[0]} images but {len(labels)} labels")
    return StreamedZeroShot(folder / "images.npz", size, labels, _lines(folder / "classnames.txt"), _templates(folder))


def _train_meta(train: CaptionData, meta_path: Path) -> list[dict[str, str]]:
    """meta.csv rows in the order of ``train`` (joined on the image path); -1 where there is no meta."""
    by_image = {}
    if meta_path.is_file():
        by_image = {row["image"]: row for row in csv.DictReader(io.StringIO(read_text(meta_path)))}
    missing = {"cluster": "-1", "cluster_frequency": "-1", "mismatched": "-1"}
    return [by_image.get(image_id, missing) for image_id in train.image_ids]


def load_pairs_folder(root: Path | str, size: int, train: bool = True, evaluation: bool = True,
                      stream_eval: bool = False, num_workers: int = 0) -> PairsFolder:
    """The training pairs, every ``retrieval_*`` set and every ``zeroshot/*`` set of ``root`` at ``size`` pixels.

    ``train=False``: the evaluation sets only (``PairsFolder.train`` empty), for runs that stream the training
    pairs (:class:`TrainPairsStream`). ``evaluation=False``: the training pairs only (no test set is read; a
    selection run evaluates on held-out training pairs). ``stream_eval`` (with ``train=False``): the evaluation
    sets streamed (:class:`StreamedZeroShot`, :class:`~isogclr.data.captions.KarpathyStream`, retrieval images
    decoded in ``num_workers`` DataLoader workers), not loaded.
    """
    root = Path(root)
    ensure_tracked(root)  # a generated folder with a manifest <root>.json: rebuilt when missing or stale
    if stream_eval and train:
        raise ValueError("load_pairs_folder: stream_eval needs train=False (streamed runs stream their training "
                         "pairs with TrainPairsStream)")
    if not train:
        if stream_eval:
            retrieval = {p.parent.name: karpathy_stream(p, p.parent, size=size, num_workers=num_workers)
                         for p in sorted(root.glob("retrieval_*/dataset.json"))}
            zeroshot = {p.parent.name: stream_zeroshot(p.parent, size)
                        for p in sorted(root.glob("zeroshot/*/images.npz"))}
        else:
            retrieval = {p.parent.name: load_karpathy(p, p.parent, size=size)
                         for p in sorted(root.glob("retrieval_*/dataset.json"))}
            zeroshot = {p.parent.name: load_zeroshot(p.parent, size)
                        for p in sorted(root.glob("zeroshot/*/images.npz"))}
        empty = CaptionData(torch.zeros((0, 3, size, size), dtype=torch.uint8), [], torch.zeros(0, dtype=torch.int64),
                            [])
        return PairsFolder(empty, [], retrieval, zeroshot)
    if not (root / "train" / "captions.tsv").is_file():
        raise FileNotFoundError(f"{root / 'train' / 'captions.tsv'} not found: generate the data with "
                                f"`python -m isogclr synthetic-pairs --out {root}` (or arrange real data as "
                                "described in isogclr/data/pairs_folder.py)")
    train = load_caption_tsv(root / "train" / "captions.tsv", size=size)
    retrieval = {p.parent.name: load_karpathy(p, p.parent, size=size)
                 for p in sorted(root.glob("retrieval_*/dataset.json"))} if evaluation else {}
    zeroshot = {p.parent.name: load_zeroshot(p.parent, size)
                for p in sorted(root.glob("zeroshot/*/images.npz"))} if evaluation else {}
    return PairsFolder(train, _train_meta(train, root / "train" / "meta.csv"), retrieval, zeroshot)



class TrainPairsStream:
    """The training pairs of a pairs folder, streamed (one process): ``train/*.tar`` webdataset shards if there
    are any, else ``train/captions.tsv``; ``epoch(e, start)`` yields the epoch's batches
    ``(images uint8 (B, 3, S, S), captions, dataset index (B,))`` from batch ``start`` on, decoded and augmented
    (``transform``) in ``num_workers`` worker processes. Every pair is visited once per epoch (but the last
    ``len % batch_size``)."""

    def __init__(self, root: Path | str, transform, batch_size: int, seed: int, num_workers: int,
                 prefetch_factor: int = 4, pin_memory: bool = False) -> None:
        from .webdataset import shard_sizes

        ensure_tracked(Path(root))
        train = Path(root) / "train"
        self.shards = sorted(str(p) for p in train.glob("*.tar"))
        if self.shards:
            self.pairs, self.n = None, sum(shard_sizes(self.shards).values())
        elif (train / "captions.tsv").is_file():
            self.pairs = caption_tsv_stream(train / "captions.tsv", transform)
            self.n = len(self.pairs)
        else:
            raise FileNotFoundError(f"neither webdataset shards {train}/*.tar nor {train / 'captions.tsv'} found "
                                    "(see isogclr/data/pairs_folder.py for the layout)")
        self.transform, self.batch_size, self.seed = transform, batch_size, seed
        self.spec = LoaderSpec(batch_size, num_workers, prefetch_factor, pin_memory)

    def __len__(self) -> int:
        return self.n

    def steps(self, epochs: int, world_size: int = 1) -> int:
        """Global batches per epoch, the same in every epoch: ``n // batch_size`` for a tsv; for shards the
        fewest any of the ``epochs`` epochs gives (a rank's share of shards varies by epoch)."""
        if self.pairs is not None:
            return self.n // self.batch_size
        from .webdataset import shard_sizes, steps_per_epoch

        sizes = shard_sizes(self.shards)
        return min(steps_per_epoch(sizes, self.shards, e, self.seed, world_size, self.batch_size // world_size)
                   for e in range(epochs))

    def epoch(self, epoch: int, start: int = 0, rank: int = 0, world_size: int = 1):
        """Process ``rank``'s batches (``batch_size / world_size`` pairs) of epoch ``epoch`` from batch ``start``
        on; the skipped batches are not decoded."""
        if self.pairs is not None:
            return iter(epoch_loader(self.pairs, self.spec, epoch, self.seed, rank, world_size, start_batch=start))
        from .webdataset import shard_loader

        return shard_loader(self.shards, self.transform, self.batch_size, epoch, self.seed, rank, world_size,
                            num_workers=self.spec.num_workers, start_batch=start)
