"""iNaturalist 2018 (Van Horn et al. 2018) from its official COCO-style annotation files.

Read from ``<root>/inaturalist/``: split ``train`` -> ``train2018.json``, ``test`` -> ``val2018.json``
(the official validation set), each holding ``"images": [{"id", "file_name", ...}]``,
``"annotations": [{"image_id", "category_id", ...}]`` and ``"categories": [{"id", "name", ...}]``;
the images are read from ``<root>/inaturalist/<file_name>`` (``file_name`` is e.g.
``train_val2018/Plantae/7477/<hash>.jpg``, so ``train_val2018.tar.gz`` is extracted there too).

Images are decoded in the order of ``"images"`` with the image-folder reader
(:func:`isogclr.data.folder.load_square_rgb`: RGB, shorter side to ``INATURALIST_SIZE``, centre crop)
into one uint8 (N, 3, size, size) tensor; unreadable or missing images are skipped, counted and
reported in one warning. At 64 pixels the 437,513 train images take about 5.4 GB.
Category ids are mapped to labels 0..C-1 in sorted id order; ``class_names`` are the category names.
``extra`` holds each kept image's ``path`` (its ``file_name``) and ``image_id``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from ..io import read_json
from .base import ImageData
from .folder import decode_labelled

INATURALIST_SIZE = 64
INATURALIST_FOLDER = "inaturalist"
ANNOTATION_FILES = {"train": "train2018.json", "test": "val2018.json"}
INATURALIST_HINT = ("download train_val2018.tar.gz, train2018.json.tar.gz and val2018.json.tar.gz of the "
                    "iNaturalist 2018 competition (https://github.com/visipedia/inat_comp/tree/master/2018) "
                    "and extract them into")


def obtain_hint(base: Path) -> str:
    return f"{INATURALIST_HINT} {base}"


def missing_inaturalist(root: Path) -> str | None:
    """What ``inaturalist`` misses under ``root`` and how to get it; None when present."""
    base = Path(root) / INATURALIST_FOLDER
    return None if base.is_dir() else f"{base} not found: {obtain_hint(base)}"


class Annotations(NamedTuple):
    """One split's annotation file, read: per image (in the file's order) its ``file_name``, label and id."""

    file_names: list[str]
    labels: list[int]
    image_ids: list[int]
    class_names: list[str]


def read_annotations(path: Path) -> Annotations:
    """The COCO-style annotation file ``path`` (``images``, ``annotations``, ``categories``): category ids mapped
    to labels 0..C-1 in sorted id order; an image without an annotation is an error naming it (the in-memory
    loader and the stream, :mod:`isogclr.data.streaming`, read the same samples with the same labels)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: {obtain_hint(path.parent)}")
    meta = read_json(path)
    categories = sorted(meta["categories"], key=lambda c: c["id"])
    label_of = {c["id"]: i for i, c in enumerate(categories)}
    category_of = {a["image_id"]: a["category_id"] for a in meta["annotations"]}
    missing = [e for e in meta["images"] if e["id"] not in category_of]
    if missing:
        raise ValueError(f"{path}: image {missing[0]['id']} ({missing[0]['file_name']}) has no annotation "
                         f"({len(missing)} image(s) without one)")
    images = meta["images"]
    return Annotations([e["file_name"] for e in images], [label_of[category_of[e["id"]]] for e in images],
                       [e["id"] for e in images], [str(c["name"]) for c in categories])


def load_inaturalist(root: Path, split: str, size: int | None = None) -> ImageData:
    """Split ``"train"`` or ``"test"`` (the validation set) decoded at ``size`` (default ``INATURALIST_SIZE``)."""
    size = INATURALIST_SIZE if size is None else size
    base = Path(root) / INATURALIST_FOLDER
    ann_path = base / ANNOTATION_FILES[split]
    ann = read_annotations(ann_path)
    items = [(base / name, label) for name, label in zip(ann.file_names, ann.labels, strict=True)]
    return decode_labelled(items, size, ann_path, f"no readable images listed in {ann_path} under {base}: "
                           f"{obtain_hint(base)}", ann.class_names, {"path": ann.file_names, "image_id": ann.image_ids})


def load_inaturalist_split(root: Path, split: str) -> ImageData:
    return load_inaturalist(root, split)
