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


def load_inaturalist(root: Path, split: str, size: int | None = None) -> ImageData:
    """Split ``"train"`` or ``"test"`` (the validation set) decoded at ``size`` (default ``INATURALIST_SIZE``)."""
    size = INATURALIST_SIZE if size is None else size
    base = Path(root) / INATURALIST_FOLDER
    ann_path = base / ANNOTATION_FILES[split]
    if not ann_path.is_file():
        raise FileNotFoundError(f"{ann_path} not found: {obtain_hint(base)}")
    meta = read_json(ann_path)
    categories = sorted(meta["categories"], key=lambda c: c["id"])
    label_of = {c["id"]: i for i, c in enumerate(categories)}
    category_of = {a["image_id"]: a["category_id"] for a in meta["annotations"]}
    for entry in meta["images"]:
        if entry["id"] not in category_of:
            raise ValueError(f"{ann_path}: image {entry['id']} ({entry['file_name']}) has no annotation")
    items = [(base / e["file_name"], label_of[category_of[e["id"]]]) for e in meta["images"]]
    return decode_labelled(items, size, ann_path, f"no readable images listed in {ann_path} under {base}: "
                           f"{obtain_hint(base)}", [str(c["name"]) for c in categories],
                           {"path": [e["file_name"] for e in meta["images"]],
                            "image_id": [e["id"] for e in meta["images"]]})


def load_inaturalist_split(root: Path, split: str) -> ImageData:
    return load_inaturalist(root, split)
