"""Caption readers: Karpathy JSON, CC3M-style tsv and webdataset tar, with corrupt images counted."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import torch
from PIL import Image

from isogclr.data.captions import load_caption_tsv, load_karpathy, load_webdataset_tar


def _jpeg_bytes(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 16), colour).save(buf, format="JPEG")
    return buf.getvalue()


def _karpathy(tmp_path, with_filepath: bool):
    images = tmp_path / "images"
    (images / "val2014").mkdir(parents=True)
    entries = []
    for i in range(4):
        name = f"img{i}.jpg"
        sub = "val2014" if with_filepath else ""
        (images / sub / name).write_bytes(_jpeg_bytes((60 * i, 0, 0)))
        entry = {"filename": name, "imgid": i, "split": "test" if i < 3 else "train",
                 "sentences": [{"raw": f" caption {i}.{k} ", "tokens": []} for k in range(6 if i == 0 else 5)]}
        if with_filepath:
            entry["filepath"] = sub
        entries.append(entry)
    path = tmp_path / "dataset.json"
    path.write_text(json.dumps({"images": entries, "dataset": "coco" if with_filepath else "flickr30k"}))
    return path, images


@pytest.mark.parametrize("with_filepath", [True, False])
def test_karpathy_five_captions_per_test_image(tmp_path, with_filepath):
    path, images = _karpathy(tmp_path, with_filepath)
    data = load_karpathy(path, images, "test", size=8)
    assert data.images.shape == (3, 3, 8, 8) and data.images.dtype == torch.uint8
    assert len(data.captions) == 15 and data.captions[0] == "caption 0.0" and data.captions[5] == "caption 1.0"
    assert data.image_index.tolist() == [0] * 5 + [1] * 5 + [2] * 5
    assert data.image_ids[1] == ("val2014/img1.jpg" if with_filepath else "img1.jpg") and data.skipped == 0


def test_karpathy_corrupt_image_skipped_with_its_captions(tmp_path):
    path, images = _karpathy(tmp_path, True)
    (images / "val2014" / "img1.jpg").write_bytes(b"broken")
    with pytest.warns(UserWarning, match="skipped 1 of 3 samples.*img1.jpg"):
        data = load_karpathy(path, images, "test", size=8)
    assert data.skipped == 1 and data.image_ids == ["val2014/img0.jpg", "val2014/img2.jpg"]
    assert data.image_index.tolist() == [0] * 5 + [1] * 5 and data.captions[5] == "caption 2.0"


def test_karpathy_missing_json_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset_coco.json.*karpathy"):
        load_karpathy(tmp_path / "dataset_coco.json", tmp_path)


def test_caption_tsv_counts_missing_and_corrupt(tmp_path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "a.jpg").write_bytes(_jpeg_bytes((0, 200, 0)))
    (tmp_path / "imgs" / "c.jpg").write_bytes(b"\xff\xd8 truncated")
    (tmp_path / "imgs" / "d.jpg").write_bytes(_jpeg_bytes((0, 0, 200)))
    tsv = tmp_path / "train.tsv"
    tsv.write_text("caption\tfilepath\na green\timgs/a.jpg\nabsent\timgs/b.jpg\nbroken\timgs/c.jpg\n\n"
                   "a tab\tin caption\timgs/d.jpg\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="skipped 2 of 4 samples"):
        data = load_caption_tsv(tsv, size=8, header=True)
    assert data.captions == ["a green", "a tab\tin caption"] and data.skipped == 2
    assert data.image_index.tolist() == [0, 1] and data.image_ids == ["imgs/a.jpg", "imgs/d.jpg"]
    assert data.images[0, 1].float().mean() > 150  # green channel


def test_webdataset_tar(tmp_path):
    path = tmp_path / "shard-000000.tar"
    members = {"0000.jpg": _jpeg_bytes((200, 0, 0)), "0000.txt": b"a red box",
               "0001.jpg": b"corrupt", "0001.txt": b"lost",
               "0002.txt": b"no image", "0003.jpg": _jpeg_bytes((0, 0, 200)), "0003.txt": "bleu \u00e9".encode(),
               "0003.json": b"{}"}
    with tarfile.open(path, "w") as tar:
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    with pytest.warns(UserWarning, match="skipped 2 of 4 samples"):
        data = load_webdataset_tar(path, size=8)
    assert data.captions == ["a red box", "bleu \u00e9"] and data.image_index.tolist() == [0, 1]
    assert data.images.shape == (2, 3, 8, 8) and data.skipped == 2
    assert data.image_ids == ["shard-000000.tar:0000", "shard-000000.tar:0003"]
