"""The claims of the t-SNE and RGCL reports (analysis/embeddings.py, analysis/rgcl.py) on small inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isogclr.analysis.embeddings import tsne_verdicts
from isogclr.analysis.rgcl import anchor_row, optimum_row, rgcl_verdicts, semantic_frequency_anchors

SUMMARY = pd.DataFrame({"centroid_distance_mean": [0.2, 0.5, 0.3], "class_frequency_mean": [300.0, 40.0, 200.0]},
                       index=pd.Index(["largest tau", "smallest tau", "all"], name="group"))


def _separation(rows: dict[tuple[int, str], tuple[float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(list(rows.values()), columns=["silhouette_cosine", "knn5_features", "knn5_tsne"],
                        index=pd.MultiIndex.from_tuples(list(rows), names=["seed", "method"]))


def test_tsne_verdicts_are_paired_by_seed():
    table = _separation({(0, "isogclr"): (0.12, 40.0, 38.0), (0, "simclr"): (0.10, 35.0, 39.0),
                         (1, "isogclr"): (0.13, 41.0, 37.0), (1, "simclr"): (0.10, 36.0, 39.5),
                         (2, "isogclr"): (0.11, 42.0, 38.5), (2, "simclr"): (0.09, 36.0, 38.0)})
    summaries = {s: SUMMARY * (1 + 0.1 * s) for s in range(3)}
    runs = {s: f"isogclr-synth10_lt-s{s}" for s in range(3)}
    out = tsne_verdicts(table, summaries, claimed="isogclr", dataset="synth10", lt_runs=runs)
    assert [v.claim.split(": ")[0] for v in out] == ["Fig. 4"] * 3 + ["Fig. 5", "Fig. 5 (right)"]
    assert out[-1].status == "not testable" and out[-1].evidence.startswith("no runs")
    assert "(silhouette_cosine)" in out[0].claim and out[0].n_seeds == 3
    assert out[0].status == "supported" and out[1].status == "supported"  # +0.02 +-0.01; +5.33 +-0.6
    assert out[2].effect == pytest.approx(((38 - 39) + (37 - 39.5) + (38.5 - 38)) / 3)
    assert out[3].n_seeds == 3 and out[3].effect == pytest.approx(0.3 * (1 + 0.1))  # mean of 0.3, 0.33, 0.36
    assert out[3].claim.endswith("away from clusters (isogclr-synth10_lt)")  # one name whatever the seeds
    assert "seed 1: 0.2200 / 0.5500 / 0.3300" in out[3].evidence
    one = tsne_verdicts(table.loc[[0]], {0: SUMMARY}, claimed="isogclr", dataset="synth10", lt_runs={0: runs[0]})
    assert all(v.status == "not testable" for v in one) and "one seed" in one[0].evidence
    alone = tsne_verdicts(table.xs("simclr", level="method", drop_level=False), summaries, claimed="isogclr",
                          dataset="synth10", lt_runs=runs)
    assert "needs isogclr and a baseline" in alone[0].evidence


def test_rgcl_verdicts_are_exact_margins():
    rho, rhos, tau0, rho_s, global_tau = 0.2, [0.1, 0.2, 0.4], 0.05, 0.3, 0.2
    figure2_h = {"h = [0, -1]": np.array([0.0, -1.0]), "h = [-0.5, -0.5]": np.array([-0.5, -0.5])}
    rows = [{"case": f"Fig. 2, {name}", **optimum_row(h, r, tau0)} for name, h in figure2_h.items() for r in rhos]
    frequent, rare = semantic_frequency_anchors(m=200, seed=0)
    rows += [{"case": f"Fig. 3, {a.name} semantics", **anchor_row(a, rho_s, tau0, global_tau)}
             for a in (frequent, rare)]
    table = pd.DataFrame(rows).set_index("case").astype(object).fillna("")
    out = rgcl_verdicts(table, figure2_h, frequent, rare, rho=rho, rhos=rhos, tau0=tau0, rho_semantics=rho_s,
                        global_tau=global_tau, negatives=200)
    assert len(out) == 6 and out[-1].status == "not testable"
    assert out[0].status == "supported" and 0 < out[0].effect <= 0.05  # p* rounds to (0.8, 0.2)
    assert out[1].status == "supported" and out[2].status == "supported"  # equal weights; rho sharpens p*
    assert out[3].status == "supported" and out[3].effect > 0  # frequent semantics, larger tau*
    assert all(v.ci_low == v.ci_high == v.effect for v in out[:5])  # exact: no interval over seeds
