"""The ablations report's claims (iSogCLR Tables 8/9, Figures 7-9; SogCLR Table 8), from the one-knob studies.

Input frames are the studies' runs (:func:`~isogclr.analysis.studies.collect_study`: rows method, ``value`` (the
knob's), seed, top1) and the learned temperatures (:func:`~isogclr.analysis.studies.study_temperatures`). A knob
"matters" when it moves the result by more than :data:`TOLERANCE` points (:func:`~isogclr.analysis.verdicts.
knob_effect`); orderings are paired by seed (:func:`~isogclr.analysis.verdicts.compare`).
"""

from __future__ import annotations

import pandas as pd

from .preconditions import knob_acted, moved, require
from .studies import per_value
from .verdicts import Verdict, combine, compare, effect, knob_effect, not_testable

TOLERANCE = 1.0  # points of top-1: a knob "matters" when it moves the result by more than this


def rho_verdict(rho: pd.DataFrame, paper9: pd.Series, tolerance: float = TOLERANCE,
                temps: pd.DataFrame | None = None) -> Verdict:
    """Table 9: iSogCLR is not sensitive to rho (``rho``: the rho study's runs; ``paper9``: the paper's top-1 per
    rho on the counterpart dataset, whose range is the paper's effect). Precondition (``temps``: the rho study's
    learned temperatures, rows value, tau): rho acted, i.e. the mean learned tau differs across the rho values by
    at least :data:`~isogclr.analysis.preconditions.KNOB_ACTED` of its mean (rho sets the KL constraint that
    drives the temperatures; if they did not move, insensitivity of the accuracy is vacuous)."""
    verdict = knob_effect("Table 9: iSogCLR is not sensitive to rho in 0.1-0.4", per_value(rho, "isogclr"),
                          tolerance=tolerance, sensitive=False, knob="rho", paper_effect=paper9.max() - paper9.min())
    if temps is None:
        return verdict
    return require(verdict, knob_acted("rho", "the mean learned tau", temps.groupby("value")["tau"].mean().to_dict()))


def tau_verdicts(curves: pd.DataFrame, paper8: pd.DataFrame, tolerance: float = TOLERANCE) -> list[Verdict]:
    """Table 8 / Figure 7 (``curves``: SimCLR's runs against tau and iSogCLR's against tau_init, in ``value``;
    ``paper8``: the paper's CIFAR10 top-1, rows ``paper CIFAR10 <method>``, columns the values): tau matters for
    SimCLR; iSogCLR is not sensitive to tau_init; iSogCLR at every tau_init beats SimCLR at its best tau (by mean),
    each tau_init paired by seed and combined (paper: iSogCLR's worst minus SimCLR's best); and, when the tau study
    ran SogCLR, tau matters for SogCLR (Figure 7's SogCLR curve; the paper's Table 8 has no SogCLR row)."""
    paper_range = paper8.max(axis=1) - paper8.min(axis=1)
    iso_by_value = per_value(curves, "isogclr")
    out = [knob_effect("Table 8: tau is an important hyper-parameter of SimCLR", per_value(curves, "simclr"),
                       tolerance=tolerance, sensitive=True, knob="tau",
                       paper_effect=paper_range.get("paper CIFAR10 simclr"))]
    if "sogclr" in set(curves.method):  # Figure 7 (left) draws SogCLR against tau too; its Table 8 has no row
        out.append(knob_effect("Table 8 / Figure 7: tau is an important hyper-parameter of SogCLR",
                               per_value(curves, "sogclr"), tolerance=tolerance, sensitive=True, knob="tau",
                               paper_effect=paper_range.get("paper CIFAR10 sogclr")))
    out.append(knob_effect("Table 8: iSogCLR is not sensitive to tau_init in 0.1-0.7", iso_by_value,
                           tolerance=tolerance, sensitive=False, knob="tau_init",
                           paper_effect=paper_range.get("paper CIFAR10 isogclr")))
    means = curves[curves.method == "simclr"].groupby("value")["top1"].mean()
    best_tau = means.idxmax()  # SimCLR's best tau by its mean (the paper's "tuned" SimCLR)
    best_simclr = (f"simclr tau {best_tau}", per_value(curves, "simclr")[best_tau])
    paper_gap = (paper8.loc["paper CIFAR10 isogclr"].min() - paper8.loc["paper CIFAR10 simclr"].max()
                 if {"paper CIFAR10 isogclr", "paper CIFAR10 simclr"} <= set(paper8.index) else None)
    out.append(combine("Table 8 / Figure 7: iSogCLR with any tau_init beats SimCLR with its best tau",
                       [compare(f"tau_init {v}", (f"isogclr tau_init {v}", by_seed), best_simclr,
                                paper_effect=paper_gap) for v, by_seed in iso_by_value.items()]))
    return out


def tau_distribution_verdict(temps: pd.DataFrame, epochs: int) -> Verdict:
    """Figures 8/9: the learned tau distributions are similar whatever tau_init (``temps``: rows seed, value (the
    tau_init), tau). Effect per seed: half the spread of the tau_init values minus the spread of the final mean
    tau across them (> 0: the runs moved from their starts towards a common distribution). Precondition: the
    temperatures left tau_init (a run's mean tau moved by at least
    :data:`~isogclr.analysis.preconditions.MOVED` of its tau_init for some tau_init): the claim is about the
    learned end state, which runs that stayed at their start never reached."""
    means = temps.groupby("value")["tau"].mean()
    init_spread = max(means.index) - min(means.index)
    final_means = temps.groupby(["seed", "value"])["tau"].mean()
    left = moved("the temperatures", "tau_init", {v: float(v) for v in means.index}, means.to_dict())
    return require(effect(
        "Figures 8/9: the learned tau distributions are similar regardless of tau_init",
        {s: 0.5 * init_spread - (m.max() - m.min()) for s, m in final_means.groupby(level="seed")},
        what="half the tau_init spread - the spread of the final mean tau", unit="",
        detail=f"final mean tau per tau_init {', '.join(f'{v}: {m:.3f}' for v, m in means.items())} "
               f"for tau_init spanning {init_spread:.2f}, after {epochs} epochs"), left)


def gamma_verdict(gamma: pd.DataFrame, paper_g: pd.Series) -> Verdict:
    """SogCLR Table 8: the best gamma < 1 (by mean) beats gamma = 1 (no moving average), paired by seed (``gamma``:
    SogCLR's runs against gamma; ``paper_g``: the paper's top-1 per gamma, its best gamma < 1 minus gamma = 1 the
    paper's effect); not testable without a gamma = 1 run."""
    means = gamma.groupby("value")["top1"].mean()
    if 1.0 not in means.index:
        return not_testable("SogCLR Table 8: gamma < 1 beats gamma = 1",
                            "gamma = 1.0 is not among studies.gamma.values")
    by_gamma = per_value(gamma, "sogclr")
    best = means.drop(index=1.0).idxmax()
    return compare("SogCLR Table 8: a moving average (best gamma < 1) beats gamma = 1",
                   (f"gamma {best}", by_gamma[best]), ("gamma 1.0", by_gamma[1.0]),
                   paper_effect=paper_g.drop(index=1.0, errors="ignore").max() - paper_g.get(1.0))
