"""A claim about a group property is judged over groups: a sample-level correlation made by a few groups is not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from isogclr.analysis.correlations import correlation
from isogclr.analysis.groups import group_correlation, group_table


def _few_groups_drive_it(seeds: int = 3) -> dict[int, pd.DataFrame]:
    """50 groups; the 3 most frequent hold 40% of the samples and have a larger value, the other 47 none: a
    group's value is its own draw (a fixed difficulty) plus per-seed noise, unrelated to its frequency."""
    rng = np.random.default_rng(0)
    sizes = np.r_[[400, 350, 300], rng.integers(20, 60, 47)]
    difficulty = np.r_[[1.0, 1.0, 1.0], rng.normal(0, 0.3, 47)]
    frames = {}
    for s in range(seeds):
        noise = np.random.default_rng(100 + s)
        rows = [pd.DataFrame({"group": g, "frequency": n, "value": difficulty[g] + noise.normal(0, 0.05)
                              + noise.normal(0, 0.3, n)}) for g, n in enumerate(sizes)]
        frames[s] = pd.concat(rows, ignore_index=True)
    return frames


def test_a_sample_level_correlation_driven_by_a_few_groups_is_inconclusive_over_groups():
    frames = _few_groups_drive_it()
    samples = correlation("value grows with frequency", {s: (f.value, f.frequency) for s, f in frames.items()},
                          what="Spearman over samples", n_boot=300)
    assert samples.status == "supported"  # the sample-level rule is fooled
    v = group_correlation("value grows with frequency",
                          {s: group_table(f, "group", "frequency", "value") for s, f in frames.items()},
                          what="Spearman(mean value per group, group frequency)")
    assert v.status == "inconclusive" and v.ci_low < 0 < v.ci_high and "50 groups" in v.evidence
    assert v.p_rerun is not None and 0 <= v.p_rerun <= 1


def test_a_trend_over_all_groups_is_supported_and_reproducible():
    rng = np.random.default_rng(1)
    sizes = rng.integers(10, 300, 30)
    tables = {}
    for s in range(3):
        f = pd.DataFrame({"group": np.repeat(np.arange(30), sizes), "frequency": np.repeat(sizes, sizes)})
        f["value"] = np.log(f.frequency) + rng.normal(0, 0.5, len(f))
        tables[s] = group_table(f, "group", "frequency", "value")
    a = group_correlation("c", tables, what="w")
    assert a.status == "supported" and a.effect > 0.8 and a == group_correlation("c", tables, what="w")
    flipped = {s: t.assign(value=-t.value) for s, t in tables.items()}
    assert group_correlation("c", flipped, what="w").status == "contradicted"


def test_too_few_seeds_or_groups_is_not_testable():
    t = pd.DataFrame({"value": [1.0, 2.0, 3.0], "property": [1, 2, 3]})
    assert group_correlation("c", {0: t, 1: t}, what="w").status == "not testable"
    big = pd.DataFrame({"value": np.arange(6.0), "property": np.arange(6)})
    assert group_correlation("c", {0: big}, what="w").status == "not testable"
    with pytest.raises(ValueError, match="not a group property"):
        group_table(pd.DataFrame({"g": [0, 0], "p": [1, 2], "v": [1.0, 2.0]}), "g", "p", "v")
