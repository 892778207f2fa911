"""The bimodal report's claims (analysis/bimodal.py) on small hand-made frames."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.bimodal import (
    autograd_tau_verdict,
    bimodal_verdicts,
    convergence_verdict,
    large_tau_verdict,
    ordering_verdicts,
    table4_verdicts,
    tau_frequency_verdict,
)

CELLS = (("retrieval_a", "ir_r1"), ("retrieval_a", "tr_r1"), ("retrieval_b", "ir_r1"), ("retrieval_b", "tr_r1"),
         ("synth10", "top1"), ("synth100", "top1"))
BASE = {"clip": 20.0, "isogclr_bimodal": 25.0, "sogclr_bimodal": 22.0, "clip_large_tau": 5.0}


def runs_frame(methods=("clip", "isogclr_bimodal", "sogclr_bimodal"), seeds=(0, 1, 2)) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame([{"method": m, "seed": s, "dataset": d, "metric": k, "value": BASE[m] + s * 0.5 + i}
                         for m in methods for s in seeds for i, (d, k) in enumerate(CELLS)])


PAPER = pd.DataFrame({"method": ["isogclr", "clip"], "dataset": ["MSCOCO"] * 2, "metric": ["ir_r1"] * 2,
                      "mean": [14.0, 12.0], "std": [0.1, 0.1]})
PAPER4 = pd.DataFrame({"method": ["clip", "clip", "sogclr", "sogclr"], "batch_size": [128] * 4,
                       "epochs": [30, 60, 30, 60], "top1": [20.0, 18.0, 22.0, 23.0]})


def test_ordering_verdicts_follow_the_methods_that_ran():
    runs = runs_frame()
    out = ordering_verdicts(runs, ["clip", "isogclr_bimodal", "sogclr_bimodal"], PAPER, {"isogclr_bimodal": "isogclr"})
    claims = [v.claim for v in out]
    assert claims[:4] == [f"Tables 2/5/6: iSogCLR > CLIP on retrieval [{d} {m}]"
                          for d in ("retrieval_a", "retrieval_b") for m in ("ir_r1", "tr_r1")]
    assert claims[4:6] == [f"Tables 2/5/6: iSogCLR > sogclr_bimodal on retrieval [{d} ir_r1]"
                           for d in ("retrieval_a", "retrieval_b")]
    assert len(out) == 9 and out[-1].status == "not testable" and "1000-class" in out[-1].evidence
    assert out[0].status == "supported" and out[0].paper_effect == pytest.approx(2.0)
    assert out[7].claim.startswith("Table 7: CLIP > iSogCLR") and out[7].status == "contradicted"
    # CLIP alone: only the ImageNet1K line
    assert [v.status for v in ordering_verdicts(runs, ["clip"], PAPER)] == ["not testable"]
    # a floor at 23 on retrieval_a IR@1: CLIP 20.5 and iSogCLR 25.5 -> iSogCLR learned, tested; at 24: no learning
    assert ordering_verdicts(runs, ["clip", "isogclr_bimodal"], PAPER, floors={("retrieval_a", "ir_r1"): 23.0}
                             )[0].status == "supported"
    assert ordering_verdicts(runs, ["clip", "isogclr_bimodal"], PAPER, floors={("retrieval_a", "ir_r1"): 24.0}
                             )[0].status == "not testable"


def test_table4_verdicts_pair_the_two_budgets():
    short = runs_frame(("clip", "sogclr_bimodal")).assign(epochs=6)
    long = runs_frame(("clip", "sogclr_bimodal")).assign(epochs=12)
    long.loc[long.method == "clip", "value"] -= 1.0 + long.loc[long.method == "clip", "seed"] * 0.1  # CLIP drops
    long.loc[long.method == "sogclr_bimodal", "value"] += 1.0 + long.loc[long.method == "sogclr_bimodal", "seed"] * 0.1
    budgets = pd.concat([short, long])
    out = table4_verdicts(budgets, [("synth10", "top1")], PAPER4)
    assert [v.claim for v in out] == [
        "SogCLR Table 4: two-way SogCLR > CLIP (InfoNCE) at a small batch [synth10 top1]",
        "SogCLR Table 4: InfoNCE (CLIP) loses accuracy from 6 to 12 epochs, SogCLR does not [synth10 top1]",
        f"SogCLR Table 4: two-way SogCLR's advantage over CLIP holds at batch {sorted(set(PAPER4.batch_size))}"]
    assert out[0].status == "supported" and out[0].paper_effect == pytest.approx(2.0)
    assert out[1].status == "supported" and "CLIP 6 ep > 12 ep: supported" in out[1].evidence
    assert out[2].status == "not testable" and out[2].evidence.startswith("no runs")
    # CLIP still rising over the short budget (6 points from epoch 3 to 6): the saturation claim is not testable
    logs = pd.DataFrame([{"method": "clip", "seed": s, "epoch": e, "retrieval_a_ir_r1": 2.0 * e} for s in range(3)
                         for e in range(1, 13)])
    rising = table4_verdicts(budgets, [("synth10", "top1")], PAPER4, logs=logs)[1]
    assert rising.status == "not testable"
    assert rising.precondition == ("CLIP had not saturated by the short budget: still gaining (+6.00 points of "
                                   "retrieval_a_ir_r1 from epoch 3 to 6, needs <= 1 points)")
    assert table4_verdicts(budgets[budgets.method == "clip"], [("synth10", "top1")], PAPER4) == []


def test_side_claims_from_logs_runs_and_taus():
    logs = pd.DataFrame([{"method": m, "seed": s, "epoch": e, "retrieval_a_ir_r1": e * (2.0 if m == "isogclr_bimodal"
                                                                                        else 1.0) + s * 0.1,
                          "tau_image_mean": 0.01 + 0.01 * e + s * 0.001, "tau_text_mean": 0.01 + 0.02 * e}
                         for m in ("clip", "isogclr_bimodal", "clip_individual_tau") for s in range(3)
                         for e in range(1, 4)])
    assert convergence_verdict(logs).status == "supported"
    drift = autograd_tau_verdict(logs, tau_init=0.01)
    assert drift.status == "supported" and "rise every epoch in every seed: True" in drift.evidence
    assert drift.effect == pytest.approx(0.031)
    large = large_tau_verdict(runs_frame(("clip", "clip_large_tau")), tau=1.0)
    assert large.status == "supported" and "tau 1.0" in large.evidence  # 5 < half of 20
    # the clusters' frequencies are the same in every seed: a cluster's identity is its frequency, not testable
    taus = pd.DataFrame([{"method": "isogclr_bimodal", "seed": s, "tau_image": 0.01 * f + 0.001 * (i % 3),
                          "cluster": f, "cluster_frequency": f} for s in range(5)
                         for i, f in enumerate([1, 2, 3, 4, 5, 6] * 5)])
    fixed = tau_frequency_verdict(taus)
    assert fixed.status == "not testable" and "identity and frequency are one thing" in fixed.evidence
    # each seed draws which cluster is frequent (a rotation of the frequencies): tau follows frequency, supported
    rotated = pd.DataFrame([{"method": "isogclr_bimodal", "seed": s, "tau_image": 0.01 * f + 0.001 * (i % 3),
                             "cluster": (f + s) % 6, "cluster_frequency": f} for s in range(5)
                            for i, f in enumerate([1, 2, 3, 4, 5, 6] * 5)])
    freq = tau_frequency_verdict(rotated)
    assert freq.status == "supported" and freq.n_seeds == 5
    assert tau_frequency_verdict(taus.assign(method="clip_individual_tau")) is None


def test_bimodal_verdicts_gather_every_claim_in_order():
    runs = runs_frame(("clip", "isogclr_bimodal", "sogclr_bimodal", "clip_large_tau"))
    budgets = pd.concat([runs_frame(("clip", "sogclr_bimodal")).assign(epochs=e) for e in (6, 12)])
    logs = pd.DataFrame([{"method": m, "seed": s, "epoch": e, "retrieval_a_ir_r1": float(e + s)}
                         for m in ("clip", "isogclr_bimodal") for s in range(3) for e in (1, 2)])
    taus = pd.DataFrame(columns=["method", "seed", "tau_image", "cluster_frequency"])
    methods = ["clip", "isogclr_bimodal", "sogclr_bimodal", "clip_large_tau"]
    out = bimodal_verdicts(runs, methods, PAPER, {}, budgets, [("synth10", "top1")], PAPER4, logs, taus,
                           large_tau=1.0)
    claims = [v.claim for v in out]
    assert len(out) == 9 + 3 + 1 + 1
    assert claims[9].startswith("SogCLR Table 4: two-way") and claims[12].startswith("Figure 1 (right)")
    assert claims[13].startswith("Figure 7 (right)")


def test_no_learning_rows_are_read_apart_and_give_the_floors(tmp_path):
    import json

    from isogclr.analysis.bimodal import collect_bimodal_references, collect_bimodal_runs, no_learning_floors

    for method, seed, own, untrained in (("clip", 0, 20.0, 1.0), ("clip", 1, 22.0, 3.0), ("iso", 0, 21.0, 1.0),
                                         ("iso", 1, 23.0, 3.0)):
        run = tmp_path / f"{method}-s{seed}"
        run.mkdir()
        run.joinpath("metrics.json").write_text(json.dumps({
            "retrieval_a_ir_r1": own, "untrained_retrieval_a_ir_r1": untrained, "chance_retrieval_a_ir_r1": 0.5,
            "synth10_top1": own, "untrained_synth10_top1": 9.0, "chance_synth10_top1": 10.0}))
    runs = collect_bimodal_runs(tmp_path, ["clip"], [0, 1])
    assert set(runs.dataset) == {"retrieval_a", "synth10"} and len(runs) == 4  # the prefixed keys are not runs
    refs = collect_bimodal_references(tmp_path, ["clip", "iso"], [0, 1])
    assert set(refs.method) == {"chance", "untrained pair"} and len(refs) == 8  # per seed, averaged over methods
    assert no_learning_floors(refs) == {("retrieval_a", "ir_r1"): 2.0, ("synth10", "top1"): 10.0}
    empty = collect_bimodal_references(tmp_path, [], [0])
    assert empty.empty and no_learning_floors(empty) == {}
