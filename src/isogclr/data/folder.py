"""ImageNet-style image folders (``<root>/<split>/<class>/*.JPEG``) decoded into uint8 memory.

Every image is converted to RGB, its shorter side resized to ``size`` and centre-cropped to
``size x size`` at load time, so a split is one (N, 3, size, size) uint8 tensor; this suits small
sets (ImageNet-100 at 64 pixels is about 1.5 GB for the 126,689 train images). An image that cannot
be read is an error (every unreadable one counted and the first ones named, after the whole split is
read), unless their number is within ``max_unreadable`` (default 0): then they are skipped, counted and
reported in one warning.

``imagenet100`` is the first 100 ImageNet-1k WordNet ids in sorted order (n01440764 ... n01855672),
shipped as ``classes/imagenet100.txt`` (taken from the sorted 1000-id list timm ships in
``timm/data/_info/imagenet_synsets.txt``). Its images are read from ``<root>/imagenet100/`` if that
folder exists, else ``<root>/imagenet/``, split ``train`` -> ``train/`` and ``test`` -> ``val/``
(the validation images sorted into one folder per wnid).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from PIL import Image

from .base import ImageData
from .manifest import GENERATORS, ManifestError, manifest_path, read_manifest

CLASSES_DIR = Path(__file__).parent / "classes"
IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png", ".bmp", ".webp")
IMAGENET100_SIZE = 64
IMAGENET_HINT = ("download ILSVRC2012 (https://image-net.org/download.php; registration required), extract "
                 "train/ into one folder per wnid and sort val/ into one folder per wnid (e.g. with the "
                 "valprep.sh script of the PyTorch ImageNet example)")


def read_class_list(name: str) -> list[str]:
    """Class ids listed one per line in the shipped file ``classes/<name>.txt``."""
    path = CLASSES_DIR / f"{name}.txt"
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def load_square_rgb(path: Path | str | BinaryIO, size: int) -> np.ndarray:
    """Decode an image (path or binary file) to uint8 (size, size, 3): shorter side to ``size``, centre crop."""
    with Image.open(path) as img:
        img.draft("RGB", (size, size))  # JPEG: decode at a reduced scale that is still >= size
        img = img.convert("RGB")
        w, h = img.size
        if (w, h) == (size, size):  # already square at size (the generated sets): nothing to resize or crop
            return np.asarray(img, dtype=np.uint8)
        scale = size / min(w, h)
        nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
        img = img.resize((nw, nh), Image.Resampling.BICUBIC)
        left, top = (nw - size) // 2, (nh - size) // 2
        img = img.crop((left, top, left + size, top + size))
        return np.asarray(img, dtype=np.uint8)


def unreadable_message(where: Path | str, bad: Sequence[tuple[str, Exception]], total: int, fix: str) -> str:
    """``where: k of n samples cannot be read (first: ...): fix``, naming up to three of them with the error."""
    shown = "; ".join(f"{name}: {type(err).__name__}: {err}" for name, err in bad[:3])
    more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"{where}: {len(bad)} of {total} samples cannot be read ({shown}{more}): {fix}"


UNREADABLE_FIX = ("replace or remove the files (re-download or re-extract the dataset); max_unreadable= lets a "
                  "known number of them be skipped")


def unreadable_fix(where: Path | str) -> str:
    """What to do about unreadable images under ``where``: :data:`UNREADABLE_FIX` for real data; for a folder
    generated from a manifest (:mod:`isogclr.data.manifest`), how to hash and regenerate it."""
    for folder in (Path(where), *Path(where).parents):
        if folder.name and manifest_path(folder).is_file():
            try:
                stage = GENERATORS[read_manifest(manifest_path(folder))["generator"]].stage
            except (ManifestError, KeyError, OSError, ValueError):
                continue
            return (f"{folder} is generated from its manifest {manifest_path(folder)}, not downloaded: `python -m "
                    f"isogclr restore-data --verify --root {folder.parent}` hashes it and regenerates it, naming the "
                    f"files that differed; if it finds the manifest's bytes, rerun the data stage "
                    f"(`dvc repro {stage}`)")
    return UNREADABLE_FIX


def decode_labelled(items: Sequence[tuple[Path, int]], size: int, where: Path | str, not_found: str,
                    class_names: list[str], extra: dict[str, list], max_unreadable: int = 0) -> ImageData:
    """Decode ``(path, label)`` items into an :class:`ImageData`.

    Unreadable images: more than ``max_unreadable`` of them raise ValueError naming ``where``, their number and
    the first ones with their error, after every item is tried; up to ``max_unreadable`` are skipped and
    reported in one warning (``extra``, per-item metadata lists, is kept for the readable items only). No
    item at all raises ``FileNotFoundError(not_found)``.
    """
    if not items:
        raise FileNotFoundError(not_found)
    images, kept, bad = [], [], []
    for i, (path, _) in enumerate(items):
        try:
            images.append(load_square_rgb(path, size))
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
            bad.append((str(path), err))
            continue
        kept.append(i)
    if len(bad) > max_unreadable:
        raise ValueError(unreadable_message(where, bad, len(items), unreadable_fix(where)))
    if bad:
        warnings.warn(unreadable_message(where, bad, len(items), f"skipped (max_unreadable={max_unreadable})"),
                      stacklevel=3)
    if not images:
        raise FileNotFoundError(not_found)
    array = np.stack(images).transpose(0, 3, 1, 2)
    return ImageData(
        images=torch.from_numpy(np.ascontiguousarray(array)),
        labels=torch.as_tensor([items[i][1] for i in kept], dtype=torch.int64),
        class_names=class_names,
        source_index=torch.arange(len(images), dtype=torch.int64),
        extra={k: np.asarray([v[i] for i in kept]) for k, v in extra.items()},
    )


def image_folder(root: Path | str, split: str, size: int = 64, classes: Sequence[str] | None = None,
                 source: str = "", max_unreadable: int = 0) -> ImageData:
    """Load ``<root>/<split>/<class>/*`` into memory as (N, 3, size, size) uint8.

    ``classes`` fixes the label order (label = position in the list; every class folder must exist);
    by default the sorted sub-folders of ``<root>/<split>``. Files are read in sorted order within a
    class. ``extra["path"]`` holds each kept image's path relative to ``<root>/<split>``; ``source``
    is appended to the not-found message (how to obtain the data); ``max_unreadable``: see
    :func:`decode_labelled`.
    """
    split_dir = Path(root) / split
    hint = f": {source}" if source else ""
    if not split_dir.is_dir():
        raise FileNotFoundError(f"{split_dir} not found{hint}")
    if classes is None:
        classes = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
        if not classes:
            raise FileNotFoundError(f"{split_dir} holds no class folders{hint}")
    missing = [str(split_dir / c) for c in classes if not (split_dir / c).is_dir()]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise FileNotFoundError(f"class folders {shown} not found{hint}")
    items = [(p, label) for label, c in enumerate(classes)
             for p in sorted(p for p in (split_dir / c).iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)]
    return decode_labelled(items, size, split_dir, f"no readable images under {split_dir}{hint}", list(classes),
                           {"path": [str(p.relative_to(split_dir)) for p, _ in items]}, max_unreadable)


def imagenet100_split(root: Path | str, split: str) -> tuple[Path, str]:
    """(folder, hint) of ImageNet-100's split: ``<root>/imagenet100`` if it exists, else ``<root>/imagenet``;
    ``train`` -> ``train/``, ``test`` -> ``val/``."""
    base = Path(root) / "imagenet100"
    if not base.is_dir():
        base = Path(root) / "imagenet"
    hint = f"{IMAGENET_HINT}; expected {Path(root) / 'imagenet100'} or {Path(root) / 'imagenet'}"
    return base / ("train" if split == "train" else "val"), hint


def missing_imagenet100(root: Path) -> str | None:
    """What ``imagenet100`` misses under ``root`` and how to get it; None when present."""
    if (Path(root) / "imagenet100").is_dir() or (Path(root) / "imagenet").is_dir():
        return None
    return f"{Path(root) / 'imagenet100'} (or {Path(root) / 'imagenet'}) not found: {IMAGENET_HINT}"


def load_imagenet100(root: Path, split: str) -> ImageData:
    """In memory at ``IMAGENET100_SIZE`` pixels (the mini scale); the paper's 224 pixels stream
    (:mod:`isogclr.data.streaming`, ``train.stream`` in params.yaml)."""
    folder, hint = imagenet100_split(root, split)
    return image_folder(folder.parent, folder.name, size=IMAGENET100_SIZE, classes=read_class_list("imagenet100"),
                        source=hint)
