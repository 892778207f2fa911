"""STL-10 (Coates et al. 2011), read with torchvision from the official binary files.

The files of ``stl10_binary.tar.gz`` (https://cs.stanford.edu/~acoates/stl10/) are read from
``<root>/stl10_binary/`` with torchvision's ``STL10`` class and ``download=False`` (it checks the
MD5 of every ``*.bin`` file, the unlabelled one included, whichever split is read). Images are
96x96 RGB, stored as uint8 (N, 3, 96, 96); class names come from ``class_names.txt``.

Two names are registered:

* ``stl10``: train = torchvision split ``"train+unlabeled"`` (the 5,000 labelled train images
  followed by the 100,000 unlabelled ones, whose label is -1), as used for self-supervised
  pre-training; test = the 8,000 labelled test images. The train split is about 2.9 GB in memory.
* ``stl10_labeled``: train = the 5,000 labelled train images only; test as above.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..io import read_text
from .base import ImageData

STL10_URL = "https://cs.stanford.edu/~acoates/stl10/"
STL10_FOLDER = "stl10_binary"
STL10_ARCHIVE = "stl10_binary.tar.gz"
CLASS_NAMES_FILE = "class_names.txt"


def obtain_hint(root: Path) -> str:
    return (f"download {STL10_ARCHIVE} from {STL10_URL} and extract it into {root} "
            f"(`tar -xzf {STL10_ARCHIVE} -C {root}`), or, where a network exists, run "
            f"torchvision.datasets.STL10('{root}', download=True)")


def missing_stl10(root: Path) -> str | None:
    """What ``stl10`` and ``stl10_labeled`` miss under ``root`` and how to get it; None when present."""
    path = Path(root) / STL10_FOLDER
    return None if path.is_dir() else f"{path} not found: {obtain_hint(root)}"


def load_stl10(root: Path, split: str, unlabeled: bool) -> ImageData:
    """Split ``"train"`` (``"train+unlabeled"`` if ``unlabeled``) or ``"test"`` of STL-10."""
    from torchvision.datasets import STL10

    root = Path(root)
    folder = root / STL10_FOLDER
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} not found: {obtain_hint(root)}")
    files = [name for name, _ in STL10.train_list + STL10.test_list] + [CLASS_NAMES_FILE]
    missing = [str(folder / name) for name in files if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found: {obtain_hint(root)}")
    tv_split = ("train+unlabeled" if unlabeled else "train") if split == "train" else "test"
    try:
        ds = STL10(str(root), split=tv_split, download=False)
    except RuntimeError as e:  # an MD5 mismatch: truncated or altered files
        raise RuntimeError(f"{folder}: {e}; re-extract it: {obtain_hint(root)}") from e
    class_names = [line.strip() for line in read_text(folder / CLASS_NAMES_FILE).splitlines() if line.strip()]
    images = torch.from_numpy(np.ascontiguousarray(ds.data))  # (N, 3, 96, 96), rows and columns as displayed
    labels = torch.from_numpy(np.asarray(ds.labels).astype(np.int64))  # uint8 - 1 for the labelled files
    return ImageData(images=images, labels=labels, class_names=class_names,
                     source_index=torch.arange(len(images), dtype=torch.int64))


def load_stl10_unlabeled(root: Path, split: str) -> ImageData:
    return load_stl10(root, split, unlabeled=True)


def load_stl10_labeled(root: Path, split: str) -> ImageData:
    return load_stl10(root, split, unlabeled=False)
