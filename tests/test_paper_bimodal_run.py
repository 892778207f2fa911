"""A paper-shaped image-text run on CPU: profiles/paper.yaml's image-text model (ResNet-50 and a DistilBERT-sized
text encoder, built from configuration, random initialization, nothing downloaded) trained on webdataset shards
at 256 px, streamed, with 2 gloo processes for two optimizer steps; rank 0 evaluates and writes the outputs.

What differs from the profile, and why: the pretrained weights (no hub here: ``pretrained`` off, the text
encoder at DistilBERT-base's sizes from configuration and a WordPiece trained on the captions, so its vocabulary
is smaller than DistilBERT's 30,522), the data (8 generated pairs in 2 shards, one per process; synth10 only for
zero-shot), the batch (4: 2 per process) and one epoch of two steps without the periodic evaluation. The final
evaluation reads its sets streamed, as the profile's runs do.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import time

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from isogclr.config.profiles import load_params

from .conftest import ROOT
from .process_helpers import free_port, torchrun_env

WORLD = 2


def _worker(rank: int, params: dict, root: str, out: str, port: int) -> None:
    torchrun_env(rank, WORLD, port, HF_HUB_OFFLINE="1")
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.data.base import StreamConfig
    from isogclr.models.text import train_wordpiece
    from isogclr.train import bimodal

    stream = params["bimodal"].pop("stream")
    cfg = bimodal_run_config(params, "isogclr_bimodal", 0)
    cfg = dataclasses.replace(cfg, stream=StreamConfig(**{**stream, "num_workers": 1, "eval_batch_size": 8}))
    captions = [line.rpartition("\t")[0] for line in open(os.path.join(root, "captions.tsv")).read().splitlines()]
    bimodal.build_tokenizer = lambda text_cfg, _: train_wordpiece(captions, text_cfg.vocab_size, text_cfg.max_length)
    load, eval_sets = bimodal.load_pairs_folder, []

    def recorded(*args, **kwargs):  # the evaluation sets the run reads: streamed, as the profile streams
        data = load(*args, **kwargs)
        eval_sets.extend(type(s).__name__ for s in [*data.retrieval.values(), *data.zeroshot.values()])
        return data

    bimodal.load_pairs_folder = recorded
    t0 = time.perf_counter()
    metrics = bimodal.train_bimodal_run(cfg, os.path.join(out, "run"), os.path.join(out, "ckpt"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"metrics": metrics, "seconds": time.perf_counter() - t0, "eval_sets": eval_sets,
                   "params": sum(p.numel() for p in bimodal.BimodalModel(
                       cfg.image_encoder, cfg.text_encoder, cfg.train.proj_dim, 100).parameters())}, f)
    dist.destroy_process_group()


@pytest.mark.slow
def test_paper_profile_image_text_run_two_processes(tmp_path):
    from isogclr.data.pair_semantics import PairSpec
    from isogclr.data.synthetic_pairs import write_synthetic_pairs
    from isogclr.data.webdataset import write_shards

    pairs = tmp_path / "pairs"
    write_synthetic_pairs(PairSpec(seed=1, image_size=256, num_pairs=8, num_clusters=4, retrieval_images=2,
                                   zeroshot_per_class=1), tmp_path / "tsv")
    lines = [line.rpartition("\t") for line in (tmp_path / "tsv" / "train" / "captions.tsv").read_text().splitlines()]
    shutil.copytree(tmp_path / "tsv", pairs, ignore=shutil.ignore_patterns("train", "synth100"))
    write_shards((((tmp_path / "tsv" / "train" / p).read_bytes(), c) for c, _, p in lines), pairs / "train",
                 per_shard=4)
    params = copy.deepcopy(load_params(ROOT / "profiles" / "paper.yaml"))
    section = params["bimodal"]
    assert section["image_encoder"]["arch"] == "resnet50" and section["image_size"] == 256
    assert section["text_encoder"]["pretrained"] == "distilbert-base-uncased"
    section.update(data=str(pairs), epochs=1, batch_size=4, eval_every=0, device="cpu", num_threads=1)
    section["image_encoder"] = {**section["image_encoder"], "pretrained": False}
    section["text_encoder"] = {"pretrained": None, "vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12,
                               "hidden_dim": 3072, "max_length": section["text_encoder"]["max_length"]}
    port = free_port()
    t0 = time.perf_counter()
    mp.spawn(_worker, args=(params, str(tmp_path / "tsv" / "train"), str(tmp_path), port), nprocs=WORLD, join=True)
    print(f"paper-shaped run, 2 processes: {time.perf_counter() - t0:.0f} s")
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    assert ranks[0]["metrics"] == ranks[1]["metrics"]  # rank 0's, on every rank
    assert set(ranks[0]["metrics"]) == set(json.loads((tmp_path / "run" / "metrics.json").read_text()))
    assert {"retrieval_a_ir_r1", "synth10_top1"} <= set(ranks[0]["metrics"])
    assert ranks[0]["eval_sets"] == ["KarpathyStream", "KarpathyStream", "StreamedZeroShot"]  # read streamed
    assert ranks[0]["params"] > 65_000_000  # ResNet-50 (23.5 M) + DistilBERT-base's six layers (42.5 M)
    log = (tmp_path / "run" / "train_log.csv").read_text().splitlines()
    assert len(log) == 2 and log[1].split(",")[1] == "2"  # one epoch row, at step 2: two optimizer steps
    tau = (tmp_path / "run" / "artifacts" / "tau.csv").read_text().splitlines()
    assert len(tau) == 1 + 8  # one row per streamed pair
