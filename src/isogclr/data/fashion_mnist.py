"""Fashion-MNIST (Xiao et al. 2017) and its long-tailed train split, read with torchvision.

The idx files are taken, in this order, from:

1. ``<root>/fashion_mnist/FashionMNIST/raw/`` when it already holds the four uncompressed
   files torchvision reads (``train-images-idx3-ubyte`` ...), e.g. after
   ``torchvision.datasets.FashionMNIST("<root>/fashion_mnist", download=True)`` on a networked machine;
2. ``<root>/fashion_mnist/`` holding the four files, gzipped or not;
3. :data:`SYSTEM_DIR`, where the Debian package ``dataset-fashion-mnist`` installs them
   gzipped (``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``).

From 2 or 3 they are decompressed once into the raw folder of 1 (the layout torchvision expects).
Images stay 1-channel: (N, 1, 28, 28) uint8; 60,000 train and 10,000 test images, 6,000 and
1,000 per class. ``fashion_mnist_lt`` keeps ``int(6000 * 0.01 ** (c / 9))`` train images of class c
(imbalance ratio 100, 14,886 images in all); its test split is the balanced one.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import torch

from .base import ImageData, long_tailed_positions, register_dataset

SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL_HINT = "sudo apt-get install -y dataset-fashion-mnist"
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def raw_folder(root: Path) -> Path:
    """Where torchvision's ``FashionMNIST(root / "fashion_mnist")`` reads the uncompressed idx files."""
    return Path(root) / "fashion_mnist" / "FashionMNIST" / "raw"


def _find(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def prepare_raw(root: Path) -> Path:
    """Make the raw folder hold the four uncompressed idx files; return it.

    Raises FileNotFoundError naming every folder searched and how to obtain the files.
    """
    raw = raw_folder(root)
    if all((raw / name).is_file() for name in FILES):
        return raw
    searched = [raw, Path(root) / "fashion_mnist", SYSTEM_DIR]
    for source in searched[1:]:
        found = [_find(source, name) for name in FILES]
        if all(found):
            break
    else:
        raise FileNotFoundError(
            f"Fashion-MNIST idx files ({', '.join(FILES)}, optionally .gz) not found in any of "
            f"{', '.join(str(p) for p in searched)}: install them with `{INSTALL_HINT}` "
            f"(or, where a network exists, run torchvision.datasets.FashionMNIST('{Path(root) / 'fashion_mnist'}', "
            f"download=True))")
    raw.mkdir(parents=True, exist_ok=True)
    for name, path in zip(FILES, found, strict=True):
        target = raw / name
        if target.is_file():
            continue
        tmp = raw / f".{name}.tmp"
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, target)
    return raw


def load_fashion_mnist(root: Path, split: str, long_tailed: bool) -> ImageData:
    from torchvision.datasets import FashionMNIST

    prepare_raw(root)
    ds = FashionMNIST(str(Path(root) / "fashion_mnist"), train=split == "train", download=False)
    images = ds.data.to(torch.uint8).unsqueeze(1).contiguous()  # (N, 1, 28, 28)
    labels = ds.targets.to(torch.int64)
    positions = np.arange(len(labels))
    if long_tailed and split == "train":
        positions = long_tailed_positions(labels.numpy(), 100.0)
    idx = torch.from_numpy(positions.astype(np.int64))
    return ImageData(images=images[idx], labels=labels[idx], class_names=list(CLASS_NAMES), source_index=idx)


register_dataset("fashion_mnist")(lambda root, split: load_fashion_mnist(root, split, False))
register_dataset("fashion_mnist_lt")(lambda root, split: load_fashion_mnist(root, split, True))
