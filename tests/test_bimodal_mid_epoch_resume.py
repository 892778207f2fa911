"""An image-text run killed (SIGKILL) right after a mid-epoch checkpoint (``bimodal.checkpoint_every``) and
restarted gives the uninterrupted run's outputs byte for byte: in memory and from streamed webdataset shards
(resumed through the shard path that skips the samples before the checkpoint's batch undecoded), on 1 and 2
processes (gloo). The augmentation draws are keyed by (seed, epoch, pair index), so the restarted epoch crops
and flips what the uninterrupted one did; dropout's generator is in the checkpoint."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from isogclr.data.pair_semantics import PairSpec
from isogclr.data.synthetic_pairs import write_synthetic_pairs
from isogclr.data.webdataset import write_shards

from .process_helpers import free_port, torchrun_env

SPEC = PairSpec(seed=3, image_size=16, num_pairs=64, num_clusters=8, retrieval_images=8, zeroshot_per_class=1)
STEPS_PER_EPOCH = SPEC.num_pairs // 16
KILL_AT = STEPS_PER_EPOCH + 2  # the checkpoint at batch 2 of epoch 2 (checkpoint_every 2; epoch ends at 4 and 8)
FILES = ("metrics.json", "train_log.csv", "artifacts/tau.csv", "artifacts/config.json")



def _worker(rank: int, world: int, params: dict, captions: str, out: str, ckpt: str, port: int,
            kill_at: int) -> None:
    torchrun_env(rank, world, port)
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.data.base import StreamConfig
    from isogclr.models.bimodal import build_tokenizer
    from isogclr.train import bimodal, engine

    cfg = bimodal_run_config(params, "isogclr_bimodal", 0)
    if captions:  # streamed; a tokenizer trained on the captions (the stream config asks for a pretrained one)
        cfg = dataclasses.replace(cfg, stream=StreamConfig(image_size=16, num_workers=1, eval_batch_size=64))
        with open(captions, encoding="utf-8") as f:
            texts = [line.rpartition("\t")[0] for line in f.read().splitlines()]
        bimodal.build_tokenizer = lambda text_cfg, _: build_tokenizer(text_cfg, texts)
    if kill_at:
        save = engine.save_torch

        def save_then_die(obj, path):  # as a preempted machine, right after the mid-epoch checkpoint
            save(obj, path)
            if isinstance(obj, dict) and obj.get("step") == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        engine.save_torch = save_then_die
    bimodal.train_bimodal_run(cfg, out, ckpt)
    if world > 1:
        dist.destroy_process_group()


def _run(params: dict, captions: str, world: int, out, ckpt, kill_at: int = 0) -> None:
    os.makedirs(ckpt, exist_ok=True)
    mp.spawn(_worker, args=(world, params, captions, str(out), str(ckpt), free_port(), kill_at), nprocs=world,
             join=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(SPEC, root / "tsv")
    tsv = root / "tsv" / "train" / "captions.tsv"
    lines = [line.rpartition("\t") for line in tsv.read_text().splitlines()]
    shutil.copytree(root / "tsv", root / "shards", ignore=shutil.ignore_patterns("train"))
    write_shards((((root / "tsv" / "train" / p).read_bytes(), c) for c, _, p in lines), root / "shards" / "train",
                 per_shard=16)
    return root


def _params(root, streamed: bool) -> dict:
    return {
        "methods": {"isogclr_bimodal": {"loss": "isogclr_bimodal", "rho": 2.0, "tau_init": 0.03, "tau_min": 0.005,
                                        "tau_max": 0.1, "eta": 0.01}},
        "bimodal": {
            "methods": ["isogclr_bimodal"], "seeds": [0], "data": str(root / ("shards" if streamed else "tsv")),
            "image_size": 16, "epochs": 2, "batch_size": 16, "lr": 1e-3, "warmup_iters": 2, "final_lr": 1e-6,
            "proj_dim": 16, "eval_every": 1, "device": "cpu", "num_threads": 1, "checkpoint_every": 2,
            "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
            "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32,
                             "max_length": 24},  # dropout 0.1 (the default): its generator is checkpointed
        },
    }


@pytest.mark.slow  # 3 runs per case, each 1 or 2 processes: ~20-60 s a case on a 2-core machine
@pytest.mark.parametrize("streamed", [False, True], ids=["in_memory", "shards"])
@pytest.mark.parametrize("world", [1, 2])
def test_killed_mid_epoch_and_resumed_equals_uninterrupted(tmp_path, data, streamed, world):
    params = _params(data, streamed)
    captions = str(data / "tsv" / "train" / "captions.tsv") if streamed else ""
    _run(params, captions, world, tmp_path / "straight", tmp_path / "ckpt_straight")
    with pytest.raises(mp.ProcessExitedException):
        _run(params, captions, world, tmp_path / "resumed", tmp_path / "ckpt", kill_at=KILL_AT)
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists() and not (tmp_path / "resumed" / "metrics.json").exists()
    assert torch.load(tmp_path / "ckpt" / "checkpoint.pt", weights_only=False)["step"] == KILL_AT  # mid-epoch
    _run(params, captions, world, tmp_path / "resumed", tmp_path / "ckpt")
    for name in FILES:
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "straight" / name).read_bytes(), name
