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

The concerns are three modules: :mod:`.transforms` (the per-sample transforms), :mod:`.loaders` (the datasets that
decode per sample and the loaders of an epoch) and this one, the streams of each dataset (:func:`load_stream`, the
stream loaders named in :data:`isogclr.data.base.STREAMS`). A streamed run uses this module (the registry's
``STREAMS.module(name)``), which therefore also names the transforms and loaders it uses (``__all__``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..io import read_lines
from .base import STREAMS
from .folder import IMAGE_EXTENSIONS, imagenet100_split, read_class_list
from .inaturalist import ANNOTATION_FILES, INATURALIST_FOLDER, INATURALIST_HINT, read_annotations
from .loaders import (
    LoaderSpec,
    StreamingImages,
    StreamingPairs,
    check_distinct,
    epoch_loader,
    eval_loader,
    verify_files,
)
from .transforms import Transform, eval_transform, pair_transform, simclr_transform, to_normalized

# what a streamed run (isogclr.train.loop) reads from this module, defined beside it
__all__ = ["LoaderSpec", "StreamingImages", "StreamingPairs", "Transform", "caption_tsv_stream", "check_distinct",
           "epoch_loader", "eval_loader", "eval_transform", "image_folder_stream", "imagenet100_stream",
           "inaturalist_stream", "inaturalist_stream_split", "list_image_folder", "load_stream", "pair_transform",
           "simclr_transform", "to_normalized", "verify_files"]


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
    """iNaturalist's COCO-style annotation file as a stream, read by :func:`~isogclr.data.inaturalist.read_annotations`
    (the in-memory loader's reader: the same samples, labels and dataset indices)."""
    ann = read_annotations(Path(annotation))
    return StreamingImages(Path(base), ann.file_names, ann.labels, ann.class_names, transform)


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
