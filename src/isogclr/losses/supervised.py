"""The supervised reference of the testbed: cross-entropy on the labels, same encoder, views and budget."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .base import ContrastiveLoss
from .loss_table import register_loss
from .two_views import full_precision


@register_loss(modality="unimodal")
class SupervisedLoss(ContrastiveLoss):
    r"""Cross-entropy of both augmented views against their label: the ceiling a self-supervised method
    can approach with the same encoder, augmentations, optimizer and number of steps (not a paper's method).

    .. math::
        L = \frac{1}{2B}\sum_{i=1}^{B} \big[-\log \operatorname{softmax}(z_{i,1})_{y_i}
            - \log \operatorname{softmax}(z_{i,2})_{y_i}\big]

    where :math:`z_{i,v}` is the projection head's output for view v of sample i, whose width the trainer
    sets to the number of classes (``needs_labels``: the head is the classifier). The encoder is then probed
    like every other method's, so its row in a table measures the representation, not this head.

    Called as ``loss_fn(z1, z2, index, labels=y)`` with the head's raw outputs (B, C) and labels (B,).
    """

    expects_normalized = False
    needs_labels = True  # the trainer passes ``labels`` and sizes the head to the number of classes

    def __init__(self, num_samples: int | None = None, label_smoothing: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor | None = None, *,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        if labels is None:
            raise ValueError("the supervised reference needs the labels: loss_fn(z1, z2, index, labels=...)")
        with full_precision(z1.device):
            logits = torch.cat([z1, z2]).float()
            return F.cross_entropy(logits, torch.cat([labels, labels]), label_smoothing=self.label_smoothing)
