"""Datasets too large for memory, decoded per sample in DataLoader worker processes.

The in-memory path (:class:`~isogclr.data.base.ImageData`, whole splits as one uint8 tensor, batched
augmentations on the device) is the right one for CIFAR, the generated sets and Fashion-MNIST. ImageNet-100
(126,689 images), iNaturalist 2018 (437,513) and CC3M (~2.7 M pairs) at the papers' 224 / 256 pixels would
need 19 GB, 66 GB and ~530 GB of RAM that way, so they are *listed* instead: what stays in memory is one
path (:class:`PackedStrings`: one byte buffer, no Python object per sample, so forked workers share it)
and one label per sample. Each ``__getitem__`` opens one file, decodes it with PIL and applies the papers'
augmentations with ``torchvision.transforms.v2`` in the worker; the main process receives uint8 batches.

Every sample carries its dataset index (its position in the list), the key of the per-sample state (s_i, u_i,
tau_i); :func:`epoch_loader` gives distinct indices per epoch across processes (a ``DistributedSampler``). Two kinds:

* :class:`StreamingImages` (unimodal): ``(views uint8 (2, 3, S, S), label, index)``, two SimCLR views
  (:func:`simclr_transform`: RandomResizedCrop S, flip, colour jitter, grayscale, optional blur);
* :class:`StreamingPairs` (image-text): ``(image uint8 (3, S, S), caption, index)``, one view
  (:func:`pair_transform`: RandomResizedCrop S with scale (crop_scale_min, 1), flip), as the bimodal runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageFilter
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torchvision.transforms import v2

from ..io import read_json, read_lines
from .augment import MEAN, STD, AugmentConfig
from .base import STREAMS
from .folder import IMAGE_EXTENSIONS, imagenet100_split, read_class_list
from .inaturalist import ANNOTATION_FILES, INATURALIST_FOLDER, INATURALIST_HINT
from .keyed import epoch_generator, sample_rng

Transform = Callable[[Image.Image], torch.Tensor]


class PILGaussianBlur:
    """Gaussian blur with sigma drawn uniformly from ``sigma`` per call, by PIL's ``ImageFilter.GaussianBlur``
    (the MoCo v2 / SimCLR-PyTorch form; ~15x faster on a 224-px image than torchvision's convolution)."""

    def __init__(self, sigma: tuple[float, float] = (0.1, 2.0)) -> None:
        self.sigma = sigma

    def __call__(self, image: Image.Image) -> Image.Image:
        low, high = self.sigma
        radius = low + (high - low) * float(torch.rand(()))  # torch's generator: seeded per sample (KeyedEpoch)
        return image.filter(ImageFilter.GaussianBlur(radius=radius))


def simclr_transform(aug: AugmentConfig, size: int) -> Transform:
    """One SimCLR view of an RGB PIL image as uint8 (3, size, size), with ``augment``'s parameters.

    torchvision's recipe (the one :mod:`isogclr.data.augment` batches on the device), on PIL images (faster
    than on tensors at 224 px: colour jitter 9 vs 22 ms): RandomResizedCrop (scale ``(crop_scale_min, 1)``,
    bilinear), horizontal flip, colour jitter (s, s, s, s/4) with probability ``jitter_p``, grayscale with
    ``grayscale_p``, Gaussian blur (sigma in [0.1, 2], :class:`PILGaussianBlur`) with ``blur_p``; then
    ``PILToTensor``. Normalisation is left to the device (:func:`to_normalized`).
    """
    s = aug.jitter_strength
    steps: list = [v2.RandomResizedCrop(size, scale=(aug.crop_scale_min, 1.0), antialias=True),
                   v2.RandomHorizontalFlip(aug.flip_p),
                   v2.RandomApply([v2.ColorJitter(s, s, s, s / 4)], p=aug.jitter_p),
                   v2.RandomGrayscale(aug.grayscale_p)]
    if aug.blur_p > 0:
        steps.append(v2.RandomApply([PILGaussianBlur((0.1, 2.0))], p=aug.blur_p))
    return v2.Compose([*steps, v2.PILToTensor()])


def pair_transform(size: int, crop_scale_min: float, flip_p: float) -> Transform:
    """The image-text runs' light augmentation: RandomResizedCrop (scale (crop_scale_min, 1)) and flip."""
    return v2.Compose([v2.RandomResizedCrop(size, scale=(crop_scale_min, 1.0), antialias=True),
                       v2.RandomHorizontalFlip(flip_p), v2.PILToTensor()])


def eval_transform(size: int) -> Transform:
    """The evaluation view: shorter side to ``size * 256 / 224`` (bilinear, antialiased), centre crop ``size``."""
    return v2.Compose([v2.Resize(round(size * 256 / 224), antialias=True), v2.CenterCrop(size), v2.PILToTensor()])


def to_normalized(images: torch.Tensor) -> torch.Tensor:
    """uint8 images from a streaming loader -> float ``(x / 255 - 0.5) / 0.25``, the in-memory path's scale."""
    return (images.float().div_(255.0) - MEAN) / STD


def decode_rgb(path: Path | str) -> Image.Image:
    """One image file decoded with PIL to an RGB image, at full resolution."""
    with Image.open(path) as img:
        return img.convert("RGB")


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


def list_image_folder(split_dir: Path | str, classes: Sequence[str] | None = None,
                      source: str = "") -> tuple[list[str], list[int], list[str]]:
    """``<split_dir>/<class>/*`` -> (paths relative to split_dir, labels, class names); sorted, as the
    in-memory :func:`~isogclr.data.folder.image_folder` orders them (the same dataset indices)."""
    split_dir = Path(split_dir)
    hint = f": {source}" if source else ""
    if not split_dir.is_dir():
        raise FileNotFoundError(f"{split_dir} not found{hint}")
    if classes is None:
        classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
    missing = [c for c in classes if not (split_dir / c).is_dir()]
    if missing or not classes:
        raise FileNotFoundError(f"class folder(s) {missing[:3] or '(none)'} not found under {split_dir}{hint}")
    paths, labels = [], []
    for label, c in enumerate(classes):
        names = sorted(p.name for p in (split_dir / c).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
        paths += [f"{c}/{name}" for name in names]
        labels += [label] * len(names)
    if not paths:
        raise FileNotFoundError(f"no images under {split_dir}{hint}")
    return paths, labels, list(classes)


def image_folder_stream(split_dir: Path | str, transform: Transform, classes: Sequence[str] | None = None,
                        source: str = "") -> StreamingImages:
    """An ImageNet-style folder ``<split_dir>/<class>/*.JPEG`` as a :class:`StreamingImages`."""
    paths, labels, names = list_image_folder(split_dir, classes, source)
    return StreamingImages(split_dir, paths, labels, names, transform)


def inaturalist_stream(base: Path | str, annotation: Path | str, transform: Transform) -> StreamingImages:
    """iNaturalist's COCO-style annotation file (``images``, ``annotations``, ``categories``) as a stream;
    labels are the category ids in sorted order, as :mod:`isogclr.data.inaturalist` numbers them."""
    base, annotation = Path(base), Path(annotation)
    if not annotation.is_file():
        raise FileNotFoundError(f"{annotation} not found")
    meta = read_json(annotation)
    categories = sorted(meta["categories"], key=lambda c: c["id"])
    label_of = {c["id"]: i for i, c in enumerate(categories)}
    category_of = {a["image_id"]: a["category_id"] for a in meta["annotations"]}
    missing = [e["file_name"] for e in meta["images"] if e["id"] not in category_of]
    if missing:
        raise ValueError(f"{annotation}: {len(missing)} image(s) without annotation (first: {missing[0]})")
    return StreamingImages(base, [e["file_name"] for e in meta["images"]],
                           [label_of[category_of[e["id"]]] for e in meta["images"]],
                           [str(c["name"]) for c in categories], transform)


def caption_tsv_stream(tsv_path: Path | str, transform: Transform,
                       image_root: Path | str | None = None) -> StreamingPairs:
    """CC3M as a folder with a ``caption<TAB>image path`` file (paths relative to ``image_root``, default the
    file's folder), the layout :func:`~isogclr.data.captions.load_caption_tsv` reads into memory."""
    tsv_path = Path(tsv_path)
    if not tsv_path.is_file():
        raise FileNotFoundError(f"{tsv_path} not found: write one 'caption<TAB>image path' line per pair")
    paths, captions = [], []
    for lineno, line in enumerate(read_lines(tsv_path), start=1):  # a line that is not UTF-8 is named
        if not line.strip():
            continue
        caption, sep, path = line.rpartition("\t")
        if not sep:
            raise ValueError(f"{tsv_path}:{lineno}: expected 'caption<TAB>image path', got {line!r}")
        if not caption.strip():
            raise ValueError(f"{tsv_path}:{lineno}: empty caption for {path}: write the caption, or remove the line")
        captions.append(caption.strip())
        paths.append(path)
    return StreamingPairs(tsv_path.parent if image_root is None else image_root, paths, captions, transform)


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


def load_stream(name: str, root: Path | str, split: str, transform: Transform, views: int = 2) -> StreamingImages:
    """Split ``"train"`` / ``"test"`` of the dataset ``name`` as a stream; the same samples, labels and dataset
    indices as its in-memory loader (:func:`~isogclr.data.base.load_dataset`), decoded per sample."""
    if name not in STREAMS:
        raise KeyError(f"dataset {name!r} has no stream loader (streamed: {sorted(STREAMS)}); the others are "
                       "small enough for memory: remove train.stream or the dataset")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return STREAMS[name](Path(root), split, transform, views)


# the stream loaders named in isogclr.data.base.STREAMS
def imagenet100_stream(root: Path, split: str, transform: Transform, views: int) -> StreamingImages:
    folder, hint = imagenet100_split(root, split)
    paths, labels, names = list_image_folder(folder, read_class_list("imagenet100"), hint)
    return StreamingImages(folder, paths, labels, names, transform, views)


def inaturalist_stream_split(root: Path, split: str, transform: Transform, views: int) -> StreamingImages:
    base = Path(root) / INATURALIST_FOLDER
    if not (base / ANNOTATION_FILES[split]).is_file():
        raise FileNotFoundError(f"{base / ANNOTATION_FILES[split]} not found: {INATURALIST_HINT} {base}")
    return inaturalist_stream(base, base / ANNOTATION_FILES[split], transform).with_transform(transform, views)
