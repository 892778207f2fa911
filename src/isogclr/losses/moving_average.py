"""What the moving-average losses share: per-sample temperatures and the watch on their weights.

* :class:`PerSampleTemperatures`: the per-sample temperatures of iSogCLR (unimodal and bimodal),
  checked bounds and Algorithm 1's steps 8-9 (Algorithm 2's for the bimodal form):
  u_i <- (1 - beta1) u_i + beta1 G(tau_i), tau_i <- clip(tau_i - eta u_i, tau_min, tau_max).
* :class:`WeightWatch`: every moving-average loss weights a negative z of anchor i by
  w_iz = exp(k_iz / tau_i) / s_i (SogCLR eq. 10, iSogCLR eq. 14; k the kernel's similarity or
  hardness). ``step_stats()`` reports the largest w_iz of the last forward; a weight that reaches
  the e^64 cap of :mod:`.numerics`, or a non-finite one, raises
  :class:`~.numerics.TrainingDiverged` naming the knob to change.
"""

from __future__ import annotations

import math

import torch

from .numerics import MAX_LOG_WEIGHT, TrainingDiverged


class PerSampleTemperatures:
    """Mix-in of an ``nn.Module`` holding per-sample temperature buffers (names chosen by the loss)."""

    def _init_temperatures(self, rho: float, tau_init: float, tau_min: float, tau_max: float,
                           beta1: float, eta: float) -> None:
        if not 0 < tau_min <= tau_init <= tau_max:
            raise ValueError(f"need 0 < tau_min <= tau_init <= tau_max, got {tau_min}, {tau_init}, {tau_max}")
        if rho < 0:
            raise ValueError(f"rho must be >= 0, got {rho}")
        if not 0 < beta1 <= 1 or eta < 0:
            raise ValueError(f"need 0 < beta1 <= 1 and eta >= 0, got beta1={beta1}, eta={eta}")
        self.rho, self.tau_min, self.tau_max = float(rho), float(tau_min), float(tau_max)
        self.beta1, self.eta = float(beta1), float(eta)

    def _register_temperatures(self, suffix: str, num_samples: int, tau_init: float) -> None:
        """Buffers ``tau{suffix}`` (n,) and ``tau_momentum{suffix}`` (n,)."""
        self.register_buffer(f"tau{suffix}", torch.full((num_samples,), float(tau_init)))
        self.register_buffer(f"tau_momentum{suffix}", torch.zeros(num_samples))

    @property
    def tau_grad_clip(self) -> float | None:
        """The clip of G(tau_i) (the ``tau_grad_clip`` switch of :mod:`.conventions`), None for none."""
        return self.conventions.tau_grad_clip

    @property
    def positive_weight(self) -> str:
        """The weight of the positive pair (the ``positive_weight`` switch of :mod:`.conventions`)."""
        return self.conventions.positive_weight

    @torch.no_grad()
    def _step_temperatures(self, index: torch.Tensor, grad: torch.Tensor, tau: torch.Tensor,
                           tau_buffer: torch.Tensor, momentum_buffer: torch.Tensor) -> None:
        """G(tau_i) = ``grad`` (clipped by the ``tau_grad_clip`` switch), then momentum and projected step."""
        clip = self.conventions.tau_grad_clip
        if clip is not None:
            grad = grad.clamp(-clip, clip)
        momentum = (1 - self.beta1) * momentum_buffer[index].to(grad.dtype) + self.beta1 * grad
        momentum_buffer[index] = momentum.to(momentum_buffer.dtype)
        tau_buffer[index] = (tau - self.eta * momentum).clamp(self.tau_min, self.tau_max).to(tau_buffer.dtype)


class WeightWatch:
    """Mix-in: ``step_stats()`` and the divergence check of the weights w_iz = exp(k_iz / tau_i) / s_i."""

    _max_log_weight: float = -math.inf
    knob: str = "tau"  # what a user changes besides the s timing (iSogCLR: tau_min)

    def _watch(self, log_weight_max: torch.Tensor, cap_exponent: torch.Tensor, value: torch.Tensor) -> None:
        """``log_weight_max``: log of the largest w_iz; ``cap_exponent``: the largest exponent the cap applies to."""
        top, capped = float(log_weight_max), float(cap_exponent)
        timing = self.conventions.s_timing
        if not (math.isfinite(top) and math.isfinite(capped) and bool(torch.isfinite(value))):
            raise TrainingDiverged(
                f"{type(self).__name__}: non-finite weights or value (largest log w_iz = {top}); "
                f"check the features and {self.knob}, and the s timing (conventions.s_timing={timing!r})")
        if capped >= MAX_LOG_WEIGHT:
            hint = (f"use conventions: {{s_timing: updated}} (s_i then includes this step's g_i) or raise {self.knob}"
                    if timing == "previous" else f"raise {self.knob}")
            raise TrainingDiverged(
                f"{type(self).__name__}: a weight w_iz = exp(k_iz / tau_i) / s_i = e^{top:.1f} reached the "
                f"e^{MAX_LOG_WEIGHT:g} cap (s timing {timing!r}: s_i is far below this step's g_i); {hint}")
        self._max_log_weight = top

    def step_stats(self) -> dict[str, float]:
        """Diagnostics of the last forward: ``max_weight``, the largest w_iz = exp(k_iz / tau_i) / s_i
        (mean over a row's negatives: g_i / s_i, 1 when s_i = g_i)."""
        return {"max_weight": math.exp(self._max_log_weight)}
