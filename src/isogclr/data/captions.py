"""Image-caption data for bimodal (CLIP-style) training and retrieval, decoded into uint8 memory.

Three sources, each returning :class:`CaptionData` (images resized + centre-cropped to ``size``):

- :func:`load_karpathy`: the Karpathy split JSON of MSCOCO / Flickr30K (``dataset_coco.json``,
  ``dataset_flickr30k.json``; https://cs.stanford.edu/people/karpathy/deepimagesent/), the 5,000 / 1,000
  test images with five captions each; images under ``image_root/<filepath>/<filename>``;
- :func:`load_caption_tsv`: a CC3M-style file of ``caption<TAB>image path`` lines;
- webdataset shards (tar files of ``KEY.jpg`` + ``KEY.txt`` members) are read by
  :func:`isogclr.data.webdataset.load_webdataset_tar` (the ``webdataset`` library; that module also streams
  them), through the same :class:`CaptionBuilder`.

:func:`karpathy_stream` lists a Karpathy split without decoding it (:class:`KarpathyStream`: captions and image
paths in memory, the images decoded a batch at a time by :meth:`KarpathyStream.batches`, the same uint8 values),
for evaluation sets too large for memory; :meth:`CaptionData.batches` gives the in-memory images the same way.

An image that is missing or cannot be decoded is an error naming the file (and the line of the TSV or the
shard and key), after every sample is tried and counted; with ``max_unreadable`` > 0, up to that many are
skipped (with their captions), counted in ``CaptionData.skipped`` and reported in one warning. An empty
caption is an error naming where it is. These are not in the image registry.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..io import read_json, read_lines
from .folder import UNREADABLE_FIX, load_square_rgb, unreadable_message
from .loaders import PackedStrings, eval_loader

KARPATHY_URL = "https://cs.stanford.edu/people/karpathy/deepimagesent/"
_UNREADABLE = (OSError, ValueError, SyntaxError, Image.DecompressionBombError)


@dataclass
class CaptionData:
    """Images (N, 3, size, size) uint8, captions (M,), and for each caption its image's position."""

    images: torch.Tensor
    captions: list[str]
    image_index: torch.Tensor
    image_ids: list[str]
    skipped: int = 0

    def __post_init__(self) -> None:
        if len(self.captions) != len(self.image_index):
            raise ValueError("captions and image_index must have the same length")
        if len(self.image_ids) != len(self.images):
            raise ValueError("images and image_ids must have the same length")

    def __len__(self) -> int:
        return len(self.images)

    def batches(self, batch_size: int) -> Iterator[torch.Tensor]:
        """The images in order, ``batch_size`` at a time."""
        return iter(self.images.split(batch_size))


class _SquareImages(torch.utils.data.Dataset):
    """``dataset[i] -> (uint8 (3, size, size), i, i)``: image ``root / paths[i]`` decoded by :func:`load_square_rgb`
    (the in-memory loaders' decoding, so the values are the same)."""

    def __init__(self, root: Path, paths: Sequence[str], size: int, source: str) -> None:
        self.root, self.paths, self.size, self.source = root, PackedStrings(paths), size, source

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        path = self.root / self.paths[i]
        try:
            array = load_square_rgb(path, self.size)
        except _UNREADABLE as err:
            raise ValueError(f"{self.source}: image {self.paths[i]} ({path}) cannot be read ({type(err).__name__}: "
                             f"{err}): {UNREADABLE_FIX}") from None
        return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))), i, i


@dataclass
class KarpathyStream:
    """A Karpathy split listed, not decoded: the fields of :class:`CaptionData` but ``images``, which
    :meth:`batches` decodes ``batch_size`` at a time in ``num_workers`` DataLoader workers."""

    captions: list[str]
    image_index: torch.Tensor
    image_ids: list[str]
    images: _SquareImages
    num_workers: int = 0

    def __len__(self) -> int:
        return len(self.images)

    def batches(self, batch_size: int) -> Iterator[torch.Tensor]:
        """uint8 (b, 3, size, size) batches of the images in order, as :meth:`CaptionData.batches` gives them."""
        return (images for images, _, _ in eval_loader(self.images, batch_size, self.num_workers))


class CaptionBuilder:
    """Collects decoded images and their captions; :meth:`build` makes the :class:`CaptionData` (or raises on
    more than ``max_unreadable`` unreadable samples, naming them)."""

    def __init__(self, size: int, source: str, max_unreadable: int = 0) -> None:
        self.size, self.source, self.max_unreadable = size, source, max_unreadable
        self.images: list[np.ndarray] = []
        self.captions: list[str] = []
        self.image_index: list[int] = []
        self.image_ids: list[str] = []
        self.bad: list[tuple[str, Exception]] = []

    def add(self, image_id: str, read, captions: Sequence[str], where: str = "") -> None:
        """``read()`` returns a path or binary file for PIL; a failure records the sample (image and captions)
        as unreadable. ``where`` (``file:line``, ``shard:key``; default ``image_id``) names it in errors."""
        where = where or image_id
        for caption in captions:
            if not caption.strip():
                raise ValueError(f"{where}: empty caption for image {image_id}: write the caption, or remove the "
                                 "sample")
        try:
            array = load_square_rgb(read(), self.size)
        except _UNREADABLE as err:
            self.bad.append((where, err))
            return
        self.captions.extend(captions)
        self.image_index.extend([len(self.images)] * len(captions))
        self.images.append(array)
        self.image_ids.append(image_id)

    def lost(self, where: str, err: Exception) -> None:
        """Count a sample that could not be read at all (no image, a truncated shard)."""
        self.bad.append((where, err))

    def build(self) -> CaptionData:
        total = len(self.bad) + len(self.images)
        if len(self.bad) > self.max_unreadable:
            raise ValueError(unreadable_message(self.source, self.bad, total, UNREADABLE_FIX))
        if self.bad:
            warnings.warn(unreadable_message(self.source, self.bad, total,
                                             f"skipped (max_unreadable={self.max_unreadable})"), stacklevel=3)
        if self.images:
            images = torch.from_numpy(np.ascontiguousarray(np.stack(self.images).transpose(0, 3, 1, 2)))
        else:
            images = torch.zeros((0, 3, self.size, self.size), dtype=torch.uint8)
        return CaptionData(images=images, captions=self.captions,
                           image_index=torch.as_tensor(self.image_index, dtype=torch.int64),
                           image_ids=self.image_ids, skipped=len(self.bad))


def load_karpathy(json_path: Path | str, image_root: Path | str, split: str = "test", size: int = 64,
                  captions_per_image: int = 5, max_unreadable: int = 0) -> CaptionData:
    """Images of ``split`` in a Karpathy JSON with their first ``captions_per_image`` captions.

    Image ids are ``<filepath>/<filename>`` (COCO) or ``<filename>`` (Flickr30K, no filepath).
    """
    json_path, image_root = Path(json_path), Path(image_root)
    if not json_path.is_file():
        raise FileNotFoundError(f"{json_path} not found: get it from {KARPATHY_URL} (caption_datasets.zip)")
    if not image_root.is_dir():
        raise FileNotFoundError(f"{image_root} not found: it must hold the dataset's images (COCO val2014/, "
                                f"train2014/ from https://cocodataset.org; Flickr30K flickr30k-images/)")
    entries = read_json(json_path)["images"]
    builder = CaptionBuilder(size, str(json_path), max_unreadable)
    for entry in entries:
        if entry["split"] != split:
            continue
        rel = Path(entry.get("filepath", "")) / entry["filename"]
        captions = [s["raw"].strip() for s in entry["sentences"][:captions_per_image]]
        builder.add(rel.as_posix(), lambda rel=rel: image_root / rel, captions,
                    f"{json_path}: image {rel.as_posix()} ({image_root / rel})")
    return builder.build()


def karpathy_stream(json_path: Path | str, image_root: Path | str, split: str = "test", size: int = 64,
                    captions_per_image: int = 5, num_workers: int = 0) -> KarpathyStream:
    """:func:`load_karpathy`'s images, captions and order, the images listed (their files checked to exist) and
    decoded only when :meth:`KarpathyStream.batches` reads them; an image that cannot be read is an error."""
    json_path, image_root = Path(json_path), Path(image_root)
    if not json_path.is_file():
        raise FileNotFoundError(f"{json_path} not found: get it from {KARPATHY_URL} (caption_datasets.zip)")
    captions, image_index, image_ids = [], [], []
    for entry in read_json(json_path)["images"]:
        if entry["split"] != split:
            continue
        rel = (Path(entry.get("filepath", "")) / entry["filename"]).as_posix()
        texts = [s["raw"].strip() for s in entry["sentences"][:captions_per_image]]
        if not all(texts):
            raise ValueError(f"{json_path}: image {rel}: empty caption: write the caption, or remove the sample")
        if not (image_root / rel).is_file():
            raise FileNotFoundError(f"{json_path}: image {rel} ({image_root / rel}) not found: the folder must hold "
                                    "the dataset's images (COCO val2014/, Flickr30K flickr30k-images/)")
        captions.extend(texts)
        image_index.extend([len(image_ids)] * len(texts))
        image_ids.append(rel)
    return KarpathyStream(captions, torch.as_tensor(image_index, dtype=torch.int64), image_ids,
                          _SquareImages(image_root, image_ids, size, str(json_path)), num_workers)


def load_caption_tsv(tsv_path: Path | str, image_root: Path | str | None = None, size: int = 64,
                     header: bool = False, max_unreadable: int = 0) -> CaptionData:
    """CC3M-style ``caption<TAB>image path`` lines; relative paths are under ``image_root``
    (default: the tsv's folder). Blank lines are ignored; a line without a tab is an error."""
    tsv_path = Path(tsv_path)
    if not tsv_path.is_file():
        raise FileNotFoundError(f"{tsv_path} not found: CC3M captions come from "
                                "https://ai.google.com/research/ConceptualCaptions/download and the images "
                                "must be downloaded from their URLs (e.g. with img2dataset)")
    root = tsv_path.parent if image_root is None else Path(image_root)
    builder = CaptionBuilder(size, str(tsv_path), max_unreadable)
    lines = read_lines(tsv_path)
    for lineno, line in enumerate(lines[1:] if header else lines, start=2 if header else 1):
        if not line.strip():
            continue
        caption, sep, path = line.rpartition("\t")
        if not sep:
            raise ValueError(f"{tsv_path}:{lineno}: expected 'caption<TAB>image path', got {line!r}")
        builder.add(path, lambda p=path: root / p, [caption.strip()], f"{tsv_path}:{lineno} ({root / path})")
    return builder.build()
