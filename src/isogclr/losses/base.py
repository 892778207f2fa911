"""What every registered loss declares: the interface the trainers read (and nothing else of a loss).

A loss is an ``nn.Module`` called as ``loss_fn(z1, z2, index)`` (unimodal: two views of the same samples) or
``loss_fn(image_features, text_features, index)`` (bimodal), returning a scalar. Besides the call, a trainer
reads only the members of :class:`ContrastiveLoss`:

* ``expects_normalized`` (class attribute, declared by each loss): the trainer L2-normalizes the features
  before the call when True; False for Barlow Twins and VICReg, which take the projector output as it is.
* ``extra_outputs`` (class attribute, default 0): how many outputs the trainer appends to the projection head
  and passes to the loss as ``e1, e2`` (TaU+SimCLR: one uncertainty logit per view).
* ``needs_labels`` (class attribute, default False): the loss is the supervised reference's cross-entropy; the
  trainer sizes the projection head to the number of classes and passes the batch's ``labels``.
* :meth:`~ContrastiveLoss.temperatures`: the temperatures the loss holds as tensors, by name. Per sample:
  ``tau`` (n,) of iSogCLR (Algorithm 1's tau_i, written to ``tau.csv`` of a unimodal run), ``tau_image`` and
  ``tau_text`` (n,) of the bimodal per-pair losses; or one global learned/fixed ``tau`` (0-d) of CLIP. Empty
  when the temperature is a fixed number (SimCLR, SogCLR, ...): there is nothing to log or export.
* ``state_knobs`` (class attribute, default empty): the knobs that act only through the per-sample state (SogCLR's
  gamma; iSogCLR's rho, beta0, beta1, eta). A sample's first visit computes the same gradient at every value of
  them (first visit: s_i = g_i), so they change a run only where samples are seen at least twice: a study of one
  of them whose overrides set one epoch is refused (:func:`isogclr.config.studies.study_run_config`).
* :meth:`~ContrastiveLoss.step_stats`: diagnostics of the last forward (``max_weight`` of the moving-average
  losses, the largest weight w_iz = exp(k_iz / tau_i) / s_i); empty when the loss has none.

The per-sample state (s_i, u_i, tau_i) is held in the module's buffers, so it is checkpointed with
``state_dict()``; ``registry_name`` and ``modality`` are set by :func:`~.loss_table.register_loss`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn


class ContrastiveLoss(nn.Module):
    """Base of every registered loss; subclasses declare ``expects_normalized`` in their class body."""

    expects_normalized: ClassVar[bool]
    extra_outputs: ClassVar[int] = 0
    needs_labels: ClassVar[bool] = False
    state_knobs: ClassVar[tuple[str, ...]] = ()
    registry_name: ClassVar[str]
    modality: ClassVar[str]

    def temperatures(self) -> dict[str, torch.Tensor]:
        """The temperatures held as tensors (per sample (n,) or global 0-d), by name; ``{}`` for a fixed one."""
        return {}

    def step_stats(self) -> dict[str, float]:
        """Diagnostics of the last forward (``max_weight``: the largest weight of the gradient); ``{}`` for none."""
        return {}
