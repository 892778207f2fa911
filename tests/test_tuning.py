"""The selection stage: the same budget per method, scored on a validation split; tuned runs read it."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from isogclr.config.core import run_config
from isogclr.config.selection import with_selection
from isogclr.config.tuning import tuning_candidates, tuning_run_config
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params
from isogclr.data.splits import validation_positions


def _tiny(smoke_params, smoke_data) -> dict:
    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(smoke_data)
    params["tuning"]["methods"] = ["simclr", "isogclr"]
    params["methods"]["simclr"]["search"] = {"tau": [0.2, 0.3]}
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
    params["methods"]["simclr"]["search"] = {"tau": [0.1, 0.2, 0.3]}  # a grid larger than the budget: sampled
    assert len(tuning_candidates(params, "simclr")) == 2
    assert tuning_candidates(params, "simclr") == tuning_candidates(params, "simclr")  # seeded
    params["methods"]["isogclr"]["search"] = [{"rho": 0.3}]
    with pytest.raises(ConfigError, match=r"methods.isogclr.beta0: 'selected' marks a knob of methods.isogclr.search, "
                                          r"and beta0 is not one \(searched: \['rho'\]\); give it a value"):
        validate_params(params)  # a knob the search no longer sets needs its value: no silent default
    for knob in ("tau_init", "eta", "beta0", "beta1"):
        del params["methods"]["isogclr"][knob]
    with pytest.raises(ConfigError, match=r"methods.isogclr.search: 1 candidates.*same budget"):
        validate_params(params)
    params["methods"]["isogclr"]["search"] = [{"rho": 0.3}, {"rho": -1.0}]
    with pytest.raises(ConfigError, match=r"candidate 1"):
        validate_params(params)


def test_a_tuned_section_needs_every_method_tuned(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["tuning"]["methods"].remove("sogclr_official")
    params["methods"]["sogclr_official"] = {"loss": "sogclr", "tau": 0.3}
    with pytest.raises(ConfigError, match=r"table1.tuned: \['sogclr_official'\]"):
        validate_params(params)


def test_tuning_runs_never_read_the_test_split(smoke_params, smoke_data, tmp_path, monkeypatch):
    from isogclr.train import loop

    params = _tiny(smoke_params, smoke_data)
    params["tuning"] |= {"validation": "carved", "validation_fraction": 0.2}  # the mode this test reads
    cfg = tuning_run_config(params, "simclr", 1, 0)
    assert cfg.validation_fraction == 0.2 and cfg.train.epochs == params["tuning"]["epochs"]
    assert cfg.method.kwargs["tau"] == 0.3 and cfg.run_id == "simclr/runs/c1-s0"
    real = loop.load_dataset

    def no_test(name, root, split, *order):
        assert split != "test", "a tuning run read the test split"
        return real(name, root, split, *order)

    monkeypatch.setattr(loop, "load_dataset", no_test)
    metrics = loop.train_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert 0 <= metrics["top1"] <= 100


def test_a_selection_on_the_generated_validation_split_trains_on_the_whole_training_split(smoke_params, tmp_path,
                                                                                           monkeypatch):
    """tuning.validation: split: a candidate trains on the whole long-tailed training split, as a tuned run, and is
    scored on the set's generated validation split (balanced); the test split is never read; the selection records
    the setting, and a selection recorded otherwise is stale."""
    from isogclr.analysis.tuning import load_selected, selection_settings, validation_words
    from isogclr.config.datasets import synthetic_spec
    from isogclr.data import load_dataset
    from isogclr.data.synthetic import write_synthetic
    from isogclr.train import loop, tuning

    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(tmp_path / "data")
    params["data"]["synthetic"]["per_class"][10] = [40, 10, 12]
    write_synthetic(synthetic_spec(params), tmp_path / "data" / "synthetic")
    val = load_dataset("synth10_lt", tmp_path / "data", "val")
    assert len(val) == 120 and np.bincount(val.labels.numpy()).tolist() == [12] * 10  # balanced, as the test split
    params["tuning"] |= {"validation": "split", "methods": ["simclr"], "dataset": "synth10_lt"}
    with pytest.raises(ConfigError, match=r"^tuning: validation_fraction: nothing is held out"):
        validate_params(params)
    del params["tuning"]["validation_fraction"]
    params["methods"]["simclr"]["search"] = {"tau": [0.2, 0.3]}
    cfg = tuning_run_config(params, "simclr", 0, 0)
    assert cfg.validation_split and not cfg.validation_fraction and cfg.to_dict()["validation_split"] is True
    assert "validation_split" not in run_config(params, "simclr", "synth10_lt", 0).to_dict()
    read = []
    real = loop.load_dataset
    monkeypatch.setattr(loop, "load_dataset", lambda name, root, split, *order: read.append(split)
                        or real(name, root, split, *order))
    train, evaluated, _ = loop.load_splits(cfg)
    assert read == ["train", "val"] and len(train) == len(load_dataset("synth10_lt", tmp_path / "data", "train"))
    assert torch.equal(evaluated.images, val.images)

    def fake_run(cfg, out, ckpt, **kwargs):
        out.mkdir(parents=True)
        metrics = {"top1": 50.0 + cfg.method.kwargs["tau"]}
        (out / "metrics.json").write_text(json.dumps(metrics))
        return metrics

    selection = tuning.tune_method(params, "simclr", fake_run, tmp_path / "tuning", tmp_path / "ckpt")
    assert selection["validation"] == "split" and selection["validation_fraction"] == 0.0
    assert load_selected(params, "simclr", tmp_path / "tuning")["knobs"] == {"tau": 0.3}
    assert validation_words(selection_settings(params, tmp_path / "tuning")).startswith("on its whole training")
    carved = copy.deepcopy(params)
    carved["tuning"] |= {"validation": "carved", "validation_fraction": 0.2}
    with pytest.raises(ValueError, match="validation"):
        load_selected(carved, "simclr", tmp_path / "tuning")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda p: p["data"]["synthetic"]["per_class"].__setitem__(10, [40, 10]), r"a\s+third count"),
    (lambda p: p["tuning"].__setitem__("dataset", "fashion_mnist_mini_lt"), "no generated validation split"),
    (lambda p: p["tuning"].__setitem__("validation", "held_out"), "'carved' or 'split'"),
])
def test_a_selection_on_a_validation_split_the_set_does_not_generate_is_refused(smoke_params, edit, message):
    params = copy.deepcopy(smoke_params)
    params["data"]["synthetic"]["per_class"][10] = [40, 10, 12]
    params["tuning"] |= {"validation": "split"}
    del params["tuning"]["validation_fraction"]
    edit(params)
    with pytest.raises(ConfigError, match=r"^tuning(\.validation)?: .*" + message):
        validate_params(params)


def test_tune_selects_the_best_candidate_and_tuned_runs_use_it(smoke_params, smoke_data, tmp_path):
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

    selection = tuning.tune_method(params, "simclr", fake_run, tmp_path / "tuning", tmp_path / "ckpt")
    assert selection["knobs"] == {"tau": 0.3} and selection["val_top1"] == 55.0 and selection["candidates"] == 2
    table = (tmp_path / "tuning" / "simclr" / "candidates.csv").read_text().splitlines()
    assert table[0] == "candidate,tau,seed,val_top1" and table[2] == "1,0.3,0,55.0"
    assert trained == ["simclr/runs/c0-s0", "simclr/runs/c1-s0"]
    tuning.tune_method(params, "simclr", fake_run, tmp_path / "tuning", tmp_path / "ckpt")  # a stage resumes
    assert len(trained) == 2

    tuned = with_selection(params, run_config(params, "simclr", "synth10", 0), tmp_path / "tuning")
    assert tuned.method.kwargs["tau"] == 0.3
    assert run_config(params, "simclr", "synth10", 0).method.kwargs["tau"] == 0.3  # untuned: candidate 1
    with pytest.raises(ConfigError, match=r"tuning/isogclr/selected.json: not found.*tune@isogclr"):
        with_selection(params, run_config(params, "isogclr", "synth10", 0), tmp_path / "tuning")


def test_a_methods_learning_rate_is_a_knob_its_search_may_set(smoke_params, smoke_data, tmp_path):
    """methods.<m>.lr replaces train.optimizer.lr in that method's runs only, and a search over it (with a
    candidate that diverges, which loses instead of stopping the selection) hands the selected rate on."""
    from isogclr.losses.numerics import TrainingDiverged
    from isogclr.train import tuning

    params = _tiny(smoke_params, smoke_data)
    shared = params["train"]["optimizer"]["lr"]
    params["methods"]["simclr"]["search"] = [{"tau": 0.2, "lr": 9.0}, {"tau": 0.2, "lr": 0.5}]
    params["methods"]["simclr"]["untuned"] = 1
    cfg = run_config(params, "simclr", "synth10", 0)
    assert cfg.optimizer.lr == 0.5 and "lr" not in cfg.method.kwargs and cfg.method.lr == 0.5
    assert cfg.to_dict()["optimizer"]["lr"] == 0.5 and cfg.to_dict()["method"]["lr"] == 0.5
    other = run_config(params, "isogclr", "synth10", 0)
    assert other.optimizer.lr == shared and "lr" not in other.to_dict()["method"]  # the others keep the shared rate
    assert tuning_run_config(params, "simclr", 0, 0).optimizer.lr == 9.0

    def fake_run(cfg, out, ckpt, **kwargs):
        if cfg.optimizer.lr == 9.0:
            raise TrainingDiverged(f"{cfg.run_id}: non-finite loss")
        out.mkdir(parents=True)
        (out / "artifacts").mkdir()
        (out / "artifacts" / "config.json").write_text(json.dumps(cfg.to_dict()))
        (out / "metrics.json").write_text(json.dumps({"top1": 30.0}))
        return {"top1": 30.0}

    selection = tuning.tune_method(params, "simclr", fake_run, tmp_path / "tuning", tmp_path / "ckpt")
    assert selection["knobs"] == {"tau": 0.2, "lr": 0.5}
    assert (tmp_path / "tuning" / "simclr" / "candidates.csv").read_text().splitlines()[1] == "0,0.2,9.0,0,nan"
    tuned = with_selection(params, run_config(params, "simclr", "synth10_lt", 3), tmp_path / "tuning")
    assert tuned.optimizer.lr == 0.5

    def diverges(cfg, out, ckpt, **kwargs):
        raise TrainingDiverged("non-finite loss")

    with pytest.raises(TrainingDiverged, match="every candidate diverged"):
        tuning.tune_method(params, "simclr", diverges, tmp_path / "again", tmp_path / "ckpt")
    for bad in (0.0, -1.0, "fast"):
        params["methods"]["simclr"]["search"] = [{"tau": 0.2, "lr": bad}, {"tau": 0.2, "lr": 0.5}]
        with pytest.raises(ConfigError, match=r"methods.simclr.lr"):
            validate_params(params)


def test_a_tuned_study_refuses_to_run_untuned(smoke_params, tmp_path, capsys):
    import yaml

    from isogclr.cli import main

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(smoke_params))
    assert main(["train", "--study", "ladder_synth10_lt", "--method", "simclr", "--seed", "0",
                 "--params", str(path)]) == 2
    assert "studies.ladder_synth10_lt.tuned" in capsys.readouterr().err


# --- the image-text selection (bimodal_tuning) -------------------------------------------------------------


@pytest.fixture(scope="module")
def pair_params(tmp_path_factory, smoke_params) -> dict:
    from isogclr.data.pair_semantics import PairSpec
    from isogclr.data.synthetic_pairs import write_synthetic_pairs

    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(PairSpec(seed=3, image_size=16, num_pairs=120, num_clusters=6, retrieval_images=12,
                                   zeroshot_per_class=2), root)
    params = copy.deepcopy(smoke_params)
    params["bimodal"].update(data=str(root), batch_size=16, device="cpu")
    params["bimodal"]["image_encoder"].pop("init", None)  # from scratch: no pretrain run in these tests
    return params


def test_holdout_pairs_hold_out_whole_images_stratified_by_cluster(pair_params):
    from isogclr.data.pairs_folder import load_pairs_folder
    from isogclr.data.splits import holdout_pairs

    data = load_pairs_folder(pair_params["bimodal"]["data"], 16)
    held = holdout_pairs(data, 0.25)
    val, train = held.retrieval["validation"], held.train
    assert list(held.retrieval) == ["validation"] and held.zeroshot == {}  # the test sets are gone
    assert set(val.image_ids).isdisjoint(train.image_ids)
    assert len(val.captions) + len(train.captions) == len(data.train.captions)
    assert 0.15 < len(val.image_ids) / len(data.train.image_ids) < 0.35
    # each caption still points at its own image, and the meta follows the training images
    def pairs(part):
        return sorted(zip(part.captions, (part.image_ids[i] for i in part.image_index.tolist()), strict=True))

    assert sorted(pairs(val) + pairs(train)) == pairs(data.train)
    assert [m["image"] for m in held.train_meta] == train.image_ids
    clusters = {m["cluster"] for m in data.train_meta}
    held_clusters = {data.train_meta[data.train.image_ids.index(i)]["cluster"] for i in val.image_ids}
    assert held_clusters <= clusters and len(held_clusters) >= 3


def test_bimodal_selection_trains_on_held_out_pairs_and_never_reads_a_test_set(pair_params, tmp_path, monkeypatch):
    from isogclr.data import pairs_folder
    from isogclr.train import bimodal, tuning

    params = copy.deepcopy(pair_params)
    cfg = tuning_run_config(params, "clip", 1, 0)
    assert cfg.validation_fraction == 0.2 and cfg.train.epochs == params["bimodal_tuning"]["epochs"]
    assert cfg.method.kwargs["tau"] == 0.05 and cfg.run_id == "clip/runs/c1-s0"

    def no_test_set(*args, **kwargs):
        raise AssertionError("a selection run read a test set")

    monkeypatch.setattr(pairs_folder, "load_karpathy", no_test_set)
    monkeypatch.setattr(pairs_folder, "load_zeroshot", no_test_set)
    selection = tuning.tune_method(params, "clip", bimodal.train_bimodal_run, tmp_path / "tuning", tmp_path / "ckpt")
    rows = (tmp_path / "tuning" / "clip" / "candidates.csv").read_text().splitlines()
    assert rows[0] == "candidate,tau,seed,val_recall" and len(rows) == 3
    best = max(rows[1:], key=lambda r: float(r.split(",")[-1]))
    assert selection["knobs"] == {"tau": float(best.split(",")[1])} and "dataset" not in selection
    assert 0 <= selection["val_recall"] <= 100
    metrics = json.loads((tmp_path / "tuning" / "clip" / "runs" / "c0-s0" / "metrics.json").read_text())
    assert sorted({k.rsplit("_", 2)[0] for k in metrics}) == ["validation"]


def test_bimodal_runs_and_the_selection_sections_are_validated(smoke_params):
    from isogclr.config.bimodal import bimodal_runs

    params = copy.deepcopy(smoke_params)
    assert bimodal_runs(params) == {"clip": (0,), "sogclr_bimodal": (0,), "isogclr_bimodal": (0,), "cyclip": (0,),
                                    "clip_individual_tau": (0,), "clip_large_tau": (0,)}
    params["bimodal"].update(seeds=[0, 1, 2], side_seeds=[1])
    assert bimodal_runs(params)["clip"] == (0, 1, 2) and bimodal_runs(params)["cyclip"] == (1,)
    bad = copy.deepcopy(params)
    bad["bimodal"]["methods"].append("cyclip")  # untuned, in a tuned section, and also a side method
    with pytest.raises(ConfigError, match=r"bimodal.side_methods: \['cyclip'\] also in bimodal.methods"):
        validate_params(bad)
    bad["bimodal"]["side_methods"].remove("cyclip")
    with pytest.raises(ConfigError, match=r"bimodal.tuned: \['cyclip'\] have no search space under bimodal_tuning"):
        validate_params(bad)
    both = copy.deepcopy(params)
    both["tuning"]["methods"].append("clip")
    with pytest.raises(ConfigError, match=r"bimodal_tuning.methods: \['clip'\] also under tuning.methods"):
        validate_params(both)
    own_rate = copy.deepcopy(params)
    own_rate["methods"]["cyclip"]["lr"] = 1e-3
    with pytest.raises(ConfigError, match=r"methods.cyclip.lr: an image-text method's rate is bimodal.lr"):
        validate_params(own_rate)
    no_data = copy.deepcopy(params)
    no_data["bimodal_tuning"]["dataset"] = "synth10"
    with pytest.raises(ConfigError, match=r"bimodal_tuning.dataset: not allowed"):
        validate_params(no_data)
