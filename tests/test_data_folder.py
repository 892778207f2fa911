"""Image-folder loader (resize + centre crop into memory, corrupt files reported) and the imagenet100 list."""

from __future__ import annotations

import warnings
from importlib import resources

import numpy as np
import pytest
import torch
from PIL import Image

from isogclr.data import folder, load_dataset
from isogclr.data.folder import image_folder, load_square_rgb, read_class_list


def _jpeg(path, colour, size=(20, 12)):
    Image.new("RGB", size, colour).save(path, format="JPEG", quality=95)


@pytest.fixture
def tree(tmp_path):
    for split, n in (("train", 3), ("val", 1)):
        for c, colour in (("n01", (250, 10, 10)), ("n02", (10, 250, 10))):
            d = tmp_path / split / c
            d.mkdir(parents=True)
            for i in range(n):
                _jpeg(d / f"img_{i}.JPEG", colour)
    (tmp_path / "train" / "n02" / "broken.JPEG").write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    (tmp_path / "train" / "n02" / "notes.txt").write_text("ignored")
    return tmp_path


def test_image_folder_refuses_a_corrupt_image_naming_it(tree):
    with pytest.raises(ValueError, match=r"train: 1 of 7 samples cannot be read \(.*broken.JPEG: .*replace or remove"):
        image_folder(tree, "train", size=8)


def test_image_folder_skips_and_reports_corrupt_within_max_unreadable(tree):
    with pytest.warns(UserWarning, match=r"1 of 7 samples cannot be read .*broken.JPEG.*skipped"):
        data = image_folder(tree, "train", size=8, max_unreadable=1)
    assert data.images.shape == (6, 3, 8, 8) and data.images.dtype == torch.uint8
    assert data.labels.tolist() == [0, 0, 0, 1, 1, 1] and data.class_names == ["n01", "n02"]
    assert torch.equal(data.source_index, torch.arange(6))
    assert data.extra["path"][0] == "n01/img_0.JPEG"
    red = data.images[0].float().mean(dim=(1, 2))
    assert red[0] > 200 and red[1] < 60


def test_clean_folder_does_not_warn_and_class_list_fixes_labels(tree):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = image_folder(tree, "val", size=8, classes=["n02", "n01"])
    assert data.labels.tolist() == [0, 1] and data.extra["path"].tolist() == ["n02/img_0.JPEG", "n01/img_0.JPEG"]


def test_missing_class_folder_is_named(tree):
    with pytest.raises(FileNotFoundError, match="n03"):
        image_folder(tree, "val", size=8, classes=["n01", "n03"])
    with pytest.raises(FileNotFoundError, match="how to get it"):
        image_folder(tree, "test", size=8, source="how to get it")


def test_square_centre_crop(tmp_path):
    img = np.zeros((10, 30, 3), dtype=np.uint8)
    img[:, 10:20] = 255  # white centre third of a wide image
    Image.fromarray(img).save(tmp_path / "wide.png")
    out = load_square_rgb(tmp_path / "wide.png", 10)
    assert out.shape == (10, 10, 3) and out.min() >= 250


def test_imagenet100_class_list_is_packaged():
    ids = read_class_list("imagenet100")
    assert len(ids) == 100 == len(set(ids)) and ids == sorted(ids)
    assert ids[0] == "n01440764" and ids[-1] == "n01855672"
    assert resources.files("isogclr.data").joinpath("classes/imagenet100.txt").is_file()


def test_imagenet100_registered(tmp_path, monkeypatch):
    ids = read_class_list("imagenet100")
    for split in ("train", "val"):
        for wnid in ids[:2]:
            (tmp_path / "imagenet" / split / wnid).mkdir(parents=True)
            _jpeg(tmp_path / "imagenet" / split / wnid / "a.JPEG", (0, 0, 200), size=(40, 40))
    with pytest.raises(FileNotFoundError, match=ids[2]):
        load_dataset("imagenet100", tmp_path, "test")
    monkeypatch.setattr(folder, "read_class_list", lambda name: ids[:2])
    monkeypatch.setattr(folder, "IMAGENET100_SIZE", 16)
    data = load_dataset("imagenet100", tmp_path, "test")
    assert data.images.shape == (2, 3, 16, 16) and data.class_names == ids[:2]
