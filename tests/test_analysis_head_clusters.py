"""RGCL's prediction for the frequent clusters: judged over clusters, at the rho values that split them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from isogclr.analysis.head_clusters import slack_table, slack_verdict

TAU_MIN = 0.005


def _runs(floor_above_threshold: bool, rhos=(1.6, 2.6, 3.6), seeds=(0, 1, 2)) -> pd.DataFrame:
    """Zipf(1) clusters over 4,000 pairs (the mini profile's): with ``floor_above_threshold`` the pairs of every
    cluster whose share exceeds e^-rho learn tau_min and the others 0.03-0.04 at random; without, every cluster's
    tau is drawn the same way whatever its share."""
    weights = 1.0 / np.arange(1, 101)
    counts = np.floor(weights / weights.sum() * 4000).astype(int)
    frames = []
    for rho in rhos:
        for seed in seeds:
            rng = np.random.default_rng([int(rho * 10), seed])
            share = counts / counts.sum()
            for cluster, n in enumerate(counts):
                slack = floor_above_threshold and share[cluster] > math.exp(-rho)
                tau = np.full(n, TAU_MIN) if slack else rng.uniform(0.03, 0.04) + rng.normal(0, 1e-3, n)
                frames.append(pd.DataFrame({"cluster": cluster, "cluster_frequency": n, "tau_image": tau,
                                            "value": rho, "seed": seed, "tau_min": TAU_MIN, "tau_max": 0.1}))
    return pd.concat(frames, ignore_index=True)


def test_clusters_above_e_minus_rho_at_the_floor_support_the_prediction():
    taus = _runs(floor_above_threshold=True)
    table = slack_table(taus).set_index(["rho", "seed"])
    # Zipf(1) over 100 clusters: shares 0.193, 0.096, 0.064, ...; e^-1.6 = 0.202 splits none, e^-2.6 two, e^-3.6 seven
    assert table.loc[(1.6, 0), "clusters slack"] == 0
    assert table.loc[(2.6, 0), "clusters slack"] == 2 and table.loc[(3.6, 0), "clusters slack"] == 7
    assert table.loc[(3.6, 0), "% at tau_min, slack"] == 100 and table.loc[(3.6, 0), "% at tau_min, bound"] == 0
    verdict = slack_verdict(taus, "RGCL: clusters above e^-rho fall to the floor")
    assert verdict.status == "supported" and verdict.n_seeds == 3
    assert "rho 2.6: 2, rho 3.6: 7" in verdict.evidence


def test_temperatures_unrelated_to_the_share_are_not_supported():
    verdict = slack_verdict(_runs(floor_above_threshold=False), "RGCL: clusters above e^-rho fall to the floor")
    assert verdict.status != "supported"


def test_a_sweep_that_never_splits_the_clusters_is_not_testable():
    verdict = slack_verdict(_runs(True, rhos=(1.0, 1.6)), "RGCL")
    assert verdict.status == "not testable" and "largest share 0.19" in verdict.evidence
