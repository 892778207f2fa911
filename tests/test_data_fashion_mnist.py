"""Fashion-MNIST loader: a tiny idx fixture in the Debian layout, errors, and (if installed) the real files."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from isogclr.data import fashion_mnist, load_dataset, long_tailed_positions


def _write_idx(path, array: np.ndarray, gz: bool) -> None:
    """The idx format: magic (0, 0, dtype 0x08 = uint8, ndim), big-endian int32 dims, raw bytes."""
    payload = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}i", *array.shape)
    payload += np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(payload)
    else:
        path.write_bytes(payload)


def _fixture(folder, n_train=20, n_test=10, gz=True):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        suffix = ".gz" if gz else ""
        _write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images, gz)
        _write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels, gz)
        arrays[prefix] = (images, labels)
    return arrays


def test_loads_gzipped_system_folder(tmp_path, monkeypatch):
    system = tmp_path / "system"
    arrays = _fixture(system)
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", system)
    root = tmp_path / "data"
    train = load_dataset("fashion_mnist", root, "train")
    assert train.images.shape == (20, 1, 28, 28) and train.images.dtype == torch.uint8
    assert np.array_equal(train.images[:, 0].numpy(), arrays["train"][0])
    assert np.array_equal(train.labels.numpy(), arrays["train"][1])
    assert torch.equal(train.source_index, torch.arange(20))
    assert train.class_names[0] == "T-shirt/top" and train.num_classes == 10
    # decompressed once into the layout torchvision expects
    assert (fashion_mnist.raw_folder(root) / "train-images-idx3-ubyte").is_file()
    test = load_dataset("fashion_mnist", root, "test")
    assert np.array_equal(test.images[:, 0].numpy(), arrays["t10k"][0])


def test_long_tailed_keeps_source_index(tmp_path, monkeypatch):
    system = tmp_path / "system"
    arrays = _fixture(system, n_train=200)
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", system)
    lt = load_dataset("fashion_mnist_lt", tmp_path / "data", "train")
    expected = long_tailed_positions(arrays["train"][1], 100.0)
    assert torch.equal(lt.source_index, torch.from_numpy(expected))
    assert np.bincount(lt.labels.numpy(), minlength=10).tolist() == [int(20 * 0.01 ** (c / 9)) for c in range(10)]
    assert np.array_equal(lt.images[:, 0].numpy(), arrays["train"][0][expected])
    assert len(load_dataset("fashion_mnist_lt", tmp_path / "data", "test")) == 10


def test_root_folder_searched_before_system(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", tmp_path / "absent")
    _fixture(tmp_path / "data" / "fashion_mnist", n_train=30, gz=False)
    assert len(load_dataset("fashion_mnist", tmp_path / "data", "train")) == 30


def test_missing_files_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="sudo apt-get install -y dataset-fashion-mnist") as info:
        load_dataset("fashion_mnist", tmp_path / "data", "train")
    assert str(tmp_path / "absent") in str(info.value)


@pytest.mark.skipif(not (fashion_mnist.SYSTEM_DIR / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Debian package dataset-fashion-mnist not installed")
def test_real_files(tmp_path):
    train = load_dataset("fashion_mnist", tmp_path, "train")
    test = load_dataset("fashion_mnist", tmp_path, "test")
    assert train.images.shape == (60000, 1, 28, 28) and len(test) == 10000
    assert np.bincount(train.labels.numpy()).tolist() == [6000] * 10
    lt = load_dataset("fashion_mnist_lt", tmp_path, "train")
    assert len(lt) == sum(int(6000 * 0.01 ** (c / 9)) for c in range(10)) == 14886


def test_mini_subset_is_an_image_folder_read_back_exactly(tmp_path, monkeypatch):
    """The mini subset: the first k images per class, resized, written as PNGs and read by image_folder."""
    from PIL import Image

    system = tmp_path / "system"
    arrays = _fixture(system, n_train=300, n_test=50)
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", system)
    root = tmp_path / "data"
    spec = fashion_mnist.FashionMnistMiniSpec(per_class=(20, 3), image_size=16)
    counts = fashion_mnist.write_fashion_mnist_mini(spec, root, root / "fashion_mnist_mini")
    assert counts == {"train": 200, "test": 30}
    assert sorted(p.name for p in (root / "fashion_mnist_mini" / "train").iterdir()) == fashion_mnist.CLASS_FOLDERS

    train = load_dataset("fashion_mnist_mini", root, "train")
    assert train.images.shape == (200, 3, 16, 16) and train.num_classes == 10
    assert train.labels.bincount().tolist() == [20] * 10
    # source_index: positions in the official split; class c's first 20 images in split order
    labels = arrays["train"][1]
    expected = np.sort(np.concatenate([np.flatnonzero(labels == c)[:20] for c in range(10)]))
    assert np.array_equal(np.sort(train.source_index.numpy()), expected)
    # pixels: the official image resized once (bicubic), grey in all three channels, lossless round trip
    i = int(train.source_index[0])
    resized = np.asarray(Image.fromarray(arrays["train"][0][i]).resize((16, 16), Image.Resampling.BICUBIC))
    assert all(np.array_equal(train.images[0, c].numpy(), resized) for c in range(3))
    assert int(train.labels[0]) == int(labels[i])

    lt = load_dataset("fashion_mnist_mini_lt", root, "train")
    assert lt.labels.bincount(minlength=10).tolist() == [int(20 * 0.01 ** (c / 9)) for c in range(10)]
    assert set(lt.source_index.tolist()) <= set(train.source_index.tolist())
    assert load_dataset("fashion_mnist_mini_lt", root, "test").labels.bincount().tolist() == [3] * 10

    # rewriting replaces the folder (no stale class folders or files survive)
    fashion_mnist.write_fashion_mnist_mini(fashion_mnist.FashionMnistMiniSpec((5, 1), 8), root,
                                           root / "fashion_mnist_mini")
    assert load_dataset("fashion_mnist_mini", root, "train").images.shape == (50, 3, 8, 8)


def test_mini_subset_errors_name_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="fashion-mnist-mini"):
        load_dataset("fashion_mnist_mini", tmp_path, "train")
    with pytest.raises(FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        fashion_mnist.write_fashion_mnist_mini(fashion_mnist.FashionMnistMiniSpec(), tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match="data.fashion_mnist_mini.per_class"):
        fashion_mnist.FashionMnistMiniSpec(per_class=(7000, 10))
    with pytest.raises(ValueError, match="data.fashion_mnist_mini.image_size"):
        fashion_mnist.FashionMnistMiniSpec(image_size=64)
