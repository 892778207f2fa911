"""STL-10 loaders on a tiny fixture in the real binary layout (column-major uint8, 1-based labels) and errors."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from torchvision.datasets import STL10

from isogclr.data import load_dataset

CLASSES = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]


def _md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _write_images(path, images: np.ndarray) -> None:
    """(N, 3, 96, 96) images as displayed -> STL-10 bytes: per image and channel, column by column."""
    path.write_bytes(np.ascontiguousarray(images.transpose(0, 1, 3, 2)).tobytes())


@pytest.fixture
def stl10_root(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    folder = tmp_path / "stl10_binary"
    folder.mkdir()
    arrays = {name: rng.integers(0, 256, (n, 3, 96, 96), dtype=np.uint8)
              for name, n in (("train", 3), ("unlabeled", 2), ("test", 2))}
    labels = {"train": np.array([0, 9, 4]), "test": np.array([7, 2])}
    for name, images in arrays.items():
        _write_images(folder / f"{name}_X.bin", images)
    for name, y in labels.items():
        (folder / f"{name}_y.bin").write_bytes((y + 1).astype(np.uint8).tobytes())  # 1-based on disk
    (folder / "class_names.txt").write_text("\n".join(CLASSES) + "\n")
    # the fixture's own checksums, so torchvision's MD5 checks run as on the real files
    monkeypatch.setattr(STL10, "train_list", [[n, _md5(folder / n)] for n in
                                              ("train_X.bin", "train_y.bin", "unlabeled_X.bin")])
    monkeypatch.setattr(STL10, "test_list", [[n, _md5(folder / n)] for n in ("test_X.bin", "test_y.bin")])
    return tmp_path, arrays, labels


def test_fixture_orientation_is_column_major(stl10_root):
    root, arrays, _ = stl10_root
    raw = np.fromfile(root / "stl10_binary" / "train_X.bin", dtype=np.uint8)
    img = arrays["train"][0]
    assert raw[1] == img[0, 1, 0] and raw[96] == img[0, 0, 1]  # second byte = row 1 of column 0


def test_stl10_train_includes_unlabeled(stl10_root):
    root, arrays, labels = stl10_root
    train = load_dataset("stl10", root, "train")
    assert train.images.shape == (5, 3, 96, 96) and train.images.dtype == torch.uint8
    assert np.array_equal(train.images.numpy(), np.concatenate([arrays["train"], arrays["unlabeled"]]))
    assert train.labels.dtype == torch.int64 and train.labels.tolist() == [0, 9, 4, -1, -1]
    assert torch.equal(train.source_index, torch.arange(5))
    assert train.class_names == CLASSES and train.num_classes == 10
    test = load_dataset("stl10", root, "test")
    assert np.array_equal(test.images.numpy(), arrays["test"]) and test.labels.tolist() == [7, 2]


def test_stl10_labeled(stl10_root):
    root, arrays, labels = stl10_root
    train = load_dataset("stl10_labeled", root, "train")
    assert np.array_equal(train.images.numpy(), arrays["train"])
    assert train.labels.dtype == torch.int64 and train.labels.tolist() == labels["train"].tolist()
    assert train.images.is_contiguous() and len(load_dataset("stl10_labeled", root, "test")) == 2


@pytest.mark.parametrize("name", ["stl10", "stl10_labeled"])
def test_missing_folder_is_named(tmp_path, name):
    with pytest.raises(FileNotFoundError, match="download=True") as info:
        load_dataset(name, tmp_path, "train")
    assert str(tmp_path / "stl10_binary") in str(info.value) and "stanford.edu/~acoates/stl10" in str(info.value)


def test_missing_file_is_named(stl10_root):
    root, _, _ = stl10_root
    (root / "stl10_binary" / "unlabeled_X.bin").unlink()
    with pytest.raises(FileNotFoundError, match="unlabeled_X.bin"):
        load_dataset("stl10_labeled", root, "test")


def test_altered_file_fails_the_checksum(stl10_root):
    root, _, _ = stl10_root
    path = root / "stl10_binary" / "test_y.bin"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(RuntimeError, match="re-extract"):
        load_dataset("stl10", root, "test")
