"""SogCLR: the global contrastive objective with moving-average estimators (Yuan et al., ICML 2022)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .conventions import LogMovingAverage, MovingAverageConventions, check_index
from .gram import GramGradient, mask_own_views, subtract_positive_weights, two_view_features
from .numerics import capped_weights_
from .registry import register_loss
from .two_views import full_precision


@register_loss("sogclr")
class SogCLRLoss(nn.Module):
    r"""SogCLR (Algorithm 1 of the SogCLR paper), in log space.

    For sample i with anchor views a in {1, 2} and negatives N_i (the 2B - 2 views of
    the other samples), g_{ia} = mean_{z in N_i} exp(z_a^T z / tau) (eq. 2, normalised).

    * ``version="v1"`` (eq. 5): F = mean_i mean_a [ -z_a^T z_{a+} + tau log g_{ia} ],
      one moving average u_{ia} per sample and view (n x 2 floats), as the official code.
    * ``version="v2"`` (eq. 13): F = mean_i [ -z_1^T z_2 + tau log((g_{i1} + g_{i2}) / 2) ],
      one u_i per sample tracking the average of both views: eq. 9 as written.

    Update (eq. 9): u_i <- (1 - gamma) u_i + gamma g_i. Gradient (eq. 10):
    m = 1/B sum_i [ -grad(z_1^T z_2) + (tau / u_i) grad g_i ], i.e. every negative
    similarity z_a^T z gets the weight exp(z_a^T z / tau) / (2 |N_i| u_i), detached.
    epsilon' of eq. 3 is 0: log space keeps g bounded away from 0.

    The returned value is the mini-batch estimate of F; its gradient is the estimator (10),
    routed through one backward matmul (:mod:`.gram`); the weights' exponent is capped at 64
    against float32 overflow with a stale u (:mod:`.numerics`, inactive in training).

    Args:
        num_samples: dataset size n (the state holds n or 2n floats).
        tau: global temperature.
        gamma: moving-average weight (1.0 = no moving average, SogCLR Table 8).
        version: ``"v1"`` or ``"v2"``.
        conventions: which u_i the gradient uses and what a first visit does.
    """

    def __init__(self, num_samples: int, tau: float = 0.1, gamma: float = 0.9,
                 version: Literal["v1", "v2"] = "v1",
                 conventions: MovingAverageConventions | None = None) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be positive, got {tau}")
        if version not in ("v1", "v2"):
            raise ValueError(f"version must be 'v1' or 'v2', got {version!r}")
        self.num_samples = int(num_samples)
        self.tau = float(tau)
        self.version = version
        self.u = LogMovingAverage(num_samples, gamma, width=2 if version == "v1" else 1, conventions=conventions)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        check_index(index, self.num_samples, len(z1))
        with full_precision(z1.device):
            feats = two_view_features(z1, z2)  # (2B, d); anchors are rows, row a's positive is (a + B) mod 2B
            b, log_m = len(z1), math.log(2 * len(z1) - 2)
            with torch.no_grad():
                half = (feats[:b] * feats[b:]).sum(1)
                pos = torch.cat([half, half])  # z_a^T z_{a+}
                logits = mask_own_views((feats / self.tau) @ feats.T, -math.inf)  # negatives only
                log_g_anchor = torch.logsumexp(logits, dim=1) - log_m  # (2B,)
                per_view = torch.stack([log_g_anchor[:b], log_g_anchor[b:]], dim=1)  # (B, 2)
                if self.version == "v1":
                    log_g = per_view
                else:
                    log_g = torch.logsumexp(per_view, dim=1, keepdim=True) - math.log(2)
                log_u = self.u.update(index, log_g)
                log_u_anchor = log_u.T.reshape(-1) if self.version == "v1" else log_u[:, 0].repeat(2)
                # eq. 10: each negative gets tau/u_i * d g_i (weight exp(s / tau) / (|N_i| u_i)) and the
                # positive -1; the mean over the 2B rows averages the views. In place: logits -> weights -> G
                shift = log_m + log_u_anchor + math.log(2 * b)  # the 1/(2B) of the mean folded in the exponent
                lse_bound = log_g_anchor + log_m - shift  # >= each row's largest exponent
                grad_sim = capped_weights_(logits.sub_(shift[:, None]), lse_bound)
                subtract_positive_weights(grad_sim, 1.0 / (2 * b))
                if self.version == "v1":
                    value = (-pos + self.tau * log_g_anchor).mean()
                else:
                    value = (-pos[:b] + self.tau * log_g[:, 0]).mean()
            return GramGradient.apply(feats, grad_sim, value)
