"""The training run: outputs, determinism, resume after SIGKILL, and the model pieces."""

from __future__ import annotations

import copy
import csv
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import timm
import torch
import yaml

from isogclr import epoch_times as timing
from isogclr import machine
from isogclr.config.core import run_config
from isogclr.config.typed import ConfigError
from isogclr.models import EncoderConfig, build_encoder
from isogclr.train.loop import train_run
from isogclr.train.optim import LARS, OptimConfig, param_groups, warmup_cosine

from .test_engine_dvclive import assert_no_wall_clock


def smoke_run(params, data_root, method="isogclr", dataset="synth10", **train):
    params = copy.deepcopy(params)
    params["data"]["root"] = str(data_root)
    params["train"].update(train)
    return run_config(params, method, dataset, 0), params


def run_files(run) -> set[str]:
    return {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file() and "dvclive" not in p.parts}


def test_run_writes_outputs_and_is_deterministic(tmp_path, smoke_params, smoke_data, _timing_record):
    cfg, _ = smoke_run(smoke_params, smoke_data)
    outs = []
    stale = tmp_path / "b" / "artifacts"  # a folder exported before, in the former layout: nothing stale stays
    stale.mkdir(parents=True)
    for name in ("encoder.pt", "features.pt"):
        (stale / name).write_bytes(b"old")
    for name, export in (("a", True), ("b", False)):
        metrics = train_run(cfg, tmp_path / name, tmp_path / f"ckpt_{name}", export=export)
        outs.append((metrics, (tmp_path / name / "artifacts" / "tau.csv").read_text()))
        assert not (tmp_path / f"ckpt_{name}" / "checkpoint.pt").exists()  # removed once outputs are written
    assert outs[0] == outs[1]
    run = tmp_path / "a"
    assert json.loads((run / "metrics.json").read_text())["top1"] == pytest.approx(outs[0][0]["top1"], abs=1e-4)
    assert json.loads((run / "artifacts" / "config.json").read_text())["method"]["loss"] == "isogclr"
    taus = [float(line.split(",")[-1]) for line in outs[0][1].splitlines()[1:]]
    assert len(taus) == 400 and all(0.05 <= t <= 1.0 for t in taus)
    assert len((run / "train_log.csv").read_text().splitlines()) == 1 + cfg.train.epochs
    # what a run keeps: small committed files (the export only with export=True) and the float32 local/ copies
    committed = {"metrics.json", "knobs.json", "train_log.csv", "artifacts/config.json", "artifacts/machine.json",
                 "artifacts/tau.csv"}
    # run.lock: the run folder's lock; state.pt: the head's and the loss's final state
    local = {"local/encoder.pt", "local/state.pt", "local/features.pt", "local/run.lock"}
    assert run_files(run) == committed | local | {"artifacts/encoder.pt", "artifacts/features.pt"}
    assert run_files(tmp_path / "b") == committed | local
    state = torch.load(run / "local" / "state.pt", weights_only=True)  # the final per-sample state, as tau.csv
    assert state["loss"]["tau"].tolist() == pytest.approx(taus, abs=1e-6) and state["loss"]["s.log_s"].shape[0] == 400
    assert sorted(p.name for p in (run / "dvclive").iterdir()) == ["metrics.json", "plots"]
    # the machine on record, beside the config: this machine, the same bytes for both runs (no clock, no host)
    assert json.loads((run / "artifacts" / "machine.json").read_text()) == machine.describe()
    records = [(folder / "artifacts" / "machine.json").read_bytes() for folder in (run, tmp_path / "b")]
    assert records[0] == records[1]
    # no wall clock in the result files: identical across the two runs, times in the timing record
    for name in ("train_log.csv", "metrics.json"):
        assert (run / name).read_text() == (tmp_path / "b" / name).read_text(), name
    header = (run / "train_log.csv").read_text().splitlines()[0].split(",")
    assert not {"seconds", "samples_per_s", "timestamp"} & set(header)
    for folder in (run / "dvclive", tmp_path / "b" / "dvclive"):
        assert_no_wall_clock(folder)
    record = timing.read(_timing_record)
    for name in ("a", "b"):
        rows = [r for r in record if r["run"] == timing.run_key(tmp_path / name)]
        assert [r["epoch"] for r in rows] == list(range(1, cfg.train.epochs + 1))
        assert all(r["seconds"] > 0 and r["samples_per_s"] > 0 for r in rows)
    # the exported encoder (float16, committed) loads by the timm name and width recorded in config.json
    half = torch.load(run / "artifacts" / "encoder.pt", weights_only=True)
    full = torch.load(run / "local" / "encoder.pt", weights_only=True)
    assert half.keys() == full.keys()
    assert all(v.dtype == (torch.float16 if full[k].is_floating_point() else full[k].dtype) for k, v in half.items())
    assert all(v.dtype != torch.float16 for v in full.values())
    assert (run / "artifacts" / "encoder.pt").stat().st_size < 0.6 * (run / "local" / "encoder.pt").stat().st_size
    encoder_cfg = json.loads((run / "artifacts" / "config.json").read_text())["encoder"]
    assert encoder_cfg["timm_name"] == f"isogclr_{cfg.encoder.arch}_cifar" == "isogclr_resnet10_cifar"
    encoder = timm.create_model(encoder_cfg["timm_name"], width=encoder_cfg["width"], num_classes=0,
                                checkpoint_path=str(run / "artifacts" / "encoder.pt"))
    assert next(encoder.parameters()).dtype == torch.float32
    reference = timm.create_model(encoder_cfg["timm_name"], width=encoder_cfg["width"], num_classes=0,
                                  checkpoint_path=str(run / "local" / "encoder.pt"))
    encoder.eval(), reference.eval()  # before any forward: a train-mode pass would move BatchNorm's statistics
    x = torch.randn(2, 3, 16, 16)
    assert encoder(x).shape == (2, encoder.num_features)
    torch.testing.assert_close(encoder(x), reference(x), rtol=0.05, atol=0.05)  # float16 weights: close
    # the exported features: float16 features and int64 labels of the test split (the train split's only for a
    # long-tailed run with per-sample temperatures: test_long_tailed_export_keeps_train_features)
    blob = torch.load(run / "artifacts" / "features.pt", weights_only=True)
    features = torch.load(run / "local" / "features.pt", weights_only=True)
    assert set(blob) == {"test", "test_labels"}
    assert blob["test"].dtype == torch.float16 and blob["test_labels"].dtype == torch.int64
    assert torch.equal(blob["test_labels"], features["test_labels"].long())
    torch.testing.assert_close(blob["test"].float(), features["test"], rtol=1e-2, atol=1e-2)
    assert set(features) == {"train", "train_labels", "test", "test_labels"}


@pytest.mark.parametrize("method, kept", [("isogclr", True), ("simclr", False)])
def test_long_tailed_export_keeps_train_features(tmp_path, smoke_params, smoke_data, method, kept):
    """Figure 5's input: an exported long-tailed run with learned temperatures keeps its train features
    (float16, aligned with tau.csv); a loss without them keeps the test split's only."""
    cfg, _ = smoke_run(smoke_params, smoke_data, method=method, dataset="synth10_lt", epochs=1)
    train_run(cfg, tmp_path / "run", tmp_path / "ckpt", export=True)
    blob = torch.load(tmp_path / "run" / "artifacts" / "features.pt", weights_only=True)
    features = torch.load(tmp_path / "run" / "local" / "features.pt", weights_only=True)
    assert ({"train", "train_labels"} <= set(blob)) is kept
    if kept:
        assert blob["train"].dtype == torch.float16
        torch.testing.assert_close(blob["train"].float(), features["train"], rtol=1e-2, atol=1e-2)
        taus = (tmp_path / "run" / "artifacts" / "tau.csv").read_text().splitlines()[1:]
        assert len(blob["train"]) == len(taus) == len(features["train"])


def read_tsv(path) -> list[dict]:
    """A DVCLive plot file's rows without the wall-clock ``timestamp`` column (if DVCLive wrote one)."""
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k != "timestamp"} for row in csv.DictReader(f, delimiter="\t")]


def test_resume_after_sigkill_gives_the_same_result(tmp_path, smoke_params, smoke_data, _timing_record):
    """Kill a real run (SIGKILL) after its first checkpoint, start it again: same metrics as uninterrupted."""
    _, params = smoke_run(smoke_params, smoke_data, epochs=6, checkpoint_every=3)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))

    def command(out):
        return [sys.executable, "-m", "isogclr", "train", "--params", str(path), "--method", "isogclr",
                "--dataset", "synth10", "--seed", "0", "--out", str(tmp_path / out),
                "--checkpoints", str(tmp_path / f"ckpt_{out}")]

    subprocess.run(command("straight") + ["--export-seed", "0"], check=True, capture_output=True)
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
        assert straight == killed, name  # no wall clock in any of them
    # --export-seed N exports the run whose seed is N: float16 encoder and test features in artifacts/
    exported = {p.name for p in (tmp_path / "straight" / "isogclr-synth10-s0" / "artifacts").iterdir()}
    assert {"encoder.pt", "features.pt"} <= exported
    assert not {"encoder.pt", "features.pt"} & {p.name for p in (tmp_path / "killed" / "isogclr-synth10-s0" /
                                                                       "artifacts").iterdir()}
    # DVCLive: one row per epoch in every curve, the same steps and values (throughput is wall clock)
    live = {out: tmp_path / out / "isogclr-synth10-s0" / "dvclive" for out in ("straight", "killed")}
    for out, folder in live.items():
        assert sorted(p.name for p in folder.iterdir()) == ["metrics.json", "plots"], out  # no dvc.yaml, no report
    curves = sorted(p.name for p in (live["straight"] / "plots" / "metrics").iterdir())
    # max_weight: the largest weight of the loss's gradient, logged when the loss reports it (step_stats)
    assert set(curves) - {"max_weight.tsv"} == {"grad_norm.tsv", "loss.tsv", "lr.tsv", "tau_mean.tsv", "tau_std.tsv"}
    assert sorted(p.name for p in (live["killed"] / "plots" / "metrics").iterdir()) == curves
    for curve in curves:
        straight, killed = (read_tsv(live[out] / "plots" / "metrics" / curve) for out in ("straight", "killed"))
        assert [int(r["step"]) for r in killed] == list(range(1, params["train"]["epochs"] + 1)), curve
        assert straight == killed, curve
    for folder in live.values():
        assert_no_wall_clock(folder)
    summaries = [json.loads((live[out] / "metrics.json").read_text()) for out in ("straight", "killed")]
    assert summaries[0] == summaries[1]
    # the resumed run records every epoch's time, the ones before the kill from its checkpoint
    killed_rows = [r for r in timing.read(_timing_record)
                   if r["run"] == timing.run_key(tmp_path / "killed" / "isogclr-synth10-s0")]
    assert [r["epoch"] for r in killed_rows] == list(range(1, params["train"]["epochs"] + 1))
    assert summaries[0]["step"] == params["train"]["epochs"]
    assert summaries[0]["top1"] == json.loads((tmp_path / "straight" / "isogclr-synth10-s0" / "metrics.json")
                                              .read_text())["top1"]
    # one log line per epoch, with the elapsed time and the ETA
    epoch_lines = [line for line in resumed.stdout.splitlines() if " epoch " in line]
    assert len(epoch_lines) == params["train"]["epochs"]
    assert all(" elapsed " in line and " eta " in line for line in epoch_lines)
    assert epoch_lines[-1].endswith(" eta 0:00:00")


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


@pytest.mark.parametrize(("warmup", "expected"), [
    ({"warmup_epochs": 1.6}, {0: 1 / 16, 15: 1.0, 58: 0.5}),  # 1.6 epochs of 10 steps = 16 steps
    ({"warmup_epochs": 0, "warmup_iters": 16}, {0: 1 / 16, 15: 1.0, 58: 0.5}),  # the same schedule, in steps
    ({"warmup_epochs": 0, "warmup_iters": 30}, {0: 1 / 30, 29: 1.0, 65: 0.5}),
    ({"warmup_epochs": 0}, {0: 1.0, 50: 0.5}),  # no warm-up
])
def test_warmup_in_epochs_or_iterations(warmup, expected):
    """The learning rate at given steps of a 100-step run (10 steps per epoch), warm-up in either unit."""
    cfg = OptimConfig(lr=0.4, **warmup)
    warmup_steps = cfg.warmup_steps(steps_per_epoch=10)
    for step, factor in expected.items():
        assert cfg.lr * warmup_cosine(step, 100, warmup_steps) == pytest.approx(0.4 * factor), step


BOTH_WARMUPS = r"train\.optimizer\.warmup_epochs \(.*\) and train\.optimizer\.warmup_iters \(.*\) are both non-zero"


@pytest.mark.parametrize(("optimizer", "message"), [
    ({"warmup_epochs": 1, "warmup_iters": 10}, BOTH_WARMUPS),
    ({"warmup_iters": 10}, BOTH_WARMUPS),  # warmup_epochs defaults to 10: a step count alone needs warmup_epochs: 0
    ({"warmup_epochs": 0, "warmup_iters": -1}, r"train\.optimizer\.warmup_iters must be an integer >= 0"),
    ({"warmup_epochs": 0, "warmup_iters": 2.5}, r"train\.optimizer\.warmup_iters: expected an integer, got 2\.5"),
])
def test_warmup_epochs_and_iters_are_exclusive(smoke_params, optimizer, message):
    """A params.yaml that sets both warm-up lengths, or a bad warmup_iters, fails before any compute."""
    params = copy.deepcopy(smoke_params)
    params["train"]["optimizer"].pop("warmup_epochs")
    params["train"]["optimizer"].update(optimizer)
    with pytest.raises(ConfigError, match=message):
        run_config(params, "isogclr", "synth10", 0)


def test_torchrun_two_cpu_processes(tmp_path, smoke_params, smoke_data):
    """The multi-process command of docs/profiles.md, on CPU with gloo: the run completes, rank 0 writes outputs."""
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
    cfg, params = smoke_run(smoke_params, smoke_data, method="tau_simclr", eval_every=1)
    params["train"]["optimizer"].update(warmup_epochs=0, warmup_iters=20)  # the loop's warm-up counted in steps
    cfg = run_config(params, "tau_simclr", "synth10", 0)
    metrics = train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert 0.0 <= metrics["top1"] <= 100.0
    state = torch.load(tmp_path / "run" / "local" / "encoder.pt")
    assert state  # the encoder saved; the head had out_dim + 1 outputs
    assert not (tmp_path / "run" / "artifacts" / "encoder.pt").exists()  # not exported (export=False)
    log = (tmp_path / "run" / "train_log.csv").read_text().splitlines()
    header = log[0].split(",")
    assert "knn1_top1" in header and "samples_seen" in header
    rows = [dict(zip(header, line.split(","), strict=True)) for line in log[1:]]
    assert [int(r["samples_seen"]) for r in rows] == [int(r["step"]) * cfg.train.batch_size for r in rows]
    assert all(0.0 <= float(r["knn1_top1"]) <= 100.0 for r in rows)
    # 12 steps per epoch; the logged lr is the last step's: 12/20 of the way up, then 3/4 down the cosine
    steps = 400 // cfg.train.batch_size
    assert steps == 12 and cfg.train.epochs == 2
    lr = cfg.optimizer.lr
    assert [float(r["lr"]) for r in rows] == pytest.approx([lr * 12 / 20, lr * warmup_cosine(23, 24, 20)])
    assert warmup_cosine(23, 24, 20) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.75)))
    assert [int(r["step"]) for r in read_tsv(tmp_path / "run" / "dvclive" / "plots" / "metrics" / "knn1_top1.tsv")] \
        == [1, 2]


def test_a_checkpoint_written_under_other_settings_is_refused(tmp_path, smoke_params, smoke_data, monkeypatch,
                                                               _timing_record):
    """A run interrupted after epoch 1, then started again after an edit of its method's knob: the checkpoint
    is refused, naming the key, both values and the file, before a step is taken; a change of how it runs
    (how often it checkpoints) is not a change of the run, and it resumes."""
    import dataclasses
    import functools

    from isogclr.train import engine, loop

    cfg, _ = smoke_run(smoke_params, smoke_data, method="simclr", epochs=3)

    def stop(epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt("interrupted after epoch 1")

    monkeypatch.setattr(loop, "fit", functools.partial(engine.fit, on_epoch_end=stop))
    with pytest.raises(KeyboardInterrupt):
        train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    monkeypatch.undo()
    ckpt = tmp_path / "ckpt" / "checkpoint.pt"
    assert torch.load(ckpt, weights_only=True)["settings"]["method"]["kwargs"] == dict(cfg.method.kwargs)
    edited = dataclasses.replace(cfg, method=dataclasses.replace(cfg.method, kwargs={**cfg.method.kwargs, "tau": 0.7}))
    with pytest.raises(ValueError) as err:
        train_run(edited, tmp_path / "run", tmp_path / "ckpt")
    message = str(err.value)
    assert f"method.kwargs.tau: {cfg.method.kwargs['tau']!r} in the checkpoint, 0.7 now" in message
    assert str(ckpt) in message and f"mv {ckpt} {ckpt}.bad" in message and "checkpoint_every" not in message
    assert ckpt.exists() and not (tmp_path / "run" / "metrics.json").exists()  # nothing was lost or written
    often = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, checkpoint_every=2))
    resumed = train_run(often, tmp_path / "run", tmp_path / "ckpt")
    assert resumed == train_run(cfg, tmp_path / "straight", tmp_path / "ckpt_straight")
