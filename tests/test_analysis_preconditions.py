"""Preconditions: a claim outside the regime it speaks of is not testable, naming what was measured."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.ablations import rho_verdict, tau_distribution_verdict
from isogclr.analysis.preconditions import above_floor, fell, knob_acted, moved, premise, require, room_below
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
    assert v.status == "not testable" and v.precondition.startswith("rho acted on the mean learned tau: 1.7% spread")
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
    assert v.precondition == "temperatures left tau_init: moved at most 1.1% of its start"
    learned = temps.assign(tau=0.25 + 0.01 * temps.value)
    assert tau_distribution_verdict(learned, epochs=2).status == "supported"


def test_the_checks_measure_and_compare():
    assert moved("m", {0: 1.0}, {0: 1.2}).holds and not moved("m", {0: 1.0}, {0: 1.05}).holds
    assert not knob_acted("k", "s", {1: 1.0, 2: 1.01}).holds and knob_acted("k", "s", {1: 1.0, 2: 1.2}).holds
    assert fell("g", 0.5, 0.1).holds and not fell("g", 0.005, 0.08).holds
    assert not above_floor({"a": 79.8, "b": 79.1}, 78.35, 2.0).holds and above_floor({"a": 90.0}, 78.35, 2.0).holds
    room = room_below({"a": 79.8, "b": 79.1}, 80.47, 2.44)
    assert not room.holds and room.measured.startswith("0.67 points from a 79.80")
    drop = compare("d", ("large", {0: 20.0, 1: 21.0, 2: 20.5}), ("small", {0: 18.0, 1: 18.5, 2: 18.2}))
    assert premise("SimCLR drops", drop).holds and not premise("SimCLR drops", compare(
        "d", ("small", {0: 18.0, 1: 18.5, 2: 18.2}), ("large", {0: 20.0, 1: 21.0, 2: 20.5}))).holds
    kept = require(drop, fell("g", 0.5, 0.1))
    assert kept.status == drop.status and kept.evidence.endswith("(needs <= 1: met)")


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
    assert reversed_premise.precondition.startswith("SimCLR drops as its batch shrinks (b=512 - b=32): -7.")
    no_learning = headline_verdict(_batch_runs(simclr=(20.0, 16.2), sogclr=(28.0, 16.5)), [32, 512], PAPER3,
                                   floor=15.65)
    assert no_learning.precondition.startswith("the runs learned: simclr b=512 16.20 against a no-learning floor")


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
