"""Offline, a missing pretrained model names its repository, the files to place and the folder."""

from __future__ import annotations

import pytest

from isogclr.models import EncoderConfig, build_encoder
from isogclr.models.bimodal import build_tokenizer
from isogclr.models.text import TextEncoder, TextEncoderConfig


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hub"


def test_missing_image_weights_name_the_file_and_the_folder(empty_cache):
    with pytest.raises(RuntimeError) as err:
        build_encoder(EncoderConfig(arch="resnet18", width=64, cifar_stem=False, pretrained=True))
    message = str(err.value)
    assert "model.safetensors" in message and "model.encoder.pretrained" in message
    assert str(empty_cache / "models--timm--resnet18") in message


def test_missing_text_weights_and_tokenizer_name_the_file_and_the_folder(empty_cache):
    cfg = TextEncoderConfig(pretrained="distilbert-base-uncased")
    with pytest.raises(RuntimeError, match="models--distilbert-base-uncased.*text_encoder.pretrained"):
        TextEncoder(cfg)
    with pytest.raises(RuntimeError, match="tokenizer.json.*models--distilbert-base-uncased"):
        build_tokenizer(cfg, ["a caption"])
