"""Paper-scale configurations build and take two optimisation steps on CPU (tiny batches, random inputs)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from isogclr.config.core import run_config
from isogclr.config.profiles import load_params
from isogclr.models import ContrastiveModel, EncoderConfig, HeadConfig
from isogclr.models.text import TextEncoder, TextEncoderConfig, train_wordpiece
from isogclr.train.optim import OptimConfig, build_optimizer

from .conftest import ROOT

PAPER = load_params(ROOT / "profiles" / "paper.yaml")


def two_steps(model, loss_fn, optimizer, make_views, index):
    losses = []
    for _ in range(2):
        _, p = model(make_views())
        z1, z2 = F.normalize(p.float(), dim=1).chunk(2)
        loss = loss_fn(z1, z2, index)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    return losses


@pytest.mark.parametrize("method", PAPER["table1"]["methods"])
def test_paper_profile_run_steps(method):
    """Each Table 1 method of the paper profile: ResNet-18 (CIFAR stem) + 3 x 8192 head + LARS, n = 50,000."""
    cfg = run_config(copy.deepcopy(PAPER), method, PAPER["table1"]["datasets"][0], 0)
    assert cfg.encoder.width == 64 and cfg.head.hidden_dim == 8192 and cfg.optimizer.name == "lars"
    torch.manual_seed(0)
    model = ContrastiveModel(cfg.encoder, cfg.head)
    loss_fn = cfg.method.build(50_000)
    optimizer = build_optimizer(model, cfg.optimizer, cfg.train.batch_size)
    two_steps(model, loss_fn, optimizer, lambda: torch.randn(8, 3, 32, 32), torch.tensor([3, 10, 49_999, 7]))


def test_resnet50_imagenet_scale_steps():
    """ImageNet-100 / iNaturalist setting: ResNet-50 at 224x224, LARS lr 1.2 (batch 256 in the paper)."""
    model = ContrastiveModel(EncoderConfig(arch="resnet50", width=64, cifar_stem=False),
                             HeadConfig(layers=2, hidden_dim=2048, out_dim=128))
    assert model.encoder.num_features == 2048
    from isogclr.losses.isogclr import ISogCLRLoss

    optimizer = build_optimizer(model, OptimConfig(lr=1.2), 256)
    two_steps(model, ISogCLRLoss(126_689), optimizer, lambda: torch.randn(4, 3, 224, 224), torch.tensor([0, 1]))


def test_distilbert_base_from_config_steps():
    """The bimodal text encoder at paper size (DistilBERT-base built from its config, no download)."""
    enc = TextEncoder(TextEncoderConfig(dim=768, n_layers=6, n_heads=12, hidden_dim=3072, vocab_size=30522,
                                        max_length=32))
    proj = torch.nn.Linear(enc.num_features, 256)
    opt = torch.optim.AdamW([*enc.parameters(), *proj.parameters()], lr=2e-4, weight_decay=0.02)
    ids = torch.randint(0, 30522, (2, 16))
    for _ in range(2):
        out = F.normalize(proj(enc(ids, torch.ones_like(ids))), dim=1)
        loss = -(out[0] @ out[1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert out.shape == (2, 256)


def test_wordpiece_tokenizer_trains_offline_and_is_deterministic(tmp_path):
    captions = [f"a {c} {s} on a {b} background" for c in ("red", "blue", "green") for s in ("star", "ring")
                for b in ("dark", "light")] * 5
    tok_a, tok_b = (train_wordpiece(captions, vocab_size=120, max_length=16) for _ in range(2))
    enc = tok_a(["a red star on a dark background"], padding="max_length", truncation=True)
    assert enc["input_ids"] == tok_b(["a red star on a dark background"], padding="max_length",
                                     truncation=True)["input_ids"]
    assert enc["input_ids"][0][0] == tok_a.cls_token_id and len(enc["input_ids"][0]) == 16
    assert tok_a.unk_token_id not in enc["input_ids"][0]
    # the same ids in another process (the trainer's own ids depend on hash order)
    script = ("import json, sys; from isogclr.models.text import train_wordpiece; "
              "caps = json.loads(sys.argv[1]); t = train_wordpiece(caps, 120, 16); "
              "print(json.dumps(t(['a red star on a dark background'])['input_ids']))")
    ids = [json.loads(subprocess.run([sys.executable, "-c", script, json.dumps(captions)], check=True,
                                     capture_output=True, text=True).stdout) for _ in range(3)]
    assert all(i == tok_a(["a red star on a dark background"])["input_ids"] for i in ids)


def test_pretrained_weights_absent_offline_give_a_clear_error(monkeypatch, tmp_path):
    from isogclr.models import build_encoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(RuntimeError, match="resnet50.*not in the Hugging Face cache.*model.safetensors"):
        build_encoder(EncoderConfig(arch="resnet50", width=64, cifar_stem=False, pretrained=True))


def test_exported_standard_encoder_loads_with_timm(tmp_path):
    """A run's artifacts/encoder.pt of a standard-stem encoder loads with timm.create_model(checkpoint_path=...)."""
    import timm

    from isogclr.io import save_torch
    from isogclr.models import build_encoder

    enc = build_encoder(EncoderConfig(arch="resnet18", width=64, cifar_stem=False))
    save_torch(enc.state_dict(), tmp_path / "encoder.pt")
    loaded = timm.create_model("resnet18", num_classes=0, checkpoint_path=str(tmp_path / "encoder.pt"))
    x = torch.randn(1, 3, 64, 64)
    enc.eval()
    loaded.eval()
    torch.testing.assert_close(loaded(x), enc(x))
