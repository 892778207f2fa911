"""Holm's adjustment across all claims, each counted once."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats

from isogclr.analysis.multiplicity import adjust, holm, p_value, unique_rows
from isogclr.analysis.verdicts import effect, verdict_table


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04: 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == [0.5] and holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])


def test_the_p_value_of_a_t_row_is_the_paired_t_test():
    diffs = {0: 1.0, 1: 2.0, 2: 1.6, 3: 0.4}
    v = effect("c", diffs, what="d")
    assert p_value(v.status, v.effect, v.ci_low, v.ci_high, v.n_seeds) == pytest.approx(
        stats.ttest_1samp(list(diffs.values()), 0.0).pvalue, rel=1e-6)
    assert p_value("not testable", 1.0, 0.5, 1.5, 3) is None
    assert p_value("supported", 0.2, 0.2, 0.2, None, "exact") == 0.0


def _row(claim: str, status: str, lo: float, hi: float, n: int = 3, repeats: str = "") -> dict:
    return {"claim": claim, "status": status, "effect": (lo + hi) / 2, "ci_low": lo, "ci_high": hi, "n_seeds": n,
            "interval": "t", "repeats": repeats}


def test_each_claim_counted_once_and_marginal_verdicts_do_not_survive():
    table = pd.DataFrame([
        _row("A", "supported", 0.1, 4.0),            # p just below 0.05 at 3 seeds
        _row("B", "supported", 5.0, 6.0),            # p far below
        _row("C", "inconclusive", -1.0, 2.0),
        _row("A again", "supported", 0.1, 4.0),      # the same numbers: the same runs
        _row("B at a subset", "supported", 4.0, 7.0, repeats="B"),
        {"claim": "D", "status": "not testable", "effect": "", "ci_low": "", "ci_high": "", "n_seeds": "",
         "interval": "t", "repeats": ""},
    ])
    assert list(unique_rows(table)) == [0, 1, 2, 0, 1, 5]
    status, tested = adjust(table)
    assert tested == 3  # A, B, C: the repeats and the not-testable row are not counted
    assert list(status) == ["inconclusive", "supported", "inconclusive", "inconclusive", "supported", ""]


def test_the_verdict_table_records_how_its_interval_was_made():
    t = verdict_table([effect("c", {0: 1.0, 1: 1.1, 2: 0.9}, what="d")])
    assert t["interval"].iloc[0] == "t" and pd.isna(t["repeats"].iloc[0])


def test_the_same_numbers_are_one_claim_whatever_their_columns_type():
    """One report's CSV reads its seeds as 3.0 (a not-testable row left the column empty), another's as 3."""
    table = pd.DataFrame({"claim": ["A", "A again", "B", "C"], "effect": [2.0, 2, "", ""],
                          "ci_low": [1.752, 1.752, "", ""], "ci_high": [2.248, 2.248, "", ""],
                          "n_seeds": [3.0, 3, "", ""], "repeats": ["", "", "", ""]})
    assert unique_rows(table).tolist() == [0, 0, 2, 3]  # two rows without numbers (not testable) are two claims
