"""The real trainers, through their CLI entry points, on 1, 2 and 4 CPU processes (``torchrun``, gloo) give the
same run: per-sample temperatures, training losses and metrics within float tolerance.

What makes this hold: the augmentation draws are keyed by (seed, epoch, sample index) (isogclr.data.keyed), the
global batch is split by rank in order, features are gathered so the loss and the per-sample state are the
global batch's on every rank, BatchNorm is synchronised (``sync_bn``) and the text encoder's dropout is 0 (its
masks come from each process's generator). What remains is the order of floating-point sums (all-reduce of the
gradients, the synchronised BatchNorm's statistics): about 1e-7 on the loss at first. Training amplifies it: a
ReLU input within 1e-7 of 0 flips, and at the mini profile's LARS rate of 2.0 a difference grows ~10x per step
(measured: 1 vs 2 processes agree to 1e-7 for 7 steps, then 3e-5, 5e-4, 5e-3, 2e-2). So the runs here are
short and at a moderate rate (12 steps at rate 0.2), where the float noise stays at its own size and any real
difference (a rank's own augmentation seed, per-rank BatchNorm: 1e-3 to 1e-2 from the first step) shows.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import yaml

from isogclr.data.pair_semantics import PairSpec
from isogclr.data.synthetic_pairs import write_synthetic_pairs

from .test_train import smoke_run

WORLDS = (1, 2, 4)


def _torchrun(world: int, args: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                             str(world), "-m", "isogclr", *args], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]


def _log(run) -> list[dict[str, str]]:
    with open(run / "train_log.csv") as f:
        return list(csv.DictReader(f))


def _close(a: list[dict[str, str]], b: list[dict[str, str]], columns: tuple[str, ...], rtol: float) -> None:
    assert len(a) == len(b)
    for row_a, row_b in zip(a, b, strict=True):
        for c in columns:
            assert float(row_a[c]) == pytest.approx(float(row_b[c]), rel=rtol, abs=1e-7), (c, row_a["epoch"])


def _column(path, name: str) -> list[float]:
    with open(path) as f:
        return [float(r[name]) for r in csv.DictReader(f)]


@pytest.mark.slow  # 3 runs of 1, 2 and 4 processes: ~1-2 min on a 2-core machine
def test_unimodal_trainer_on_1_2_and_4_processes(tmp_path, smoke_params, smoke_data):
    _, params = smoke_run(smoke_params, smoke_data, epochs=1)
    params["train"].update(sync_bn=True, batch_size=32, eval_every=0)
    params["train"]["optimizer"].update(lr=0.2)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    runs = {}
    for world in WORLDS:
        _torchrun(world, ["train", "--params", str(path), "--method", "isogclr", "--dataset", "synth10", "--seed", "0",
                          "--out", str(tmp_path / f"w{world}"), "--checkpoints", str(tmp_path / f"ckpt{world}")])
        runs[world] = tmp_path / f"w{world}" / "isogclr-synth10-s0"
    one = _log(runs[1])
    metrics = json.loads((runs[1] / "metrics.json").read_text())
    tau = _column(runs[1] / "artifacts" / "tau.csv", "tau")
    assert len(set(tau)) > 100  # the per-sample temperatures moved apart: the comparison can fail
    for world in WORLDS[1:]:
        _close(_log(runs[world]), one, ("loss", "tau_mean", "tau_std"), rtol=1e-5)
        assert max(abs(a - b) for a, b in zip(_column(runs[world] / "artifacts" / "tau.csv", "tau"), tau,
                                              strict=True)) < 1e-5
        other = json.loads((runs[world] / "metrics.json").read_text())
        for key, value in metrics.items():  # accuracies in %: within one test image of 1,000 (float noise)
            assert other[key] == pytest.approx(value, abs=0.2), (world, key)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(PairSpec(seed=3, image_size=16, num_pairs=64, num_clusters=8, retrieval_images=8,
                                   zeroshot_per_class=1), root)
    return root


@pytest.mark.slow  # 3 runs of 1, 2 and 4 processes: ~1-2 min on a 2-core machine
def test_image_text_trainer_on_1_2_and_4_processes(tmp_path, pairs):
    params = {
        "methods": {"isogclr_bimodal": {"loss": "isogclr_bimodal", "rho": 2.0, "tau_init": 0.03, "tau_min": 0.005,
                                        "tau_max": 0.1, "eta": 0.01}},
        "bimodal": {
            "methods": ["isogclr_bimodal"], "seeds": [0], "data": str(pairs), "image_size": 16, "epochs": 2,
            "batch_size": 16, "lr": 1e-3, "warmup_iters": 2, "final_lr": 1e-6, "proj_dim": 16, "eval_every": 1,
            "device": "cpu", "num_threads": 1, "sync_bn": True,
            "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
            "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32,
                             "max_length": 24, "dropout": 0.0},
        },
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    runs = {}
    for world in WORLDS:
        _torchrun(world, ["train-bimodal", "--params", str(path), "--method", "isogclr_bimodal", "--seed", "0",
                          "--out", str(tmp_path / f"w{world}"), "--checkpoints", str(tmp_path / f"ckpt{world}")])
        runs[world] = tmp_path / f"w{world}" / "isogclr_bimodal-s0"

    def taus(run) -> list[tuple[float, float]]:
        path = run / "artifacts" / "tau.csv"
        return list(zip(_column(path, "tau_image"), _column(path, "tau_text"), strict=True))

    one, metrics = taus(runs[1]), json.loads((runs[1] / "metrics.json").read_text())
    assert len({t for t in one}) > 8  # the temperatures moved apart: the comparison can fail
    for world in WORLDS[1:]:
        other = taus(runs[world])
        assert max(abs(a - b) for x, y in zip(other, one, strict=True) for a, b in zip(x, y, strict=True)) < 1e-5
        _close(_log(runs[world]), _log(runs[1]), ("loss", "tau_image_mean", "tau_image_std"), rtol=1e-4)
        assert json.loads((runs[world] / "metrics.json").read_text()) == pytest.approx(metrics, abs=0.01), world
