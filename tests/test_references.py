"""The reference rows of the tables: the supervised reference (a method of its own) and the no-learning rows."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F

from isogclr.config.core import run_config
from isogclr.config.sections import references_spec
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params
from isogclr.losses import build_loss
from isogclr.train.loop import train_run
from isogclr.train.references import no_learning, raw_pixel_probe


def _params(smoke_params, data_root):
    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(data_root)
    params["methods"]["supervised"] = {"loss": "supervised"}
    params["references"] = {"methods": ["supervised"], "datasets": ["synth10"], "seeds": [0], "random_inits": [0, 1]}
    return params


def test_supervised_loss_is_the_cross_entropy_of_both_views():
    torch.manual_seed(0)
    z1, z2, y = torch.randn(6, 4, requires_grad=True), torch.randn(6, 4), torch.randint(0, 4, (6,))
    loss = build_loss("supervised", 10)(z1, z2, torch.arange(6), labels=y)
    expected = (F.cross_entropy(z1, y) + F.cross_entropy(z2, y)) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    loss.backward()
    assert z1.grad is not None and z1.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="needs the labels"):
        build_loss("supervised", 10)(z1, z2, torch.arange(6))


def test_supervised_run_gets_each_samples_label_and_a_classifier_head(tmp_path, smoke_params, smoke_data,
                                                                      monkeypatch):
    """The trainer sizes the head to the classes and passes every sample's own label; the run is probed as any."""
    from isogclr.data import load_dataset
    from isogclr.losses.supervised import SupervisedLoss

    seen = []
    forward = SupervisedLoss.forward

    def spy(self, z1, z2, index, *, labels=None):
        seen.append((z1.shape[1], index.clone(), labels.clone()))
        return forward(self, z1, z2, index, labels=labels)

    monkeypatch.setattr(SupervisedLoss, "forward", spy)
    cfg = run_config(_params(smoke_params, smoke_data), "supervised", "synth10", 0)
    metrics = train_run(cfg, tmp_path / "sup", tmp_path / "ckpt")
    train_labels = load_dataset("synth10", smoke_data, "train").labels
    assert seen and all(width == 10 for width, _, _ in seen)
    assert all(torch.equal(labels, train_labels[index]) for _, index, labels in seen)
    assert json.loads((tmp_path / "sup" / "artifacts" / "config.json").read_text())["method"]["loss"] == "supervised"
    assert 0 <= metrics["top1"] <= 100


def test_no_learning_rows(tmp_path, smoke_params, smoke_data):
    params = _params(smoke_params, smoke_data)
    validate_params(params)
    spec = references_spec(params)
    cfg = run_config(params, spec.methods[0], "synth10", 0)
    rows = no_learning(cfg, spec.random_inits, tmp_path / "synth10")
    assert rows["chance"] == 10.0
    assert set(rows) == {"chance", "raw_pixels_top1", "random_init_s0_top1", "random_init_s1_top1", "floor_top1"}
    assert rows["random_init_s0_top1"] != rows["random_init_s1_top1"]  # two different initializations
    mean_init = (rows["random_init_s0_top1"] + rows["random_init_s1_top1"]) / 2
    assert rows["floor_top1"] == pytest.approx(max(rows["raw_pixels_top1"], mean_init), abs=1e-3)
    assert json.loads((tmp_path / "synth10" / "metrics.json").read_text()) == rows
    assert no_learning(cfg, spec.random_inits) == rows  # deterministic


def test_raw_pixel_probe_reads_class_evidence_in_pixels(smoke_params, smoke_data):
    """A set whose class is the image's brightness: the pixel probe finds it; in pure noise it finds nothing."""
    from isogclr.data.base import ImageData

    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 2
    images = (torch.rand(200, 3, 8, 8, generator=g) * 100 + labels[:, None, None, None] * 120).to(torch.uint8)
    data = ImageData(images, labels, ["dark", "light"], torch.arange(200))
    cfg = run_config(_params(smoke_params, smoke_data), "supervised", "synth10", 0)
    assert raw_pixel_probe(data, data, cfg) == 100.0
    noise = ImageData((torch.rand(200, 3, 8, 8, generator=g) * 255).to(torch.uint8), labels, ["dark", "light"],
                      torch.arange(200))  # the same labels, no evidence of them in the pixels
    assert raw_pixel_probe(noise.subset(range(100)), noise.subset(range(100, 200)), cfg) < 75


@pytest.mark.parametrize("change, message", [
    ({"random_inits": []}, "references.random_inits"),
    ({"random_inits": [0, -1]}, "references.random_inits"),
    ({"methods": ["nope"]}, "references.methods"),
])
def test_references_section_errors_name_the_key(smoke_params, smoke_data, change, message):
    params = _params(smoke_params, smoke_data)
    params["references"].update(change)
    with pytest.raises(ConfigError, match=message):
        references_spec(params)


def test_random_inits_only_in_the_references_section(smoke_params, smoke_data):
    from isogclr.config.sections import table_spec

    params = _params(smoke_params, smoke_data)
    params["table1"]["random_inits"] = [0]
    with pytest.raises(ConfigError, match="table1.random_inits"):
        table_spec(params, "table1")
