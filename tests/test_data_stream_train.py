"""A training run on a streamed dataset (ImageNet-100's layout, tiny JPEGs): per-dataset settings, workers,
the evaluation views, the outputs; and the in-memory runs' configs are unchanged by ``train.stream``."""

from __future__ import annotations

import copy
import io
import json

import numpy as np
import pytest
from PIL import Image

from isogclr.config.core import run_config
from isogclr.config.studies import study_run_config
from isogclr.config.typed import ConfigError
from isogclr.data.folder import read_class_list
from isogclr.train.loop import train_run


def _stream_params(smoke_params: dict, root) -> dict:
    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(root)
    params["train"].update(epochs=1, batch_size=20, stream={"image_size": 16, "num_workers": 2, "eval_batch_size": 64},
                           by_dataset={"imagenet100": {"train.batch_size": 40, "train.stream.image_size": 24,
                                                       "augment.blur_p": 0.5}})
    params["probe"]["epochs"] = 2
    return params


@pytest.fixture(scope="module")
def imagenet100_tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream_data")
    rng = np.random.default_rng(0)
    for split, per_class in (("train", 2), ("val", 1)):
        for wnid in read_class_list("imagenet100"):
            folder = root / "imagenet100" / split / wnid
            folder.mkdir(parents=True)
            for i in range(per_class):
                buf = io.BytesIO()
                Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(buf, "JPEG")
                (folder / f"{wnid}_{i}.JPEG").write_bytes(buf.getvalue())
    return root


def test_streamed_run_trains_and_evaluates(tmp_path, smoke_params, imagenet100_tiny):
    params = _stream_params(smoke_params, imagenet100_tiny)
    cfg = run_config(params, "isogclr", "imagenet100", 0)
    assert cfg.stream is not None and cfg.stream.image_size == 24 and cfg.train.batch_size == 40
    assert cfg.augment.blur_p == 0.5
    metrics = train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert 0.0 <= metrics["top1"] <= 100.0
    tau = (tmp_path / "run" / "artifacts" / "tau.csv").read_text().splitlines()
    assert len(tau) == 1 + 200  # one temperature per training image, indexed by dataset position
    log = (tmp_path / "run" / "train_log.csv").read_text().splitlines()
    assert log[1].split(",")[1] == str(200 // 40)  # steps of the one epoch
    config = json.loads((tmp_path / "run" / "artifacts" / "config.json").read_text())
    assert config["stream"]["image_size"] == 24


def test_stream_applies_only_to_streamed_datasets(smoke_params):
    params = copy.deepcopy(smoke_params)
    base = run_config(params, "isogclr", "synth10", 0).to_dict()
    params["train"]["stream"] = {"image_size": 224}
    params["train"]["by_dataset"] = {"inaturalist": {"train.batch_size": 256}}
    cfg = run_config(params, "isogclr", "synth10", 0)
    assert cfg.stream is None and cfg.to_dict() == base  # the in-memory runs' config.json is unchanged
    assert run_config(params, "isogclr", "inaturalist", 0).train.batch_size == 256


def test_study_knob_wins_over_by_dataset(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["train"]["by_dataset"] = {"imagenet100": {"train.batch_size": 256}}
    params["studies"] = {"bs": {"methods": ["simclr"], "knob": "train.batch_size", "values": [32],
                                "dataset": "imagenet100", "seeds": [0]}}
    assert study_run_config(params, "bs", "simclr", 32, 0).train.batch_size == 32


@pytest.mark.parametrize("by_dataset, message", [
    ({"imagenet1k": {"train.batch_size": 2}}, "train.by_dataset.imagenet1k: unknown dataset"),
    ({"imagenet100": {"modle.encoder.arch": "resnet50"}}, "train.by_dataset.imagenet100: modle is not a section"),
    ({"imagenet100": {"train.stream.image_size": 4}}, "train.stream"),
])
def test_bad_by_dataset_names_the_key(smoke_params, by_dataset, message):
    params = copy.deepcopy(smoke_params)
    params["train"]["stream"] = {"image_size": 224}
    params["train"]["by_dataset"] = by_dataset
    with pytest.raises(ConfigError, match=message):
        run_config(params, "isogclr", "imagenet100", 0)
