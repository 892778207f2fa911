"""Per-pair state off the accelerator (``bimodal.state_device: cpu``): s, u and tau in host memory.

The iSogCLR paper (section 5, memory cost) notes that the per-pair state of a loss (the moving averages s
or u and the temperatures tau with their momentum: up to 24 bytes per pair, 9.6 GB at LAION-400M) need not
live on the GPU: a step reads and writes only the rows of its batch. :class:`HostStateLoss` keeps every
per-pair buffer of the loss in CPU memory and a *window* copy of the loss built for ``batch_size`` pairs on the
device. A step

1. writes the previous step's updated rows into the host buffers (:meth:`RowCopies.flush`: they were copied off
   the device while that step's backward pass ran), then copies the batch's rows of every per-pair buffer into
   the window (``index_select`` into a staging buffer on the host, one host-to-device copy per buffer);
2. calls the window loss with the local indices ``0 .. B - 1`` (the loss's own update rules, unchanged);
3. copies the window's updated rows device-to-host into a second staging buffer (:meth:`RowCopies.store`) and
   returns the loss; the host buffers receive them at the next flush (next step, or any read of the state:
   ``temperatures()``, ``state_dict()``, an attribute).

On CUDA (:func:`overlaps`) the host buffers and both staging buffers are pinned and the copies are issued
``non_blocking`` on a side stream, ordered against the compute stream by events: the host-to-device copy of
step 1 runs beside the encoders' forward kernels still queued on the compute stream (it lands in a device
buffer of its own and is moved into the window on the compute stream, so the previous step's backward never sees
it), and the device-to-host copy of step 3 runs beside the backward pass; the host waits for it only at the next
flush. On any other device the same calls run synchronously, in program order (nothing overlaps on the CPU).

The update of a row depends on that row only (:class:`~isogclr.losses.conventions.LogMovingAverage`,
:meth:`~isogclr.losses.moving_average.PerSampleTemperatures._step_temperatures`), so the numbers are the
same as with the state on the device, bit for bit (``tests/test_state_offload.py``). Device memory for the
state drops from ``n x bytes per pair`` to ``B x bytes per pair`` (twice that with the landing buffer); the host
holds ``n x bytes per pair`` plus two staging buffers of B rows.

Losses whose per-pair state are *parameters* (``clip_individual_tau``: the optimizer owns them) are refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn


def overlaps(device: torch.device) -> bool:
    """Whether the row copies to and from ``device`` are asynchronous (pinned memory, a side stream): on CUDA."""
    return device.type == "cuda"


class RowCopies:
    """Moves a batch's rows of the host buffers ``host`` (name -> (n, ...)) into and out of the window's buffers
    (``window(name)`` -> (B, ...)); see the module docstring for the order of a step and what overlaps."""

    def __init__(self, host: dict[str, torch.Tensor], window: Callable[[str], torch.Tensor],
                 device: torch.device) -> None:
        self.overlap = overlaps(device)
        self.window = window
        pin = (lambda t: t.pin_memory()) if self.overlap else (lambda t: t)
        self.host = {name: pin(buf) for name, buf in host.items()}
        self.staging = {name: pin(torch.empty_like(window(name), device="cpu")) for name in host}  # host -> device
        self.outgoing = {name: pin(torch.empty_like(window(name), device="cpu")) for name in host}  # device -> host
        self.landing = {name: torch.empty_like(window(name)) for name in host}  # on the device
        self.pending: torch.Tensor | None = None  # rows whose updated values are in ``outgoing``, not yet in host
        if self.overlap:
            self.side = torch.cuda.Stream(device)
            self.landed, self.updated, self.stored = torch.cuda.Event(), torch.cuda.Event(), torch.cuda.Event()
            self.landed.record()  # nothing in flight yet

    def _on_side(self):
        return torch.cuda.stream(self.side) if self.overlap else contextlib.nullcontext()

    def flush(self) -> None:
        """The stored rows into the host buffers (after their device-to-host copy has finished)."""
        if self.pending is None:
            return
        if self.overlap:
            self.stored.synchronize()
        for name, host in self.host.items():
            host.index_copy_(0, self.pending, self.outgoing[name])
        self.pending = None

    def load(self, rows: torch.Tensor) -> None:
        """The host rows ``rows`` (CPU int64) -> the window's buffers, in order."""
        self.flush()  # a row of the previous batch may come again: its update first
        for name, host in self.host.items():
            torch.index_select(host, 0, rows, out=self.staging[name])
        with self._on_side():
            if self.overlap:  # the landing buffers are free once the previous batch was moved out of them
                self.side.wait_event(self.landed)
            for name, staging in self.staging.items():
                self.landing[name].copy_(staging, non_blocking=self.overlap)
        if self.overlap:
            torch.cuda.current_stream().wait_stream(self.side)
        for name, landing in self.landing.items():
            self.window(name).copy_(landing)
        if self.overlap:
            self.landed.record()

    def store(self, rows: torch.Tensor) -> None:
        """The window's updated rows -> ``outgoing`` (on CUDA beside what the compute stream does next, e.g. the
        backward pass); they reach the host buffers at the next :meth:`flush`."""
        if self.overlap:
            self.updated.record()
            self.side.wait_event(self.updated)
        with self._on_side():
            for name, outgoing in self.outgoing.items():
                outgoing.copy_(self.window(name), non_blocking=self.overlap)
        if self.overlap:
            self.stored.record(self.side)
        self.pending = rows.clone()  # the caller may reuse its index tensor


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
        host = {name: buf for name, buf in full.named_buffers()
                if buf.dim() and buf.shape[0] == num_samples and window_buffers[name].shape[0] == batch_size}
        if not host:
            raise ValueError(f"bimodal.state_device: cpu: {type(full).__name__} has no per-pair state to keep on the "
                             "host; set bimodal.state_device: model")
        del full
        self.copies = RowCopies(host, self._window_buffer, device)

    @property
    def host(self) -> dict[str, torch.Tensor]:
        """The per-pair buffers in host memory, up to date (the last step's rows written in)."""
        self.copies.flush()
        return self.copies.host

    @property
    def staging(self) -> dict[str, torch.Tensor]:
        return self.copies.staging

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
        self.copies.load(rows)  # 1. the previous rows -> the host; the batch's rows -> the window
        local = torch.arange(self.batch_size, device=index.device)
        loss = self.window(image_features, text_features, local)  # 2. the loss's own update of its rows
        self.copies.store(rows)  # 3. the updated rows -> the host (on CUDA while the backward pass runs)
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
        window = {k: v for k, v in state_dict.items() if k not in self.host}  # (self.host: pending rows written)
        for name, host in self.host.items():
            host.copy_(state_dict[name])
        window.update({name: buf for name, buf in self.window.state_dict().items() if name in self.host})
        return self.window.load_state_dict(window, strict=strict)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            copies = self.__dict__.get("copies")
            if copies is not None and name in copies.host:
                copies.flush()
                return copies.host[name]
            return getattr(super().__getattr__("window"), name)


def state_bytes(loss: nn.Module, num_samples: int) -> int:
    """Bytes of ``loss``'s per-pair buffers (those with ``num_samples`` rows)."""
    return sum(b.numel() * b.element_size() for b in loss.buffers() if b.dim() and b.shape[0] == num_samples)
