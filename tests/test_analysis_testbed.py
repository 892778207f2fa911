"""The testbed's reference rows, thresholds and the before/after table of the central verdicts."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pytest

from isogclr.analysis.testbed import (
    REFERENCE_ROWS,
    before_after,
    position,
    reference_rows,
    status_counts,
    thresholds,
)


def with_reference_rows(table: pd.DataFrame, references: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``table`` (methods as rows, datasets as ``columns``) with the reference rows appended below, labelled."""
    extra = pd.DataFrame({row: {c: references.loc[c, row] for c in columns if c in references.index}
                          for row in REFERENCE_ROWS}).T
    return pd.concat([table, extra.reindex(columns=list(table.columns))])


def _write(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


@pytest.fixture()
def runs(tmp_path):
    _write(tmp_path / "references" / "a" / "metrics.json", {"chance": 10.0, "raw_pixels_top1": 12.0,
           "random_init_s0_top1": 14.0, "random_init_s1_top1": 16.0, "floor_top1": 15.0})
    _write(tmp_path / "references" / "b" / "metrics.json", {"chance": 10.0, "raw_pixels_top1": 75.0,
           "random_init_s0_top1": 50.0, "random_init_s1_top1": 52.0, "floor_top1": 75.0})
    for dataset, top1 in (("a", (60.0, 62.0)), ("b", (90.0, 92.0))):
        for seed, value in enumerate(top1):
            _write(tmp_path / f"supervised-{dataset}-s{seed}" / "metrics.json", {"top1": value})
    return tmp_path


def test_reference_rows(runs):
    refs = reference_rows(runs, ["a", "b"], [0, 1])
    assert refs.loc["a"].to_dict() == {"chance": 10.0, "raw pixels": 12.0, "random init": 15.0, "floor": 15.0,
                                       "supervised": 61.0, "supervised seeds": 2}
    assert refs.loc["b", "supervised"] == 91.0
    with pytest.raises(FileNotFoundError, match="supervised-a-s7"):
        reference_rows(runs, ["a"], [7])


def test_position_and_thresholds(runs):
    assert position(38.0, 15.0, 61.0) == pytest.approx(0.5)
    assert math.isnan(position(10.0, 20.0, 20.0))  # the supervised reference learned nothing: no scale
    refs = reference_rows(runs, ["a", "b"], [0, 1])
    checks = thresholds({"a": 29.0, "b": 76.0}, refs, raw_pixels_only=["b"])
    assert not checks.loc["a", "holds"]  # 29 < 15 + 15
    assert checks.loc["a", "needs at least"] == 30.0 and checks.loc["a", "needs at most"] == 56.0
    assert checks.loc["b", "holds"]  # 76 >= 75 (raw pixels) and <= 91 - 5
    assert thresholds({"a": 30.0}, refs).loc["a", "holds"]
    assert not thresholds({"a": 57.0}, refs).loc["a", "holds"]  # saturated: within 5 of supervised
    assert checks.loc["a", "window"] == 26.0 and checks.loc["b", "window"] == 11.0  # 91 - 5 - 75
    refs.loc["b", "supervised"] = 78.0  # 3 points above the raw-pixel probe: no score can be within both bounds
    narrow = thresholds({"b": 76.0}, refs, raw_pixels_only=["b"]).loc["b"]
    assert narrow["window"] == -2.0 and not narrow["holds"]


def test_with_reference_rows(runs):
    refs = reference_rows(runs, ["a", "b"], [0, 1])
    table = pd.DataFrame({"a": [30.0], "b": [80.0]}, index=["simclr"])
    full = with_reference_rows(table, refs, ["a", "b"])
    assert list(full.index) == ["simclr", "chance", "raw pixels", "random init", "supervised"]
    assert full.loc["supervised", "a"] == 61.0 and full.loc["raw pixels", "b"] == 75.0


def test_before_after_keeps_claims_of_either_side():
    before = pd.DataFrame({"report": ["t1", "t1"], "claim": ["x", "old budget"], "status": ["inconclusive"] * 2,
                           "effect": [-1.0, 2.0], "ci_low": [-5.0, -1.0], "ci_high": [3.0, 5.0]})
    after = pd.DataFrame({"report": ["t1", "t1"], "claim": ["x", "new budget"], "status": ["supported", "contradicted"],
                          "effect": [2.0, -3.0], "ci_low": [1.0, -4.0], "ci_high": [3.0, -2.0], "mde": [1.5, 2.0]})
    table = before_after(before, after)
    assert list(table["claim"]) == ["x", "new budget", "old budget"]
    row = table.set_index("claim").loc["x"]
    assert row["status before"] == "inconclusive" and row["status after"] == "supported"
    assert pd.isna(row["mde before"]) and row["mde after"] == 1.5
    assert pd.isna(table.set_index("claim").loc["old budget", "status after"])
    assert status_counts(after) == {"supported": 1, "contradicted": 1}


def test_moved_keeps_changed_statuses_effects_and_one_sided_claims():
    from isogclr.analysis.testbed import moved

    before = pd.DataFrame({"report": ["t"] * 4, "claim": ["same", "nudged", "shifted", "gone"],
                           "status": ["inconclusive"] * 4, "effect": [1.0, 1.0, 1.0, 1.0]})
    after = pd.DataFrame({"report": ["t"] * 4, "claim": ["same", "nudged", "shifted", "new"],
                          "status": ["inconclusive", "inconclusive", "inconclusive", "supported"],
                          "effect": [1.0, 1.004, 1.2, 2.0]})
    assert list(moved(before, after)["claim"]) == ["shifted", "new", "gone"]
    assert list(moved(before, after, tolerance=0.001)["claim"]) == ["nudged", "shifted", "new", "gone"]


def test_method_scores_from_a_table_or_a_ladder(tmp_path):
    from isogclr.analysis.testbed import method_scores

    params = {"table1": {"methods": ["simclr"], "datasets": ["a"], "seeds": [0, 1]},
              "studies": {"ladder": {"methods": ["simclr"], "knob": "train.epochs", "dataset": "b", "values": [5, 20],
                                     "seeds": [0]}}}
    _write(tmp_path / "runs" / "simclr-a-s0" / "metrics.json", {"top1": 30.0})
    _write(tmp_path / "runs" / "simclr-a-s1" / "metrics.json", {"top1": 32.0})
    _write(tmp_path / "studies" / "ladder" / "simclr-20-s0" / "metrics.json", {"top1": 60.0})
    scores = method_scores(params, "simclr", ["a", "b", "c"], tmp_path / "runs", tmp_path / "studies")
    assert scores.loc["a", "top1"] == 31.0 and scores.loc["a", "runs"] == "table1, 2 seed(s)"
    assert scores.loc["b", "top1"] == 60.0 and scores.loc["b", "runs"] == "ladder at 20 epochs, 1 seed(s)"
    assert "c" not in scores.index


def test_reference_runs_feed_the_table_builders(runs):
    from isogclr.analysis.table1 import no_learning_floors
    from isogclr.analysis.testbed import reference_runs

    frame = reference_runs(runs, ["a", "missing"], [0, 1])
    assert list(frame.method) == ["chance", "raw_pixels", "random_init", "random_init", "supervised", "supervised"]
    assert list(frame[frame.method == "random_init"].seed) == [0, 1]
    assert no_learning_floors(frame) == {"a": 15.0}  # the mean random init (15) beats raw pixels (12)


def test_pairing_measures_what_a_shared_seed_cancels():
    from isogclr.analysis.testbed import pairing

    rng = np.random.default_rng(0)
    shared = rng.normal(0, 3, 8)  # what a seed's runs share (initial weights, data order, augmentation draws)
    rows = []
    for method, offset in (("a", 1.0), ("b", 0.0)):
        own = rng.normal(0, 0.5, 8)
        rows += [{"dataset": "d", "method": method, "seed": s, "top1": 50 + offset + shared[s] + own[s]}
                 for s in range(8)]
    rows += [{"dataset": "e", "method": m, "seed": s, "top1": rng.normal()} for m in "ab" for s in range(2)]
    table = pairing(pd.DataFrame(rows), [("a", "b"), ("a", "missing")])
    assert len(table) == 1  # dataset e has 2 seeds (no sd), "missing" has no runs
    row = table.iloc[0]
    assert row["dataset"] == "d" and row["comparison"] == "a - b" and row["seeds"] == 8
    assert row["correlation"] > 0.9 and row["ratio"] < 0.3
    a, b = np.array([r["top1"] for r in rows[:8]]), np.array([r["top1"] for r in rows[8:16]])
    assert row["sd paired"] == pytest.approx(np.std(a - b, ddof=1))
    assert row["sd unpaired"] == pytest.approx(np.sqrt(a.var(ddof=1) + b.var(ddof=1)))


def test_pairing_of_runs_with_too_few_seeds_is_an_empty_table_with_its_columns():
    from isogclr.analysis.testbed import pairing

    one_seed = pd.DataFrame([{"dataset": "d", "method": m, "seed": 0, "top1": 50.0} for m in "ab"])
    table = pairing(one_seed, [("a", "b")])
    assert table.empty and {"comparison", "correlation", "ratio"} <= set(table.columns)


def test_status_moves_say_why_from_what_each_verdict_measured():
    from isogclr.analysis.testbed import status_moves

    def frame(rows):
        return pd.DataFrame(rows, columns=["report", "claim", "status", "effect", "ci_low", "ci_high", "n_seeds",
                                           "qualifier"])

    before = frame([("t", "same", "inconclusive", 1.0, -1.0, 3.0, 7, ""),
                    ("t", "narrowed", "inconclusive", 1.0, -1.0, 3.0, 3, ""),
                    ("t", "flipped", "supported", 2.0, 1.0, 3.0, 7, "settled"),
                    ("t", "blocked", "supported", 2.0, 1.0, 3.0, 3, ""),
                    ("t", "freed", "not testable", None, None, None, 3, "no learning"),
                    ("t", "gone", "inconclusive", 0.0, -1.0, 1.0, 3, "")])
    after = frame([("t", "same", "inconclusive", 1.5, -0.5, 3.5, 7, ""),
                   ("t", "narrowed", "supported", 1.5, 1.0, 2.0, 7, ""),
                   ("t", "flipped", "contradicted", -2.0, -3.0, -1.0, 7, ""),
                   ("t", "blocked", "not testable", None, None, None, 3, "the knob did not act: tau moved 0.001"),
                   ("t", "freed", "inconclusive", 0.5, -1.0, 2.0, 3, ""),
                   ("t", "new", "supported", 1.0, 0.5, 1.5, 3, "")])
    why = status_moves(before, after).set_index("claim")["why"]
    assert list(why.index) == ["narrowed", "flipped", "blocked", "freed", "new", "gone"]  # "same" did not move
    assert why["narrowed"] == ("the effect moved +0.50, within its earlier interval; interval half-width "
                               "2.00 -> 0.50 (3 seeds, now 7)")
    assert why["flipped"].startswith("the effect changed sign beyond its earlier interval (+2.00 -> -2.00)")
    assert why["blocked"] == "a precondition failed: the knob did not act: tau moved 0.001"
    assert why["freed"] == "its precondition now holds (before: no learning)"
    assert why["new"].startswith("a new claim") and why["gone"].startswith("no longer tested")
