"""The training run: outputs, determinism, resume after SIGKILL, and the model pieces."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml

from isogclr.config import run_config
from isogclr.models import EncoderConfig, build_encoder
from isogclr.train.loop import train_run
from isogclr.train.optim import LARS, param_groups, warmup_cosine


def smoke_run(params, data_root, method="isogclr", **train):
    params = copy.deepcopy(params)
    params["data"]["root"] = str(data_root)
    params["train"].update(train)
    return run_config(params, method, "synth10", 0), params


def test_run_writes_outputs_and_is_deterministic(tmp_path, smoke_params, smoke_data):
    cfg, _ = smoke_run(smoke_params, smoke_data)
    outs = []
    for name in ("a", "b"):
        metrics = train_run(cfg, tmp_path / name, tmp_path / f"ckpt_{name}")
        outs.append((metrics, (tmp_path / name / "artifacts" / "tau.csv").read_text()))
        assert not (tmp_path / f"ckpt_{name}" / "checkpoint.pt").exists()  # removed once outputs are written
    assert outs[0] == outs[1]
    run = tmp_path / "a"
    assert json.loads((run / "metrics.json").read_text())["top1"] == pytest.approx(outs[0][0]["top1"], abs=1e-4)
    assert json.loads((run / "artifacts" / "config.json").read_text())["method"]["loss"] == "isogclr"
    taus = [float(line.split(",")[-1]) for line in outs[0][1].splitlines()[1:]]
    assert len(taus) == 400 and all(0.05 <= t <= 1.0 for t in taus)
    assert len((run / "train_log.csv").read_text().splitlines()) == 1 + cfg.train.epochs


def test_resume_after_sigkill_gives_the_same_result(tmp_path, smoke_params, smoke_data):
    """Kill a real run (SIGKILL) after its first checkpoint, start it again: same metrics as uninterrupted."""
    _, params = smoke_run(smoke_params, smoke_data, epochs=6, checkpoint_every=3)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))

    def command(out):
        return [sys.executable, "-m", "isogclr", "train", "--params", str(path), "--method", "isogclr",
                "--dataset", "synth10", "--seed", "0", "--out", str(tmp_path / out),
                "--checkpoints", str(tmp_path / f"ckpt_{out}")]

    subprocess.run(command("straight"), check=True, capture_output=True)
    proc = subprocess.Popen(command("killed"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ckpt = tmp_path / "ckpt_killed" / "isogclr-synth10-s0" / "checkpoint.pt"
    deadline = time.time() + 120
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "isogclr-synth10-s0" / "metrics.json").exists()
    resumed = subprocess.run(command("killed"), check=True, capture_output=True, text=True)
    assert "resumed from" in resumed.stdout
    for name in ("metrics.json", "artifacts/tau.csv", "train_log.csv"):
        straight = (tmp_path / "straight" / "isogclr-synth10-s0" / name).read_text()
        killed = (tmp_path / "killed" / "isogclr-synth10-s0" / name).read_text()
        if name == "train_log.csv":  # wall-clock columns differ; the losses must not
            straight, killed = ([line.split(",")[:4] for line in t.splitlines()] for t in (straight, killed))
        assert straight == killed, name


def test_cifar_stem_encoder_shapes():
    enc = build_encoder(EncoderConfig(arch="resnet18", width=8, cifar_stem=True))
    assert enc.num_features == 64
    assert enc.conv1.kernel_size == (3, 3) and enc.conv1.stride == (1, 1)
    assert isinstance(enc.maxpool, torch.nn.Identity)
    assert enc(torch.randn(2, 3, 16, 16)).shape == (2, 64)
    assert build_encoder(EncoderConfig(width=64)).num_features == 512


def test_lars_excludes_biases_and_norms_and_scales_by_trust_ratio():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    groups = param_groups(model, weight_decay=0.1)
    assert [len(g["params"]) for g in groups] == [1, 3] and groups[1]["weight_decay"] == 0.0
    opt = LARS(groups, lr=1.0, momentum=0.0, weight_decay=0.1, trust_coefficient=0.01)
    w = model[0].weight
    before = w.detach().clone()
    w.grad = torch.ones_like(w)
    opt.step()
    grad = torch.ones_like(w) + 0.1 * before
    expected = before - 0.01 * before.norm() / grad.norm() * grad
    torch.testing.assert_close(w.detach(), expected)


def test_warmup_cosine():
    assert warmup_cosine(0, 100, 10) == pytest.approx(0.1)
    assert warmup_cosine(9, 100, 10) == pytest.approx(1.0)
    assert warmup_cosine(55, 100, 10) == pytest.approx(0.5)
    assert warmup_cosine(100, 100, 10, 0.1) == pytest.approx(0.1)


def test_torchrun_two_cpu_processes(tmp_path, smoke_params, smoke_data):
    """The README's multi-process command, on CPU with gloo: the run completes and rank 0 writes the outputs."""
    _, params = smoke_run(smoke_params, smoke_data, epochs=1)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             "-m", "isogclr", "train", "--params", str(path), "--method", "isogclr", "--dataset",
                             "synth10", "--seed", "0", "--out", str(tmp_path / "runs"),
                             "--checkpoints", str(tmp_path / "ckpt")],
                            capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "runs" / "isogclr-synth10-s0"
    metrics = json.loads((run / "metrics.json").read_text())
    assert {"top1", "knn1_top1"} <= set(metrics)
    assert result.stdout.count("epoch 1/1") == 1  # only rank 0 logs


def test_tau_simclr_trains_with_an_extra_head_output_and_eval_curve(tmp_path, smoke_params, smoke_data):
    """TaU+SimCLR gets its per-view logit e from one extra head output; eval_every logs 1-NN per epoch."""
    cfg, _ = smoke_run(smoke_params, smoke_data, method="tau_simclr", eval_every=1)
    metrics = train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert 0.0 <= metrics["top1"] <= 100.0
    state = torch.load(tmp_path / "run" / "artifacts" / "encoder.pt")
    assert state  # the encoder exported; the head had out_dim + 1 outputs
    log = (tmp_path / "run" / "train_log.csv").read_text().splitlines()
    header = log[0].split(",")
    assert "knn1_top1" in header and "samples_seen" in header
    rows = [dict(zip(header, line.split(","), strict=True)) for line in log[1:]]
    assert [int(r["samples_seen"]) for r in rows] == [int(r["step"]) * cfg.train.batch_size for r in rows]
    assert all(0.0 <= float(r["knn1_top1"]) <= 100.0 for r in rows)
