"""benchmarks/regime.py: the design arithmetic (equal steps), the report's summaries on small frames, its CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import regime  # noqa: E402


def test_committed_designs_match_the_profile():
    lt, bal = regime.COMMITTED["synth10_lt"], regime.COMMITTED["synth10"]
    assert lt.images == 4958 and lt.steps() == 456  # 38 full batches x 12 epochs (params.yaml: 456 steps)
    assert bal.images == 20000 and bal.steps() == 468
    assert lt.updates() == pytest.approx(456 * 128 / 4958)


def test_long_tail_counts_follow_the_profile():
    assert regime.train_images("synth10_lt", 400) == 988  # the probe of issue 56
    assert regime.train_images("synth10_lt", 200) == 492
    assert regime.train_images("synth10", 100) == 1000


def test_steps_drop_the_last_incomplete_batch():
    assert regime.design_steps(988, 128, 60) == 420
    assert regime.design_steps(127, 128, 10) == 0


@pytest.mark.parametrize("name", list(regime.DESIGNS))
def test_every_design_is_within_ten_percent_of_the_committed_steps(name):
    design = regime.DESIGNS[name]
    assert regime.within_steps(design, regime.COMMITTED[design.dataset])


@pytest.mark.parametrize("dataset", ["synth10_lt", "synth10"])
def test_designs_span_12_to_240_updates_on_each_set(dataset):
    updates = [d.updates() for d in regime.DESIGNS.values() if d.dataset == dataset]
    assert min(updates) < 13 and max(updates) >= 240


def test_the_issue_probe_at_200_a_class_is_outside_the_tolerance():
    assert not regime.within_steps(regime.Design("synth10_lt", 200, 120), regime.COMMITTED["synth10_lt"])


def test_design_params_pin_tau_init_and_move_the_data(tmp_path):
    params = {"data": {"root": "data", "synthetic": {"per_class": {10: [2000, 1000, 1000], 100: [100, 20]}}},
              "train": {"epochs_by_dataset": {"synth10_lt": 12}},
              "methods": {"isogclr": {"tau_init": "selected"}, "simclr": {"tau": "selected"}}}
    out = regime.design_params(params, regime.DESIGNS["lt-p400-e65"], "isogclr-t0.7", tmp_path)
    assert out["data"]["synthetic"]["per_class"] == {10: [400, 1000, 1000]}
    assert out["data"]["root"] == str(tmp_path) and out["train"]["epochs_by_dataset"]["synth10_lt"] == 65
    assert out["methods"]["isogclr"]["pin"] == {"tau_init": 0.7}
    assert params["methods"]["isogclr"] == {"tau_init": "selected"}  # the input is not changed
    same = regime.design_params(params, regime.DESIGNS["lt-p2000-e12"], "simclr", tmp_path)
    assert same["data"]["synthetic"]["per_class"][10] == [2000, 1000, 1000] and "pin" not in same["methods"]["simclr"]


def test_gap_fraction():
    assert regime.gap_fraction(0.1, 0.7) == pytest.approx(1.0)
    assert regime.gap_fraction(0.35, 0.5) == pytest.approx(0.25)
    assert regime.gap_fraction(0.4, 0.4) == 0.0


def _tau_frame(values, labels):
    return pd.DataFrame({"tau": values, "label": labels})


def test_tau_table_means_over_seeds_and_gap():
    taus = {("d", "isogclr-t0.1", 0): _tau_frame([0.3, 0.5], [0, 1]), ("d", "isogclr-t0.1", 1): _tau_frame(
        [0.4, 0.6], [0, 1]), ("d", "isogclr-t0.7", 0): _tau_frame([0.6, 0.6], [0, 1])}
    row = regime.tau_table(taus).iloc[0]
    assert row["tau 0.1: mean"] == pytest.approx(0.45) and row["tau 0.7: mean"] == pytest.approx(0.6)
    assert row["tau 0.1: sd"] == pytest.approx(np.std([0.3, 0.5], ddof=1), abs=1e-3)
    assert row["gap fraction (0.1 vs 0.7)"] == pytest.approx(0.25) and not row["gap met (< 0.25)"]


def test_level_table_margins_on_the_seeds_of_every_method():
    runs = pd.DataFrame({"design": "d", "variant": ["simclr", "simclr", "simclr", "sogclr", "sogclr"],
                         "seed": [0, 1, 2, 0, 1], "val_top1": [30.0, 32.0, 90.0, 29.0, 31.0]})
    refs = pd.DataFrame({"design": "d", "seed": [0, 1, 2], "raw_pixels": [12.0, 14.0, 0.0],
                         "random_init": [20.0, 22.0, 0.0]})
    row = regime.level_table(runs, refs).iloc[0]  # seed 2 has no SogCLR run: left out of every mean
    assert row["seeds (every method)"] == "0 1" and row["simclr top-1"] == 31.0 and row["sogclr top-1"] == 30.0
    assert row["SimCLR - raw pixels"] == 18.0 and row["SimCLR - random init"] == 10.0
    assert bool(row["level met (>= 10 above both)"])
    refs.loc[0, "random_init"] = 21.0
    assert not bool(regime.level_table(runs, refs).iloc[0]["level met (>= 10 above both)"])


def test_paired_table_differences_by_seed():
    runs = pd.DataFrame({"design": "d", "variant": ["simclr"] * 3 + ["isogclr-t0.3"] * 3, "seed": [0, 1, 2] * 2,
                         "val_top1": [30.0, 20.0, 25.0, 31.0, 20.0, 27.0]})
    row = regime.paired_table(runs).set_index("comparison").loc["isogclr-t0.3 - simclr"]
    assert row["mean difference"] == 1.0 and row["sd of differences"] == 1.0 and row["seeds"] == 3
    assert row["MDE at 5 seeds"] > 0


def test_class_frequency_is_the_runs_own():
    frame = regime.class_frequency(_tau_frame([0.1, 0.2, 0.3], [4, 4, 7]))
    assert frame["frequency"].tolist() == [2.0, 2.0, 1.0]


def test_slope_recovers_a_frequency_effect():
    rng = np.random.default_rng(0)
    taus = {}
    for seed in range(5):
        counts = rng.permutation([40, 30, 20, 12, 8, 5, 3, 2, 2, 1])
        labels = np.repeat(np.arange(10), counts)
        tau = 0.3 + 0.02 * np.log(counts[labels]) + 0.01 * labels + rng.normal(0, 1e-4, len(labels))
        taus[("d", "isogclr-t0.3", seed)] = _tau_frame(tau, labels)
    row = regime.slope_table(taus).iloc[0]
    assert row["slope per log frequency"] == pytest.approx(0.02, abs=1e-3)
    assert row["status"] == "supported" and row["95% low"] > 0
    few = regime.slope_table({k: v for k, v in taus.items() if k[2] < 3}).iloc[0]  # 3 seeds: no interval
    assert few["status"] == "not testable" and few["95% low"] is None
    assert few["slope per log frequency"] == pytest.approx(0.02, abs=1e-3)


def test_help_works():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "regime.py"), "--help"], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    assert "--work" in done.stdout and "--report" in done.stdout


def test_variants_pin_their_knobs(tmp_path):
    assert regime.variant_spec("isogclr-t0.3-eta0") == ("isogclr", {"tau_init": 0.3, "eta": 0.0})
    assert regime.variant_spec("sogclr-tau0.47") == ("sogclr", {"tau": 0.47})
    with pytest.raises(Exception, match="unknown variant 'sogclr-taux'"):
        regime.variant_spec("sogclr-taux")
    params = {"data": {"root": "data", "synthetic": {"per_class": {10: [2000, 1000, 1000]}}},
              "train": {"epochs_by_dataset": {"synth10_lt": 12}},
              "methods": {"isogclr": {"tau_init": "selected"}, "sogclr": {"tau": "selected"}}}
    out = regime.design_params(params, regime.DESIGNS["lt-p200-e152"], "isogclr-paper", tmp_path)
    assert out["methods"]["isogclr"]["pin"] == {"tau_init": 0.7, "beta0": 0.8}
    assert regime.design_params(params, regime.DESIGNS["lt-p200-e152"], "sogclr-tau0.5",
                                tmp_path)["methods"]["sogclr"]["pin"] == {"tau": 0.5}
    assert regime.tau_init_of("isogclr-t0.7") == 0.7 and regime.tau_init_of("isogclr-t0.3-eta0") is None


def test_control_pairs_set_each_control_against_what_it_holds_fixed():
    pairs = regime.control_pairs(["simclr", "sogclr", "isogclr-t0.3", "isogclr-t0.7", "isogclr-t0.3-eta0",
                                  "isogclr-paper", "sogclr-tau0.47"])
    assert pairs[:3] == [("isogclr-t0.3", "isogclr-t0.3-eta0"), ("isogclr-t0.3", "sogclr-tau0.47"),
                         ("isogclr-paper", "isogclr-t0.7")]
    assert ("sogclr-tau0.47", "sogclr") in pairs and ("isogclr-paper", "simclr") in pairs
    assert regime.control_pairs(["simclr", "sogclr", "isogclr-t0.3"]) == []
    runs = pd.DataFrame({"design": "d", "variant": ["isogclr-t0.3"] * 3 + ["isogclr-t0.3-eta0"] * 3,
                         "seed": [0, 1, 2] * 2, "val_top1": [31.0, 20.0, 27.0, 30.0, 20.0, 25.0]})
    row = regime.paired_table(runs, regime.control_pairs).iloc[0]
    assert row["comparison"] == "isogclr-t0.3 - isogclr-t0.3-eta0" and row["mean difference"] == 1.0
    assert row["95% low"] < 1.0 < row["95% high"]


def test_exact_denominator_is_the_mean_over_the_other_samples_views():
    import math

    import regime_state
    import torch
    import torch.nn.functional as F

    z = F.normalize(torch.randn(7, 2, 5, dtype=torch.float64), dim=2)
    tau = 0.3
    brute = []
    for i in range(7):
        others = torch.cat([z[j] for j in range(7) if j != i])  # the 12 views of the other samples
        brute.append(math.log(float(torch.exp(z[i] @ others.T / tau).mean())))
    assert torch.allclose(regime_state.exact_log_g(z, tau), torch.tensor(brute, dtype=torch.float64))
    rows, log_b = regime_state.batch_log_g(z, tau, 3, torch.Generator().manual_seed(0))
    assert len(rows) == 6 and len(set(rows.tolist())) == 6  # two batches of 3, the last sample dropped
    first = rows[:3]
    assert torch.allclose(log_b[:3], regime_state.exact_log_g(z[first], tau))
