"""What a profile costs before it runs (analysis/cost.py): a run's steps as its loader counts them, rates fit to a
record, and a projection that keeps what it cannot price as recorded."""

import copy
import dataclasses

import pandas as pd
import pytest

from isogclr.analysis import cost
from isogclr.analysis.repro_timing import OTHER

RATES = {"unimodal": (8.0, 6e-4, 0.05), "bimodal": (9.0, 1.2e-3, 0.01)}


def _work(rows):
    return pd.DataFrame([dict(zip(cost.WORK_COLUMNS, r, strict=True)) for r in rows])


def _record(work, noise=None):
    """Stage seconds of ``work``'s families at :data:`RATES`, one stage a family (``noise``: family -> seconds
    added)."""
    out = []
    for family, runs in work.groupby("family", sort=False):
        o, a, c = RATES[runs["kind"].iloc[0]]
        seconds = len(runs) * o + a * runs["samples"].sum() + c * runs["steps"].sum()
        out.append({"stage": family, "family": family, "runs": len(runs),
                    "seconds": seconds + (noise or {}).get(family, 0.0)})
    return pd.DataFrame(out)


def _families():
    rows = []
    for i, (steps, batch) in enumerate([(456, 128), (468, 128), (1240, 32), (152, 256), (76, 512)]):
        for seed in range(3):
            n = steps * (1 + seed % 2)
            rows.append((f"runs/u{i}-s{seed}", f"u{i}", "unimodal", n, n * batch))
    for i, (steps, batch) in enumerate([(496, 128), (150, 128), (400, 64)]):
        for seed in range(3):
            n = steps + 7 * seed
            rows.append((f"runs_bimodal/b{i}-s{seed}", f"b{i}", "bimodal", n, n * batch))
    return _work(rows)


def test_the_rates_of_each_kind_are_recovered_from_a_record_they_made():
    work = _families()
    rates = cost.fit_rates(work, _record(work))
    for kind, expected in RATES.items():
        assert rates.loc[kind].to_numpy() == pytest.approx(expected, rel=1e-6)


def test_a_family_the_record_ran_with_other_runs_is_left_out_of_the_fit():
    """The record is of other params there: its seconds (here 10x) must not pull the rates."""
    work = _families()
    record = _record(work, noise={"u1": 10 * 468 * 128 * 6e-4 * 3})
    record.loc[record["family"] == "u1", "runs"] = 5  # the record's u1 had 5 runs, the plan has 3
    rates = cost.fit_rates(work, record)
    assert rates.loc["unimodal"].to_numpy() == pytest.approx(RATES["unimodal"], rel=1e-6)
    fitted = cost.fit_residuals(work, record, rates)
    assert "u1" not in set(fitted["family"])
    assert fitted["modelled_s"].to_numpy() == pytest.approx(fitted["recorded_s"].to_numpy(), rel=1e-6)


def test_a_kind_with_fewer_recorded_families_than_rates_is_refused():
    work = _families()
    work = work[~work["family"].isin(["b1", "b2"])]
    with pytest.raises(ValueError, match="bimodal: 1 recorded stage families"):
        cost.fit_rates(work, _record(work))


def test_the_projection_prices_planned_runs_and_keeps_untrained_stages_as_recorded():
    work = _families()
    record = pd.concat([_record(work), pd.DataFrame([
        {"stage": "index", "family": "index", "runs": 0, "seconds": 30.0},
        {"stage": "references@synth10", "family": "references", "runs": 1, "seconds": 60.0}])], ignore_index=True)
    rates = cost.fit_rates(work, record)
    doubled = work.assign(steps=2 * work["steps"], samples=2 * work["samples"])
    table = cost.project(doubled, record, rates, slots=2)
    trained = record[record["runs"].gt(0) & record["family"].ne("references")]["seconds"].sum()
    per_run = (len(work[work.kind == "unimodal"]) * RATES["unimodal"][0]
               + len(work[work.kind == "bimodal"]) * RATES["bimodal"][0])
    expected = 2 * trained - per_run + 30.0 + 60.0  # twice the work, the same overheads, the rest as recorded
    total = table[table["claim"] == "total"].iloc[0]
    assert total["stage_min"] == pytest.approx(expected / 60, abs=0.05)
    assert cost.schedule_minutes(table) == pytest.approx(expected / 120, abs=0.05)
    assert table.loc[table["claim"] == OTHER, "stage_min"].item() == pytest.approx(0.5)
    with pytest.raises(ValueError, match="slots"):
        cost.project(work, record, rates, slots=0)


def test_a_runs_steps_are_its_epochs_of_full_batches_of_the_split_it_trains_on(smoke_params, smoke_data, tmp_path):
    """synth10_lt's training split as the run reads it (the long-tailed subset), the last partial batch dropped,
    and a selection's carved part smaller than the whole split."""
    from isogclr.config.core import run_config
    from isogclr.config.plan import PlannedRun
    from isogclr.data.base import load_dataset
    from isogclr.data.splits import validation_split

    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(smoke_data)
    cfg = run_config(params, "simclr", "synth10_lt", 0)
    data = load_dataset("synth10_lt", smoke_data, "train", cfg.order_seed)
    n = len(data.labels)
    whole = cost.run_work(PlannedRun("table1", "runs/simclr-synth10_lt-s0", cfg))
    assert whole["kind"] == "unimodal" and whole["family"] == "train"
    assert whole["steps"] == cfg.train.epochs * (n // cfg.train.batch_size)
    assert whole["samples"] == whole["steps"] * cfg.train.batch_size
    carved = dataclasses.replace(cfg, validation_fraction=0.2)
    part = cost.run_work(PlannedRun("tuning", "tuning/simclr/runs/c0-s0", carved))
    assert part["family"] == "tune"
    kept = len(validation_split(data, 0.2)[0].labels)  # what the selection's run trains on
    assert kept < n and part["steps"] == cfg.train.epochs * (kept // cfg.train.batch_size)
