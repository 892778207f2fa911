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

``fashion_mnist_mini`` and ``fashion_mnist_mini_lt`` are the mini profile's real dataset: the first
``per_class`` train and test images of every class, resized to ``image_size`` pixels, written once by
:func:`write_fashion_mnist_mini` (the ``fashion_mnist_mini`` stage of dvc.yaml) as an image folder
``<root>/fashion_mnist_mini/{train,test}/<class>/<index>.png`` and read back by the same
:func:`~isogclr.data.folder.image_folder` code as ImageNet-100 (``<index>`` is the image's position in
the full Fashion-MNIST split and becomes its ``source_index``). The long-tailed variant keeps
``int(n * 0.01 ** (c / 9))`` of the ``n`` train images of class c.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..io import generated_folder, meta_keys, read_json
from .base import ImageData
from .folder import image_folder

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


def load_fashion_mnist(root: Path, split: str) -> ImageData:
    from torchvision.datasets import FashionMNIST

    prepare_raw(root)
    ds = FashionMNIST(str(Path(root) / "fashion_mnist"), train=split == "train", download=False)
    images = ds.data.to(torch.uint8).unsqueeze(1).contiguous()  # (N, 1, 28, 28)
    labels = ds.targets.to(torch.int64)
    return ImageData(images=images, labels=labels, class_names=list(CLASS_NAMES),
                     source_index=torch.arange(len(labels), dtype=torch.int64))


# the loader declared in isogclr.dataset_specs.SPECS (fashion_mnist_lt: its training split's subset)
def load_fashion_mnist_balanced(root: Path, split: str) -> ImageData:
    return load_fashion_mnist(root, split)


def missing_fashion_mnist(root: Path) -> str | None:
    """What ``fashion_mnist`` (and ``fashion_mnist_lt``) miss under ``root`` and how to get it; None when present."""
    searched = [raw_folder(root), Path(root) / "fashion_mnist", SYSTEM_DIR]
    if any(all((d / f).is_file() or (d / f"{f}.gz").is_file() for f in FILES) for d in searched):
        return None
    return f"Fashion-MNIST not found in {', '.join(map(str, searched))}: install it with `{INSTALL_HINT}`"


MINI_FOLDER = "fashion_mnist_mini"
CLASS_FOLDERS = [f"{c}_{re.sub('[^a-z]+', '_', name.lower())}" for c, name in enumerate(CLASS_NAMES)]


@dataclass(frozen=True)
class FashionMnistMiniSpec:
    """``data.fashion_mnist_mini`` in params.yaml: images per class (train, test) and their size in pixels."""

    per_class: tuple[int, int] = (200, 100)
    image_size: int = 16

    def __post_init__(self) -> None:
        train, test = self.per_class
        if not (1 <= train <= 6000 and 1 <= test <= 1000):
            raise ValueError(f"data.fashion_mnist_mini.per_class: (train, test) must be within (6000, 1000) "
                             f"per class and >= 1, got {self.per_class}")
        if not 8 <= self.image_size <= 28:
            raise ValueError(f"data.fashion_mnist_mini.image_size must be in [8, 28], got {self.image_size}")


def spec_from_dict(raw: dict) -> FashionMnistMiniSpec:
    """The spec stored in a manifest (JSON lists) back as a :class:`FashionMnistMiniSpec`."""
    raw = dict(raw)
    if "per_class" in raw:
        raw["per_class"] = tuple(raw["per_class"])
    return FashionMnistMiniSpec(**raw)


def write_fashion_mnist_mini(spec: FashionMnistMiniSpec, root: Path, out_dir: Path) -> dict[str, int]:
    """Write the subset as an image folder into ``out_dir`` (replaced atomically); return images per split.
    A non-empty ``out_dir`` that is not this command's output is refused (:func:`isogclr.io.generated_folder`)."""
    with generated_folder(out_dir, _own_output, "python -m isogclr fashion-mnist-mini") as tmp:
        return _write_subset(spec, root, tmp)


def _own_output(folder: Path) -> bool:
    """Whether ``folder`` looks like :func:`write_fashion_mnist_mini`'s output (its meta.json)."""
    return meta_keys(folder) == {"spec", "images"}


def _write_subset(spec: FashionMnistMiniSpec, root: Path, tmp: Path) -> dict[str, int]:
    from PIL import Image

    counts = {}
    for split, per_class in zip(("train", "test"), spec.per_class, strict=True):
        full = load_fashion_mnist(root, split)
        labels = full.labels.numpy()
        for c, folder in enumerate(CLASS_FOLDERS):
            (tmp / split / folder).mkdir(parents=True)
            for i in np.flatnonzero(labels == c)[:per_class]:
                img = Image.fromarray(full.images[i, 0].numpy(), mode="L")
                img = img.resize((spec.image_size, spec.image_size), Image.Resampling.BICUBIC)
                img.save(tmp / split / folder / f"{int(full.source_index[i]):05d}.png")
        counts[split] = per_class * len(CLASS_FOLDERS)
    (tmp / "meta.json").write_text(json.dumps({"spec": asdict(spec), "images": counts}, indent=1))
    return counts


def load_fashion_mnist_mini(root: Path, split: str) -> ImageData:
    from .decoded import decoded_split
    from .manifest import ensure_tracked

    folder = Path(root) / MINI_FOLDER
    ensure_tracked(folder)  # rebuilt from data/fashion_mnist_mini.json when missing or stale
    meta = folder / "meta.json"
    if not meta.is_file():
        raise FileNotFoundError(f"{meta} not found (nor the manifest {folder}.json to rebuild it from): "
                                f"write the subset with `python -m isogclr fashion-mnist-mini "
                                f"--out {folder}` (the fashion_mnist_mini stage of dvc.yaml; it needs "
                                f"`{INSTALL_HINT}`)")
    size = read_json(meta)["spec"]["image_size"]
    data = decoded_split(folder, split, lambda: image_folder(folder, split, size=size, classes=CLASS_FOLDERS,
                                                             source="the fashion_mnist_mini stage"))
    data.class_names = list(CLASS_NAMES)
    data.source_index = torch.as_tensor([int(Path(p).stem) for p in data.extra["path"]], dtype=torch.int64)
    return data


# the loader declared in isogclr.dataset_specs.SPECS (fashion_mnist_mini_lt: its training split's subset)
def load_fashion_mnist_mini_balanced(root: Path, split: str) -> ImageData:
    return load_fashion_mnist_mini(root, split)


def missing_fashion_mnist_mini(root: Path) -> str | None:
    """None when the subset is on disk (stale or missing with a manifest: rebuilt from the source), else what
    :func:`missing_fashion_mnist` says of the source."""
    from .manifest import manifest_path, up_to_date

    mini = Path(root) / MINI_FOLDER
    if up_to_date(mini) or (mini.is_dir() and not manifest_path(mini).is_file()):
        return None
    return missing_fashion_mnist(root)
