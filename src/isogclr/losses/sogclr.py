"""SogCLR: the global contrastive objective with moving-average estimators (Yuan et al., ICML 2022)."""

from __future__ import annotations

import math
from typing import Literal

import torch

from .base import ContrastiveLoss
from .conventions import LogMovingAverage, MovingAverageConventions, check_index, resolve_conventions
from .gram import GramGradient, mask_own_views, subtract_positive_weights, two_view_features
from .loss_table import register_loss
from .moving_average import WeightWatch
from .numerics import capped_weights_
from .two_views import full_precision


@register_loss(modality="unimodal")
class SogCLRLoss(WeightWatch, ContrastiveLoss):
    r"""SogCLR (Algorithm 1 of the SogCLR paper), in log space.

    For sample i with anchor views a in {1, 2} and negatives N_i (the 2B - 2 views of
    the other samples), g_{ia} = mean_{z in N_i} exp(z_a^T z / tau) (eq. 2, normalised).

    * ``version="v1"`` (eq. 5): F = mean_i mean_a [ -z_a^T z_{a+} + tau log g_{ia} ],
      one moving average u_{ia} per sample and view (n x 2 floats). The official code keeps one
      u_i per sample that each view reads and updates (``per_view_s``, n floats).
    * ``version="v2"`` (eq. 13): F = mean_i [ -z_1^T z_2 + tau log((g_{i1} + g_{i2}) / 2) ],
      one u_i per sample tracking the average of both views: eq. 9 as written.

    Update (eq. 9): u_i <- (1 - gamma) u_i + gamma g_i. Gradient (eq. 10):
    m = 1/B sum_i [ -grad(z_1^T z_2) + (tau / u_i) grad g_i ], i.e. every negative
    similarity z_a^T z gets the weight exp(z_a^T z / tau) / (2 |N_i| u_i), detached.
    epsilon' of eq. 3 is 0: log space keeps g bounded away from 0.

    ``convention="official"`` sets every switch as the SogCLR authors' code (the table of
    :mod:`.conventions`: u after the update, one stored u_i read per view, the two views' terms
    summed; their cross-entropy takes the unscaled z_a^T z, so the loss is F, not F / tau);
    single switches go in ``conventions`` (``loss_over_tau=True`` divides F by tau).

    The returned value is the mini-batch estimate of F; its gradient is the estimator (10),
    routed through one backward matmul (:mod:`.gram`); the weights' exponent is capped at 64
    against float32 overflow with a stale u (:mod:`.numerics`); reaching the cap raises
    :class:`.TrainingDiverged` and ``step_stats()`` reports the largest weight (:mod:`.moving_average`).

    Args:
        num_samples: dataset size n (the state holds n or 2n floats).
        tau: global temperature.
        gamma: moving-average weight (1.0 = no moving average, SogCLR Table 8).
        version: ``"v1"`` or ``"v2"``.
        convention: ``"paper"`` or ``"official"``, the preset of every switch.
        conventions: single switches on top of the preset (object or mapping).
    """

    expects_normalized = True
    knob = "tau"
    state_knobs = ("gamma",)  # act from a sample's second visit on (losses/base.py)

    def __init__(self, num_samples: int, tau: float = 0.1, gamma: float = 0.9,
                 version: Literal["v1", "v2"] = "v1", convention: str = "paper",
                 conventions: MovingAverageConventions | dict | None = None) -> None:
        super().__init__()
        self.conventions = cv = resolve_conventions("sogclr", convention, conventions)
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        if version not in ("v1", "v2"):
            raise ValueError(f"version must be 'v1' or 'v2', got {version!r}")
        self.num_samples = int(num_samples)
        self.tau = float(tau)
        self.version = version
        if cv.per_view_s and version != "v1":
            raise ValueError("per_view_s=True is the official code's form of version 'v1'; got version='v2'")
        width = 2 if version == "v1" and not cv.per_view_s else 1
        self.u = LogMovingAverage(num_samples, gamma, width=width, conventions=cv)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(z1))
        cv = self.conventions
        with full_precision(z1.device):
            feats = two_view_features(z1, z2)  # (2B, d); anchors are rows, row a's positive is (a + B) mod 2B
            b, log_m = len(z1), math.log(2 * len(z1) - 2)
            with torch.no_grad():
                half = (feats[:b] * feats[b:]).sum(1)
                pos = torch.cat([half, half])  # z_a^T z_{a+}
                logits = mask_own_views((feats / self.tau) @ feats.T, -math.inf)  # negatives only
                if cv.kernel == "hardness":  # exp((z_a^T z - z_a^T z_{a+}) / tau)
                    logits.sub_((pos / self.tau)[:, None])
                log_g_anchor = torch.logsumexp(logits, dim=1) - log_m  # (2B,)
                per_view = torch.stack([log_g_anchor[:b], log_g_anchor[b:]], dim=1)  # (B, 2)
                if cv.per_view_s:
                    log_u_anchor = self.u.update_per_view(index, per_view, cv.stored_s).T.reshape(-1)
                elif self.version == "v1":
                    log_u_anchor = self.u.update(index, per_view).T.reshape(-1)
                else:
                    log_g = torch.logsumexp(per_view, dim=1, keepdim=True) - math.log(2)
                    log_u_anchor = self.u.update(index, log_g)[:, 0].repeat(2)
                # the official code sums the views' terms (x 2); loss_over_tau (an option) divides F by tau
                scale = (2.0 if cv.reduction == "sum" else 1.0) / (self.tau if cv.loss_over_tau else 1.0)
                # eq. 10: each negative gets tau/u_i * d g_i (weight exp(s / tau) / (|N_i| u_i)) and the
                # positive -1; the mean over the 2B rows averages the views. In place: logits -> weights -> G
                shift = log_m + log_u_anchor + math.log(2 * b)  # the 1/(2B) of the mean folded in the exponent
                if scale != 1.0:
                    shift = shift - math.log(scale)
                lse_bound = log_g_anchor + log_m - shift  # >= each row's largest exponent
                row_max = logits.amax(dim=1)
                if cv.kernel == "hardness":
                    value_rows = self.tau * log_g_anchor
                else:
                    value_rows = -pos + self.tau * log_g_anchor
                if self.version == "v1":
                    value = value_rows.mean()
                else:
                    value = (self.tau * log_g[:, 0] - (0.0 if cv.kernel == "hardness" else pos[:b])).mean()
                if scale != 1.0:
                    value = scale * value
                self._watch((row_max - log_u_anchor).max(), (row_max - shift).max(), value)
                grad_sim = capped_weights_(logits.sub_(shift[:, None]), lse_bound)
                if cv.kernel == "hardness" and cv.positive_weight == "exact":
                    subtract_positive_weights(grad_sim, grad_sim.sum(1))
                else:
                    subtract_positive_weights(grad_sim, scale / (2 * b))
            return GramGradient.apply(feats, grad_sim, value)
