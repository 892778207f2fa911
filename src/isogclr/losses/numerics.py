"""Numerical guards shared by the moving-average losses."""

from __future__ import annotations

import torch

# exp(64) ~ 6e27: a weight times a scaled hardness (|h / tau| <= 2 / 0.005 = 400) summed over
# a batch of 4096 stays below the float32 maximum (3.4e38).
MAX_LOG_WEIGHT = 64.0


def capped_weights(log_weights: torch.Tensor) -> torch.Tensor:
    """exp(log_weights) with the exponent capped at :data:`MAX_LOG_WEIGHT` (no gradient).

    The weights exp(h / tau) / (m s_i) of the moving-average estimators are g_i / s_i times a
    softmax. When a stale s_i is e^64 times smaller than this step's g_i (with the ``previous``
    s timing this happens in training: the bimodal iSogCLR reaches weights of 1e20 and more when
    tau_i falls between two visits; or with adversarial inputs such as identical then antipodal
    features at tau = 0.005), exp overflows float32 and the estimator, the temperature update and
    the returned value become inf / NaN. The losses raise :class:`TrainingDiverged` when a weight
    reaches the cap (:mod:`.moving_average`), so capped weights never train a model.
    """
    return torch.exp(log_weights.detach().clamp_max(MAX_LOG_WEIGHT))


def capped_weights_(log_weights: torch.Tensor, row_bound: torch.Tensor | None = None) -> torch.Tensor:
    """In-place :func:`capped_weights` of a tensor without gradient.

    ``row_bound`` (one value per row, at least the row's maximum, e.g. its logsumexp) lets the
    common case skip the clamp pass: it is applied only when some row could exceed the cap.
    """
    if row_bound is None or bool((row_bound > MAX_LOG_WEIGHT).any()):
        log_weights.clamp_max_(MAX_LOG_WEIGHT)
    return log_weights.exp_()


class TrainingDiverged(RuntimeError):
    """A loss whose weights reached the cap (:data:`MAX_LOG_WEIGHT`) or went non-finite.

    Raised by the losses with the knob to change; the trainers re-raise it with the run, the
    method and the step (:class:`isogclr.train.engine.StepMonitor`).
    """
