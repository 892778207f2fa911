"""Image-text runs with streamed training pairs (``bimodal.stream``): from the caption file and from webdataset
shards; one temperature per pair, the evaluation sets read as before; the config's checks."""

from __future__ import annotations

import csv
import dataclasses
import shutil

import pytest

from isogclr.config.bimodal import bimodal_run_config
from isogclr.config.typed import ConfigError
from isogclr.data.base import StreamConfig
from isogclr.data.pair_semantics import PairSpec
from isogclr.data.synthetic_pairs import write_synthetic_pairs
from isogclr.data.webdataset import write_shards
from isogclr.models.bimodal import build_tokenizer
from isogclr.train import bimodal

SPEC = PairSpec(seed=3, image_size=16, num_pairs=64, num_clusters=8, mismatch_fraction=0.05, retrieval_images=12,
                zeroshot_per_class=2)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(SPEC, root / "tsv")
    lines = [line.rpartition("\t") for line in (root / "tsv" / "train" / "captions.tsv").read_text().splitlines()]
    captions = [c for c, _, _ in lines]
    shutil.copytree(root / "tsv", root / "shards", ignore=shutil.ignore_patterns("train"))
    write_shards((((root / "tsv" / "train" / p).read_bytes(), c) for c, _, p in lines), root / "shards" / "train",
                 per_shard=16)
    return root, captions


def _params(data: str) -> dict:
    return {"methods": {"isogclr_bimodal": {"loss": "isogclr_bimodal", "rho": 3.0, "tau_init": 0.03,
                                            "tau_min": 0.005, "tau_max": 0.1, "eta": 0.01}},
            "bimodal": {"methods": ["isogclr_bimodal"], "seeds": [0], "data": data, "image_size": 16, "epochs": 2,
                        "batch_size": 16, "lr": 1e-3, "warmup_iters": 2, "final_lr": 1e-6, "proj_dim": 16,
                        "eval_every": 1, "device": "cpu", "num_threads": 1,
                        "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
                        "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32,
                                         "max_length": 24}}}


@pytest.mark.parametrize("layout", ["tsv", "shards"])
def test_streamed_pairs_train_with_one_temperature_per_pair(tmp_path, folders, layout, monkeypatch):
    root, captions = folders
    cfg = bimodal_run_config(_params(str(root / layout)), "isogclr_bimodal", 0)
    # the config asks for a pretrained tokenizer with streaming (not available offline): train one on the captions
    cfg = dataclasses.replace(cfg, stream=StreamConfig(image_size=16, num_workers=1, eval_batch_size=64))
    monkeypatch.setattr(bimodal, "build_tokenizer", lambda text_cfg, _: build_tokenizer(text_cfg, captions))
    metrics = bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert any(k.endswith("_ir_r1") for k in metrics) and all(0 <= v <= 100 for v in metrics.values())
    with open(tmp_path / "run" / "artifacts" / "tau.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["index"]) for r in rows] == list(range(SPEC.num_pairs))
    visited = [r for r in rows if float(r["tau_image"]) != 0.03]
    assert len(visited) >= SPEC.num_pairs // 2  # the temperatures of the streamed pairs moved


def test_stream_config_checks_name_the_key(folders):
    root, _ = folders
    params = _params(str(root / "tsv"))
    params["bimodal"]["stream"] = {"image_size": 16}
    with pytest.raises(ConfigError, match="bimodal.stream: streamed pairs need a pretrained tokenizer"):
        bimodal_run_config(params, "isogclr_bimodal", 0)
    params["bimodal"]["stream"] = {"image_size": 32}
    params["bimodal"]["text_encoder"]["pretrained"] = "distilbert-base-uncased"
    with pytest.raises(ConfigError, match="bimodal.stream.image_size: 32 differs"):
        bimodal_run_config(params, "isogclr_bimodal", 0)
