"""Image-caption data for bimodal (CLIP-style) training and retrieval, decoded into uint8 memory.

Three sources, each returning :class:`CaptionData` (images resized + centre-cropped to ``size``):

- :func:`load_karpathy`: the Karpathy split JSON of MSCOCO / Flickr30K (``dataset_coco.json``,
  ``dataset_flickr30k.json``; https://cs.stanford.edu/people/karpathy/deepimagesent/), the 5,000 / 1,000
  test images with five captions each; images under ``image_root/<filepath>/<filename>``;
- :func:`load_caption_tsv`: a CC3M-style file of ``caption<TAB>image path`` lines;
- :func:`load_webdataset_tar`: webdataset shards (tar files of ``KEY.jpg`` + ``KEY.txt`` members),
  read with the ``webdataset`` library (:mod:`isogclr.data.webdataset`, which also streams them).

Images that are missing or cannot be decoded are skipped (with their captions), counted in
``CaptionData.skipped`` and reported in one warning per call. These are not in the image registry.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from .folder import load_square_rgb

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


class _Builder:
    def __init__(self, size: int, source: str) -> None:
        self.size, self.source = size, source
        self.images: list[np.ndarray] = []
        self.captions: list[str] = []
        self.image_index: list[int] = []
        self.image_ids: list[str] = []
        self.bad: list[str] = []

    def add(self, image_id: str, read, captions: Sequence[str]) -> None:
        """``read()`` returns a path or binary file for PIL; a failure skips the image and its captions."""
        try:
            array = load_square_rgb(read(), self.size)
        except _UNREADABLE:
            self.bad.append(image_id)
            return
        self.captions.extend(captions)
        self.image_index.extend([len(self.images)] * len(captions))
        self.images.append(array)
        self.image_ids.append(image_id)

    def build(self) -> CaptionData:
        if self.bad:
            total = len(self.bad) + len(self.images)
            warnings.warn(f"{self.source}: skipped {len(self.bad)} of {total} samples: missing or unreadable "
                          f"image (first: {self.bad[0]})", stacklevel=3)
        if self.images:
            images = torch.from_numpy(np.ascontiguousarray(np.stack(self.images).transpose(0, 3, 1, 2)))
        else:
            images = torch.zeros((0, 3, self.size, self.size), dtype=torch.uint8)
        return CaptionData(images=images, captions=self.captions,
                           image_index=torch.as_tensor(self.image_index, dtype=torch.int64),
                           image_ids=self.image_ids, skipped=len(self.bad))


def load_karpathy(json_path: Path | str, image_root: Path | str, split: str = "test", size: int = 64,
                  captions_per_image: int = 5) -> CaptionData:
    """Images of ``split`` in a Karpathy JSON with their first ``captions_per_image`` captions.

    Image ids are ``<filepath>/<filename>`` (COCO) or ``<filename>`` (Flickr30K, no filepath).
    """
    json_path, image_root = Path(json_path), Path(image_root)
    if not json_path.is_file():
        raise FileNotFoundError(f"{json_path} not found: get it from {KARPATHY_URL} (caption_datasets.zip)")
    if not image_root.is_dir():
        raise FileNotFoundError(f"{image_root} not found: it must hold the dataset's images (COCO val2014/, "
                                f"train2014/ from https://cocodataset.org; Flickr30K flickr30k-images/)")
    entries = json.loads(json_path.read_text())["images"]
    builder = _Builder(size, str(json_path))
    for entry in entries:
        if entry["split"] != split:
            continue
        rel = Path(entry.get("filepath", "")) / entry["filename"]
        captions = [s["raw"].strip() for s in entry["sentences"][:captions_per_image]]
        builder.add(rel.as_posix(), lambda rel=rel: image_root / rel, captions)
    return builder.build()


def load_caption_tsv(tsv_path: Path | str, image_root: Path | str | None = None, size: int = 64,
                     header: bool = False) -> CaptionData:
    """CC3M-style ``caption<TAB>image path`` lines; relative paths are under ``image_root``
    (default: the tsv's folder). Blank lines are ignored; a line without a tab is an error."""
    tsv_path = Path(tsv_path)
    if not tsv_path.is_file():
        raise FileNotFoundError(f"{tsv_path} not found: CC3M captions come from "
                                "https://ai.google.com/research/ConceptualCaptions/download and the images "
                                "must be downloaded from their URLs (e.g. with img2dataset)")
    root = tsv_path.parent if image_root is None else Path(image_root)
    builder = _Builder(size, str(tsv_path))
    lines = tsv_path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines[1:] if header else lines, start=2 if header else 1):
        if not line.strip():
            continue
        caption, sep, path = line.rpartition("\t")
        if not sep:
            raise ValueError(f"{tsv_path}:{lineno}: expected 'caption<TAB>image path', got {line!r}")
        builder.add(path, lambda p=path: root / p, [caption.strip()])
    return builder.build()


def load_webdataset_tar(shards: Path | str | Iterable[Path | str], size: int = 64) -> CaptionData:
    """Webdataset shards decoded into memory; read with the ``webdataset`` library
    (:func:`isogclr.data.webdataset.load_webdataset_tar`; streaming: :func:`isogclr.data.webdataset.shard_loader`)."""
    from .webdataset import load_webdataset_tar as read

    return read(shards, size)
