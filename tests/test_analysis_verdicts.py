"""The verdict engine on hand-made numbers: each status, ties, one seed, the bootstrap, the sign rule, the paper."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isogclr.analysis.correlations import correlation
from isogclr.analysis.stats import bootstrap_spearman, paired_differences, t_interval
from isogclr.analysis.verdicts import (
    COLUMNS,
    Verdict,
    best_of,
    combine,
    compare,
    count_statuses,
    effect,
    exact,
    knob_effect,
    not_testable,
    paper_difference,
    per_seed,
    write_verdicts,
)


def test_t_interval_matches_the_textbook_quantiles():
    two = t_interval([1.0, 3.0])  # mean 2, s = sqrt(2), t_{0.975, 1} = 12.7062
    assert two.estimate == 2.0 and two.half_width == pytest.approx(12.7062 * 1.0, abs=1e-3)
    three = t_interval({0: 1.0, 1: 2.0, 2: 3.0})  # s = 1, t_{0.975, 2} = 4.3027
    assert three.half_width == pytest.approx(4.3027 / np.sqrt(3), abs=1e-4) and three.n == 3
    with pytest.raises(ValueError, match="at least 2 seeds, got 1"):
        t_interval([1.0])


def test_pairing_is_by_seed_not_by_position():
    assert paired_differences({0: 5.0, 1: 7.0, 2: 1.0}, {1: 6.0, 0: 1.0}) == {0: 4.0, 1: 1.0}
    # a consistent +1 per seed is supported although the seed spread (10 points) dwarfs it
    v = compare("a > b", ("a", {0: 50.0, 1: 60.0, 2: 70.0}), ("b", {0: 49.0, 1: 59.1, 2: 68.9}))
    assert v.status == "supported" and v.n_seeds == 3 and v.effect == pytest.approx(1.0)


@pytest.mark.parametrize("a, status", [((40.0, 41.0, 42.0), "supported"), ((30.0, 31.0, 30.5), "contradicted"),
                                       ((38.0, 33.0, 36.0), "inconclusive")])
def test_each_status_of_a_paired_comparison(a, status):
    b = {0: 35.0, 1: 35.5, 2: 34.5}
    v = compare("a > b", ("a", dict(enumerate(a))), ("b", b), paper_effect=2.3)
    assert v.status == status and v.ci_low < v.effect < v.ci_high
    assert "95% CI" in v.evidence and "(3 seeds)" in v.evidence and "paper: +2.30 points" in v.evidence


def test_ties_are_inconclusive():
    v = compare("a > b", ("a", {0: 50.0, 1: 50.0}), ("b", {0: 50.0, 1: 50.0}))
    assert v.status == "inconclusive" and v.ci_low == v.ci_high == 0 and "a tie" in v.evidence
    assert exact("exact tie", 0.0, "x = y").status == "inconclusive"


def test_one_seed_is_not_testable_whatever_the_gap():
    v = compare("a > b", ("a", {0: 90.0, 1: 80.0}), ("b", {0: 10.0}), paper_effect=1.0)
    assert v.status == "not testable" and "one seed (0)" in v.evidence and v.effect == 80.0 and v.n_seeds == 1
    assert compare("a > b", ("a", {0: 9.0}), ("b", {1: 1.0})).status == "not testable"
    with pytest.raises(ValueError, match="cannot rest on 1 seed"):
        Verdict("c", "supported", "e", effect=1.0, ci_low=0.5, ci_high=1.5, n_seeds=1)
    with pytest.raises(ValueError, match="containing 0"):
        Verdict("c", "contradicted", "e", effect=-1.0, ci_low=-2.0, ci_high=0.5, n_seeds=3)
    with pytest.raises(ValueError, match="status"):
        Verdict("c", "held", "e")


def test_the_paper_effect_statement_says_whether_it_could_have_been_seen():
    wide = effect("c", {0: -4.0, 1: 6.0, 2: 1.0}, what="a - b", paper_effect=2.3)
    assert wide.status == "inconclusive" and "could not detect an effect of the paper's size" in wide.evidence
    narrow = effect("c", {0: -0.1, 1: 0.1, 2: 0.0}, what="a - b", paper_effect=2.3)
    assert narrow.status == "inconclusive" and "would have been detected" in narrow.evidence
    assert "paper: no number" in effect("c", {0: 1.0, 1: 2.0}, what="a - b").evidence
    paper = pd.DataFrame({"method": ["a", "b", "a"], "dataset": ["X", "X", "Y"], "mean": [80.0, 77.7, 1.0]})
    assert paper_difference(paper, "a", "b", dataset="X") == pytest.approx(2.3)
    assert paper_difference(paper, "a", "b", dataset="Y") is None


def test_best_of_needs_every_rival_beaten():
    me = ("me", {0: 50.0, 1: 51.0, 2: 52.0})
    beaten = {"x": {0: 40.0, 1: 41.5, 2: 41.0}, "y": {0: 45.0, 1: 46.0, 2: 46.5}}
    assert best_of("best", me, beaten).status == "supported"
    close = best_of("best", me, {**beaten, "z": {0: 51.0, 1: 50.0, 2: 52.5}})
    assert close.status == "inconclusive" and "vs z: inconclusive" in close.evidence
    lost = best_of("best", me, {**beaten, "w": {0: 60.0, 1: 61.0, 2: 62.5}, "v": {0: 1.0}})
    assert lost.status == "contradicted" and lost.effect < 0  # one loss settles it, one-seed rival or not
    assert combine("all", [not_testable("p", "r"), lost]).status == "contradicted"
    assert combine("all", [not_testable("p", "r"), best_of("b", me, beaten)]).status == "not testable"


def test_knob_effect_against_a_tolerance():
    flat = {0.1: {0: 50.0, 1: 52.0, 2: 51.0}, 0.4: {0: 50.2, 1: 52.1, 2: 51.3}}
    steep = {0.1: {0: 50.0, 1: 52.0, 2: 51.0}, 0.4: {0: 55.0, 1: 57.2, 2: 56.1}}
    assert knob_effect("insensitive", flat, tolerance=1.0, sensitive=False).status == "supported"
    assert knob_effect("insensitive", steep, tolerance=1.0, sensitive=False).status == "contradicted"
    assert knob_effect("sensitive", steep, tolerance=1.0, sensitive=True).status == "supported"
    assert knob_effect("sensitive", flat, tolerance=1.0, sensitive=True).status == "contradicted"
    noisy = {0.1: {0: 50.0, 1: 52.0, 2: 51.0}, 0.4: {0: 48.0, 1: 55.0, 2: 52.0}}
    assert knob_effect("insensitive", noisy, tolerance=1.0, sensitive=False).status == "inconclusive"
    one = knob_effect("insensitive", {0.1: {0: 50.0}, 0.4: {0: 50.5}}, tolerance=1.0, sensitive=False)
    assert one.status == "not testable" and "no interval" in one.evidence


def test_bootstrap_interval_is_seeded_and_covers_the_estimate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = x + rng.normal(size=400)
    a, b = bootstrap_spearman(x, y, n_boot=300, seed=7), bootstrap_spearman(x, y, n_boot=300, seed=7)
    assert a == b and a.low < a.estimate < a.high and 0.5 < a.estimate < 0.8
    from scipy.stats import spearmanr
    assert a.estimate == pytest.approx(spearmanr(x, y).statistic)
    none = bootstrap_spearman(x, rng.normal(size=400), n_boot=300)
    assert none.low < 0 < none.high


def test_correlation_needs_seeds_that_agree_in_sign():
    rng = np.random.default_rng(1)
    x = rng.normal(size=300)
    up, down = x + rng.normal(size=300), -x + rng.normal(size=300)
    kw = {"what": "Spearman(x, y)", "n_boot": 200}
    assert correlation("c", {0: (x, up), 1: (x, up[::-1][::-1] + 0.1)}, **kw).status == "supported"
    assert correlation("c", {0: (x, down), 1: (x, down)}, **kw).status == "contradicted"
    mixed = correlation("c", {0: (x, up), 1: (x, down)}, **kw)
    assert mixed.status == "inconclusive" and "disagree in sign" in mixed.evidence
    single = correlation("c", {0: (x, up)}, **kw)
    assert single.status == "not testable" and "one seed" in single.evidence


def test_per_seed_and_the_csv_columns(tmp_path):
    runs = pd.DataFrame({"method": ["a", "a", "b"], "seed": [0, 1, 0], "top1": [1.0, 2.0, 3.0]})
    assert per_seed(runs, method="a") == {0: 1.0, 1: 2.0}
    with pytest.raises(ValueError, match="no row with"):
        per_seed(runs, method="c")
    verdicts = [compare("a > b", ("a", {0: 2.0, 1: 3.0}), ("b", {0: 1.0, 1: 1.5})), not_testable("n", "why")]
    table = write_verdicts(verdicts, tmp_path, "r")
    back = pd.read_csv(tmp_path / "verdicts" / "r.csv")
    assert tuple(back.columns) == COLUMNS and list(back.status) == [table.status[0], "not testable"]
    assert count_statuses(back.status) == {"supported": 0, "contradicted": 0, "inconclusive": 1,
                                           "not testable": 1}
    with pytest.raises(ValueError, match="'held'"):
        count_statuses(["held"])


def test_report_helpers_build_verdicts_from_per_seed_tables():
    from isogclr.analysis.bimodal import ordering_verdict
    from isogclr.analysis.studies import per_value
    from isogclr.analysis.temperatures import frequency_verdict

    runs = pd.DataFrame([{"method": m, "seed": s, "dataset": "retrieval_a", "metric": "ir_r1", "value": v}
                         for m, vals in (("iso", (5.0, 6.0, 7.0)), ("clip", (4.0, 4.9, 6.1)))
                         for s, v in enumerate(vals)])
    paper = pd.DataFrame({"method": ["isogclr", "clip"], "dataset": ["MSCOCO"] * 2, "metric": ["ir_r1"] * 2,
                          "mean": [14.0, 12.0]})
    v = ordering_verdict(runs, "iso > clip", "iso", "clip", "retrieval_a", "ir_r1", paper, {"iso": "isogclr"})
    assert v.status == "supported" and v.paper_effect == pytest.approx(2.0) and v.claim.endswith("[retrieval_a ir_r1]")
    chance = ordering_verdict(runs, "iso > clip", "iso", "clip", "retrieval_a", "ir_r1", paper, {"iso": "isogclr"},
                              floor=5.0)  # both within 2 points of a 5% floor: no learning
    assert chance.status == "not testable" and chance.evidence.startswith("no learning")
    study = pd.DataFrame({"method": "m", "value": [0.1, 0.1, 0.4], "seed": [0, 1, 0], "top1": [1.0, 2.0, 3.0]})
    assert per_value(study, "m") == {0.1: {0: 1.0, 1: 2.0}, 0.4: {0: 3.0}}
    rng = np.random.default_rng(2)
    frames = []
    for s in range(5):  # each seed draws which class is frequent, as the long-tailed sets' seeded class order
        order = rng.permutation(12)
        label = order[rng.choice(12, 1200, p=np.arange(12, 0, -1) / 78)]
        frames.append(pd.DataFrame({"label": label, "run": f"r{s}"}))
    taus = pd.concat(frames, ignore_index=True)
    taus["class_frequency"] = taus.groupby(["run", "label"])["label"].transform("size")
    taus["tau"] = 0.01 * np.log(taus["class_frequency"]) + rng.normal(0, 0.005, len(taus))
    v = frequency_verdict(taus, "frequent -> larger tau", {s: f"r{s}" for s in range(5)})
    assert v.status == "supported" and v.n_seeds == 5 and "over 12 groups x 5 seeds" in v.evidence
    assert v.effect == pytest.approx(0.01, rel=0.2)
    assert "over samples (description only, not the verdict)" in v.evidence


def _bounded_taus(at_min: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """1000 temperatures in [0.005, 0.1]: ``at_min`` of them at tau_min 0.005 (up to 1e-6), the rest spread and
    decreasing with a frequency (so that a spread state gives a clear contradicted verdict)."""
    rng = np.random.default_rng(seed)
    freq = rng.integers(1, 50, 1000).astype(float)
    tau = 0.1 - 0.0018 * freq + rng.normal(0, 0.003, 1000)
    tau[:at_min] = 0.005 + rng.uniform(0, 1e-6, at_min)
    return np.clip(tau, 0.005, 0.1), freq


def test_at_bound_counts_the_values_within_the_tolerance_of_the_busiest_bound():
    from isogclr.analysis.correlations import at_bound_reason
    from isogclr.analysis.stats import at_bound

    values = [0.005, 0.00504, 0.00506, 0.05, 0.0995, 0.1]  # tolerance 5e-05 at tau_min, 1e-3 at tau_max
    assert at_bound(values, {"tau_min": 0.005, "tau_max": 0.1}) == pytest.approx((2 / 6, "tau_min", 0.005, 5e-05))
    assert at_bound(values, {"tau_min": 0.005, "tau_max": 0.1}, rtol=0.02)[0] == pytest.approx(3 / 6)
    assert at_bound(values, {"tau_min": float("nan"), "tau_max": 0.1})[1:3] == ("tau_max", 0.1)  # no tau_min
    assert at_bound([0.0, 0.0, 0.5], {"low": 0.0, "high": 1.0}) == pytest.approx((2 / 3, "low", 0.0, 0.01))
    assert at_bound_reason(values, {"tau_min": 0.005, "tau_max": 0.1}) is None  # a third: not most
    said = at_bound_reason([0.005] * 991 + [0.05] * 9, {"tau_min": 0.005, "tau_max": 0.1})
    assert said.startswith("at its bound: 99.1% of the 1000 values within 5e-05 (1% of the bound) of tau_min 0.005")
    with pytest.raises(ValueError, match="needs values and a bound"):
        at_bound([0.01], {"tau_max": None})
    with pytest.raises(ValueError, match="bound low = 0 with no range"):
        at_bound([0.0], {"low": 0.0})


def test_a_correlation_on_temperatures_at_their_bound_is_not_testable():
    """The pinned state of the image-text runs: most temperatures at tau_min, rank differences in rounding noise.
    Without bounds the correlation gives a verdict; with them, not testable (at its bound), the fraction stated;
    a spread state under the same bounds keeps its normal verdict."""
    bounds = {"tau_min": 0.005, "tau_max": 0.1}
    pinned = {s: _bounded_taus(at_min=990, seed=s) for s in range(3)}
    blind = correlation("tau grows with frequency", pinned, what="Spearman")
    assert blind.status in ("supported", "contradicted", "inconclusive")
    v = correlation("tau grows with frequency", pinned, what="Spearman", bounds=bounds)
    assert v.status == "not testable" and v.n_seeds == 3
    assert v.evidence.startswith("at its bound: 99.0% of the 3000 values within 5e-05 (1% of the bound) of tau_min")
    assert v.effect == pytest.approx(blind.effect)  # the numbers are kept
    spread = {s: _bounded_taus(at_min=0, seed=s) for s in range(3)}
    normal = correlation("tau grows with frequency", spread, what="Spearman", bounds=bounds)
    assert normal.status == "contradicted" and not normal.evidence.startswith("at its bound")
    half = {s: _bounded_taus(at_min=500, seed=s) for s in range(3)}  # exactly half: not "most"
    assert correlation("x", half, what="Spearman", bounds=bounds).status != "not testable"


def test_the_temperature_verdicts_read_the_bounds_their_runs_were_trained_with(tmp_path):
    import json

    from isogclr.analysis.bimodal import load_bimodal_taus, tau_frequency_verdict
    from isogclr.analysis.temperatures import frequency_verdict, load_temperatures

    for s in range(2):
        tau, freq = _bounded_taus(at_min=900, seed=s)
        labels = (freq // 10).astype(int)
        unimodal, bimodal = tmp_path / f"iso-s{s}" / "artifacts", tmp_path / f"isogclr_bimodal-s{s}" / "artifacts"
        for folder in (unimodal, bimodal):
            folder.mkdir(parents=True)
            (folder / "config.json").write_text(json.dumps({"method": {"kwargs": {"tau_min": 0.005, "tau_max": 0.1}}}))
        (bimodal.parent / "metrics.json").write_text("{}")
        pd.DataFrame({"label": labels, "tau": tau}).to_csv(unimodal / "tau.csv", index=False)
        pd.DataFrame({"tau_image": tau, "tau_text": tau, "cluster": freq.astype(int),
                      "cluster_frequency": freq}).to_csv(bimodal / "tau.csv", index=False)
    taus = load_temperatures(tmp_path, ["iso-s0", "iso-s1"])
    assert set(taus["tau_min"]) == {0.005} and set(taus["tau_max"]) == {0.1}
    v = frequency_verdict(taus, "frequent -> larger tau", {0: "iso-s0", 1: "iso-s1"})
    assert v.status == "not testable" and v.evidence.startswith("at its bound: 90.0% of the 2000 values")
    pairs = load_bimodal_taus(tmp_path, ["isogclr_bimodal"], [0, 1])
    w = tau_frequency_verdict(pairs)
    assert w.status == "not testable" and "of tau_min 0.005" in w.evidence
    with pytest.raises(ValueError, match="different tau_min"):
        frequency_verdict(taus.assign(tau_min=np.where(taus["run"] == "iso-s0", 0.005, 0.01)), "x",
                          {0: "iso-s0", 1: "iso-s1"})


def test_a_verdict_table_says_settled_only_of_a_decided_verdict():
    """p_rerun and the qualifier (the rule: tests/test_analysis_rerun.py): settled / not settled (p ...) for a
    supported or contradicted verdict, the seeds that would answer an inconclusive one."""
    verdicts = [effect("tight", {s: 1.0 + 0.01 * s for s in range(7)}, what="d"),
                effect("three seeds", {0: 1.0, 1: 1.2, 2: 1.1}, what="d"),
                effect("open", {0: -1.0, 1: 1.5, 2: 0.2}, what="d", paper_effect=2.0), not_testable("n", "one seed")]
    table = write_verdicts(verdicts, tmp := Path(tempfile.mkdtemp()), "r")
    back = pd.read_csv(tmp / "verdicts" / "r.csv")
    assert list(table.status) == ["supported", "supported", "inconclusive", "not testable"]
    assert back["qualifier"].iloc[0] == "settled" and back["p_rerun"].iloc[0] > 0.95
    assert back["qualifier"].iloc[1].startswith("not settled (p 0.")  # 3 seeds: never settled
    assert back["qualifier"].iloc[2].endswith("seeds would answer it at the paper's effect")
    assert np.isnan(back["p_rerun"].iloc[3]) and pd.isna(back["qualifier"].iloc[3])


def test_each_tested_row_says_detected_excluded_or_neither():
    from isogclr.analysis.verdicts import outcome, verdict_table
    assert outcome("supported", 0.2, 1.0, 0.5) == "detected"
    assert outcome("contradicted", -2.73, -0.38, 1.28) == "excluded"  # iSogCLR - SimCLR on synth10_lt
    assert outcome("inconclusive", -2.89, 0.21, 1.28) == "excluded"  # across 0, yet below the paper's +1.28
    assert outcome("inconclusive", -1.06, 1.49, 0.61) == "neither"  # SogCLR - SimCLR: holds 0 and +0.61
    assert outcome("inconclusive", -1.0, 0.5, None) == "neither" and outcome("contradicted", -1.0, -0.5, None) == \
        "excluded"  # without a paper number, "excluded" means every effect in the paper's direction
    assert outcome("not testable", None, None, 1.0) == "" and outcome("inconclusive", float("nan"), 1.0, 1.0) == ""
    table = verdict_table([compare("A > B", ("a", {0: 1.0, 1: 1.2, 2: 0.9}), ("b", {0: 2.0, 1: 2.1, 2: 2.0}),
                                   paper_effect=0.5)])
    assert table["outcome"].tolist() == ["excluded"]


def test_the_bottom_line_gives_effects_in_words():
    from isogclr.analysis.explain import bottom_line
    from isogclr.analysis.verdicts import verdict_table, with_runs
    rows = [compare("iso > sim", ("iso", {0: 30.0, 1: 31.0, 2: 30.5}), ("sim", {0: 31.5, 1: 32.6, 2: 32.3}),
                    paper_effect=1.28),
            compare("sog > sim", ("sog", {0: 31.0, 1: 33.0, 2: 31.9}), ("sim", {0: 31.5, 1: 32.6, 2: 32.3}),
                    paper_effect=0.61),
            *with_runs([compare("12 ep > 6 ep", ("12", {0: 35.0, 1: 36.0, 2: 35.5}), ("6", {0: 30.0, 1: 31.5,
                                                                                          2: 30.2}))],
                       "studies/ladder: 6 epochs")]
    table = verdict_table(rows).astype(object).fillna("")
    line = bottom_line(table)
    assert line.startswith("Bottom line: Against the paper, 1 row (each interval below 0 and below the paper's effect")
    assert "iso > sim -1.63 [" in line and "For the paper, 1 row" in line
    assert "12 ep > 6 ep (studies/ladder: 6 epochs) +4.93 [" in line  # what the supported row means, and its runs
    assert "Open, 1 inconclusive: none excludes the paper's effect; 1 holds both 0 and the paper's effect, e.g. " \
           "sog > sim" in line and "(paper +0.610)" in line
    assert table["runs"].tolist() == ["", "", "studies/ladder: 6 epochs"]
