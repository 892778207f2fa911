"""k-nearest-neighbour classification on frozen features (EMC2's 1-NN and k-NN accuracy)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


@torch.no_grad()
def knn_accuracy(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor,
                 k: int = 1, temperature: float | None = None, chunk: int = 1024) -> float:
    """Top-1 (%) of cosine k-NN: each test point takes the (weighted) vote of its k nearest training points.

    ``temperature=None``: plain majority vote (ties go to the nearest neighbour's class, so k = 1
    is 1-NN); otherwise votes are weighted by exp(similarity / temperature) (Wu et al., 2018).
    """
    if k < 1 or k > len(train_x):
        raise ValueError(f"k must be in [1, {len(train_x)}], got {k}")
    train_x, test_x = F.normalize(train_x.float(), dim=1), F.normalize(test_x.float(), dim=1)
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    correct = 0
    for start in range(0, len(test_x), chunk):
        sim = test_x[start:start + chunk] @ train_x.T
        top_sim, top_idx = sim.topk(k, dim=1)
        labels = train_y[top_idx]
        weights = torch.ones_like(top_sim) if temperature is None else torch.exp(top_sim / temperature)
        # rank-decreasing tie-break: the nearest neighbour's vote counts very slightly more
        weights = weights * (1 + 1e-6 * torch.linspace(1, 0, k))
        votes = torch.zeros(len(labels), num_classes).scatter_add_(1, labels, weights)
        correct += int((votes.argmax(1) == test_y[start:start + chunk]).sum())
    return 100.0 * correct / len(test_x)
