"""The Table 1 report's verdicts and tables (analysis/table1.py) on small hand-made frames."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.table1 import (
    REFERENCES,
    all_methods_verdicts,
    budget_study,
    epochs_table,
    epochs_verdicts,
    no_learning_floors,
    table1_table,
    table1_verdicts,
    with_references,
)
from isogclr.analysis.tables import mean_std
from isogclr.config.sections import TableSpec
from isogclr.config.typed import ConfigError

SPEC = TableSpec(methods=("simclr", "sogclr", "isogclr"), datasets=("synth10_lt",), seeds=(0, 1, 2))
PAPER = pd.DataFrame({"method": ["simclr", "sogclr", "isogclr", "barlow_twins", "tau_simclr"],
                      "dataset": ["CIFAR10-LT"] * 5, "mean": [80.0, 81.0, 83.0, 79.0, 82.0], "std": [0.1] * 5})



def reference_frame(rows: list[dict]) -> pd.DataFrame:
    """Reference rows as the reports read them: method, dataset, seed, top1 (a reference without seeds: seed 0)."""
    frame = pd.DataFrame(rows, columns=["method", "dataset", "seed", "top1"])
    frame["seed"] = frame["seed"].fillna(0).astype(int)
    return frame

def frame(means: dict[str, tuple[float, float, float]], dataset: str = "synth10_lt") -> pd.DataFrame:
    return pd.DataFrame([{"method": m, "dataset": dataset, "seed": s, "top1": v}
                         for m, vals in means.items() for s, v in enumerate(vals)])


RUNS = frame({"simclr": (40.0, 41.0, 42.0), "sogclr": (41.0, 42.5, 42.8), "isogclr": (30.0, 31.0, 29.0)})


def test_table1_verdicts_test_every_pair_that_was_run_beside_the_paper():
    verdicts = {v.claim: v for v in table1_verdicts(RUNS, SPEC, PAPER)}
    assert list(verdicts) == [f"Table 1: {a} > {b} on synth10_lt (CIFAR10-LT)"
                              for a, b in (("sogclr", "simclr"), ("isogclr", "sogclr"), ("isogclr", "simclr"))]
    sog = verdicts["Table 1: sogclr > simclr on synth10_lt (CIFAR10-LT)"]
    assert sog.status == "supported" and sog.paper_effect == pytest.approx(1.0) and sog.mde is not None
    assert verdicts["Table 1: isogclr > simclr on synth10_lt (CIFAR10-LT)"].status == "contradicted"
    assert verdicts["Table 1: isogclr > simclr on synth10_lt (CIFAR10-LT)"].paper_effect == pytest.approx(3.0)


def test_table1_verdicts_at_the_no_learning_floor_are_not_testable():
    reference = reference_frame([{"method": "chance", "dataset": "synth10_lt", "top1": 10.0},
                                 {"method": "raw_pixels", "dataset": "synth10_lt", "top1": 40.5},
                                 {"method": "random_init", "dataset": "synth10_lt", "seed": 0, "top1": 20.0},
                                 {"method": "random_init", "dataset": "synth10_lt", "seed": 1, "top1": 22.0}])
    floors = no_learning_floors(reference)
    assert floors == {"synth10_lt": 40.5}  # the better no-learning probe; chance is not one of them
    verdicts = table1_verdicts(RUNS, SPEC, PAPER, floors=floors)
    # simclr 41.0, sogclr 42.1 and isogclr 30.0 are all at most 2 points above 40.5: no learning
    assert [v.status for v in verdicts] == ["not testable"] * 3
    assert verdicts[0].evidence.startswith("no learning: sogclr 42.10 and simclr 41.00")
    assert no_learning_floors(None) == {}


def test_all_methods_verdicts_need_every_baseline_beaten_and_test_tau_simclr_apart():
    every = frame({"simclr": (40.0, 41.0, 42.0), "barlow_twins": (35.0, 36.0, 37.0), "isogclr": (45.0, 46.5, 46.8),
                   "tau_simclr": (47.0, 48.0, 49.0)})
    out = all_methods_verdicts(every, ["simclr", "isogclr", "barlow_twins", "tau_simclr"], ["synth10_lt"], SPEC,
                               PAPER)
    assert [v.claim for v in out] == ["Tables 1/3/4: isogclr beats all 2 baselines on synth10_lt",
                                      "Table 10: isogclr > TaU+SimCLR on synth10_lt"]
    assert out[0].status == "supported" and out[1].status == "contradicted"
    assert out[1].paper_effect == pytest.approx(1.0)


BUDGETS = pd.DataFrame([{"method": m, "epochs": e, "seed": s, "top1": base + e / 10 + s * 0.3 + (0.5 if m == "isogclr"
                                                                                                 else 0.0)}
                        for m, base in (("simclr", 40.0), ("isogclr", 40.0)) for e in (5, 10) for s in range(3)])
PAPER34 = pd.DataFrame({"method": ["simclr", "isogclr"] * 2, "dataset": ["CIFAR10-LT"] * 4,
                        "epochs": [400] * 2 + [800] * 2,
                        "mean": [80.0, 82.0, 81.0, 84.0], "std": [0.1, 0.2, float("nan"), 0.3]})


def test_epochs_table_and_verdicts():
    table = epochs_table(BUDGETS, ["simclr", "isogclr"], PAPER34, "synth10_lt")
    assert list(table.columns) == ["ours 5 ep", "ours 10 ep", "paper CIFAR10-LT 400 ep", "paper CIFAR10-LT 800 ep"]
    assert table.loc["isogclr", "ours 10 ep"] == "41.80 ± 0.30"
    assert table.loc["simclr", "paper CIFAR10-LT 800 ep"] == "81.00"  # no std: the mean alone
    out = epochs_verdicts(BUDGETS, ["simclr", "isogclr"], "synth10_lt", PAPER34, [5])
    assert [v.claim for v in out] == ["Tables 3/4: simclr gains from 10 over 5 epochs on synth10_lt",
                                      "Tables 3/4: isogclr gains from 10 over 5 epochs on synth10_lt",
                                      "Tables 3/4: isogclr > simclr after 5 epochs on synth10_lt"]
    assert out[0].paper_effect == pytest.approx(1.0) and out[1].paper_effect == pytest.approx(2.0)
    assert out[2].paper_effect == pytest.approx(2.0)  # our 5 epochs stand for the paper's 400
    assert all(v.status == "supported" for v in out)


def test_reference_rows_are_shown_below_the_methods_labelled():
    runs = pd.concat([RUNS, frame({"supervised": (60.0, 61.0, 62.0)})])
    reference = reference_frame([{"method": "raw_pixels", "dataset": "synth10_lt", "top1": 12.0},
                                 {"method": "chance", "dataset": "synth10_lt", "top1": 10.0},
                                 {"method": "random_init", "dataset": "synth10_lt", "seed": 0, "top1": 13.0},
                                 {"method": "random_init", "dataset": "synth10_lt", "seed": 1, "top1": 14.0}])
    table = table1_table(mean_std(runs), SPEC, reference, PAPER)
    assert list(table.index) == ["simclr", "sogclr", "isogclr", REFERENCES["chance"], REFERENCES["raw_pixels"],
                                 REFERENCES["random_init"], REFERENCES["supervised"]]
    assert table.loc[REFERENCES["chance"], "ours synth10_lt"] == "10.00 (n=1)"
    assert table.loc[REFERENCES["random_init"], "ours synth10_lt"] == "13.50 ± 0.71"
    assert table.loc[REFERENCES["raw_pixels"], "paper CIFAR10-LT"] == "—"
    assert table.loc[REFERENCES["supervised"], "ours synth10_lt"] == "61.00 ± 1.00"
    assert table.loc["simclr", "paper CIFAR10-LT"] == "80.00 ± 0.10"
    # without reference rows the methods' table is unchanged
    plain = table1_table(mean_std(RUNS), SPEC, None, PAPER)
    assert list(plain.index) == ["simclr", "sogclr", "isogclr"]
    assert with_references(plain, None) is plain
    # a reference on a dataset the table does not show adds no column
    other = reference_frame([{"method": "chance", "dataset": "synth100", "top1": 1.0}])
    assert list(with_references(plain, other).columns) == list(plain.columns)
    assert with_references(plain, other).loc[REFERENCES["chance"]].tolist() == ["—", "—"]


def test_the_budget_study_is_the_one_train_epochs_study_that_lists_the_report():
    """Tables 3/4 read the study whose knob is train.epochs and whose `report` (a name or a list) is theirs."""
    ladder = {"knob": "train.epochs", "report": ["budget_ladder", "table1_unimodal"]}
    params = {"studies": {"rho": {"knob": "methods.{method}.rho", "report": "ablations"}, "ladder": ladder,
                          "other_ladder": {"knob": "train.epochs", "report": "budget_ladder"}}}
    assert budget_study(params) == "ladder"
    params["studies"]["epochs"] = {"knob": "train.epochs", "report": "table1_unimodal"}
    with pytest.raises(ConfigError, match=r"found \['ladder', 'epochs'\]"):
        budget_study(params)
    del params["studies"]["epochs"], params["studies"]["ladder"]
    with pytest.raises(ConfigError, match="found none"):
        budget_study(params)
