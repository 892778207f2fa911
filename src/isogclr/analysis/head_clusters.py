"""RGCL's prediction for the frequent clusters of the image-text pairs, tested on a rho sweep of iSogCLR's runs.

iSogCLR's temperature of anchor i is the dual variable of its robust global contrastive loss (RGCL, Sec. 4,
Eq. (4)): the distribution p over the anchor's negatives may move away from uniform by at most rho in KL
divergence. If a share q of the batch are near-duplicates of the anchor (its generated cluster), putting all of
p's mass on them costs KL = log(1 / q). So where q > e^-rho the constraint is slack even as tau -> 0, and the
optimal tau_i* falls to its floor (tau_min); below e^-rho the constraint binds and tau_i* stays above it. The share
above which this happens moves with rho: e^-1.6 = 0.20, e^-2.6 = 0.074, e^-3.6 = 0.027.

In expectation a cluster's share of a batch is its share of the training pairs, ``frequency / pairs``. Per run of
the sweep (``bimodal_studies.rho_pairs``, and ``rho_pairs_objects`` on the object variant, whose clusters are
objects with free colour, place and size: semantic neighbours rather than near-duplicates), :func:`slack_table`
gives, per rho and seed, the clusters predicted slack (``share > e^-rho``), the mean tau_image of their pairs and
of the others', and the share of each group's pairs at tau_min. :func:`slack_verdict` judges the prediction at the
group level (the unit at which share varies: a cluster): per seed, the mean over clusters of tau_image of the
clusters predicted bound minus that of the clusters predicted slack, averaged over the rho values at which the
prediction splits the clusters; seeds are the replicates (a Student-t interval, :func:`~.verdicts.effect`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .groups import MIN_GROUPS
from .stats import at_bound
from .studies import study_run_path
from .temperatures import run_taus
from .verdicts import Verdict, effect, not_testable


def load_study_taus(root: Path | str, study: str, method: str, values: Sequence[float], seeds: Sequence[int]
                    ) -> pd.DataFrame:
    """``artifacts/tau.csv`` of every run of ``bimodal_studies.<study>`` (``method`` at each value and seed), with
    columns ``value`` (the knob's value), ``seed`` and the run's bounds (``tau_min``, ``tau_max``)."""
    frames = []
    for value in values:
        for seed in seeds:
            run = study_run_path(root, study, method, value, seed, command="train-bimodal")
            frames.append(run_taus(run, value=float(value), seed=int(seed)))
    return pd.concat(frames, ignore_index=True)


def cluster_means(taus: pd.DataFrame) -> pd.DataFrame:
    """Per (value, seed, cluster): the cluster's share of the run's pairs and the mean tau_image of its pairs, and
    the share of them at tau_min (within :func:`~.stats.at_bound`'s tolerance)."""
    rows = []
    for (value, seed), run in taus.groupby(["value", "seed"], sort=True):
        floor = {"tau_min": float(run["tau_min"].iloc[0])}
        for cluster, pairs in run.groupby("cluster", sort=True):
            rows.append({"value": value, "seed": seed, "cluster": cluster,
                         "share": float(pairs["cluster_frequency"].iloc[0]) / len(run),
                         "tau_image": float(pairs["tau_image"].mean()),
                         "at_floor": float(at_bound(pairs["tau_image"], floor)[0])})
    return pd.DataFrame(rows)


def slack_table(taus: pd.DataFrame) -> pd.DataFrame:
    """Per (rho, seed): e^-rho, the clusters predicted slack (share above it) and bound, and per group the mean
    over its clusters of tau_image and of the share of pairs at tau_min."""
    rows = []
    for (value, seed), clusters in cluster_means(taus).groupby(["value", "seed"], sort=True):
        threshold = math.exp(-value)
        slack = clusters[clusters["share"] > threshold]
        bound = clusters[clusters["share"] <= threshold]
        rows.append({"rho": value, "seed": seed, "e^-rho": round(threshold, 4),
                     "largest share": round(float(clusters["share"].max()), 4),
                     "clusters slack": len(slack), "clusters bound": len(bound),
                     "tau slack": slack["tau_image"].mean() if len(slack) else float("nan"),
                     "tau bound": bound["tau_image"].mean() if len(bound) else float("nan"),
                     "% at tau_min, slack": 100 * slack["at_floor"].mean() if len(slack) else float("nan"),
                     "% at tau_min, bound": 100 * bound["at_floor"].mean() if len(bound) else float("nan")})
    return pd.DataFrame(rows)


def slack_verdict(taus: pd.DataFrame, claim: str) -> Verdict:
    """RGCL's prediction (module docstring) on the runs ``taus`` (:func:`load_study_taus`): per seed, the mean over
    the rho values that split the clusters (at least one slack and :data:`~.groups.MIN_GROUPS` bound) of
    (mean tau_image of the bound clusters - that of the slack ones); positive = the prediction's direction."""
    table = slack_table(taus)
    split = table[(table["clusters slack"] >= 1) & (table["clusters bound"] >= MIN_GROUPS)]
    if split.empty:
        largest = float(table["largest share"].max()) if len(table) else float("nan")
        return not_testable(claim, f"no rho of the sweep puts a cluster above e^-rho (largest share {largest:.3f}, "
                                   f"e^-rho {', '.join(f'{t:.3f}' for t in sorted(set(table['e^-rho'])))})")
    gap = (split["tau bound"] - split["tau slack"]).groupby(split["seed"]).mean()
    rhos = sorted(set(split["rho"]))
    counts = ", ".join(f"rho {r:g}: {int(c)}" for r, c in split.groupby("rho")["clusters slack"].max().items())
    return effect(claim, gap.to_dict(), unit="",
                  what="mean tau_image of the clusters below e^-rho - of those above it (over clusters, mean over "
                       f"rho {', '.join(f'{r:g}' for r in rhos)})",
                  detail=f"clusters above e^-rho: {counts}")
