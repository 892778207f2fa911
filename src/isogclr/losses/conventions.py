"""The conventions the papers leave open, and the official code's choices, in one place.

Every moving-average loss (``sogclr``, ``isogclr``, ``sogclr_bimodal``, ``isogclr_bimodal``) takes
``convention="paper"`` (the default: the papers' equations, with the s timing chosen below) or
``convention="official"`` (every switch as the authors' current code sets it), and any single switch
on top of the preset (``conventions={"s_timing": "previous"}`` or a :class:`MovingAverageConventions`;
``tau_grad_clip=``, ``positive_weight=``, ``direction_reduction=`` are the same switches as keywords).
:meth:`MovingAverageConventions.preset` gives every switch of a preset for a loss. Nothing else in
the library decides them.

The official code read for the presets (current versions): unimodal iSogCLR (``SogCLR_DRO_Loss`` of
``unimodal_exps/losses.py``) and bimodal SogCLR / iSogCLR (``SogCLR_Loss``, ``SogCLR_DRO_Loss`` of
``bimodal_exps/models/losses.py``) in the iSogCLR authors' repository ``zhqiu/contrastive-learning-iSogCLR``;
unimodal SogCLR in the SogCLR authors' repository ``Optimization-AI/SogCLR`` (``sogclr/builder.py``).
``tests/test_conventions_presets.py`` checks each preset against a float64 re-derivation of the
algorithm, step by step; each official preset was also run against the authors' current code, in
float64, step by step (``docs/losses.md``, "Run against the authors' code": the commits, the
largest differences, how to rerun).

"effect": each switch alone, set to the official value on top of the paper preset, relative change
(L2, largest over 20 float64 steps: 64 samples, batch 16, revisited samples, drifting features) of
the feature gradient and of the largest tau; the s timing's row compares ``previous`` with ``updated``.

=================  ==============================  ===================================  ===========================
switch             paper preset                    official code                        effect alone
=================  ==============================  ===================================  ===========================
``s_timing``       ``updated``: s_i^{t+1}, after   ``updated`` (all four losses)        ``previous`` vs ``updated``:
                   this step's update (chosen,                                          grad 0.2-1.0, tau 0.4-1.0;
                   below); ``previous``: s_i^t,                                         largest weight 26 vs 10
                   eq. 10 / eqs. 13-14 as written                                       (iSogCLR), 2e20 vs 19
                                                                                        (bimodal iSogCLR)
``first_visit``    ``estimate``: s_i <- g_i        unimodal ``estimate`` (iSogCLR: s =  bimodal SogCLR 0.13,
                                                   g in epoch 0; SogCLR: gamma = 1      bimodal iSogCLR 0.85 grad,
                                                   while the batch's u are 0);          1.0 tau (its early tau_i
                                                   bimodal ``zero`` (s from 0)          steps see s = beta g)
``kernel``         iSogCLR ``hardness``:           unimodal iSogCLR ``similarity``      iSogCLR grad 0.085,
                   exp((z_a.z - z_a.z_a+)/tau)     exp(z_a.z / tau_i); bimodal SogCLR   tau 0.06; bimodal SogCLR
                   (eq. 3); SogCLR ``similarity``  ``hardness``                         grad 0.36 (equal when s=g)
``per_view_s``     False: iSogCLR one s_i of the   True: one stored s_i; view a reads   iSogCLR grad 0.052,
(unimodal)         pooled g_i (eq. 11); SogCLR v1  s_ia = (1-b) s_i + b g_ia, is        tau 0.031; SogCLR 0.008
                   one u_ia per view (2n floats)   weighted by it; s_i <- views' mean
``stored_s``       ``mean``                        SogCLR repository ``mean`` (since    ``sum``: u settles at
(per_view_s)                                       Feb. 2023); ``sum`` (option): its    gamma/(2 gamma - 1) x
                                                   earlier versions and the iSogCLR     (g_1 + g_2): 1.125 x at
                                                   repository's SogCLR copy (a defect)  0.9, unbounded at <= 0.5
``positive_in_g``  False: the positive is not a    True: all B columns, the positive's  bimodal SogCLR grad 0.17;
(bimodal)          negative (eqs. 15-16)           exp(0) = 1 in g (still / (B - 1))    bimodal iSogCLR 0.26,
                                                                                        tau 0.5
``positive_``      ``exact``: gradient of tau_i    unimodal iSogCLR ``one``; bimodal    iSogCLR grad 0.082
``weight``         log g_i (sum_z w_iz with the    ``exact`` (their code                (tau unchanged)
                   hardness kernel, 1 with the     differentiates h = sim - pos)
                   similarity one)
``tau_grad_clip``  none                            3.0 unimodal (of the views' mean),   unimodal: inactive here;
(iSogCLR)                                          5.0 bimodal (per direction)          bimodal grad 0.41, tau 0.51
``reduction``      ``mean`` of the views /         ``sum``: the code adds the views' /  gradient x 2 (LARS and
                   directions                      directions' terms                    Adam: nearly none)
``loss_over_tau``  False: F = tau log g - pos      False: the cross-entropy of the      True (option): F / tau,
(SogCLR,           (iSogCLR: tau_i log g_i)        unscaled z.z (only the weights       gradient x 1 / tau
iSogCLR)                                           exp(z.z / T) use T): F               (iSogCLR: F_i / tau_i)
=================  ==============================  ===================================  ===========================

Also settled (no switch: paper and code agree, or the code's choice is a numerical detail): g_i is
a mean over the 2B - 2 negatives of the anchor (unimodal) or the B - 1 other pairs (bimodal); eq.
13's 1/n in G(tau_i) is absorbed in ``eta`` (Thm. 1's eta = O(BB'eps^2/n) cancels it; the code has
no 1/n either); tau_i in [tau_min, tau_max]; log s_i is stored, never s (the code stores s with a
running-max shift b_i and adds eps = 1e-10 to s: the same numbers to 1e-10 relative); the gradient
and the temperature update use this step's tau_i (before its update).

**The s timing: ``updated`` by default, on evidence.** A negative's weight is w_iz = exp(k_iz / tau_i)
/ s_i, whose mean over a row is g_i / s_i. With ``previous`` s_i is the value of the sample's last
visit, an epoch old: when tau_i has fallen or the features have moved since, g_i / s_i is unbounded;
with ``updated`` s_i >= beta g_i, so g_i / s_i <= 1 / beta. Measured on the mini runs (seed 0,
``docs/losses.md``, "Stale weights"): unimodal iSogCLR on synth10, the largest weight per epoch
reaches 557 with ``previous`` against at most 16 with ``updated``, the temperatures spread 11 x more
(std 0.045 vs 0.004) and the linear probe falls from 36.5% to 28.1% top-1; see the docs for the
bimodal runs. The authors' code uses ``updated`` in all four losses. ``previous`` remains a switch
(the equations' literal reading). Whatever the timing, a weight that reaches the e^64 cap of
:mod:`.numerics`, or a non-finite one, raises :class:`~isogclr.losses.numerics.TrainingDiverged`
naming the knob; ``step_stats()`` reports each step's largest weight (:mod:`.moving_average`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

STimingT = Literal["previous", "updated"]
FirstVisitT = Literal["estimate", "zero"]
KernelT = Literal["hardness", "similarity"]
ConventionT = Literal["paper", "official"]

MOVING_AVERAGE_LOSSES = ("sogclr", "isogclr", "sogclr_bimodal", "isogclr_bimodal")
_UNIMODAL = ("sogclr", "isogclr")
_BIMODAL = ("sogclr_bimodal", "isogclr_bimodal")

# choices of each switch (None for tau_grad_clip = no clip; a positive float otherwise)
_CHOICES: dict[str, tuple[Any, ...]] = {
    "s_timing": ("previous", "updated"),
    "first_visit": ("estimate", "zero"),
    "kernel": ("hardness", "similarity"),
    "per_view_s": (False, True),
    "stored_s": ("mean", "sum"),
    "positive_in_g": (False, True),
    "positive_weight": ("exact", "one"),
    "reduction": ("mean", "sum"),
    "loss_over_tau": (False, True),
}
# which losses a switch applies to (the others must keep the paper value)
_APPLIES: dict[str, tuple[str, ...]] = {
    "per_view_s": _UNIMODAL,
    "stored_s": _UNIMODAL,
    "positive_in_g": _BIMODAL,
    "tau_grad_clip": ("isogclr", "isogclr_bimodal"),
    "loss_over_tau": _UNIMODAL,
}
_PAPER = {"s_timing": "updated", "first_visit": "estimate", "per_view_s": False, "stored_s": "mean",
          "positive_in_g": False, "positive_weight": "exact", "tau_grad_clip": None, "reduction": "mean",
          "loss_over_tau": False}
_PAPER_KERNEL = {"sogclr": "similarity", "isogclr": "hardness", "sogclr_bimodal": "similarity",
                 "isogclr_bimodal": "hardness"}
_OFFICIAL = {
    "sogclr": {"s_timing": "updated", "first_visit": "estimate", "kernel": "similarity", "per_view_s": True,
               "stored_s": "mean", "reduction": "sum", "loss_over_tau": False},
    "isogclr": {"s_timing": "updated", "first_visit": "estimate", "kernel": "similarity", "per_view_s": True,
                "stored_s": "mean", "positive_weight": "one", "tau_grad_clip": 3.0, "reduction": "sum"},
    "sogclr_bimodal": {"s_timing": "updated", "first_visit": "zero", "kernel": "hardness", "positive_in_g": True,
                       "positive_weight": "exact", "reduction": "sum"},
    "isogclr_bimodal": {"s_timing": "updated", "first_visit": "zero", "kernel": "hardness", "positive_in_g": True,
                        "positive_weight": "exact", "tau_grad_clip": 5.0, "reduction": "sum"},
}


class _Preset:
    def __repr__(self) -> str:
        return "PRESET"


PRESET: Any = _Preset()  # a switch left to the preset (``convention=``) of the loss


@dataclass(frozen=True)
class MovingAverageConventions:
    """The switches of a moving-average loss (see the module table). A field left at ``PRESET``
    takes the value of the loss's ``convention`` preset; :meth:`resolve` fills them in."""

    s_timing: STimingT = PRESET
    first_visit: FirstVisitT = PRESET
    kernel: KernelT = PRESET
    per_view_s: bool = PRESET
    stored_s: Literal["mean", "sum"] = PRESET
    positive_in_g: bool = PRESET
    positive_weight: Literal["exact", "one"] = PRESET
    tau_grad_clip: float | None = PRESET
    reduction: Literal["mean", "sum"] = PRESET
    loss_over_tau: bool = PRESET

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is PRESET:
                continue
            if field.name == "tau_grad_clip":
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                          or not value > 0):
                    raise ValueError(f"tau_grad_clip must be a positive number or None, got {value!r}")
            elif value not in _CHOICES[field.name] or type(value) is not type(_CHOICES[field.name][0]):
                choices = " or ".join(repr(c) for c in _CHOICES[field.name])
                raise ValueError(f"{field.name} must be {choices}, got {value!r}")

    @classmethod
    def preset(cls, convention: str, loss: str) -> MovingAverageConventions:
        """Every switch of ``convention`` (``"paper"`` or ``"official"``) for ``loss``."""
        if loss not in MOVING_AVERAGE_LOSSES:
            raise ValueError(f"loss must be one of {list(MOVING_AVERAGE_LOSSES)}, got {loss!r}")
        if convention == "paper":
            return cls(**_PAPER, kernel=_PAPER_KERNEL[loss])
        if convention == "official":
            return cls(**{**_PAPER, "kernel": _PAPER_KERNEL[loss], **_OFFICIAL[loss]})
        raise ValueError(f"convention must be 'paper' or 'official', got {convention!r}")

    def resolve(self, convention: str, loss: str) -> MovingAverageConventions:
        """These switches on top of the preset ``convention`` of ``loss``; checks that each applies."""
        base = self.preset(convention, loss)
        paper = self.preset("paper", loss)
        set_here = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                    if getattr(self, f.name) is not PRESET}
        out = dataclasses.replace(base, **set_here)
        for name, losses in _APPLIES.items():
            if loss not in losses and getattr(out, name) != getattr(paper, name):
                raise ValueError(f"{name}={getattr(out, name)!r} does not apply to loss {loss!r} "
                                 f"(only to {list(losses)})")
        if out.stored_s == "sum" and not out.per_view_s:
            raise ValueError("stored_s='sum' needs per_view_s=True (it is how the per-view estimates are stored)")
        return out

    def is_resolved(self) -> bool:
        return all(getattr(self, f.name) is not PRESET for f in dataclasses.fields(self))


def resolve_conventions(loss: str, convention: str,
                        conventions: MovingAverageConventions | dict[str, Any] | None,
                        **switches: Any) -> MovingAverageConventions:
    """The loss's switches: the preset, then ``conventions`` (an object or a mapping), then the
    keyword switches that are not ``PRESET`` (``tau_grad_clip=``, ``positive_weight=``, ...)."""
    if conventions is None:
        conventions = MovingAverageConventions()
    elif isinstance(conventions, dict):
        known = [f.name for f in dataclasses.fields(MovingAverageConventions)]
        unknown = sorted(set(conventions) - set(known))
        if unknown:
            raise ValueError(f"conventions: unknown switch {unknown[0]!r} (switches: {', '.join(known)})")
        conventions = MovingAverageConventions(**conventions)
    elif not isinstance(conventions, MovingAverageConventions):
        raise TypeError("conventions must be a MovingAverageConventions or a mapping, "
                        f"got {type(conventions).__name__}")
    given = {k: v for k, v in switches.items() if v is not PRESET}
    for key, value in given.items():
        current = getattr(conventions, key)
        if current is not PRESET and current != value:
            raise ValueError(f"{key} is given twice with different values: {current!r} in conventions, {value!r}")
    return dataclasses.replace(conventions, **given).resolve(convention, loss)


class LogMovingAverage(nn.Module):
    """Per-sample moving averages s_i <- (1 - beta) s_i + beta g_i, stored as log s_i.

    One float32 per sample and column (4 bytes x ``width``). Unvisited samples hold
    ``-inf``. The buffer is part of ``state_dict`` and moves with ``.to(device)``.
    """

    def __init__(self, num_samples: int, beta: float, width: int = 1,
                 conventions: MovingAverageConventions | None = None) -> None:
        super().__init__()
        if not 0.0 < beta <= 1.0:
            raise ValueError(f"moving-average weight must be in (0, 1], got {beta}")
        self.beta = float(beta)
        self.conventions = conventions or MovingAverageConventions(s_timing="updated", first_visit="estimate")
        if self.conventions.s_timing is PRESET or self.conventions.first_visit is PRESET:
            raise ValueError("LogMovingAverage needs s_timing and first_visit set (MovingAverageConventions.resolve)")
        self.register_buffer("log_s", torch.full((num_samples, width), -math.inf))

    def update(self, index: torch.Tensor, log_g: torch.Tensor) -> torch.Tensor:
        """Write the update for ``index`` and return log s to use in this step's gradients.

        Args:
            index: (B,) distinct dataset indices.
            log_g: (B, width) log of this step's mini-batch estimates g_i (no grad).
        """
        log_g = log_g.detach()
        prev = self.log_s[index].to(log_g.dtype)
        first = torch.isneginf(prev)
        log_keep = math.log1p(-self.beta) if self.beta < 1.0 else -math.inf
        moved = torch.logaddexp(prev + log_keep, log_g + math.log(self.beta))
        new = torch.where(first, log_g, moved) if self.conventions.first_visit == "estimate" else moved
        self.log_s[index] = new.to(self.log_s.dtype)
        if self.conventions.s_timing == "updated":
            return new
        return torch.where(first, new, prev)

    def update_per_view(self, index: torch.Tensor, log_g: torch.Tensor, stored: str = "mean") -> torch.Tensor:
        """Per-view estimates from one stored value per sample (the official codes' layout).

        Each view a reads s_ia = (1 - beta) s_i + beta g_ia (or g_ia on a first visit with
        ``first_visit="estimate"``); s_i <- the ``stored`` (``"mean"`` or ``"sum"``) of the s_ia.
        Returns the (B, 2) log s to use in this step's gradients: the s_ia (``updated``) or the
        stored s_i of the previous visit for both views (``previous``; s_ia on a first visit).

        Args:
            index: (B,) distinct dataset indices.
            log_g: (B, 2) log of this step's per-view estimates g_ia (no grad).
        """
        if self.log_s.shape[1] != 1:
            raise ValueError("per-view estimates need a single stored column (width=1)")
        log_g = log_g.detach()
        prev = self.log_s[index].to(log_g.dtype)  # (B, 1)
        first = torch.isneginf(prev)
        log_keep = math.log1p(-self.beta) if self.beta < 1.0 else -math.inf
        moved = torch.logaddexp(prev + log_keep, log_g + math.log(self.beta))
        new = torch.where(first, log_g, moved) if self.conventions.first_visit == "estimate" else moved
        kept = torch.logsumexp(new, dim=1, keepdim=True) - (math.log(2) if stored == "mean" else 0.0)
        self.log_s[index] = kept.to(self.log_s.dtype)
        if self.conventions.s_timing == "updated":
            return new
        return torch.where(first, new, prev.expand_as(new))


def check_index(index: torch.Tensor, num_samples: int, batch_size: int) -> None:
    """Per-sample state needs distinct, in-range indices (a sampler without replacement)."""
    if index.shape != (batch_size,):
        raise ValueError(f"index must have shape ({batch_size},), got {tuple(index.shape)}")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_samples):
        raise IndexError(f"index out of range [0, {num_samples}): min {int(index.min())}, max {int(index.max())}")
    if torch.unique(index).numel() != index.numel():
        raise ValueError("index has repeated entries; per-sample state needs distinct samples in a batch")
