"""Per-pair state off the accelerator (``bimodal.state_device: cpu``): s, u and tau in host memory.

The iSogCLR paper (section 5, memory cost) notes that the per-pair state of a loss (the moving averages s
or u and the temperatures tau with their momentum: up to 24 bytes per pair, 9.6 GB at LAION-400M) need not
live on the GPU: a step reads and writes only the rows of its batch. :class:`HostStateLoss` keeps every
per-pair buffer of the loss in CPU memory (pinned on CUDA machines, so the copies are asynchronous) and a
*window* copy of the loss built for ``batch_size`` pairs on the device. A step

1. copies the batch's rows of every per-pair buffer into the window (``index_select`` on the host,
   then one host-to-device copy per buffer),
2. calls the window loss with the local indices ``0 .. B - 1`` (the loss's own update rules, unchanged),
3. copies the window's rows back into the host buffers at the batch's indices.

The update of a row depends on that row only (:class:`~isogclr.losses.conventions.LogMovingAverage`,
:meth:`~isogclr.losses.moving_average.PerSampleTemperatures._step_temperatures`), so the numbers are the
same as with the state on the device, bit for bit (``tests/test_state_offload.py``). Device memory for the
state drops from ``n x bytes per pair`` to ``B x bytes per pair``; the host holds ``n x bytes per pair``.

Losses whose per-pair state are *parameters* (``clip_individual_tau``: the optimizer owns them) are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class HostStateLoss(nn.Module):
    """``build(n)`` (a bimodal loss for n pairs) with its per-pair buffers in host memory; see the module doc.

    Its ``state_dict`` is the plain loss's (the full per-pair buffers, on the CPU), so checkpoints are
    interchangeable with those of a run that keeps the state on the device; attributes not found here
    (``tau_image``, ``step_stats``, ...) are read from the host buffers, then from the window loss.
    """

    def __init__(self, build: Callable[[int], nn.Module], num_samples: int, batch_size: int,
                 device: torch.device) -> None:
        super().__init__()
        full = build(num_samples)  # built on the CPU: its per-pair buffers become the host state
        per_pair = [name for name, p in full.named_parameters() if p.dim() and p.shape[0] == num_samples]
        if per_pair:
            raise ValueError(f"bimodal.state_device: cpu keeps per-pair *buffers* in host memory, but "
                             f"{type(full).__name__} learns per-pair parameters {per_pair} with the optimizer; "
                             "set bimodal.state_device: model")
        self.window = build(batch_size).to(device)
        self.num_samples, self.batch_size, self.device = int(num_samples), int(batch_size), device
        window_buffers = dict(self.window.named_buffers())
        pin = device.type == "cuda"
        self.host: dict[str, torch.Tensor] = {}
        self.staging: dict[str, torch.Tensor] = {}
        for name, buf in full.named_buffers():
            if buf.dim() and buf.shape[0] == num_samples and window_buffers[name].shape[0] == batch_size:
                self.host[name] = buf.pin_memory() if pin else buf
                self.staging[name] = torch.empty_like(window_buffers[name], device="cpu", pin_memory=pin)
        if not self.host:
            raise ValueError(f"bimodal.state_device: cpu: {type(full).__name__} has no per-pair state to keep on the "
                             "host; set bimodal.state_device: model")
        del full

    def _window_buffer(self, name: str) -> torch.Tensor:
        return self.window.get_buffer(name)

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor,
                index: torch.Tensor) -> torch.Tensor:
        if len(index) != self.batch_size:
            raise ValueError(f"bimodal.state_device: cpu: a global batch of {len(index)} pairs, the window holds "
                             f"{self.batch_size}")
        rows = index.cpu()
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= self.num_samples):
            raise IndexError(f"dataset index out of range [0, {self.num_samples}): min {int(rows.min())}, "
                             f"max {int(rows.max())}")
        for name, host in self.host.items():  # 1. the batch's rows -> the window (asynchronous from pinned memory)
            staging = self.staging[name]
            torch.index_select(host, 0, rows, out=staging)
            self._window_buffer(name).copy_(staging, non_blocking=True)
        local = torch.arange(self.batch_size, device=index.device)
        loss = self.window(image_features, text_features, local)  # 2. the loss's own update of its rows
        for name, host in self.host.items():  # 3. the updated rows -> the host
            host.index_copy_(0, rows, self._window_buffer(name).to("cpu"))
        return loss

    def temperatures(self) -> dict[str, torch.Tensor]:
        """The loss's temperatures (:meth:`~isogclr.losses.base.ContrastiveLoss.temperatures`), the per-pair ones
        read from the host state (the window holds only the last batch's rows)."""
        return {name: self.host.get(name, value) for name, value in self.window.temperatures().items()}

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        state = self.window.state_dict(keep_vars=keep_vars)
        state.update({name: host for name, host in self.host.items()})
        out = destination if destination is not None else {}
        out.update({prefix + k: v for k, v in state.items()})
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        window = {k: v for k, v in state_dict.items() if k not in self.host}
        for name, host in self.host.items():
            host.copy_(state_dict[name])
        window.update({name: buf for name, buf in self.window.state_dict().items() if name in self.host})
        return self.window.load_state_dict(window, strict=strict)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            host = self.__dict__.get("host", {})
            if name in host:
                return host[name]
            return getattr(super().__getattr__("window"), name)


def state_bytes(loss: nn.Module, num_samples: int) -> int:
    """Bytes of ``loss``'s per-pair buffers (those with ``num_samples`` rows)."""
    return sum(b.numel() * b.element_size() for b in loss.buffers() if b.dim() and b.shape[0] == num_samples)
