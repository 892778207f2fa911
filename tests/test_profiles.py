"""Profiles as overlays of the mini profile, and tuned knobs written once (methods.<m>.search)."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import yaml

from isogclr.cli import main
from isogclr.config.core import run_config, search_points
from isogclr.config.profiles import (
    _OverlayLoader,
    check_profiles,
    differences,
    load_params,
    merge_profile,
    overlay_keys,
)
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params

from .conftest import ROOT


@pytest.mark.parametrize("name", ["smoke", "paper"])
def test_an_overlay_merges_to_a_full_profile_that_validates(name):
    params = load_params(ROOT / "profiles" / f"{name}.yaml")
    assert "extends" not in params and params["profile"] == name
    validate_params(params)


def test_profile_check_checks_every_profile_by_rule(tmp_path, capsys):
    """`python -m isogclr profile --check`: every profile merges and validates, an overlay changes only what it
    names, and params.yaml is compared with the mini profile (no stored copy of the merged profiles)."""
    assert main(["profile", "--check", "--profiles", str(ROOT / "profiles"), "--out", str(ROOT / "params.yaml")]) == 0
    out = capsys.readouterr().out
    assert "profiles/smoke.yaml: overlay of mini.yaml, valid" in out and "params.yaml: the mini profile" in out
    assert "paper_settings" not in out  # not a profile
    folder = tmp_path / "profiles"
    folder.mkdir()
    shutil.copy(ROOT / "profiles" / "mini.yaml", folder / "mini.yaml")
    (folder / "tiny.yaml").write_text("extends: mini\nprofile: tiny\ntrain: {epochs: 0}\n")
    with pytest.raises(ConfigError, match=r"tiny.yaml: .*epochs"):
        check_profiles(folder, validate_params)
    (folder / "tiny.yaml").write_text("extends: mini\nprofile: tiny\ntrian: {epochs: 2}\n")
    with pytest.raises(ConfigError, match=r"tiny.yaml: .*trian: unknown key \(did you mean 'train'\?\)"):
        check_profiles(folder, validate_params)
    (folder / "tiny.yaml").write_text("extends: mini\nprofile: tiny\ntrain: {epochs: 2}\n")
    assert check_profiles(folder, validate_params)[-1].endswith("tiny.yaml: overlay of mini.yaml, valid, 2 keys "
                                                                "differ from it")  # profile and train.epochs
    edited = tmp_path / "params.yaml"  # an ablation in progress: params.yaml is not the mini profile
    params = load_params(folder / "mini.yaml")
    params["methods"]["isogclr"]["tau_min"] = 0.02
    edited.write_text(yaml.safe_dump(params))
    assert main(["profile", "--check", "--profiles", str(folder), "--out", str(edited)]) == 0
    assert f"{edited}: the mini profile but 1 keys: methods.isogclr.tau_min" in capsys.readouterr().out


def test_differences_and_overlay_keys():
    assert differences({"a": {"x": 1, "y": 2}, "c": 3}, {"a": {"x": 1, "y": 3}, "b": 1}) == ["a.y", "b", "c"]
    overlay = yaml.load("a:\n  y: 3\n  z: !replace {j: 2}\nb: !delete\n", Loader=_OverlayLoader)
    assert overlay_keys(overlay) == {"a", "a.y", "a.z", "b"}  # a replaced mapping is one key


def test_merge_rules():
    base = {"a": {"x": 1, "y": [1, 2], "z": {"k": 1}}, "b": 2}
    overlay = yaml.load("a:\n  y: [3]\n  z: !replace {j: 2}\n  x: !delete\nc: 3\n", Loader=_OverlayLoader)
    assert merge_profile(base, overlay) == {"a": {"y": [3], "z": {"j": 2}}, "b": 2, "c": 3}  # lists replace
    assert base == {"a": {"x": 1, "y": [1, 2], "z": {"k": 1}}, "b": 2}  # not modified
    with pytest.raises(ConfigError, match=r"^a\.nope: !delete"):
        merge_profile(base, yaml.load("a:\n  nope: !delete\n", Loader=_OverlayLoader))


def test_a_new_method_is_one_block_in_the_mini_profile(tmp_path):
    for name in ("mini", "smoke", "paper"):
        (tmp_path / f"{name}.yaml").write_text((ROOT / "profiles" / f"{name}.yaml").read_text())
    mini = (tmp_path / "mini.yaml").read_text()
    (tmp_path / "mini.yaml").write_text(mini.replace("\nmodel:\n", "\n  simclr_cold:\n    loss: simclr\n    tau: 0.05\n"
                                                     "model:\n", 1))
    for name in ("mini", "smoke", "paper"):
        params = load_params(tmp_path / f"{name}.yaml")
        assert params["methods"]["simclr_cold"] == {"loss": "simclr", "tau": 0.05}
        params["table3"]["methods"].append("simclr_cold")
        validate_params(params)


def test_profile_command_writes_the_full_params(tmp_path, capsys):
    out = tmp_path / "params.yaml"
    assert main(["profile", "smoke", "--profiles", str(ROOT / "profiles"), "--out", str(out)]) == 0
    text = out.read_text()
    assert yaml.safe_load(text) == load_params(ROOT / "profiles" / "smoke.yaml")
    assert "extends" not in text and "!delete" not in text
    assert main(["profile", "mini", "--profiles", str(ROOT / "profiles"), "--out", str(out)]) == 0
    mini = (ROOT / "profiles" / "mini.yaml").read_text()
    assert out.read_text().endswith(mini) and out.read_text() != mini  # comments kept, under a header
    assert out.read_text().startswith("# Written by `python -m isogclr profile mini` from profiles/mini.yaml")
    assert (ROOT / "params.yaml").read_text() == out.read_text()  # the committed params.yaml is written, not kept


def test_a_knob_set_beside_its_search_space_is_refused(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["methods"]["isogclr"]["rho"] = 0.4  # what `dvc exp run -S methods.isogclr.rho=0.4` does
    with pytest.raises(ConfigError, match=r"^methods.isogclr.rho: 0.4, but it is a knob of methods.isogclr.search.*"
                                          r"pin it.*or change the candidates"):
        validate_params(params)
    params = copy.deepcopy(smoke_params)
    params["methods"]["isogclr"]["untuned"] = 2
    with pytest.raises(ConfigError, match=r"^methods.isogclr.untuned: the index of a candidate .* got 2"):
        validate_params(params)
    params = copy.deepcopy(smoke_params)
    params["methods"]["isogclr"]["search"][1].pop("beta0")
    with pytest.raises(ConfigError, match=r"methods.isogclr.search: candidate 1 sets .* the same knobs"):
        validate_params(params)
    params = copy.deepcopy(smoke_params)
    params["methods"]["cyclip"]["search"] = params["methods"]["cyclip"].pop("tau") and {"tau": [0.02, 0.03]}
    with pytest.raises(ConfigError, match=r"^methods.cyclip.search: cyclip is in neither tuning.methods"):
        validate_params(params)


def _set(params_file, key: str, value: str) -> None:
    """What `dvc exp run -S key=value` does to params.yaml before it reruns the stages (DVC's own function)."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(str(params_file), [f"{key}={value}"])


def test_dvc_set_param_keeps_params_yaml_readable_and_refuses_a_searched_knob(tmp_path):
    params_file = tmp_path / "params.yaml"
    params_file.write_text((ROOT / "params.yaml").read_text())
    _set(params_file, "methods.isogclr.tau_min", "0.02")  # DVC rewrites the file: no YAML alias may break it
    assert load_params(params_file)["methods"]["isogclr"]["tau_min"] == 0.02
    assert load_params(params_file)["methods"]["isogclr"]["rho"] == "selected"  # a searched knob, marked
    validate_params(load_params(params_file))
    _set(params_file, "methods.isogclr.rho", "0.4")  # DVC finds the key: our message, before any compute
    with pytest.raises(ConfigError, match=r"^methods.isogclr.rho: 0.4, but it is a knob of methods.isogclr.search.*"
                                          r"methods.isogclr.pin: \{rho: 0.4\}"):
        validate_params(load_params(params_file))


@pytest.mark.parametrize(("key", "value", "method", "knob", "expected"), [
    ("methods.isogclr.tau_min", "0.02", "isogclr", "tau_min", 0.02),  # the header's ablation
    ("methods.simclr.search.tau", "[0.1,0.5]", "simclr", "tau", 0.5),  # a searched knob: its candidates
])
def test_dvc_exp_run_set_changes_the_runs_it_names(tmp_path, smoke_params, key, value, method, knob, expected):
    """The examples of params.yaml's header on the smoke profile: the resolved config (artifacts/config.json is
    this dict) of an untuned study run and of a tuning candidate show the new value."""
    params_file = tmp_path / "params.yaml"
    main(["profile", "smoke", "--profiles", str(ROOT / "profiles"), "--out", str(params_file)])
    _set(params_file, key, value)
    params = load_params(params_file)
    validate_params(params)
    from isogclr.config.studies import study_run_config
    from isogclr.config.tuning import tuning_run_config

    study = "rho" if method == "isogclr" else "tau"
    untuned = study_run_config(params, study, method, params["studies"][study]["values"][0], 0).to_dict()
    candidate = tuning_run_config(params, method, 1, 0).to_dict()
    assert candidate["method"]["kwargs"][knob] == expected
    if knob == "tau_min":
        assert untuned["method"]["kwargs"][knob] == expected
    selected = tmp_path / "tuning" / method / "selected.json"  # a tuned run (Table 1) at the selected candidate
    selected.parent.mkdir(parents=True)
    searched = search_points(params["methods"][method]["search"], key)[0]
    selected.write_text(json.dumps({"knobs": {k: candidate["method"]["kwargs"][k] for k in searched}}))
    from isogclr.config.selection import with_selection

    tuned = with_selection(params, run_config(params, method, "synth10", 0), tmp_path / "tuning")
    assert tuned.method.kwargs[knob] == expected

