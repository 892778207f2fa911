"""Four CPU processes (gloo) streaming one dataset: every epoch visits each dataset index exactly once across the
processes, and per-sample state updated from the gathered indices stays identical on every rank."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from PIL import Image

from isogclr.data.augment import AugmentConfig
from isogclr.data.loaders import LoaderSpec, check_distinct, epoch_loader
from isogclr.data.streaming import image_folder_stream
from isogclr.data.transforms import pair_transform, simclr_transform
from isogclr.data.webdataset import shard_loader, write_shards
from isogclr.losses.conventions import LogMovingAverage
from isogclr.train.distributed import gather_no_grad

WORLD, N, B, EPOCHS = 4, 48, 8, 3


def _jpeg(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def _batches(kind: str, root: str, epoch: int, rank: int):
    if kind == "folder":
        stream = image_folder_stream(root, simclr_transform(AugmentConfig(), 8))
        return ((views, index) for views, _, index in
                epoch_loader(stream, LoaderSpec(batch_size=B, num_workers=0), epoch, seed=5, rank=rank,
                             world_size=WORLD))
    shards = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".tar"))
    return ((images, index) for images, _, index in
            shard_loader(shards, pair_transform(8, 0.5, 0.5), B, epoch, seed=5, rank=rank, world_size=WORLD,
                         num_workers=0, shuffle_buffer=4))


def worker(rank: int, kind: str, root: str, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    state = LogMovingAverage(N, beta=0.5)
    visits, local_seen = [], []
    for epoch in range(EPOCHS):
        epoch_index = []
        for images, index in _batches(kind, root, epoch, rank):
            assert len(index) == B // WORLD
            local_seen += index.tolist()
            index = gather_no_grad(index)
            check_distinct(index, N)
            # a per-sample estimate that differs by rank (the images differ): the state must follow the
            # gathered values, so each rank contributes its own rows and everyone writes the same update
            log_g = gather_no_grad(images.float().mean(dim=tuple(range(1, images.dim()))).log()[:, None])
            state.update(index, log_g)
            epoch_index += index.tolist()
        visits.append(epoch_index)
    torch.save({"visits": visits, "state": state.log_s.clone(), "local": local_seen},
               os.path.join(out_dir, f"r{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow  # 4 processes: 60-67 s each (pytest --durations, a 2-core machine)
@pytest.mark.parametrize("kind", ["folder", "shards"])
def test_four_processes_visit_each_index_once_and_share_state(tmp_path, kind):
    root = tmp_path / "data"
    if kind == "folder":
        for i in range(N):
            (root / f"c{i % 3}").mkdir(parents=True, exist_ok=True)
            (root / f"c{i % 3}" / f"{i:03d}.jpg").write_bytes(_jpeg(i))
    else:
        write_shards(((_jpeg(i), f"pair {i}") for i in range(N)), root, per_shard=6)  # 8 shards, 2 per rank
    mp.spawn(worker, args=(kind, str(root), str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD, join=True)
    results = [torch.load(tmp_path / f"r{r}.pt") for r in range(WORLD)]
    for epoch in range(EPOCHS):
        assert sorted(results[0]["visits"][epoch]) == list(range(N))  # each index exactly once per epoch
    assert results[0]["visits"][0] != results[0]["visits"][1]  # another order next epoch
    for r in range(1, WORLD):
        assert results[r]["visits"] == results[0]["visits"]
        assert torch.equal(results[r]["state"], results[0]["state"])  # identical per-sample state on every rank
    assert torch.isfinite(results[0]["state"]).all()  # every sample was visited and updated
    locals_ = [set(res["local"][:N // WORLD]) for res in results]  # epoch 0: the ranks' shares are disjoint
    assert sum(map(len, locals_)) == N and len(set().union(*locals_)) == N
