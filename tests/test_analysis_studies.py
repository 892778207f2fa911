"""Reading studies back: values, borrowed points, curves, config comparison."""

from __future__ import annotations

import copy
import json

import pytest

from isogclr import epoch_times as timing
from isogclr.analysis.studies import collect_study, same_settings, study_curves

from .timing_helpers import run_seconds


def _fake_run(root, study, method, value, top1, tau_init=0.3):
    run = root / study / f"{method}-{value}-s0"
    (run / "artifacts").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"top1": top1, "knn1_top1": top1 - 1}))
    (run / "train_log.csv").write_text("epoch,step,samples_seen,loss,knn1_top1\n1,2,64,1.0,10\n2,4,128,0.9,\n")
    (run / "artifacts" / "config.json").write_text(json.dumps({"run_id": f"{study}/{method}-{value}-s0",
                                                               "method": {"kwargs": {"rho": value if study == "rho"
                                                                                     else 0.3,
                                                                                     "tau_init": tau_init}}}))


def test_collect_study_reads_every_value_and_borrowed_points(tmp_path, smoke_params):
    params = copy.deepcopy(smoke_params)
    params["studies"]["rho"]["values"] = [0.1, 0.3]
    params["studies"]["tau_init"]["values"] = [0.7]
    for value, top1 in ((0.1, 40.0), (0.3, 42.0)):
        _fake_run(tmp_path, "rho", "isogclr", value, top1)
    _fake_run(tmp_path, "tau_init", "isogclr", 0.7, 45.0, tau_init=0.7)
    rho = collect_study(params, "rho", tmp_path)
    assert rho["value"].tolist() == [0.1, 0.3] and rho["top1"].tolist() == [40.0, 42.0]
    both = collect_study(params, "tau_init", tmp_path, extra={0.3: ("rho", 0.3)})
    assert both["value"].tolist() == [0.3, 0.7] and both["top1"].tolist() == [42.0, 45.0]
    # the curves hold no wall clock (the reports measure cost in steps and samples seen); the timing record is read
    # by isogclr.analysis.repro_timing only, keyed by the run's folder
    record = tmp_path / "timing.csv"
    timing.record(timing.run_key(tmp_path / "rho" / "isogclr-0.1-s0"),
                  [{"epoch": 2, "seconds": 0.25}, {"epoch": 1, "seconds": 0.5}], path=record)
    curves = study_curves(params, "rho", tmp_path)
    assert not [c for c in curves.columns if "seconds" in c] and len(curves) == 4
    assert curves["step"].tolist() == [2, 4, 2, 4] and curves["samples_seen"].tolist() == [64, 128, 64, 128]
    assert run_seconds(tmp_path / "rho" / "isogclr-0.1-s0", timing_path=record).to_dict("list") == {
        "epoch": [1, 2], "train_seconds": [0.5, 0.75]}
    log = tmp_path / "rho" / "isogclr-0.3-s0" / "train_log.csv"
    log.write_text("epoch,step,samples_seen,loss,train_seconds\n1,2,64,1.0,0.5\n")  # an old log with a time column
    with pytest.raises(ValueError, match=r"isogclr-0.3-s0/train_log.csv: wall-clock column\(s\) \['train_seconds'\]"):
        study_curves(params, "rho", tmp_path)
    diff = same_settings(tmp_path / "rho" / "isogclr-0.3-s0" / "artifacts" / "config.json",
                         tmp_path / "tau_init" / "isogclr-0.7-s0" / "artifacts" / "config.json")
    assert diff == ["method.kwargs.tau_init"]


def test_missing_study_run_names_the_command(tmp_path, smoke_params):
    with pytest.raises(FileNotFoundError, match="dvc repro study_rho"):
        collect_study(smoke_params, "rho", tmp_path)


def test_check_differs_only_names_the_other_keys(tmp_path):
    from isogclr.analysis.studies import check_differs_only

    for name, config in (("a", {"train": {"epochs": 10, "lr": 0.1}}), ("b", {"train": {"epochs": 5, "lr": 0.1}}),
                         ("c", {"train": {"epochs": 5, "lr": 0.2}})):
        (tmp_path / name / "artifacts").mkdir(parents=True)
        (tmp_path / name / "artifacts" / "config.json").write_text(json.dumps({"run_id": name, **config}))
    check_differs_only([(tmp_path / "a", tmp_path / "b")], key="train.epochs")
    with pytest.raises(ValueError, match=r"differ in \['train.epochs', 'train.lr'\]"):
        check_differs_only([(tmp_path / "a", tmp_path / "b"), (tmp_path / "a", tmp_path / "c")], key="train.epochs")


def test_the_studies_a_report_reads_in_either_section():
    """A report finds the optional studies it shows by their ``report`` (the paper profile runs no rho sweep; the
    mini profile no headline study until it defines one), in ``studies`` or in ``bimodal_studies``."""
    from isogclr.analysis.studies import studies_read_by

    params = {"studies": {"batch_size": {"report": "small_batch", "knob": "train.batch_size"},
                          "rho": {"report": "ablations"}, "ladder": {"report": ["budget_ladder", "small_batch"]}},
              "bimodal_studies": {"rho_pairs": {"report": "bimodal"}}}
    assert studies_read_by(params, "small_batch") == ["batch_size", "ladder"]
    assert studies_read_by(params, "small_batch", knob="train.batch_size") == ["batch_size"]
    assert studies_read_by(params, "bimodal") == []
    assert studies_read_by(params, "bimodal", section="bimodal_studies") == ["rho_pairs"]
    assert studies_read_by({}, "bimodal", section="bimodal_studies") == []
