"""Seeds allocated by power (analysis.power) on hand-checkable numbers.

At sd 1 the exact MDE (80% power, two-sided 95%) is 3.264 with 3 seeds, 2.128 with 4, 1.682 with 5, 1.435 with
6 and 1.273 with 7: a target of 2.2 needs 4 seeds, 1.7 needs 5, 4.0 is met at 3.
"""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.power import (
    TABLE_COLUMNS,
    Group,
    allocate,
    claims_from_verdicts,
    floor_minutes,
    group_minutes,
    mde,
    pilot_claims,
    seed_budget,
    seeds_for_median_mde,
    seeds_to_detect,
)


def claims(*rows: tuple[str, float, float, float, int]) -> pd.DataFrame:
    """(group, target, sd, minutes per seed, seeds now) per claim."""
    return pd.DataFrame([{"group": g, "claim": f"{g}{i}", "target": t, "sd": s, "minutes_per_seed": m,
                          "seeds_now": n} for i, (g, t, s, m, n) in enumerate(rows)])


def by_group(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index("group")


def test_the_mde_and_the_seeds_a_target_needs():
    assert [round(mde(1.0, n), 3) for n in (3, 4, 5)] == [3.264, 2.128, 1.682]
    assert mde(2.0, 4) == pytest.approx(2 * mde(1.0, 4)) and pd.isna(mde(1.0, 1))
    assert seeds_to_detect(2.2, 1.0) == 4 and seeds_to_detect(1.7, 1.0) == 5 and seeds_to_detect(4.0, 1.0) == 3
    assert seeds_to_detect(0.01, 1.0, cap=20) is None
    assert seeds_for_median_mde([1.0, 1.0, 5.0], 1.3) == 7  # median sd 1, MDE(1, 7) = 1.273


def test_a_budget_that_lets_only_one_group_reach_its_target():
    two = claims(("a", 2.2, 1.0, 1.0, 1), ("b", 1.7, 1.0, 1.0, 1))  # a needs 4 seeds (+1 min), b 5 (+2 min)
    t = by_group(allocate(two, budget_minutes=8.0))  # floor 3 + 3 = 6, a's jump 7, b's would make 9
    assert list(t.columns) == list(TABLE_COLUMNS[1:])
    assert t.loc["a", "seeds proposed"] == 4 and t.loc["b", "seeds proposed"] == 3
    assert t.loc["a", "detectable proposed"] == 1 and t.loc["b", "detectable proposed"] == 0
    assert t.loc["a", "minutes proposed"] == 4.0 and t.loc["a", "minutes now"] == 1.0
    assert t.loc["a", "median MDE proposed"] == pytest.approx(2.128, abs=1e-3)
    assert pd.isna(t.loc["a", "median MDE now"])  # one seed: no MDE
    assert t.loc["total", "detectable proposed"] == 1 and "unspent 1.0" in t.loc["total", "sd source"]
    both = by_group(allocate(two, budget_minutes=9.0))
    assert both.loc["a", "seeds proposed"] == 4 and both.loc["b", "seeds proposed"] == 5


def test_the_most_claims_per_minute_goes_first():
    # c: three claims at 4 seeds for 2 minutes a seed (1.5 claims a minute); d: one claim at 4 seeds for 1 minute
    mixed = claims(("c", 2.2, 1.0, 2.0, 3), ("c", 2.2, 1.0, 2.0, 3), ("c", 2.2, 1.0, 2.0, 3), ("d", 2.2, 1.0, 1.0, 3))
    t = by_group(allocate(mixed, budget_minutes=9.0 + 1.0))  # floor 9; room for d's jump only
    assert t.loc["d", "seeds proposed"] == 4 and t.loc["c", "seeds proposed"] == 3
    t = by_group(allocate(mixed, budget_minutes=9.0 + 2.0))  # c's jump first; then d's does not fit
    assert t.loc["c", "seeds proposed"] == 4 and t.loc["d", "seeds proposed"] == 3
    assert t.loc["total", "detectable proposed"] == 3


def test_the_floor_binds_above_what_a_claim_needs_and_below_what_runs_now():
    easy = claims(("e", 4.0, 1.0, 1.0, 9), ("never", 0.01, 1.0, 1.0, 9))
    t = by_group(allocate(easy, budget_minutes=100.0, cap=20))
    assert t.loc["e", "seeds proposed"] == 3 and t.loc["e", "detectable proposed"] == 1  # 3.264 <= 4 at the floor
    assert t.loc["never", "seeds proposed"] == 3  # no number of seeds helps: nothing spent on it
    assert t.loc["e", "detectable now"] == 1 and t.loc["e", "minutes now"] == 9.0
    raised = by_group(allocate(easy, budget_minutes=100.0, cap=20, min_seeds={"never": 7}))
    assert raised.loc["never", "seeds proposed"] == 7
    assert floor_minutes(easy, min_seeds={"never": 7}) == 3.0 + 7.0


def test_a_floor_the_budget_cannot_pay_is_a_clear_error():
    two = claims(("a", 2.2, 1.0, 1.0, 1), ("b", 1.7, 1.0, 1.0, 1))
    with pytest.raises(ValueError, match=r"infeasible: the floor \(3 seeds per group\) costs 6.0 minutes, more than "
                                         r"the budget of 5.0"):
        allocate(two, budget_minutes=5.0)
    with pytest.raises(ValueError, match="min_seeds names groups with no claim"):
        allocate(two, budget_minutes=50.0, min_seeds={"z": 4})
    with pytest.raises(ValueError, match="sd must be a positive number"):
        allocate(claims(("a", 2.2, float("nan"), 1.0, 1)), budget_minutes=50.0)
    with pytest.raises(ValueError, match="one value per group"):
        allocate(claims(("a", 2.2, 1.0, 1.0, 1), ("a", 2.2, 1.0, 2.0, 1)), budget_minutes=50.0)


GROUPS = {"pilot": Group("rep", r"^P", r":train@"), "single": Group("rep", r"^S", r":study@", donor="pilot")}


def test_the_pilot_from_verdicts_and_stage_times():
    verdicts = pd.DataFrame([
        {"report": "rep", "claim": "P1", "effect": -0.5, "paper_effect": 2.0, "mde": 3.264, "n_seeds": 3,
         "evidence": "x - y: -0.50 points"},  # sd 1 (3.264 / MDE(1, 3)), target 2
        {"report": "rep", "claim": "P2", "effect": 3.0, "paper_effect": None, "mde": 9.792, "n_seeds": 3,
         "evidence": "points"},  # sd 3, target 3 (no paper number: the observed effect)
        {"report": "rep", "claim": "P3", "effect": 0.2, "paper_effect": None, "mde": None, "n_seeds": 3,
         "evidence": "Spearman"},  # a correlation: no paired mean, left out
        {"report": "rep", "claim": "S1", "effect": 1.5, "paper_effect": 0.5, "mde": None, "n_seeds": 1,
         "evidence": "one seed (0): a - b +1.50 points, no interval"},  # borrows the median sd of P1, P2: 2
        {"report": "other", "claim": "P9", "effect": 1.0, "paper_effect": 1.0, "mde": 1.0, "n_seeds": 3,
         "evidence": "points"},  # another report
    ])
    stages = pd.DataFrame({"stage": ["p/dvc.yaml:train@a", "p/dvc.yaml:train@b", "p/dvc.yaml:study@a", "data"],
                           "seconds": [180.0, 180.0, 120.0, 60.0]})
    c = claims_from_verdicts(verdicts, GROUPS).set_index("claim")
    assert list(c.index) == ["P1", "P2", "S1"]
    assert c.loc["P1", "sd"] == pytest.approx(1.0, abs=1e-4) and c.loc["P1", "target"] == 2.0
    assert c.loc["P2", "sd"] == pytest.approx(3.0, abs=1e-4) and c.loc["P2", "target"] == 3.0
    assert c.loc["S1", "sd"] == pytest.approx(2.0, abs=1e-4) and c.loc["S1", "target"] == 1.5
    assert c.loc["S1", "sd_source"] == "borrowed from pilot (median sd of 2 claims)"
    assert group_minutes(stages, GROUPS).set_index("group")["stage_minutes"].to_dict() == {"pilot": 6.0, "single": 2.0}
    p = pilot_claims(verdicts, stages, GROUPS).set_index("claim")
    assert p.loc["P1", "minutes_per_seed"] == 2.0 and p.loc["S1", "minutes_per_seed"] == 2.0  # 6 min / 3, 2 / 1
    budget, other = seed_budget(stages, schedule_minutes=10.0, slots=2, groups=GROUPS)
    assert other == pytest.approx(1.0) and budget == pytest.approx(19.0)
    with pytest.raises(ValueError, match="is in groups 'a' and 'b'"):
        group_minutes(stages, {"a": Group("rep", "P", "train"), "b": Group("rep", "S", "train@a")})
    with pytest.raises(ValueError, match="its donor None has no spread"):
        claims_from_verdicts(verdicts, {"single": Group("rep", r"^S", r":study@")})
