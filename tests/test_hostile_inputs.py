"""Hostile inputs are refused before any compute, each with the key or path it comes from: unknown keys at any
level (with the nearest known key), negative seeds and thread counts, names that would write outside the
output folders, text files that are not UTF-8 (params.yaml, a zero-shot classnames.txt) and a foreign file in
place of a checkpoint."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from isogclr.cli import main
from isogclr.config.core import run_config
from isogclr.config.keys import check_keys
from isogclr.config.profiles import load_params
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params
from isogclr.io import TextFileError, UnreadableFileError, load_torch, read_json, read_lines, read_text

from .conftest import ROOT


@pytest.fixture(scope="module")
def mini() -> dict:
    return load_params(ROOT / "profiles" / "mini.yaml")


def _changed(params: dict, change) -> dict:  # noqa: ANN001
    params = copy.deepcopy(params)
    change(params)
    return params


@pytest.mark.parametrize("profile", ["mini", "smoke", "paper"])
def test_the_committed_profiles_hold_known_keys_only(profile):
    check_keys(load_params(ROOT / "profiles" / f"{profile}.yaml"))


def test_params_yaml_holds_known_keys_only():
    check_keys(load_params(ROOT / "params.yaml"))


UNKNOWN = [
    (lambda p: p.update(trian={"epochs": 3}), "trian: unknown key (did you mean 'train'?)"),
    (lambda p: p["table1"].update(seedz=[1]), "table1.seedz: unknown key (did you mean 'table1.seeds'?)"),
    (lambda p: p["train"].update(num_thread=1), "train.num_thread: unknown key (did you mean 'train.num_threads'?)"),
    (lambda p: p["data"].update(synthetc={}), "data.synthetc: unknown key (did you mean 'data.synthetic'?)"),
    (lambda p: p["model"]["encoder"].update(widht=4), "did you mean 'model.encoder.width'?"),
    (lambda p: p["temperatures"].update(seeds=[0]), "temperatures.seeds: unknown key"),
    (lambda p: p["bimodal"]["text_encoder"].update(n_layer=1), "did you mean 'bimodal.text_encoder.n_layers'?"),
    (lambda p: p["methods"]["flatclr"].update(tua=0.2), "methods.flatclr.tua: unknown key (did you mean "
                                                        "'methods.flatclr.tau'?)"),
    (lambda p: p["methods"]["isogclr"]["search"][1].update(rhoo=0.1), "methods.isogclr.search[1].rhoo: unknown key"),
    (lambda p: p["studies"]["rho"].update(knob="methods.{method}.rhoo"),
     "studies.rho.knob: 'methods.isogclr.rhoo' is not a knob of its loss (did you mean 'methods.isogclr.rho'?)"),
    (lambda p: p["studies"]["rho"]["overrides"].update({"train.epochz": 3}),
     "studies.rho.overrides: train.epochz: unknown key (did you mean 'train.epochs'?)"),
    (lambda p: p["train"].update(by_dataset={"synth10": {"model.encoder.widht": 4}}),
     "train.by_dataset.synth10: model.encoder.widht: unknown key"),
    (lambda p: p["train"]["epochs_by_dataset"].update(synth1O=3),
     "train.epochs_by_dataset.synth1O: unknown dataset (did you mean 'synth10'?)"),
    (lambda p: p["emc2_convergence"].update(num_image=8), "did you mean 'emc2_convergence.num_images'?"),
]


@pytest.mark.parametrize(("change", "message"), UNKNOWN)
def test_an_unknown_key_at_any_level_is_refused_with_the_nearest_known_one(mini, change, message):
    with pytest.raises(ConfigError) as err:
        validate_params(_changed(mini, change))
    assert message in str(err.value)


def _write(tmp_path: Path, params: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.mark.parametrize("command", [["validate", "--skip-data"], ["synthetic"], ["synthetic-pairs"],
                                     ["train", "--method", "simclr", "--dataset", "synth10", "--seed", "0"]])
def test_every_command_refuses_an_unknown_key_before_it_writes(tmp_path, capsys, mini, command):
    path = _write(tmp_path, _changed(mini, lambda p: p.update(trian={"epochs": 3})))
    out = ["--out", str(tmp_path / "out")] if command[0] != "validate" else []
    assert main([*command, "--params", str(path), *out]) == 2
    assert "trian: unknown key (did you mean 'train'?)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("section", "message"), [
    ("train", "train: num_threads must be >= 0"),
    ("bimodal", "num_threads must be an integer >= 0"),
    ("emc2_convergence", "emc2_convergence.num_threads: must be an integer >= 0"),
])
def test_a_negative_thread_count_is_refused(mini, section, message):
    with pytest.raises(ConfigError) as err:
        validate_params(_changed(mini, lambda p: p[section].update(num_threads=-4)))
    assert message in str(err.value) and str(err.value).startswith(section)


@pytest.mark.parametrize(("change", "key"), [
    (lambda p: p["tuning"].update(seeds=[0, -1]), "tuning.seeds"),
    (lambda p: p["table1"].update(seeds=[-1]), "table1.seeds"),
    (lambda p: p["data"]["synthetic"].update(seed=-1), "data.synthetic.seed"),
    (lambda p: p["data"]["synthetic_pairs"].update(seed=-2), "data.synthetic_pairs.seed"),
    (lambda p: p["bimodal"].update(seeds=[-1]), "bimodal.seeds"),
])
def test_a_negative_seed_in_params_is_refused(mini, change, key):
    with pytest.raises(ConfigError, match=rf"^{key}: seeds are non-negative integers"):
        validate_params(_changed(mini, change))


@pytest.mark.parametrize("argv", [["train", "--method", "simclr", "--dataset", "synth10", "--seed", "-1"],
                                  ["train", "--method", "simclr", "--dataset", "synth10", "--seed", "0",
                                   "--export-seed", "-1"],
                                  ["train-bimodal", "--method", "clip", "--seed", "-1"]])
def test_a_negative_seed_on_the_command_line_is_refused(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", str(tmp_path / "runs")])
    assert exit_.value.code == 2
    assert "seed" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_a_run_config_refuses_a_negative_seed(mini):
    with pytest.raises(ConfigError, match="^seed: expected a non-negative integer, got -1"):
        run_config(mini, "simclr", "synth10", -1)


@pytest.mark.parametrize(("change", "key"), [
    (lambda p: p["methods"].update({"../../escape": {"loss": "simclr"}}), "methods.../../escape"),
    (lambda p: p["methods"].update({"a/b": {"loss": "simclr"}}), "methods.a/b"),
    (lambda p: p["studies"].update({"../x": p["studies"]["rho"]}), "studies.../x"),
    (lambda p: p["bimodal_studies"].update({".hidden": p["bimodal_studies"]["bimodal_epochs"]}),
     "bimodal_studies..hidden"),
    (lambda p: p["studies"]["tau"].update(values=[0.1, "../../x"]), "studies.tau.values"),
])
def test_a_name_that_would_leave_the_output_folder_is_refused(mini, change, key):
    with pytest.raises(ConfigError) as err:
        validate_params(_changed(mini, change))
    assert str(err.value).startswith(f"{key}:")


@pytest.mark.parametrize("option", ["--method", "--dataset", "--study"])
def test_a_name_that_would_leave_the_output_folder_is_refused_on_the_command_line(tmp_path, capsys, option):
    argv = {"--method": "simclr", "--dataset": "synth10", "--seed": "0"}
    argv[option] = "../../escape"
    with pytest.raises(SystemExit) as exit_:
        main(["train", *(x for kv in argv.items() for x in kv), "--out", str(tmp_path / "runs")])
    assert exit_.value.code == 2
    assert f"argument {option}: '../../escape' is not a plain name" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path.parent / "escape").exists()


def test_a_params_file_that_is_not_utf8_is_named_with_its_line(tmp_path, capsys):
    path = tmp_path / "params.yaml"
    path.write_bytes((ROOT / "params.yaml").read_bytes() + b"# caf\xe9\n")
    lines = (ROOT / "params.yaml").read_bytes().count(b"\n") + 1
    with pytest.raises(ConfigError, match=rf"^{path}:{lines}: not UTF-8 text \(byte 6 of the line"):
        load_params(path)
    assert main(["validate", "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:{lines}: not UTF-8" in err


def test_an_overlay_whose_base_is_not_utf8_names_the_base(tmp_path):
    (tmp_path / "mini.yaml").write_bytes(b"profile: mini\n# \xff\n")
    (tmp_path / "smoke.yaml").write_text("extends: mini\nprofile: smoke\n")
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'mini.yaml'}:2: not UTF-8"):
        load_params(tmp_path / "smoke.yaml")


def test_a_zeroshot_classnames_file_that_is_not_utf8_is_named(tmp_path):
    from isogclr.data.pairs_folder import load_zeroshot, stream_zeroshot

    folder = tmp_path / "zeroshot" / "synth10"
    folder.mkdir(parents=True)
    np.savez(folder / "images.npz", images=np.zeros((2, 8, 8, 3), np.uint8), labels=np.array([0, 1]))
    (folder / "templates.txt").write_text("a photo of a {}.\n")
    (folder / "classnames.txt").write_bytes(b"blob\nr\xe9ing\n")
    for load in (load_zeroshot, stream_zeroshot):
        with pytest.raises(TextFileError, match=rf"^{folder / 'classnames.txt'}:2: not UTF-8 text"):
            load(folder, 8)
    (folder / "classnames.txt").write_text("blob\nring\n")
    assert load_zeroshot(folder, 8).classnames == ["blob", "ring"]


def test_the_text_readers_name_the_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a": 1}\r\n')
    assert read_json(path) == {"a": 1} and read_text(path) == '{"a": 1}\n'
    path.write_text('{"a": 1,\n "b": }\n')
    with pytest.raises(TextFileError, match=rf"^{path}:2:7: invalid JSON"):
        read_json(path)
    path.write_bytes(b"ok\n\x80\n")
    for read in (read_text, read_json, read_lines):
        with pytest.raises(TextFileError, match=rf"^{path}:2: not UTF-8 text \(byte 1 of the line"):
            read(path)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(OSError, match=str(loop)):
        read_text(loop)


@pytest.mark.parametrize("foreign", [{"state_dict": {"w": torch.zeros(2)}}, torch.zeros(3), [1, 2]])
def test_a_foreign_file_as_checkpoint_is_named_with_the_missing_key(tmp_path, foreign):
    from isogclr.train.engine import CHECKPOINT_KEYS

    path = tmp_path / "checkpoint.pt"
    torch.save(foreign, path)
    with pytest.raises(UnreadableFileError) as err:
        load_torch(path, "checkpoint of run r", "move it aside", required=CHECKPOINT_KEYS)
    message = str(err.value)
    assert message.startswith(f"{path}: not a checkpoint of run r written by isogclr") and "'model'" in message
    assert message.endswith("move it aside")
