"""The claims of the t-SNE and RGCL reports (analysis/embeddings.py, analysis/rgcl.py) on small inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from isogclr.analysis.embeddings import tsne_verdicts
from isogclr.analysis.rgcl import anchor_row, optimum_row, rgcl_verdicts, semantic_frequency_anchors

SUMMARY = pd.DataFrame({"centroid_distance_mean": [0.2, 0.5, 0.3], "class_frequency_mean": [300.0, 40.0, 200.0]},
                       index=pd.Index(["largest tau", "smallest tau", "all"], name="group"))


def test_tsne_verdicts_with_one_seed_are_not_testable_with_the_numbers():
    table = pd.DataFrame({"silhouette_cosine": [0.12, 0.10], "knn5_features": [40.0, 35.0], "knn5_tsne": [38.0, 39.0]},
                         index=pd.Index(["isogclr", "simclr"], name="method"))
    out = tsne_verdicts(table, SUMMARY, claimed="isogclr", dataset="synth10", seed=0, lt_run="isogclr-synth10_lt-s0")
    assert [v.claim.split(": ")[0] for v in out] == ["Fig. 4"] * 3 + ["Fig. 5"]
    assert all(v.status == "not testable" for v in out)
    assert "(silhouette_cosine)" in out[0].claim and "one seed" in out[0].evidence
    assert out[3].effect == 0.3 and "10% largest tau 0.2000, 10% smallest tau 0.5000" in out[3].evidence
    alone = tsne_verdicts(table.loc[["simclr"]], SUMMARY, claimed="isogclr", dataset="synth10", seed=0, lt_run="r")
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
