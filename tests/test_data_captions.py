"""Caption readers: Karpathy JSON, CC3M-style tsv and webdataset tar; corrupt images, truncated shards and
empty captions refused, named and counted."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import torch
from PIL import Image

from isogclr.data.captions import load_caption_tsv, load_karpathy
from isogclr.data.webdataset import load_webdataset_tar, shard_pairs, write_shards


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
    with pytest.raises(ValueError, match=r"dataset.json: 1 of 3 samples cannot be read \(.*image val2014/img1.jpg"):
        load_karpathy(path, images, "test", size=8)
    with pytest.warns(UserWarning, match="1 of 3 samples cannot be read.*img1.jpg"):
        data = load_karpathy(path, images, "test", size=8, max_unreadable=1)
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
    with pytest.raises(ValueError, match=r"train.tsv: 2 of 4 samples cannot be read \(.*train.tsv:3 .*train.tsv:4 "):
        load_caption_tsv(tsv, size=8, header=True)
    with pytest.warns(UserWarning, match="2 of 4 samples cannot be read"):
        data = load_caption_tsv(tsv, size=8, header=True, max_unreadable=2)
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
    with pytest.raises(ValueError, match=r"2 of 4 samples cannot be read \(.*shard-000000.tar:0001: .*"
                                         r"shard-000000.tar:0002: .*without an image"):
        load_webdataset_tar(path, size=8)
    with pytest.warns(UserWarning, match="2 of 4 samples cannot be read"):
        data = load_webdataset_tar(path, size=8, max_unreadable=2)
    assert data.captions == ["a red box", "bleu \u00e9"] and data.image_index.tolist() == [0, 1]
    assert data.images.shape == (2, 3, 8, 8) and data.skipped == 2
    assert data.image_ids == ["shard-000000.tar:0000", "shard-000000.tar:0003"]


def _png_bytes(value: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (value, value, value)).save(buf, format="PNG")
    return buf.getvalue()


def test_a_truncated_shard_counts_every_sample_it_lost(tmp_path):
    (shard,) = write_shards(((_png_bytes(20 * i), f"caption {i}") for i in range(10)), tmp_path, per_shard=10,
                            image_ext="png")
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ValueError) as err:
        load_webdataset_tar(shard, size=8)
    message = str(err.value)
    lost = int(message.split(": ")[1].split(" of ")[0])
    assert f"{shard}:" in message and "truncated or corrupt after sample" in message and "sample 10 of 10" in message
    assert message.split(" samples cannot be read")[0].endswith(f"{lost} of 10") and 1 <= lost < 10


@pytest.mark.parametrize("reader", ["tsv", "karpathy", "webdataset"])
def test_an_empty_caption_is_refused_naming_where(tmp_path, reader):
    (tmp_path / "a.png").write_bytes(_png_bytes(10))
    if reader == "tsv":
        (tmp_path / "c.tsv").write_text("a cat\ta.png\n \ta.png\n")
        with pytest.raises(ValueError, match=r"c.tsv:2 .*empty caption"):
            load_caption_tsv(tmp_path / "c.tsv", size=8)
    elif reader == "karpathy":
        entry = {"filename": "a.png", "split": "test", "sentences": [{"raw": "ok"}, {"raw": "  "}]}
        (tmp_path / "d.json").write_text(json.dumps({"images": [entry]}))
        with pytest.raises(ValueError, match=r"d.json: image a.png .*empty caption"):
            load_karpathy(tmp_path / "d.json", tmp_path, size=8)
    else:
        (shard,) = write_shards([(_png_bytes(1), "ok"), (_png_bytes(2), " ")], tmp_path / "s", image_ext="png")
        with pytest.raises(ValueError, match=r"shard-000000.tar:000000001: empty caption"):
            load_webdataset_tar(shard, size=8)


@pytest.mark.parametrize("damage", ["no image", "corrupt image", "not utf-8"])
def test_a_streamed_sample_error_names_the_shard_and_key(tmp_path, damage):
    image, caption = _png_bytes(5), b"a grey square"
    if damage == "corrupt image":
        image = b"\x89PNG broken"
    elif damage == "not utf-8":
        caption = b"caf\xe9 au lait"
    path = tmp_path / "shard-000000.tar"
    with tarfile.open(path, "w") as tar:
        for name, payload in {"000000007.txt": caption, "000000007.index": b"7",
                              **({} if damage == "no image" else {"000000007.png": image})}.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    expected = {"no image": "sample without an image member", "corrupt image": "cannot decode the image",
                "not utf-8": r"the caption \(txt\) is not UTF-8"}[damage]
    with pytest.raises(ValueError, match=rf"shard-000000.tar:000000007: {expected}"):
        next(iter(shard_pairs([path], lambda img: torch.zeros(3, 8, 8), epoch=0, seed=0, shuffle_buffer=0)))
