"""A shard epoch resumed at batch k yields the uninterrupted epoch's batches k, k + 1, ... in the same sample
order, with the same decoded and augmented pixels, without decoding the skipped samples
(isogclr.data.webdataset, ``start_batch``); a sample's crop and flip do not depend on the worker or the rank
that decodes it (isogclr.data.keyed)."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from PIL import Image

from isogclr.data.transforms import pair_transform
from isogclr.data.webdataset import shard_loader, worker_skips, write_shards

N, B = 58, 6  # shards of 7 samples: 9 shards, the last of 2 (uneven shares between workers)


def _jpeg(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (9, 9, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    return [str(p) for p in write_shards(((_jpeg(i), f"pair {i}") for i in range(N)), root, per_shard=7)]


def _indices(shards, start: int, workers: int, rank: int = 0, world: int = 1, transform=None) -> list[list[int]]:
    batches = shard_loader(shards, transform or pair_transform(8, 0.5, 0.5), B, epoch=1, seed=4, rank=rank,
                           world_size=world, num_workers=workers, shuffle_buffer=5, start_batch=start)
    return [index.tolist() for _, _, index in batches]


@pytest.mark.parametrize(("workers", "world"), [(0, 1), (2, 1), (3, 2)])
def test_resumed_epoch_continues_in_the_same_order(shards, workers, world):
    for rank in range(world):
        full = _indices(shards, 0, workers, rank, world)
        assert len(full) >= 3
        for start in (1, len(full) - 1):
            assert _indices(shards, start, workers, rank, world) == full[start:], (rank, start)


def test_skipped_batches_are_not_decoded(shards):
    calls = itertools.count()
    transform = pair_transform(8, 0.5, 0.5)

    def counting(image):
        next(calls)
        return transform(image)

    full = _indices(shards, 0, 0, transform=counting)
    decoded_full = next(calls)
    resumed = _indices(shards, 3, 0, transform=counting)
    assert resumed == full[3:]
    assert next(calls) - decoded_full - 1 == (len(full) - 3) * B  # only the batches it yields


def test_worker_skips_follow_the_round_robin():
    """Against a simulation of DataLoader's turn-taking over workers (an exhausted worker drops out)."""
    for counts in ([5, 3, 0, 4], [1, 1], [7], [0, 2, 9]):
        order = []
        left = list(counts)
        while any(left):
            for k in range(len(counts)):
                if left[k]:
                    order.append(k)
                    left[k] -= 1
        for taken in range(sum(counts) + 1):
            assert worker_skips(counts, taken) == [order[:taken].count(k) for k in range(len(counts))]
    with pytest.raises(ValueError, match="cannot skip"):
        worker_skips([1, 2], 4)


def _pixels(shards, start: int, workers: int, rank: int = 0, world: int = 1, epoch: int = 1) -> dict[int, np.ndarray]:
    batches = shard_loader(shards, pair_transform(8, 0.5, 0.5), B, epoch=epoch, seed=4, rank=rank, world_size=world,
                           num_workers=workers, shuffle_buffer=5, start_batch=start)
    return {int(i): img.numpy() for images, _, index in batches for img, i in zip(images, index, strict=True)}


@pytest.mark.parametrize("workers", [0, 2])
def test_resumed_epoch_decodes_the_same_pixels(shards, workers):
    """Before keyed draws, crops came from a running per-worker generator: skipping samples shifted every later
    draw, and resumed batches differed from the uninterrupted ones by up to 237 in pixel value."""
    full = _pixels(shards, 0, workers)
    resumed = _pixels(shards, 2, workers)
    assert resumed and set(resumed) < set(full)
    for i, image in resumed.items():
        np.testing.assert_array_equal(image, full[i], err_msg=f"sample {i}")


def test_a_samples_view_does_not_depend_on_workers_or_ranks(shards):
    one = _pixels(shards, 0, 0)
    for workers, world in ((2, 1), (3, 2)):
        other = {}
        for rank in range(world):
            other.update(_pixels(shards, 0, workers, rank, world))
        shared = set(one) & set(other)
        assert len(shared) >= B
        for i in shared:
            np.testing.assert_array_equal(other[i], one[i], err_msg=f"sample {i}, {workers} workers, {world} ranks")
    moved = _pixels(shards, 0, 0, epoch=2)  # another epoch draws other crops
    assert any(not np.array_equal(moved[i], one[i]) for i in set(moved) & set(one))
