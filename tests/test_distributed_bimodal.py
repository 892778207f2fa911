"""Image-text training under torchrun, on CPU processes (gloo).

* The step of :mod:`isogclr.train.bimodal` (both encoders in one DistributedDataParallel forward, features and
  indices gathered by :func:`~isogclr.train.bimodal.global_loss`, the image-text AdamW) with 1, 2 and 4 processes
  taking B, B/2 and B/4 pairs of each global batch: the same loss, gradients and parameters (float64, to float
  tolerance) and the same per-pair state and temperatures (float64, to 1e-12: after the first step the
  parameters agree to rounding, DDP sums the ranks' gradients in another order) over several steps, for CLIP (learned
  temperature), SogCLR and iSogCLR (bimodal). The encoders are elementwise, so a pair's features do not depend
  on how the batch is split (a ResNet's BatchNorm does: per-rank statistics, as open_clip's default).
* The whole trainer (:func:`~isogclr.train.bimodal.train_bimodal_run`) with 2 processes: rank 0 writes the
  outputs, every rank returns its metrics, and a run SIGKILLed after its first epoch and restarted gives the
  same files as an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from isogclr.losses import build_loss
from isogclr.train.bimodal import _Encoders, global_loss
from isogclr.train.optim import adamw_with_loss_params

from .process_helpers import free_port, torchrun_env

N, B, D, STEPS = 32, 8, 6, 4
CASES = {
    "clip": ("clip", {"tau": 0.1, "learn_tau": True}),
    "sogclr_bimodal": ("sogclr_bimodal", {"tau": 0.1, "gamma": 0.8}),
    "isogclr_bimodal": ("isogclr_bimodal", {"rho": 1.0, "tau_init": 0.05, "tau_min": 0.01, "tau_max": 0.5,
                                            "eta": 0.05, "beta0": 0.8, "beta1": 0.9}),
}


class _Elementwise(nn.Module):
    """A stand-in for the image-text model: per-feature scales and shifts of fixed inputs, then unit norm."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.image_scale = nn.Parameter(1 + 0.3 * torch.randn(D, generator=g, dtype=torch.float64))
        self.image_shift = nn.Parameter(0.1 * torch.randn(D, generator=g, dtype=torch.float64))
        self.text_scale = nn.Parameter(1 + 0.3 * torch.randn(D, generator=g, dtype=torch.float64))

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x * self.image_scale + self.image_shift, dim=1)

    def encode_text(self, t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.normalize(t * self.text_scale * mask, dim=1)


def _data():
    g = torch.Generator().manual_seed(0)
    images, texts = torch.randn(N, D, generator=g, dtype=torch.float64), torch.randn(N, D, generator=g,
                                                                                     dtype=torch.float64)
    texts = texts + 0.5 * images  # paired
    batches = [torch.randperm(N, generator=g)[:B] for _ in range(STEPS)]
    return images, texts, batches


def steps(case: str, rank: int, world: int) -> dict:
    name, kwargs = CASES[case]
    model, loss_fn = _Elementwise(), build_loss(name, N, **kwargs).double()
    optimizer = adamw_with_loss_params(model, loss_fn, lr=0.05, weight_decay=0.1, loss_lr=0.02)
    encoders = DistributedDataParallel(_Encoders(model)) if world > 1 else _Encoders(model)
    images, texts, batches = _data()
    local = B // world
    out = {"loss": [], "grads": []}
    for index in batches:
        mine = index[rank * local:(rank + 1) * local]
        image_x, text_x = encoders(images[mine], texts[mine], torch.ones(local, 1, dtype=torch.float64))
        loss = global_loss(loss_fn, image_x, text_x, mine)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        out["loss"].append(loss.detach())
        out["grads"].append([p.grad.clone() for p in [*model.parameters(), *loss_fn.parameters()]])
        optimizer.step()
    out["params"] = [p.detach().clone() for p in [*model.parameters(), *loss_fn.parameters()]]
    out["state"] = {k: v.clone() for k, v in loss_fn.state_dict().items()}
    return out


def _worker(rank: int, world: int, case: str, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.save(steps(case, rank, world), os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def _check_equal(tmp_path, case: str, world: int) -> None:
    single = steps(case, 0, 1)
    mp.spawn(_worker, args=(world, case, str(tmp_path / "init"), str(tmp_path)), nprocs=world, join=True)
    for rank in range(world):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        for loss, loss1 in zip(got["loss"], single["loss"], strict=True):
            torch.testing.assert_close(loss, loss1, rtol=1e-12, atol=1e-12)
        for grads, grads1 in zip(got["grads"], single["grads"], strict=True):  # DDP's average = the global gradient
            for g, g1 in zip(grads, grads1, strict=True):
                torch.testing.assert_close(g, g1, rtol=1e-9, atol=1e-12)
        for p, p1 in zip(got["params"], single["params"], strict=True):
            torch.testing.assert_close(p, p1, rtol=1e-9, atol=1e-12)
        assert got["state"].keys() == single["state"].keys()
        for key, value in got["state"].items():  # per-pair state and temperatures, float64: to 1e-12
            assert value.dtype == torch.float64
            torch.testing.assert_close(value, single["state"][key], rtol=1e-12, atol=1e-12, msg=key)


@pytest.mark.slow  # 2 processes per case: 41 s for clip (pytest --durations, a loaded 2-core machine)
@pytest.mark.parametrize("case", sorted(CASES))
def test_two_processes_match_one(tmp_path, case):
    _check_equal(tmp_path, case, 2)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_four_processes_match_one(tmp_path, case):
    _check_equal(tmp_path, case, 4)


def test_state_moves_so_the_comparison_can_fail():
    """The steps above change the per-pair state and the parameters (the equalities are not vacuous)."""
    for case in ("sogclr_bimodal", "isogclr_bimodal"):
        out = steps(case, 0, 1)
        fresh = build_loss(CASES[case][0], N, **CASES[case][1]).double().state_dict()
        assert any(not torch.equal(out["state"][k], fresh[k]) for k in fresh)
    assert not torch.equal(steps("clip", 0, 1)["params"][0], _Elementwise().image_scale.detach())


# --- the whole trainer with 2 processes --------------------------------------------------------------------------

WORLD = 2



def _train_worker(rank: int, params: dict, method: str, out: str, ckpt: str, port: int, kill_after: int) -> None:
    torchrun_env(rank, WORLD, port)
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.train import bimodal

    if kill_after:
        def kill(run_id: str, epoch: int) -> None:  # after the epoch's checkpoint: as a preempted machine
            if epoch == kill_after and rank == 0:
                os.kill(os.getpid(), signal.SIGKILL)
        bimodal.on_epoch_end = kill
    metrics = bimodal.train_bimodal_run(bimodal_run_config(params, method, 0), out, ckpt)
    with open(os.path.join(ckpt, f"returned{rank}.json"), "w") as f:
        json.dump(metrics, f)
    dist.destroy_process_group()


def _spawn(params: dict, method: str, out, ckpt, kill_after: int = 0) -> None:
    os.makedirs(ckpt, exist_ok=True)
    mp.spawn(_train_worker, args=(params, method, str(out), str(ckpt), free_port(), kill_after), nprocs=WORLD,
             join=True)


@pytest.fixture(scope="module")
def params(tmp_path_factory) -> dict:
    from isogclr.data.pair_semantics import PairSpec
    from isogclr.data.synthetic_pairs import write_synthetic_pairs

    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(PairSpec(seed=3, image_size=16, num_pairs=64, num_clusters=8, retrieval_images=8,
                                   zeroshot_per_class=1), root)
    return {
        "methods": {name: {"loss": loss, **kwargs} for name, (loss, kwargs) in CASES.items()},
        "bimodal": {
            "methods": ["isogclr_bimodal"], "seeds": [0], "data": str(root), "image_size": 16, "epochs": 2,
            "batch_size": 16, "lr": 1e-3, "weight_decay": 0.02, "warmup_iters": 2, "final_lr": 1e-6, "proj_dim": 16,
            "eval_every": 1, "device": "cpu", "num_threads": 1,
            "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
            "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32,
                             "max_length": 24},
        },
    }


FILES = ("metrics.json", "train_log.csv", "artifacts/tau.csv", "artifacts/config.json")


@pytest.mark.slow
def test_two_process_run_killed_and_resumed_equals_uninterrupted(tmp_path, params):
    _spawn(params, "isogclr_bimodal", tmp_path / "straight", tmp_path / "ckpt_straight")
    returned = [json.loads((tmp_path / "ckpt_straight" / f"returned{r}.json").read_text()) for r in range(WORLD)]
    assert returned[0] == returned[1]  # rank 0's metrics, on every rank (metrics.json rounds them)
    assert {k: round(v, 4) for k, v in returned[1].items()} == json.loads((tmp_path / "straight" /
                                                                           "metrics.json").read_text())
    assert not (tmp_path / "ckpt_straight" / "checkpoint.pt").exists()
    log = (tmp_path / "straight" / "train_log.csv").read_text().splitlines()
    assert len(log) == 3 and "retrieval_a_ir_r1" in log[0]  # 2 epochs; the periodic evaluation ran on rank 0

    with pytest.raises(mp.ProcessExitedException):  # SIGKILL after epoch 1's checkpoint
        _spawn(params, "isogclr_bimodal", tmp_path / "resumed", tmp_path / "ckpt", kill_after=1)
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists() and not (tmp_path / "resumed" / "metrics.json").exists()
    _spawn(params, "isogclr_bimodal", tmp_path / "resumed", tmp_path / "ckpt")
    for name in FILES:
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "straight" / name).read_bytes(), name
