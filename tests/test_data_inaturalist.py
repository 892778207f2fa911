"""iNaturalist 2018 loader on a tiny fixture in the official COCO-style json layout, corrupt images and errors."""

from __future__ import annotations

import functools
import json
import warnings

import pytest
import torch
from PIL import Image

from isogclr.data import inaturalist, load_dataset
from isogclr.data.folder import decode_labelled
from isogclr.data.inaturalist import load_inaturalist

# listed out of id order; labels follow sorted ids: 2 -> 0, 5 -> 1, 7 -> 2
CATEGORIES = [{"id": 7, "name": "Zea mays", "supercategory": "Plantae"},
              {"id": 2, "name": "Apis mellifera", "supercategory": "Insecta"},
              {"id": 5, "name": "Bufo bufo", "supercategory": "Amphibia"}]
COLOURS = {2: (250, 10, 10), 5: (10, 250, 10), 7: (10, 10, 250)}


def _write_split(base, json_name, items, start_id):
    """items: (category_id, kind) with kind "ok", "corrupt" or "missing"; returns the json dict."""
    images, annotations = [], []
    for k, (cat, kind) in enumerate(items):
        image_id = start_id + k
        file_name = f"train_val2018/{'Plantae' if cat == 7 else 'Animalia'}/{cat}/{image_id:032x}.jpg"
        path = base / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "ok":
            Image.new("RGB", (30, 20), COLOURS[cat]).save(path, format="JPEG", quality=95)
        elif kind == "corrupt":
            path.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
        images.append({"license": 1, "file_name": file_name, "rights_holder": "someone",
                       "height": 20, "width": 30, "id": image_id})
        annotations.append({"id": image_id, "image_id": image_id, "category_id": cat})
    meta = {"info": {"year": 2018}, "images": images, "annotations": annotations[::-1],
            "categories": CATEGORIES, "licenses": [{"id": 1, "name": "CC BY"}]}
    (base / json_name).write_text(json.dumps(meta))
    return meta


@pytest.fixture
def inat_root(tmp_path):
    base = tmp_path / "inaturalist"
    base.mkdir()
    train = _write_split(base, "train2018.json",
                         [(7, "ok"), (2, "ok"), (5, "corrupt"), (5, "ok"), (2, "missing"), (7, "ok")], 100)
    val = _write_split(base, "val2018.json", [(5, "ok"), (2, "ok")], 900)
    return tmp_path, train, val


def test_train_refuses_unreadable_images_counting_them(inat_root, monkeypatch):
    root, train, _ = inat_root
    monkeypatch.setattr(inaturalist, "INATURALIST_SIZE", 8)
    with pytest.raises(ValueError, match=r"train2018.json: 2 of 6 samples cannot be read"):
        load_dataset("inaturalist", root, "train")
    monkeypatch.setattr(inaturalist, "decode_labelled", functools.partial(decode_labelled, max_unreadable=2))
    with pytest.warns(UserWarning, match=r"train2018.json: 2 of 6 samples cannot be read"):
        data = load_dataset("inaturalist", root, "train")
    assert data.images.shape == (4, 3, 8, 8) and data.images.dtype == torch.uint8
    assert data.labels.tolist() == [2, 0, 1, 2]
    assert data.class_names == ["Apis mellifera", "Bufo bufo", "Zea mays"] and data.num_classes == 3
    assert torch.equal(data.source_index, torch.arange(4))
    assert data.extra["image_id"].tolist() == [100, 101, 103, 105]
    assert data.extra["path"][0] == train["images"][0]["file_name"]
    blue = data.images[0].float().mean(dim=(1, 2))
    assert blue[2] > 200 and blue[0] < 60


def test_test_split_is_val2018_and_clean_split_does_not_warn(inat_root):
    root, _, _ = inat_root
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = load_inaturalist(root, "test", size=16)
    assert data.images.shape == (2, 3, 16, 16) and data.labels.tolist() == [1, 0]
    assert data.extra["image_id"].tolist() == [900, 901]


def test_missing_annotation_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="inat_comp") as info:
        load_dataset("inaturalist", tmp_path, "test")
    assert str(tmp_path / "inaturalist" / "val2018.json") in str(info.value)


def test_no_readable_image_and_unannotated_image(tmp_path):
    base = tmp_path / "inaturalist"
    base.mkdir()
    _write_split(base, "val2018.json", [(2, "missing")], 0)
    with pytest.raises(ValueError, match="1 of 1 samples cannot be read"):
        load_inaturalist(tmp_path, "test", size=8)
    meta = _write_split(base, "train2018.json", [(2, "ok"), (5, "ok")], 0)
    meta["annotations"] = meta["annotations"][:1]
    (base / "train2018.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="has no annotation"):
        load_inaturalist(tmp_path, "train", size=8)
