"""The selection stage: the same budget per method, scored on a validation split; tuned runs read it."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from isogclr.config import (
    ConfigError,
    run_config,
    tuning_candidates,
    tuning_run_config,
    validate_params,
    with_selection,
)
from isogclr.data.splits import validation_positions


def _tiny(smoke_params, smoke_data) -> dict:
    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(smoke_data)
    params["tuning"]["methods"] = {"simclr": {"tau": [0.2, 0.3]}, "isogclr": params["tuning"]["methods"]["isogclr"]}
    return params


def test_validation_split_is_stratified_disjoint_and_the_same_for_every_run():
    labels = np.repeat(np.arange(4), [40, 20, 5, 1])
    train, val = validation_positions(labels, 0.2)
    assert set(train).isdisjoint(val) and len(train) + len(val) == len(labels)
    assert [int((labels[val] == c).sum()) for c in range(4)] == [8, 4, 1, 0]  # a one-sample class stays in train
    again = validation_positions(labels, 0.2)
    assert np.array_equal(again[1], val)
    with pytest.raises(ValueError, match="fraction"):
        validation_positions(labels, 1.0)


def test_every_method_gets_the_same_number_of_candidates(smoke_params):
    params = copy.deepcopy(smoke_params)
    assert tuning_candidates(params, "simclr") == [{"tau": 0.2}, {"tau": 0.3}]
    params["tuning"]["methods"]["simclr"] = {"tau": [0.1, 0.2, 0.3]}  # a grid larger than the budget: sampled
    assert len(tuning_candidates(params, "simclr")) == 2
    assert tuning_candidates(params, "simclr") == tuning_candidates(params, "simclr")  # seeded
    params["tuning"]["methods"]["isogclr"] = [{"rho": 0.3}]
    with pytest.raises(ConfigError, match=r"tuning.methods.isogclr: 1 candidates.*same budget"):
        validate_params(params)
    params["tuning"]["methods"]["isogclr"] = [{"rho": 0.3}, {"rho": -1.0}]
    with pytest.raises(ConfigError, match=r"candidate 1"):
        validate_params(params)


def test_a_tuned_section_needs_every_method_tuned(smoke_params):
    params = copy.deepcopy(smoke_params)
    del params["tuning"]["methods"]["sogclr_official"]
    with pytest.raises(ConfigError, match=r"table1.tuned: \['sogclr_official'\]"):
        validate_params(params)


def test_tuning_runs_never_read_the_test_split(smoke_params, smoke_data, tmp_path, monkeypatch):
    from isogclr.train import loop

    params = _tiny(smoke_params, smoke_data)
    cfg = tuning_run_config(params, "simclr", 1, 0)
    assert cfg.validation_fraction == 0.2 and cfg.train.epochs == params["tuning"]["epochs"]
    assert cfg.method.kwargs["tau"] == 0.3 and cfg.run_id == "simclr/runs/c1-s0"
    real = loop.load_dataset

    def no_test(name, root, split):
        assert split != "test", "a tuning run read the test split"
        return real(name, root, split)

    monkeypatch.setattr(loop, "load_dataset", no_test)
    metrics = loop.train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert 0 <= metrics["top1"] <= 100


def test_tune_selects_the_best_candidate_and_tuned_runs_use_it(smoke_params, smoke_data, tmp_path, monkeypatch):
    from isogclr.train import tuning

    params = _tiny(smoke_params, smoke_data)
    scores = {0.2: 40.0, 0.3: 55.0}
    trained = []

    def fake_run(cfg, out, ckpt, **kwargs):  # the selection logic, not the training, is under test here
        trained.append(cfg.run_id)
        out.mkdir(parents=True)
        (out / "artifacts").mkdir()
        (out / "artifacts" / "config.json").write_text(json.dumps(cfg.to_dict()))
        metrics = {"top1": scores[cfg.method.kwargs["tau"]]}
        (out / "metrics.json").write_text(json.dumps(metrics))
        return metrics

    monkeypatch.setattr(tuning, "train_run", fake_run)
    selection = tuning.tune_method(params, "simclr", tmp_path / "tuning", tmp_path / "ckpt")
    assert selection["knobs"] == {"tau": 0.3} and selection["val_top1"] == 55.0 and selection["candidates"] == 2
    table = (tmp_path / "tuning" / "simclr" / "candidates.csv").read_text().splitlines()
    assert table[0] == "candidate,tau,seed,val_top1" and table[2] == "1,0.3,0,55.0"
    assert trained == ["simclr/runs/c0-s0", "simclr/runs/c1-s0"]
    tuning.tune_method(params, "simclr", tmp_path / "tuning", tmp_path / "ckpt")  # an interrupted stage resumes
    assert len(trained) == 2

    tuned = with_selection(params, "simclr", tmp_path / "tuning")
    assert run_config(tuned, "simclr", "synth10", 0).method.kwargs["tau"] == 0.3
    assert run_config(params, "simclr", "synth10", 0).method.kwargs["tau"] == params["methods"]["simclr"]["tau"]
    with pytest.raises(ConfigError, match=r"tuning/isogclr/selected.json: not found.*tune@isogclr"):
        with_selection(params, "isogclr", tmp_path / "tuning")


def test_a_tuned_study_refuses_to_run_untuned(smoke_params, tmp_path, capsys):
    import yaml

    from isogclr.cli import main

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(smoke_params))
    assert main(["train", "--study", "ladder_synth10_lt", "--method", "simclr", "--seed", "0",
                 "--params", str(path)]) == 2
    assert "studies.ladder_synth10_lt.tuned" in capsys.readouterr().err
