"""The exact global contrastive objective and its squared gradient norm (EMC2's convergence study).

On a small dataset with a finite set of fixed augmentations (EMC2: 500 images, 2 augmentations),
the global contrastive loss over *all* negatives can be evaluated exactly by full passes:

    F(w) = 1/(nA) sum_{i,a} [ -z_ia . z_ia+ + tau log( 1/|S_i| sum_{z in S_i} exp(z_ia . z / tau) ) ]

where z_ia is view a of image i, z_ia+ the next view of the same image (a+1 mod A), and S_i every
view of every other image (|S_i| = (n - 1) A). The gradient with respect to the parameters is
computed in two passes so that memory does not grow with n: (1) features of all views without a
graph and dF/dfeatures in closed form by autograd on the features only; (2) for each chunk of
images, recompute its features with a graph and back-propagate dF/dfeatures of that chunk.
BatchNorm runs in eval mode, so F is a deterministic function of the weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def global_contrastive_loss(feats: torch.Tensor, tau: float) -> torch.Tensor:
    """F for features (n, A, d) of A fixed views per image (normalised here), in log space."""
    n, a, d = feats.shape
    z = F.normalize(feats, dim=-1).reshape(n * a, d)
    sim = z @ z.T
    image = torch.arange(n, device=z.device).repeat_interleave(a)
    negatives = image[:, None] != image[None, :]
    rows = torch.arange(n * a, device=z.device)
    positive = sim[rows, image * a + (rows % a + 1) % a]
    log_g = torch.logsumexp(sim.div(tau).masked_fill(~negatives, float("-inf")), dim=1) - math.log((n - 1) * a)
    return (-positive + tau * log_g).mean()


def exact_objective_and_grad_norm(model: nn.Module, views: torch.Tensor, tau: float, chunk: int = 256,
                                  objective: Callable[[torch.Tensor, float], torch.Tensor] = global_contrastive_loss,
                                  ) -> tuple[float, float]:
    """(F(w), ||grad_w F(w)||^2) for ``model`` mapping images to features, on fixed ``views`` (n, A, C, H, W).

    ``objective(features (n, A, d), tau)`` is F as a function of all the features (default: the global
    contrastive loss above); any such function gets the same two-pass gradient.
    """
    n, a = views.shape[:2]
    was_training = model.training
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    def features(i: int) -> torch.Tensor:
        return model(views[i:i + chunk].flatten(0, 1)).reshape(min(chunk, n - i), a, -1)

    with torch.no_grad():
        feats = torch.cat([features(i) for i in range(0, n, chunk)])
    feats.requires_grad_()
    value = objective(feats, tau)
    (grad_feats,) = torch.autograd.grad(value, feats)
    grads = [torch.zeros_like(p) for p in params]
    for i in range(0, n, chunk):
        for g, gp in zip(grads, torch.autograd.grad(features(i), params, grad_feats[i:i + chunk], allow_unused=True),
                         strict=True):
            if gp is not None:
                g.add_(gp)
    model.train(was_training)
    return value.item(), float(sum((g.double() ** 2).sum() for g in grads))


def all_pairs_contrastive_loss(feats: torch.Tensor, tau: float) -> torch.Tensor:
    """F for features (n, A, d), the positive term averaged over all A - 1 other views of the image.

    Equals :func:`global_contrastive_loss` when A = 2.
    """
    n, a, d = feats.shape
    z = F.normalize(feats, dim=-1).reshape(n * a, d)
    sim = z @ z.T
    image = torch.arange(n, device=z.device).repeat_interleave(a)
    same = image[:, None] == image[None, :]
    own = torch.eye(n * a, dtype=torch.bool, device=z.device)
    positive = sim.masked_fill(~same | own, 0.0).sum(1) / (a - 1)
    log_g = torch.logsumexp(sim.div(tau).masked_fill(same, float("-inf")), dim=1) - math.log((n - 1) * a)
    return (-positive + tau * log_g).mean()


def exact_objective(model: nn.Module, views: torch.Tensor, tau: float, chunk: int = 256) -> tuple[float, float]:
    """(F(w), ||grad F(w)||^2) on fixed ``views`` (n, A, C, H, W), ``model`` mapping images to features.

    :func:`exact_objective_and_grad_norm` (two passes, BatchNorm in eval mode) of F =
    :func:`global_contrastive_loss` for A = 2, :func:`all_pairs_contrastive_loss` for A > 2.
    """
    objective = global_contrastive_loss if views.shape[1] == 2 else all_pairs_contrastive_loss
    return exact_objective_and_grad_norm(model, views, tau, chunk, objective=objective)
