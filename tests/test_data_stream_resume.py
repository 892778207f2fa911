"""A shard epoch resumed at batch k yields the uninterrupted epoch's batches k, k + 1, ... in the same sample
order, without decoding the skipped samples (isogclr.data.webdataset, ``start_batch``)."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest
from PIL import Image

from isogclr.data.streaming import pair_transform
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
