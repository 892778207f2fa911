"""CIFAR-10/100 loaders on a tiny python-pickle fixture in the real layout, LT arithmetic and errors."""

from __future__ import annotations

import hashlib
import pickle
import struct

import numpy as np
import pytest
import torch
from torchvision.datasets import CIFAR10, CIFAR100

from isogclr.data import load_dataset, long_tailed_positions


class _Py2Pickler(pickle._Pickler):
    """Writes bytes as python-2 ``str`` opcodes, as in the real CIFAR files.

    Read back with ``encoding="latin1"`` (as torchvision does) they become ``str`` keys such as
    "data"; with ``encoding="bytes"`` they are b"data", b"labels", b"fine_labels", b"coarse_labels".
    """

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj):
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _dump(path, obj) -> None:
    def py2(x):
        if isinstance(x, str):
            return x.encode("latin1")
        if isinstance(x, dict):
            return {py2(k): py2(v) for k, v in x.items()}
        if isinstance(x, list):
            return [py2(v) for v in x]
        return x

    with open(path, "wb") as f:
        _Py2Pickler(f, protocol=2).dump(py2(obj))


def _md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _batch(rng, n, label_keys: dict[str, np.ndarray]):
    out = {"batch_label": "fixture", "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
           "filenames": [f"img_{i}.png" for i in range(n)]}
    out.update({k: v.tolist() for k, v in label_keys.items()})
    return out


@pytest.fixture
def cifar10_root(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    batches = {}
    for i in range(1, 6):
        batches[f"data_batch_{i}"] = _batch(rng, 4, {"labels": (np.arange(4) + i) % 10})
    batches["test_batch"] = _batch(rng, 3, {"labels": np.array([9, 8, 7])})
    for name, batch in batches.items():
        _dump(folder / name, batch)
    _dump(folder / "batches.meta", {"label_names": [f"c{i}" for i in range(10)], "num_cases_per_batch": 4})
    # the fixture's own checksums, so torchvision's MD5 checks run as on the real files
    monkeypatch.setattr(CIFAR10, "train_list", [[f"data_batch_{i}", _md5(folder / f"data_batch_{i}")]
                                                for i in range(1, 6)])
    monkeypatch.setattr(CIFAR10, "test_list", [["test_batch", _md5(folder / "test_batch")]])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": _md5(folder / "batches.meta")})
    return tmp_path, batches


@pytest.fixture
def cifar100_root(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    fine = np.array([0, 1, 2, 3, 4, 5, 99, 98])
    train = _batch(rng, 8, {"fine_labels": fine, "coarse_labels": fine % 20})
    test = _batch(rng, 2, {"fine_labels": np.array([5, 6]), "coarse_labels": np.array([5, 6])})
    _dump(folder / "train", train)
    _dump(folder / "test", test)
    _dump(folder / "meta", {"fine_label_names": [f"f{i}" for i in range(100)],
                            "coarse_label_names": [f"s{i}" for i in range(20)]})
    monkeypatch.setattr(CIFAR100, "train_list", [["train", _md5(folder / "train")]])
    monkeypatch.setattr(CIFAR100, "test_list", [["test", _md5(folder / "test")]])
    monkeypatch.setattr(CIFAR100, "meta", {**CIFAR100.meta, "md5": _md5(folder / "meta")})
    return tmp_path, train, test


def test_fixture_keys_are_those_of_the_real_files(cifar10_root):
    root, _ = cifar10_root
    with open(root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        assert set(pickle.load(f, encoding="bytes")) == {b"batch_label", b"data", b"filenames", b"labels"}


def test_cifar10(cifar10_root):
    root, batches = cifar10_root
    train = load_dataset("cifar10", root, "train")
    assert train.images.shape == (20, 3, 32, 32) and train.images.dtype == torch.uint8
    data = np.concatenate([batches[f"data_batch_{i}"]["data"] for i in range(1, 6)]).reshape(-1, 3, 32, 32)
    assert np.array_equal(train.images.numpy(), data)
    assert train.labels.tolist() == sum((batches[f"data_batch_{i}"]["labels"] for i in range(1, 6)), [])
    assert torch.equal(train.source_index, torch.arange(20))
    assert train.class_names == [f"c{i}" for i in range(10)] and train.superclass is None
    test = load_dataset("cifar10", root, "test")
    assert test.labels.tolist() == [9, 8, 7]


def test_cifar10_lt_keeps_source_index(cifar10_root):
    root, _ = cifar10_root
    full = load_dataset("cifar10", root, "train")
    lt = load_dataset("cifar10_lt", root, "train")
    expected = long_tailed_positions(full.labels.numpy(), 100.0)
    assert torch.equal(lt.source_index, torch.from_numpy(expected))
    assert torch.equal(lt.images, full.images[lt.source_index])
    assert len(load_dataset("cifar10_lt", root, "test")) == 3


def test_cifar100_superclass(cifar100_root):
    root, train, test = cifar100_root
    data = load_dataset("cifar100", root, "train")
    assert data.labels.tolist() == train["fine_labels"]
    assert data.superclass.tolist() == train["coarse_labels"]
    assert data.superclass_names == [f"s{i}" for i in range(20)] and data.num_classes == 100
    assert load_dataset("cifar100", root, "test").superclass.tolist() == [5, 6]
    lt = load_dataset("cifar100_lt", root, "train")
    assert torch.equal(lt.superclass, data.superclass[lt.source_index])


@pytest.mark.parametrize(("classes", "per_class", "size"), [(10, 5000, 12406), (100, 500, 10847)])
def test_long_tailed_sizes_of_the_real_data(classes, per_class, size):
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(classes), per_class))
    positions = long_tailed_positions(labels, 100.0)
    assert len(positions) == size
    counts = np.bincount(labels[positions], minlength=classes)
    assert counts[0] == per_class and counts[-1] == per_class // 100


@pytest.mark.parametrize(("name", "folder"), [("cifar10", "cifar-10-batches-py"), ("cifar100_lt", "cifar-100-python")])
def test_missing_folder_is_named(tmp_path, name, folder):
    with pytest.raises(FileNotFoundError, match="download=True") as info:
        load_dataset(name, tmp_path, "train")
    assert str(tmp_path / folder) in str(info.value) and "cs.toronto.edu" in str(info.value)


def test_missing_batch_is_named(cifar10_root):
    root, _ = cifar10_root
    (root / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        load_dataset("cifar10", root, "test")
