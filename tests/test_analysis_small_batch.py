"""The small-batch report's claims (analysis/small_batch.py) on small hand-made frames."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.small_batch import batch_verdicts, burn_in_verdict, emc2_verdicts, table6_verdict

PAPER = pd.DataFrame({"table": [3, 3, 3, 3, 6, 6, 6], "method": ["simclr", "sogclr", "simclr", "sogclr", "simclr",
                                                                 "sogclr", "flatclr"],
                      "batch": [256, 256, 8192, 8192, 256, 256, 256], "epochs": [100] * 7,
                      "top1": [62.0, 66.0, 69.0, 69.5, 50.0, 55.0, 52.0]})


def runs(means: dict[tuple[str, int], float], seeds=(0, 1, 2)) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame([{"method": m, "value": v, "seed": s, "top1": x + 0.3 * s, "knn1_top1": x - 5 + 0.2 * s}
                         for (m, v), x in means.items() for s in seeds])


def test_batch_verdicts_per_batch_size_and_small_against_large():
    by_batch = runs({("simclr", 32): 30.0, ("sogclr", 32): 33.0, ("simclr", 256): 35.0, ("sogclr", 256): 36.0})
    by_batch.loc[(by_batch.method == "sogclr") & (by_batch.seed == 1), "top1"] += 0.5  # a spread of differences
    out = batch_verdicts(by_batch, [32, 256], PAPER)
    assert [v.claim for v in out] == ["SogCLR Tables 2/3: SogCLR > SimCLR at batch 32",
                                      "SogCLR Tables 2/3: SogCLR > SimCLR at batch 256",
                                      "SogCLR: shrinking the batch from 256 to 32 costs SogCLR less than SimCLR "
                                      "(the interaction)"]
    assert out[0].paper_effect is None and out[1].paper_effect == pytest.approx(4.0)
    # (sogclr 33 - 36) - (simclr 30 - 35) = +2 on every seed; paper (66 - 69.5) - (62 - 69) = +3.5
    assert out[2].paper_effect == pytest.approx(3.5) and out[2].status == "supported"
    assert out[2].effect == pytest.approx(2.0)
    assert "preconditions met: the paper's premise holds: SimCLR drops" in out[2].evidence
    assert out[0].status == "supported"


def test_the_headline_at_its_own_budget_and_at_equal_steps():
    """The headline's runs may come from a budget of their own (where the large batch learns), with the small batch
    at equal steps beside them: two rows, each the interaction of its own runs, the 2-epoch rows untouched."""
    by_batch = runs({("simclr", 32): 30.0, ("sogclr", 32): 33.0, ("simclr", 256): 35.0, ("sogclr", 256): 36.0})
    headline = runs({("simclr", 32): 40.0, ("sogclr", 32): 41.0, ("simclr", 256): 44.0, ("sogclr", 256): 43.0})
    headline.loc[(headline.method == "sogclr") & (headline.seed == 2) & (headline.value == 256), "top1"] += 0.6
    steps = runs({("simclr", 32): 36.0, ("sogclr", 32): 39.0})
    out = batch_verdicts(by_batch, [32, 256], PAPER, headline=headline, equal_steps=steps,
                         steps_budget="equal steps: b=32 for 1 epochs (155 steps), b=256 for 8 (152)")
    assert [v.claim for v in out[2:]] == [
        "SogCLR: shrinking the batch from 256 to 32 costs SogCLR less than SimCLR (the interaction)",
        "SogCLR: shrinking the batch from 256 to 32 costs SogCLR less than SimCLR (the interaction, equal steps)"]
    assert out[0].effect == pytest.approx(3.0)  # the 2-epoch runs, not the headline's
    # equal epochs: (41 - 43) - (40 - 44) = +2, seed 2 +0.6 at b=256 only: mean +2 - 0.2
    assert out[2].effect == pytest.approx(2.0 - 0.2)
    # equal steps: (39 - 43) - (36 - 44) = +4, minus the same 0.2
    assert out[3].effect == pytest.approx(4.0 - 0.2) and "b=32 for 1 epochs (155 steps)" in out[3].evidence
    assert out[3].status == "supported" and "SimCLR drops" in out[3].evidence


def test_the_interaction_at_one_seed_is_not_testable_and_says_so():
    """The smoke profile runs one seed: no interval, and the former row's line says so instead of failing."""
    by_batch = runs({("simclr", 32): 30.0, ("sogclr", 32): 33.0, ("simclr", 256): 35.0, ("sogclr", 256): 36.0},
                    seeds=(0,))
    out = batch_verdicts(by_batch, [32, 256], PAPER)
    assert out[2].status == "not testable"
    assert "one seed (0)" in out[2].evidence and "+2.00 points, no interval" in out[2].evidence


def test_table6_and_emc2_at_a_small_batch():
    small = runs({("simclr", 32): 30.0, ("sogclr", 32): 33.0, ("flatclr", 32): 31.0, ("emc2", 32): 34.0,
                  ("negcache", 32): 29.0})
    bump = small.loc[small.seed == 2, "method"].map({"sogclr": 0.4, "emc2": 0.2}).fillna(0)
    small.loc[small.seed == 2, "top1"] += bump
    t6 = table6_verdict(small, 32, PAPER)
    assert t6.claim == "SogCLR Table 6: SogCLR is the best small-batch method (b = 32)" and t6.status == "supported"
    assert "vs simclr" in t6.evidence and "vs flatclr" in t6.evidence and "simo" not in t6.evidence
    emc2 = emc2_verdicts(small, 32)
    assert [v.claim for v in emc2] == [f"EMC2: EMC2 beats SimCLR, SogCLR and Negative Cache at b = 32 ({x})"
                                       for x in ("linear probe", "1-NN")]
    assert emc2[0].status == "supported"
    # at the standard batch every baseline is required
    missing = emc2_verdicts(small[small.method != "negcache"], 256, require_all=True)
    assert [v.status for v in missing] == ["not testable"] * 2 and "the batch_size study" in missing[0].evidence


def test_burn_in_needs_a_run_without_burn_in():
    burn = runs({("emc2", 31): 34.0, ("emc2", 0): 33.0})
    burn.loc[(burn.value == 31) & (burn.seed == 1), "top1"] += 0.4
    v = burn_in_verdict(burn, 32)
    assert v.status == "supported" and "P=31" in v.evidence and "P=0" in v.evidence
    assert burn_in_verdict(burn[burn.value == 31], 32).status == "not testable"
