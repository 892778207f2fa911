"""Streaming datasets: per-sample decode at the requested size, dataset indices, distinct batches, shards."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from PIL import Image

from isogclr.data.augment import AugmentConfig
from isogclr.data.folder import image_folder
from isogclr.data.loaders import LoaderSpec, check_distinct, epoch_loader
from isogclr.data.streaming import caption_tsv_stream, image_folder_stream, inaturalist_stream
from isogclr.data.transforms import pair_transform, simclr_transform, to_normalized
from isogclr.data.webdataset import load_webdataset_tar, rank_shards, shard_loader, shard_sizes, write_shards


def _jpeg(seed: int, size: tuple[int, int] = (20, 14)) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path):
    split = tmp_path / "train"
    for c, name in enumerate(["b_cls", "a_cls", "c_cls"]):
        (split / name).mkdir(parents=True)
        for i in range(4):
            (split / name / f"img{i}.jpg").write_bytes(_jpeg(10 * c + i, (20 + i, 14)))
    return split


def test_folder_stream_decodes_views_at_size_with_in_memory_order(folder):
    stream = image_folder_stream(folder, simclr_transform(AugmentConfig(), 12))
    memory = image_folder(folder.parent, "train", size=8)
    assert len(stream) == len(memory) == 12 and stream.class_names == memory.class_names == ["a_cls", "b_cls", "c_cls"]
    assert stream.labels.tolist() == memory.labels.tolist()  # same dataset indices as the in-memory loader
    assert [stream.paths[i] for i in range(12)] == list(memory.extra["path"])
    views, label, index = stream[5]
    assert views.shape == (2, 3, 12, 12) and views.dtype == torch.uint8 and (label, index) == (1, 5)
    assert not torch.equal(views[0], views[1])  # two independent random views
    x = to_normalized(views)
    assert x.dtype == torch.float32 and x.min() >= -2.0 and x.max() <= 2.0


def test_unreadable_file_is_an_error_naming_it(folder):
    (folder / "a_cls" / "img0.jpg").write_bytes(b"\xff\xd8 broken")
    stream = image_folder_stream(folder, simclr_transform(AugmentConfig(), 8))
    with pytest.raises(OSError, match="sample 0: cannot decode .*a_cls/img0.jpg"):
        stream[0]


def test_missing_class_folder_names_it(folder):
    with pytest.raises(FileNotFoundError, match="n0144"):
        image_folder_stream(folder, simclr_transform(AugmentConfig(), 8), classes=["a_cls", "n0144"])


@pytest.mark.parametrize("world", [1, 3])
def test_epoch_loader_covers_distinct_indices(folder, world):
    stream = image_folder_stream(folder, simclr_transform(AugmentConfig(), 8))
    spec = LoaderSpec(batch_size=6, num_workers=0)
    seen = []
    for epoch in range(2):
        epoch_seen = []
        loaders = [list(epoch_loader(stream, spec, epoch, seed=3, rank=r, world_size=world)) for r in range(world)]
        assert {len(batches) for batches in loaders} == {12 // 6}  # the same number of steps on every rank
        for step in range(2):
            index = torch.cat([loaders[r][step][2] for r in range(world)])
            check_distinct(index, len(stream))
            assert loaders[0][step][0].shape == (6 // world, 2, 3, 8, 8)
            epoch_seen += index.tolist()
        assert sorted(epoch_seen) == list(range(12))  # 12 = 2 batches of 6: each index exactly once
        seen.append(epoch_seen)
    assert seen[0] != seen[1]  # reshuffled by epoch


def test_epoch_loader_workers_decode(folder):
    stream = image_folder_stream(folder, simclr_transform(AugmentConfig(), 8))
    batches = list(epoch_loader(stream, LoaderSpec(batch_size=4, num_workers=2), epoch=0, seed=0))
    assert sorted(torch.cat([b[2] for b in batches]).tolist()) == list(range(12))
    again = list(epoch_loader(stream, LoaderSpec(batch_size=4, num_workers=2), epoch=0, seed=0))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again, strict=True))  # seeded views


def _views_by_index(stream, spec, epoch, world, start=0):
    out = {}
    for rank in range(world):
        for views, _, index in epoch_loader(stream, spec, epoch, seed=5, rank=rank, world_size=world,
                                            start_batch=start):
            out.update({int(i): v for i, v in zip(index, views, strict=True)})
    return out


def test_a_samples_views_are_keyed_not_drawn_by_worker_rank_or_resume(folder):
    """Each sample's two views come from (seed, epoch, index) (isogclr.data.keyed): the same pixels with 0 or 2
    workers, on 1 or 3 processes, and in an epoch resumed at its second batch; another epoch draws others."""
    stream = image_folder_stream(folder, simclr_transform(AugmentConfig(blur_p=0.5), 8))
    one = _views_by_index(stream, LoaderSpec(batch_size=6, num_workers=0), 1, 1)
    assert sorted(one) == list(range(12))
    for spec, world, start in ((LoaderSpec(batch_size=6, num_workers=2), 1, 0),
                               (LoaderSpec(batch_size=6, num_workers=0), 3, 0),
                               (LoaderSpec(batch_size=6, num_workers=2), 1, 1)):
        other = _views_by_index(stream, spec, 1, world, start)
        assert other and all(torch.equal(other[i], one[i]) for i in other), (spec.num_workers, world, start)
    again = _views_by_index(stream, LoaderSpec(batch_size=6, num_workers=0), 2, 1)
    assert sum(not torch.equal(again[i], one[i]) for i in one) >= 10
    torch.manual_seed(123)
    state = torch.get_rng_state()
    _views_by_index(stream, LoaderSpec(batch_size=6, num_workers=0), 1, 1)
    assert torch.equal(torch.get_rng_state(), state)  # the trainer's generator is left alone


def test_check_distinct_rejects_repeats_and_range():
    check_distinct(torch.tensor([3, 1, 2]), 4)
    with pytest.raises(RuntimeError, match="repeated dataset index.*e.g. 2"):
        check_distinct(torch.tensor([2, 1, 2]), 4)
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        check_distinct(torch.tensor([0, 4]), 4)


def test_inaturalist_and_caption_streams(tmp_path):
    (tmp_path / "imgs").mkdir()
    for i in range(3):
        (tmp_path / "imgs" / f"{i}.jpg").write_bytes(_jpeg(i))
    ann = {"images": [{"id": 10 + i, "file_name": f"imgs/{i}.jpg"} for i in range(3)],
           "annotations": [{"image_id": 10, "category_id": 7}, {"image_id": 11, "category_id": 2},
                           {"image_id": 12, "category_id": 7}],
           "categories": [{"id": 7, "name": "Aves"}, {"id": 2, "name": "Plantae"}]}
    (tmp_path / "train2018.json").write_text(json.dumps(ann))
    inat = inaturalist_stream(tmp_path, tmp_path / "train2018.json", simclr_transform(AugmentConfig(), 8))
    assert inat.labels.tolist() == [1, 0, 1] and inat.class_names == ["Plantae", "Aves"]
    assert inat[2][0].shape == (2, 3, 8, 8)
    (tmp_path / "captions.tsv").write_text("a cat\timgs/0.jpg\n\na\ttab\timgs/2.jpg\n", encoding="utf-8")
    pairs = caption_tsv_stream(tmp_path / "captions.tsv", pair_transform(10, 0.5, 0.5))
    image, caption, index = pairs[1]
    assert image.shape == (3, 10, 10) and caption == "a\ttab" and index == 1 and len(pairs) == 2


def test_shards_stream_every_index_once_per_epoch(tmp_path):
    shards = write_shards(((_jpeg(i), f"caption {i}") for i in range(30)), tmp_path / "wds", per_shard=5)
    assert len(shards) == 6 and shard_sizes(shards) == {s.name: 5 for s in shards}
    transform = pair_transform(8, 0.5, 0.5)
    for world, workers in [(1, 2), (2, 0), (3, 1)]:
        for epoch in range(2):
            per_rank = [list(shard_loader(shards, transform, batch_size=6, epoch=epoch, seed=1, rank=r,
                                          world_size=world, num_workers=workers, shuffle_buffer=4))
                        for r in range(world)]
            assert {len(b) for b in per_rank} == {30 // 6}
            seen = []
            for step in range(30 // 6):
                images = torch.cat([per_rank[r][step][0] for r in range(world)])
                index = torch.cat([per_rank[r][step][2] for r in range(world)])
                check_distinct(index, 30)
                assert images.shape == (6, 3, 8, 8)
                captions = sum((per_rank[r][step][1] for r in range(world)), [])
                assert captions == [f"caption {i}" for i in index.tolist()]  # the index travels with its sample
                seen += index.tolist()
            assert sorted(seen) == list(range(30))


def test_rank_shards_partition_and_rotate():
    shards = [f"s{i}" for i in range(7)]
    parts = [rank_shards(shards, 0, 0, r, 3) for r in range(3)]
    assert sum(map(len, parts)) == 6 and len(set(sum(parts, []))) == 6  # disjoint; 7 mod 3 = 1 left out
    left_out = {e: (set(shards) - set(sum((rank_shards(shards, e, 0, r, 3) for r in range(3)), []))).pop()
                for e in range(8)}
    assert len(set(left_out.values())) > 1  # a different shard is left out in other epochs
    with pytest.raises(ValueError, match="2 shard"):
        rank_shards(shards[:2], 0, 0, 0, 3)


def test_missing_shard_sizes_name_the_manifest(tmp_path):
    shard = tmp_path / "x.tar"
    shard.write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="sizes.json.*x_stats.json"):
        shard_sizes([shard])


def test_load_webdataset_tar_in_memory(tmp_path):
    shards = write_shards(((_jpeg(i), f"c{i}") for i in range(4)), tmp_path, per_shard=3)
    data = load_webdataset_tar(shards, size=8)
    assert data.captions == ["c0", "c1", "c2", "c3"] and data.images.shape == (4, 3, 8, 8)


def test_caption_tsv_stream_names_the_line_of_a_bad_caption(tmp_path):
    tsv = tmp_path / "captions.tsv"
    tsv.write_bytes(b"a cat\ta.png\ncaf\xe9\tb.png\n")
    with pytest.raises(ValueError, match=r"captions.tsv:2: not UTF-8"):
        caption_tsv_stream(tsv, pair_transform(10, 0.5, 0.5))
    tsv.write_text("a cat\ta.png\n  \tb.png\n")
    with pytest.raises(ValueError, match=r"captions.tsv:2: empty caption for b.png"):
        caption_tsv_stream(tsv, pair_transform(10, 0.5, 0.5))
