"""CIFAR-10 / CIFAR-100 (Krizhevsky 2009) and their long-tailed train splits, read with torchvision.

The standard python-pickle batches are read from ``<root>/cifar-10-batches-py/`` and
``<root>/cifar-100-python/`` (the folders inside ``cifar-10-python.tar.gz`` and
``cifar-100-python.tar.gz`` from https://www.cs.toronto.edu/~kriz/cifar.html), with torchvision's
``CIFAR10`` / ``CIFAR100`` classes and ``download=False`` (they check every file's MD5).
``cifar100`` also carries the 20 coarse labels as ``superclass``.

Long-tailed train splits keep ``int(n_max * 0.01 ** (c / (C - 1)))`` images of class c (imbalance ratio 100,
Cao et al. 2019), the first ones in file order (the subset :func:`isogclr.data.base.load_dataset` takes):

>>> sum(int(5000 * 0.01 ** (c / 9)) for c in range(10))  # cifar10_lt train size
12406
>>> sum(int(500 * 0.01 ** (c / 99)) for c in range(100))  # cifar100_lt train size
10847

Test splits are the balanced 10,000 images.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

from .base import ImageData

CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
FOLDERS = {10: "cifar-10-batches-py", 100: "cifar-100-python"}
ARCHIVES = {10: "cifar-10-python.tar.gz", 100: "cifar-100-python.tar.gz"}


def obtain_hint(root: Path, num_classes: int) -> str:
    cls = f"CIFAR{num_classes}"
    return (f"download {ARCHIVES[num_classes]} from {CIFAR_URL} and extract it into {root} "
            f"(`tar -xzf {ARCHIVES[num_classes]} -C {root}`), or, where a network exists, run "
            f"torchvision.datasets.{cls}('{root}', download=True)")


def missing_cifar10(root: Path) -> str | None:
    """What ``cifar10`` (and ``cifar10_lt``) miss under ``root`` and how to get it; None when present."""
    return _missing(Path(root), 10)


def missing_cifar100(root: Path) -> str | None:
    return _missing(Path(root), 100)


def _missing(root: Path, num_classes: int) -> str | None:
    path = root / FOLDERS[num_classes]
    return None if path.is_dir() else f"{path} not found: {obtain_hint(root, num_classes)}"


def _unpickle(path: Path) -> dict:
    """A CIFAR pickle (python-2 str keys) with str keys, as torchvision reads it."""
    with open(path, "rb") as f:
        entry = pickle.load(f, encoding="latin1")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


def load_cifar(root: Path, split: str, num_classes: int) -> ImageData:
    from torchvision.datasets import CIFAR10, CIFAR100

    root = Path(root)
    folder = root / FOLDERS[num_classes]
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} not found: {obtain_hint(root, num_classes)}")
    cls = CIFAR10 if num_classes == 10 else CIFAR100
    files = [name for name, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    missing = [str(folder / name) for name in files if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found: {obtain_hint(root, num_classes)}")
    try:
        ds = cls(str(root), train=split == "train", download=False)
    except RuntimeError as e:  # an MD5 mismatch: truncated or altered files
        raise RuntimeError(f"{folder}: {e}; re-extract it: {obtain_hint(root, num_classes)}") from e
    images = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))  # (N, 3, 32, 32)
    labels = np.asarray(ds.targets, dtype=np.int64)
    superclass = superclass_names = None
    if num_classes == 100:
        names = [name for name, _ in (cls.train_list if split == "train" else cls.test_list)]
        superclass = np.concatenate([np.asarray(_unpickle(folder / n)["coarse_labels"], dtype=np.int64)
                                     for n in names])
        superclass_names = list(_unpickle(folder / cls.meta["filename"])["coarse_label_names"])
    return ImageData(
        images=images, labels=torch.from_numpy(labels), class_names=list(ds.classes),
        source_index=torch.arange(len(labels), dtype=torch.int64),
        superclass=None if superclass is None else torch.from_numpy(superclass),
        superclass_names=superclass_names,
    )


# the loaders declared in isogclr.dataset_specs.SPECS (cifar10_lt, cifar100_lt: their training splits' subsets)
def load_cifar10(root: Path, split: str) -> ImageData:
    return load_cifar(root, split, 10)


def load_cifar100(root: Path, split: str) -> ImageData:
    return load_cifar(root, split, 100)
