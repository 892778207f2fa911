"""Table helpers: cells, mean ± std over seeds by any grouping, our numbers beside the paper's."""

from __future__ import annotations

import math

import pandas as pd

from isogclr.analysis.tables import cell, mean_std, paper_numbers, side_by_side


def test_cell_shows_the_std_only_where_there_is_one():
    assert cell(38.456, 0.5) == "38.46 ± 0.50"
    assert cell(38.456) == "38.46" and cell(38.456, math.nan) == "38.46"


def test_mean_std_groups_by_any_columns():
    runs = pd.DataFrame({"method": ["a", "a", "a", "b"], "epochs": [5, 5, 10, 5], "dataset": ["synth10"] * 4,
                         "top1": [10.0, 14.0, 20.0, 30.0]})
    by_epochs = mean_std(runs, by=("method", "epochs")).set_index(["method", "epochs"])
    assert by_epochs.loc[("a", 5), "mean"] == 12.0 and math.isclose(by_epochs.loc[("a", 5), "std"], 8 ** 0.5)
    assert by_epochs.loc[("a", 10), "std"] == 0.0 and by_epochs.loc[("a", 5), "seeds"] == 2  # one seed: std 0
    table = side_by_side(mean_std(runs), paper_numbers("isogclr_table1"), {"a": "isogclr"})
    assert table.loc["a", "ours synth10"] == "14.67 ± 5.03"
    assert table.loc["a", "paper CIFAR10"] == "89.24 ± 0.15" and table.loc["b", "paper CIFAR10"] == "n/a"
