"""Preconditions: a claim outside the regime it speaks of is not testable, naming what was measured."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.ablations import rho_verdict, tau_distribution_verdict
from isogclr.analysis.preconditions import above_floor, fell, knob_acted, moved, premise, require, room_below, saturated
from isogclr.analysis.small_batch import headline_verdict
from isogclr.analysis.verdicts import compare, verdict_table


def _rho_runs(top1: dict[float, tuple[float, float, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"method": "isogclr", "value": v, "seed": s, "top1": x}
                         for v, xs in top1.items() for s, x in enumerate(xs)])


def test_a_run_whose_knob_did_not_act_is_not_testable():
    runs = _rho_runs({0.1: (19.0, 19.5, 18.6), 0.4: (19.1, 19.4, 18.7)})  # insensitive, as measured
    paper9 = pd.Series({0.1: 77.86, 0.4: 78.37})
    still = pd.DataFrame({"value": [0.1] * 3 + [0.4] * 3, "tau": [0.304, 0.305, 0.303, 0.299, 0.298, 0.300]})
    v = rho_verdict(runs, paper9, temps=still)
    assert v.status == "not testable"
    assert v.precondition.startswith("rho did not act on the mean learned tau (1.7% spread")
    assert "precondition not met" in v.evidence and "binding pair" in v.evidence  # the numbers are kept
    assert verdict_table([v])["qualifier"].iloc[0] == v.precondition
    acted = pd.DataFrame({"value": [0.1] * 3 + [0.4] * 3, "tau": [0.2, 0.21, 0.2, 0.4, 0.41, 0.4]})
    w = rho_verdict(runs, paper9, temps=acted)
    assert w.status == rho_verdict(runs, paper9).status != "not testable" and "preconditions met" in w.evidence


def test_temperatures_that_stayed_at_their_start_say_nothing_about_the_learned_distribution():
    temps = pd.DataFrame([{"seed": s, "value": v, "tau": v * (1.01 + 0.001 * s)} for s in range(3)
                          for v in (0.1, 0.3, 0.7) for _ in range(5)])
    v = tau_distribution_verdict(temps, epochs=2)
    assert v.status == "not testable"
    assert v.precondition == "the temperatures did not leave tau_init (moved at most 1.1% of tau_init, needs >= 10%)"
    learned = temps.assign(tau=0.25 + 0.01 * temps.value)
    assert tau_distribution_verdict(learned, epochs=2).status == "supported"


def test_the_checks_measure_and_compare():
    assert moved("m", "s", {0: 1.0}, {0: 1.2}).holds and not moved("m", "s", {0: 1.0}, {0: 1.05}).holds
    assert not knob_acted("k", "s", {1: 1.0, 2: 1.01}).holds and knob_acted("k", "s", {1: 1.0, 2: 1.2}).holds
    assert fell("g", "e", 0.5, 0.1).holds and not fell("g", "e", 0.005, 0.08).holds
    assert not above_floor({"a": 79.8, "b": 79.1}, 78.35, 2.0).holds and above_floor({"a": 90.0}, 78.35, 2.0).holds
    room = room_below({"a": 79.8, "b": 79.1}, 80.47, 2.44)
    assert not room.holds and room.measured.startswith("0.67 points from a 79.80")
    drop = compare("d", ("large", {0: 20.0, 1: 21.0, 2: 20.5}), ("small", {0: 18.0, 1: 18.5, 2: 18.2}))
    assert premise("SimCLR drops", drop).holds and not premise("SimCLR drops", compare(
        "d", ("small", {0: 18.0, 1: 18.5, 2: 18.2}), ("large", {0: 20.0, 1: 21.0, 2: 20.5}))).holds
    kept = require(drop, fell("g", "e", 0.5, 0.1))
    assert kept.status == drop.status
    assert kept.evidence.endswith("g fell towards e (final / initial 0.2 (0.5 to 0.1), needs <= 1)")


def _batch_runs(simclr: tuple[float, float], sogclr: tuple[float, float]) -> pd.DataFrame:
    """Three seeds at b = 32 and 512: (mean at 32, mean at 512) per method, seed noise +-0.3."""
    rows = []
    for method, (small, large) in (("simclr", simclr), ("sogclr", sogclr)):
        for s, noise in enumerate((-0.3, 0.0, 0.3)):
            rows += [{"method": method, "value": 32, "seed": s, "top1": small + noise + 0.1 * s},
                     {"method": method, "value": 512, "seed": s, "top1": large + noise}]
    return pd.DataFrame(rows)


PAPER3 = pd.DataFrame({"method": ["simclr", "simclr", "sogclr", "sogclr"], "batch": [256, 8192, 256, 8192],
                       "top1": [62.8, 69.7, 69.4, 69.7]})


def test_the_small_batch_headline_is_an_interaction_under_its_premise():
    ok = headline_verdict(_batch_runs(simclr=(20.0, 30.0), sogclr=(28.0, 31.0)), [32, 512], PAPER3, floor=15.0)
    assert ok.status == "supported" and ok.effect == pytest.approx(7.0) and ok.paper_effect == pytest.approx(6.6)
    reversed_premise = headline_verdict(_batch_runs(simclr=(23.5, 16.2), sogclr=(24.5, 16.5)), [32, 512], PAPER3)
    assert reversed_premise.status == "not testable"
    assert reversed_premise.precondition.startswith(
        "the paper's premise does not hold: not (SimCLR drops as its batch shrinks (b=512 - b=32)) (-7.")
    no_learning = headline_verdict(_batch_runs(simclr=(20.0, 16.2), sogclr=(28.0, 16.5)), [32, 512], PAPER3,
                                   floor=15.65)
    assert no_learning.precondition == \
        "the runs did not learn (simclr b=512 16.20, needs > 17.65, the no-learning floor 15.65 + 2)"


def test_the_long_tailed_gain_is_a_paired_interaction():
    from isogclr.analysis.table1 import longtail_gain_verdict
    from isogclr.config.sections import TableSpec

    rows = []
    for s in range(3):
        for dataset, gap in (("synth10", 0.5), ("synth10_lt", 2.5 + 0.1 * s)):
            rows += [{"method": "simclr", "dataset": dataset, "seed": s, "top1": 40.0 + s},
                     {"method": "isogclr", "dataset": dataset, "seed": s, "top1": 40.0 + s + gap}]
    spec = TableSpec(methods=("simclr", "isogclr"), datasets=("synth10", "synth10_lt"), seeds=(0, 1, 2))
    paper = pd.DataFrame({"method": ["isogclr", "simclr", "isogclr", "simclr"], "mean": [60.0, 58.0, 89.0, 88.5],
                          "dataset": ["CIFAR10-LT", "CIFAR10-LT", "CIFAR10", "CIFAR10"]})
    v = longtail_gain_verdict(pd.DataFrame(rows), spec, "synth10_lt", "synth10", paper=paper)
    assert v.status == "supported" and v.effect == pytest.approx(2.1) and v.paper_effect == pytest.approx(1.5)
    assert longtail_gain_verdict(pd.DataFrame(rows), spec, "synth10_lt", "synth100", paper=paper).status \
        == "not testable"


def _failing_checks():
    """One failing check from every builder of :mod:`isogclr.analysis.preconditions`."""
    up = compare("d", ("small", {0: 18.0, 1: 18.5, 2: 18.2}), ("large", {0: 20.0, 1: 21.0, 2: 20.5}))
    return {"moved": moved("the temperatures", "tau_init", {0: 1.0}, {0: 1.01}),
            "knob_acted": knob_acted("rho", "the mean tau", {1: 1.0, 2: 1.001}),
            "fell (rose)": fell("the squared gradient norm", "stationarity", 0.00274, 0.122),
            "fell (too little)": fell("the squared gradient norm", "stationarity", 1.0, 0.5, max_ratio=0.01),
            "saturated": saturated("CLIP", "the short budget", 5.13, 1.0, "from epoch 4 to 8"),
            "premise": premise("SimCLR drops as its batch shrinks", up),
            "above_floor": above_floor({"spectral": 77.11, "isogclr": 79.0}, 78.35, 2.0),
            "room_below": room_below({"a": 79.8}, 80.47, 2.44)}


@pytest.mark.parametrize("builder", list(_failing_checks()))
def test_every_failed_check_reads_as_a_failure(builder):
    """A failed check's label (the qualifier of its not-testable row) says what happened, never what was
    required: "the runs did not learn (...)", not "the runs learned: ...". """
    check = _failing_checks()[builder]
    assert not check.holds
    label = require(compare("c", ("a", {0: 1.0, 1: 2.0}), ("b", {0: 0.0, 1: 0.5})), check).precondition
    assert label == check.label() and label.startswith(check.failed) and not label.startswith(check.name)
    assert " not " in f" {check.failed} ", label  # "did not", "does not", "had not", "not enough"
    assert f"needs {check.needs}" in label and check.measured in label


def test_the_issue_labels_read_as_what_happened():
    assert above_floor({"spectral": 77.11}, 78.35, 2.0).label() == \
        "the runs did not learn (spectral 77.11, needs > 80.35, the no-learning floor 78.35 + 2)"
    assert fell("the squared gradient norm", "stationarity", 0.00274, 0.122).label().startswith(
        "the squared gradient norm did not fall towards stationarity: it rose 44.5x")
    assert saturated("CLIP", "the short budget", 5.13, 1.0, "from epoch 4 to 8").label().startswith(
        "CLIP had not saturated by the short budget: still gaining (+5.13 points from epoch 4 to 8")
