"""Multi-process training helpers (torchrun / torch.distributed).

Contrastive losses need the global batch: every rank gathers all ranks' features *with
gradients* (``torch.distributed.nn.functional.all_gather``) and the dataset indices, and
evaluates the same global loss. Each rank therefore applies the same per-sample state
update to the same indices with the same inputs, so the state (s, u, tau) stays identical
on every rank without extra communication. The backward of ``all_gather`` sums every
rank's gradient into the local features, i.e. world_size x the single-process gradient;
DDP's gradient averaging divides it back, so parameters get exactly the global-batch gradient.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import nn


def resolve_device(name: str) -> torch.device:
    """``train.device`` / ``bimodal.device`` (``auto``, ``cpu``, ``cuda``) -> the device of this process."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device is 'cuda' but no GPU is visible; set train.device: auto or cpu")
    return torch.device(name)


@dataclass(frozen=True)
class DistContext:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device: torch.device) -> DistContext:
    """Join the process group that torchrun describes (WORLD_SIZE, RANK, LOCAL_RANK); one process otherwise.

    NCCL on GPUs, gloo on CPUs. On GPUs each process takes the device ``LOCAL_RANK``. The group is left
    (:func:`leave`) when the process exits: a gloo group still alive when the interpreter tears down can abort
    the process after its run has finished ("terminate called without an active exception", SIGABRT), which
    torchrun reports as a failed run.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistContext(0, 1, device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        atexit.register(leave)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    return DistContext(dist.get_rank(), dist.get_world_size(), device)


def leave() -> None:
    """Destroy this process's group, if it is in one (registered to run at exit by :func:`setup`)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def process_rank() -> int:
    """This process's rank: the process group's once joined, else torchrun's ``RANK`` (0 without torchrun)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` from all ranks (rank order) keeping the autograd graph; identity on one process."""
    if not is_distributed():
        return x
    return torch.cat(dist_fn.all_gather(x))


@torch.no_grad()
def gather_no_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` (e.g. dataset indices) from all ranks, without gradient."""
    if not is_distributed():
        return x
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts)


def all_gather_object(obj: Any) -> list[Any]:
    """Every rank's ``obj`` in rank order (picklable objects, e.g. RNG states); ``[obj]`` on one process."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (e.g. the metrics only rank 0 computes); ``obj`` on one process."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class GlobalBatchNorm(nn.modules.batchnorm._BatchNorm):
    r"""BatchNorm whose training statistics are the global batch's, across the processes, on any device.

    In training under a process group of W > 1 processes: :math:`\mu = \sum_r \sum_i x_{ri} / N` and
    :math:`\sigma^2 = \sum_r \sum_i (x_{ri} - \mu)^2 / N` over the N values of every process (two
    ``all_reduce``\ s with autograd, so the gradient flows through the statistics as in one process); the running
    statistics take the unbiased variance, as ``nn.BatchNorm``. Otherwise (evaluation, one process) it is
    ``nn.BatchNorm``. torch's ``SyncBatchNorm`` does the same on GPUs only (it refuses CPU tensors, and DDP refuses
    it in a CPU module); :func:`sync_batchnorm` uses it there.
    """

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {x.dim()}D input)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and is_distributed()):
            return super().forward(x)
        self._check_input_dim(x)
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        count = torch.tensor([x.numel() // x.shape[1]], dtype=x.dtype, device=x.device)
        total = dist_fn.all_reduce(torch.cat([x.sum(dims), count]))
        n = total[-1]
        mean = total[:-1] / n
        var = dist_fn.all_reduce(((x - mean.view(shape)) ** 2).sum(dims)) / n
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (n / (n - 1)), alpha=factor)
        y = (x - mean.view(shape)) * torch.rsqrt(var + self.eps).view(shape)
        return y * self.weight.view(shape) + self.bias.view(shape) if self.affine else y


def sync_batchnorm(model: nn.Module, device: torch.device) -> nn.Module:
    """``model`` with every BatchNorm computing its statistics over the global batch (``sync_bn``): torch's
    ``SyncBatchNorm`` on GPUs, :class:`GlobalBatchNorm` on CPUs. Weights, biases, running statistics and their
    floating-point type are kept."""
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)

    def convert(module: nn.Module) -> nn.Module:
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, GlobalBatchNorm):
            floats = [t for t in module.state_dict().values() if t.is_floating_point()]
            like = floats[0] if floats else torch.empty(0, device=device)  # its device and floating-point type
            new = GlobalBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                  module.track_running_stats).to(device=like.device, dtype=like.dtype)
            new.load_state_dict(module.state_dict())
            new.train(module.training)
            return new
        for name, child in module.named_children():
            module.add_module(name, convert(child))
        return module

    return convert(model)
