"""Two CPU processes (gloo) give the same per-sample state and gradients as one process with the global batch."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from isogclr.losses import build_loss
from isogclr.train.distributed import gather_no_grad, gather_with_grad

N, B, D, WORLD = 24, 8, 6, 2
CASES = {
    "simclr": ("simclr", {"tau": 0.2}, False),
    "sogclr": ("sogclr", {"tau": 0.2, "gamma": 0.7}, False),
    "isogclr": ("isogclr", {"rho": 0.3, "tau_init": 0.4, "eta": 0.5}, False),
    "isogclr_bimodal": ("isogclr_bimodal", {"rho": 1.0, "tau_init": 0.1, "tau_min": 0.005, "eta": 0.5}, True),
}


def batches():
    g = torch.Generator().manual_seed(0)
    for _ in range(3):  # three steps: later steps read the state the earlier ones wrote
        index = torch.randperm(N, generator=g)[:B]
        z1 = F.normalize(torch.randn(B, D, generator=g, dtype=torch.float64), dim=1)
        z2 = F.normalize(torch.randn(B, D, generator=g, dtype=torch.float64), dim=1)
        yield index, z1, z2


def run(loss_fn, rank: int, world: int):
    grads = []
    for index, z1, z2 in batches():
        local = slice(rank * B // world, (rank + 1) * B // world)
        a, b = z1[local].clone().requires_grad_(), z2[local].clone().requires_grad_()
        loss = loss_fn(gather_with_grad(a), gather_with_grad(b), gather_no_grad(index[local]))
        loss.backward()
        grads.append((loss.detach(), a.grad, b.grad))
    return grads, {k: v.clone() for k, v in loss_fn.state_dict().items()}


def worker(rank: int, case: str, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    name, kwargs, _ = CASES[case]
    torch.save(run(build_loss(name, N, **kwargs), rank, WORLD), os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_processes_match_one(tmp_path, case):
    name, kwargs, _ = CASES[case]
    single_grads, single_state = run(build_loss(name, N, **kwargs), 0, 1)
    mp.spawn(worker, args=(case, str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        grads, state = torch.load(tmp_path / f"rank{rank}.pt")
        local = slice(rank * B // WORLD, (rank + 1) * B // WORLD)
        for (loss, ga, gb), (loss1, ga1, gb1) in zip(grads, single_grads, strict=True):
            torch.testing.assert_close(loss, loss1, rtol=1e-12, atol=1e-12)
            # all_gather's backward sums every rank's gradient: world x the single-process one (DDP divides)
            torch.testing.assert_close(ga, WORLD * ga1[local], rtol=1e-10, atol=1e-12)
            torch.testing.assert_close(gb, WORLD * gb1[local], rtol=1e-10, atol=1e-12)
        assert state.keys() == single_state.keys()
        for key, value in state.items():
            torch.testing.assert_close(value, single_state[key], rtol=0, atol=0, msg=key)


# --- BatchNorm over the global batch on CPU processes (sync_bn) ---------------------------------------------------

def _bn_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4), torch.nn.BatchNorm1d(4)).double()


def _bn_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 3, 8, 8, generator=g, dtype=torch.float64), torch.randn(8, 4, generator=g,
                                                                                 dtype=torch.float64)


def _bn_worker(rank: int, init_file: str, out_dir: str) -> None:
    from isogclr.train.distributed import sync_batchnorm

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    model = sync_batchnorm(_bn_model(), torch.device("cpu"))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x, weights = _bn_data()
    local = slice(rank * 8 // WORLD, (rank + 1) * 8 // WORLD)
    out = gather_with_grad(ddp(x[local]))
    (out * weights).sum().backward()  # the same global loss on every rank, as the trainers
    torch.save((out.detach(), [p.grad for p in model.parameters()], [b.clone() for b in model.buffers()]),
               os.path.join(out_dir, f"bn{rank}.pt"))
    dist.destroy_process_group()


def test_global_batchnorm_on_two_cpu_processes_is_batchnorm_on_one(tmp_path):
    """torch's SyncBatchNorm refuses CPU modules; ours gives one process's outputs, gradients and running
    statistics (float64: to 1e-12). Per-rank BatchNorm, what DDP does without it, differs at the first step."""
    model = _bn_model()
    x, weights = _bn_data()
    out = model(x)
    (out * weights).sum().backward()
    grads, buffers = [p.grad for p in model.parameters()], list(model.buffers())
    mp.spawn(_bn_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        out2, grads2, buffers2 = torch.load(tmp_path / f"bn{rank}.pt")
        torch.testing.assert_close(out2, out.detach(), rtol=1e-12, atol=1e-12)
        for a, b in zip(grads2, grads, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
        for a, b in zip(buffers2, buffers, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    per_rank = torch.cat([_bn_model()(x[:4]), _bn_model()(x[4:])])  # each half normalised alone
    assert (per_rank - out).abs().max() > 1e-2


_LEAVES = """
import atexit, os, sys
import torch, torch.distributed as dist
from isogclr.train import distributed
# atexit runs last-registered first: this hook runs after the one setup registers
atexit.register(lambda: open(sys.argv[1] + os.environ["RANK"], "w").write(str(dist.is_initialized())))
ctx = distributed.setup(torch.device("cpu"))
distributed.barrier()
"""


def test_a_process_leaves_its_group_before_it_exits(tmp_path):
    """setup() destroys the gloo group at exit: left alive into the interpreter's teardown, it can abort a finished
    run (SIGABRT, "terminate called without an active exception"), which torchrun reports as a failure."""
    import subprocess
    import sys

    script = tmp_path / "leaves.py"
    script.write_text(_LEAVES)
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             str(script), str(tmp_path / "initialized-at-exit-")], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert [(tmp_path / f"initialized-at-exit-{r}").read_text() for r in range(2)] == ["False", "False"]
