"""params.yaml validation: bad values fail before any compute, naming the key."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import yaml

from isogclr.config.core import run_config
from isogclr.config.profiles import load_params
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params

from .conftest import ROOT


@pytest.mark.parametrize("profile", ["mini", "smoke"])
def test_profiles_are_valid(profile):
    validate_params(load_params(ROOT / "profiles" / f"{profile}.yaml"))


def test_params_yaml_is_the_mini_profile():
    assert load_params(ROOT / "params.yaml") == load_params(ROOT / "profiles" / "mini.yaml")


@pytest.mark.parametrize(("edit", "key"), [
    (lambda p: p["table1"]["methods"].append("nope"), "table1.methods"),
    (lambda p: p["table1"]["datasets"].append("cifar1000"), "table1.datasets"),
    (lambda p: p["methods"]["isogclr"].update(tau_min=0.9, tau_max=0.1), "methods.isogclr"),
    (lambda p: p["methods"]["isogclr"].update(rho=-0.1), "methods.isogclr"),
    (lambda p: p["methods"]["sogclr"].update(gamma=1.5), "methods.sogclr"),
    (lambda p: p["methods"]["simclr"].update(loss="simclrr"), "methods.simclr.loss"),
    (lambda p: p["methods"]["simclr"].update(temperature=0.1), "methods.simclr"),
    (lambda p: p["train"].update(batchsize=3), "train.batchsize"),
    (lambda p: p["train"]["optimizer"].update(name="adam"), "train.optimizer"),
    (lambda p: p["model"]["encoder"].update(arch="vit"), "model.encoder"),
    (lambda p: p["probe"].update(report="best_epoch"), "probe"),
    (lambda p: p["data"]["synthetic"].update(image_size=4), "data.synthetic"),
    (lambda p: p["data"]["fashion_mnist_mini"].update(per_class=[10, 5000]), "data.fashion_mnist_mini"),
    (lambda p: p["table1_real"]["datasets"].append("fashion_mnist_mini_x"), "table1_real.datasets"),
    (lambda p: p["table1"].update(seeds=[-1]), "table1.seeds"),
    (lambda p: p["temperatures"].update(methods=["simclr_x"]), "temperatures.methods"),
    (lambda p: p["data"].update(long_tailed_order="random"), "data.long_tailed_order"),
    (lambda p: p["tuning"].update(epochs=0), "tuning"),
])
def test_invalid_values_name_their_key(smoke_params, edit, key):
    params = copy.deepcopy(smoke_params)
    edit(params)
    with pytest.raises(ConfigError) as err:
        validate_params(params)
    assert str(err.value).startswith(key), str(err.value)


def test_run_config_resolves(smoke_params):
    cfg = run_config(smoke_params, "isogclr", "synth10", 3)
    assert cfg.run_id == "isogclr-synth10-s3"
    assert cfg.method.loss == "isogclr"
    assert cfg.method.kwargs["rho"] == smoke_params["methods"]["isogclr"]["search"][0]["rho"]  # untuned: 0
    assert cfg.to_dict()["encoder"]["width"] == smoke_params["model"]["encoder"]["width"]


def test_the_long_tailed_class_order_is_in_the_config_of_a_long_tailed_run_only(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["data"]["long_tailed_order"] = "fixed"  # whatever the profile's
    fixed = run_config(params, "simclr", "synth10_lt", 3)
    assert fixed.order_seed is None and "long_tailed_order" not in fixed.to_dict()  # the same file as before
    params["data"]["long_tailed_order"] = "by_seed"
    lt, balanced = run_config(params, "simclr", "synth10_lt", 3), run_config(params, "simclr", "synth10", 3)
    assert lt.order_seed == 3 and lt.to_dict()["long_tailed_order"] == "by_seed"
    assert "long_tailed_order" not in balanced.to_dict()  # a balanced set has no class order


def test_cli_fails_before_training_on_bad_params(tmp_path, smoke_params):
    params = copy.deepcopy(smoke_params)
    params["methods"]["isogclr"]["rho"] = -1.0
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    result = subprocess.run([sys.executable, "-m", "isogclr", "train", "--params", str(path), "--method", "isogclr",
                             "--dataset", "synth10", "--seed", "0", "--out", str(tmp_path / "runs")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "methods.isogclr" in result.stderr and "rho" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_cli_help():
    result = subprocess.run([sys.executable, "-m", "isogclr", "--help"], capture_output=True, text=True, check=True)
    for command in ("validate", "synthetic", "train", "notebooks"):
        assert command in result.stdout


def test_epochs_by_dataset_overrides_epochs(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["train"]["epochs_by_dataset"] = {"synth10_lt": 7}
    assert run_config(params, "simclr", "synth10_lt", 0).train.epochs == 7
    assert run_config(params, "simclr", "synth10", 0).train.epochs == params["train"]["epochs"]
    params["train"]["epochs_by_dataset"] = {"synth10_lt": 0}
    with pytest.raises(ConfigError, match="^train: epochs_by_dataset.synth10_lt"):
        validate_params(params)


def test_study_run_config_sets_the_knob_and_overrides(smoke_params):
    from isogclr.config.studies import study_run_config

    params = copy.deepcopy(smoke_params)
    params["train"]["epochs_by_dataset"] = {"synth10_lt": 9}
    params["studies"]["rho"].update(values=[0.1, 0.4], overrides={"train.epochs": 3})
    cfg = study_run_config(params, "rho", "isogclr", 0.4, 0)
    assert cfg.run_id == "rho/isogclr-0.4-s0"
    assert cfg.method.kwargs["rho"] == 0.4 and cfg.dataset == params["studies"]["rho"]["dataset"]
    assert cfg.train.epochs == 3  # the study's train.epochs replaces epochs_by_dataset
    assert params["methods"]["isogclr"]["rho"] == "selected"  # params are not modified (rho is searched)
    batch = study_run_config(params, "batch_size", "sogclr", 32, 0)
    assert batch.train.batch_size == 32 and batch.run_id == "batch_size/sogclr-32-s0"


@pytest.mark.parametrize(("study", "method", "knob"), [("rho", "isogclr", "rho"), ("gamma", "sogclr", "gamma")])
def test_a_study_of_a_state_knob_at_one_epoch_is_refused(smoke_params, study, method, knob):
    """At one epoch every visit is a first visit, which is the same at every value of a state knob (the mini
    profile's rho and gamma studies once gave 17.73 and 15.99 at every value): a study whose overrides set one
    epoch is refused before any run."""
    from isogclr.config.studies import study_run_config

    params = copy.deepcopy(smoke_params)
    params["studies"][study]["overrides"] = {"train.epochs": 1}
    with pytest.raises(ConfigError, match=rf"^studies.{study}.knob: {knob} of {method} .* 1 epoch"):
        validate_params(params)
    params["studies"][study]["overrides"] = {"train.epochs": 2}
    assert study_run_config(params, study, method, params["studies"][study]["values"][0], 0).train.epochs == 2
    params["studies"]["tau"]["overrides"] = {"train.epochs": 1}  # tau acts on a first visit: allowed
    study_run_config(params, "tau", "sogclr", params["studies"]["tau"]["values"][0], 0)
    params["studies"][study]["overrides"] = None  # one epoch from the profile (a quick run's): its author's choice
    params["train"].update(epochs=1, epochs_by_dataset={})
    assert study_run_config(params, study, method, params["studies"][study]["values"][0], 0).train.epochs == 1


@pytest.mark.parametrize(("edit", "key"), [
    (lambda p: p["studies"]["rho"].update(methods=["nope"]), "studies.rho"),
    (lambda p: p["studies"]["rho"].update(dataset="cifar1000"), "studies.rho"),
    (lambda p: p["studies"]["rho"].update(knob="methods.{method}.rh0"), "studies.rho"),
    (lambda p: p["studies"]["rho"].update(values=[-0.5]), "studies.rho"),
    (lambda p: p["studies"]["batch_size"].update(knob="trian.batch_size"), "studies.batch_size.knob"),
    (lambda p: p["studies"]["batch_size"].update(overrides={"train.epoch": 3}), "studies.batch_size"),
    (lambda p: p["studies"]["tau"].update(seeds=[]), "studies.tau"),
    (lambda p: p["bimodal_studies"]["bimodal_epochs"].update(methods=["simclr"]), "bimodal_studies.bimodal_epochs"),
    (lambda p: p["bimodal_studies"]["bimodal_epochs"].update(methods=["nope"]), "bimodal_studies.bimodal_epochs"),
    (lambda p: p["bimodal_studies"]["bimodal_epochs"].update(knob="bimodal.epoch"), "bimodal_studies.bimodal_epochs"),
    (lambda p: p["bimodal_studies"]["bimodal_epochs"].update(values=[0]), "bimodal_studies.bimodal_epochs"),
    (lambda p: p["bimodal_studies"]["bimodal_epochs"].update(dataset="synth10"), "bimodal_studies.bimodal_epochs"),
    (lambda p: p["bimodal_studies"].update(rho=p["bimodal_studies"]["bimodal_epochs"]), "bimodal_studies: ['rho']"),
])
def test_invalid_studies_name_their_key(smoke_params, edit, key):
    params = copy.deepcopy(smoke_params)
    edit(params)
    with pytest.raises(ConfigError) as err:
        validate_params(params)
    assert str(err.value).startswith(key), str(err.value)


def test_cli_study_value_must_be_in_the_study(tmp_path, smoke_params):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(smoke_params))
    result = subprocess.run([sys.executable, "-m", "isogclr", "train", "--params", str(path), "--study", "rho",
                             "--method", "isogclr", "--value", "0.77", "--seed", "0"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "studies.rho.values: 0.77" in result.stderr
    assert not (tmp_path / "studies").exists()


def test_bimodal_study_run_config_sets_the_knob(smoke_params):
    from isogclr.config.bimodal import bimodal_study_run_config

    params = copy.deepcopy(smoke_params)
    params["bimodal_studies"]["bimodal_epochs"].update(values=[1, 4], overrides={"bimodal.batch_size": 16})
    cfg = bimodal_study_run_config(params, "bimodal_epochs", "sogclr_bimodal", 4, 0)
    assert cfg.run_id == "bimodal_epochs/sogclr_bimodal-4-s0"
    assert cfg.train.epochs == 4 and cfg.train.batch_size == 16
    assert cfg.train.lr == params["bimodal"]["lr"] and params["bimodal"]["epochs"] != 4  # params are not modified


def test_cli_bimodal_study_needs_a_value(tmp_path, smoke_params):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(smoke_params))
    result = subprocess.run([sys.executable, "-m", "isogclr", "train-bimodal", "--params", str(path), "--study",
                             "bimodal_epochs", "--method", "clip", "--seed", "0"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "give both --study and --value" in result.stderr
    assert not (tmp_path / "studies").exists()


# ------------------------------------------------------- the typed report sections (what the notebooks read)


def test_table_spec_reads_a_table_section(smoke_params):
    from isogclr.config.sections import TableSpec, table_spec

    spec = table_spec(copy.deepcopy(smoke_params), "table1")
    raw = smoke_params["table1"]
    assert isinstance(spec, TableSpec)
    assert spec.methods == tuple(raw["methods"]) and spec.datasets == tuple(raw["datasets"])
    assert spec.seeds == tuple(raw["seeds"]) and spec.tuned is True
    assert spec.paper_rows == {"sogclr_official": "sogclr"}
    assert spec.paper_row("sogclr_official") == "sogclr" and spec.paper_row("isogclr") == "isogclr"
    extra = table_spec(smoke_params, "table3")
    assert extra.paper_rows == {} and extra.tuned is False  # the defaults of absent keys
    params = copy.deepcopy(smoke_params)
    del params["table1_real"]
    assert table_spec(params, "table1_real") is None


@pytest.mark.parametrize(("section", "edit", "key"), [
    ("table1", lambda t: t.update(seeds=[0, -1]), "table1.seeds"),
    ("table1", lambda t: t.update(seeds=[True]), "table1.seeds"),
    ("table1", lambda t: t.update(seeds=[]), "table1.seeds"),
    ("table1", lambda t: t.update(methods="simclr"), "table1.methods"),
    ("table1", lambda t: t["methods"].append("nope"), "table1.methods"),
    ("table1_real", lambda t: t["datasets"].append("cifar1000"), "table1_real.datasets"),
    ("table1", lambda t: t.update(paper_rows={"nope": "simclr"}), "table1.paper_rows"),
    ("table1", lambda t: t.update(paper_rows=["simclr"]), "table1.paper_rows"),
    ("table3", lambda t: t.update(tuned="yes"), "table3.tuned"),
    ("table3", lambda t: t.update(seed=[0]), "table3.seed"),  # a misspelt key is not silently ignored
])
def test_table_spec_names_the_bad_key(smoke_params, section, edit, key):
    from isogclr.config.sections import table_spec

    params = copy.deepcopy(smoke_params)
    edit(params[section])
    with pytest.raises(ConfigError) as err:
        table_spec(params, section)
    assert str(err.value).startswith(key), str(err.value)


def test_table_spec_only_reads_table_sections(smoke_params):
    from isogclr.config.sections import table_spec

    with pytest.raises(ConfigError, match="^temperatures: not a table section"):
        table_spec(smoke_params, "temperatures")


def test_temperature_spec_reuses_table1_seeds(smoke_params):
    from isogclr.config.sections import TemperatureSpec, temperature_spec

    params = copy.deepcopy(smoke_params)
    params["table1"]["seeds"] = [3, 1]
    spec = temperature_spec(params)
    assert spec == TemperatureSpec(methods=tuple(params["temperatures"]["methods"]),
                                   datasets=tuple(params["temperatures"]["datasets"]), seeds=(3, 1))
    del params["temperatures"]
    assert temperature_spec(params) is None


@pytest.mark.parametrize(("edit", "key"), [
    (lambda p: p["temperatures"].update(methods=["simclr_x"]), "temperatures.methods"),
    (lambda p: p["temperatures"].update(datasets=["synth100"]), "temperatures.datasets"),  # not a table1 dataset
    (lambda p: p["temperatures"].update(datasets=[]), "temperatures.datasets"),
    (lambda p: p["temperatures"].update(seeds=[0]), "temperatures.seeds"),  # its seeds are table1's
    (lambda p: p.pop("table1"), "temperatures"),
    (lambda p: p["table1"].update(seeds="0"), "table1.seeds"),
])
def test_temperature_spec_names_the_bad_key(smoke_params, edit, key):
    from isogclr.config.sections import temperature_spec

    params = copy.deepcopy(smoke_params)
    edit(params)
    with pytest.raises(ConfigError) as err:
        temperature_spec(params)
    assert str(err.value).startswith(key), str(err.value)


def test_method_settings_are_the_runs_kwargs(smoke_params):
    from isogclr.config.sections import method_settings

    params = copy.deepcopy(smoke_params)
    settings = method_settings(params, "isogclr")
    block = params["methods"]["isogclr"]  # a tuned method: its untuned runs take candidate `untuned` (0)
    expected = {**{k: v for k, v in block.items() if k not in ("loss", "search")}, **block["search"][0]}
    assert settings == expected == run_config(params, "isogclr", "synth10", 0).method.kwargs
    settings["rho"] = 123.0  # a copy: the params are not modified
    assert method_settings(params, "isogclr")["rho"] == block["search"][0]["rho"] != 123.0
    params["methods"]["isogclr"]["tau_min"] = -0.1
    with pytest.raises(ConfigError, match="^methods.isogclr"):
        method_settings(params, "isogclr")
    with pytest.raises(ConfigError, match="^methods.nope: not defined"):
        method_settings(params, "nope")


def test_profile_name(smoke_params):
    from isogclr.config.sections import profile_name

    assert profile_name(smoke_params) == "smoke"
    assert profile_name({}) == "?"  # as the reports' captions have always shown a profile without a name
    with pytest.raises(ConfigError, match="^profile"):
        profile_name({"profile": 3})


@pytest.mark.parametrize("profile", ["mini", "smoke", "paper"])
def test_every_profile_reads_as_typed_report_sections(profile):
    from isogclr.config.core import TABLE_SECTIONS
    from isogclr.config.sections import profile_name, table_spec, temperature_spec

    params = load_params(ROOT / "profiles" / f"{profile}.yaml")
    assert profile_name(params) == profile
    specs = {section: table_spec(params, section) for section in TABLE_SECTIONS}
    optional = {"references", "pretrain"} if profile == "paper" else set()  # not at the papers' scale yet
    assert all(spec is not None for section, spec in specs.items() if section not in optional)
    assert temperature_spec(params).seeds == specs["table1"].seeds


@pytest.mark.parametrize(("section", "key"), [
    ({"batch_size": 0}, "emc2_convergence.batch_size"),
    ({"methods": ["simclr", "nope"]}, "emc2_convergence.methods"),
    ({"augmentation_values": [2, "4"]}, "emc2_convergence.augmentation_values"),
    ({"infinite_augmentation": 1}, "emc2_convergence.infinite_augmentation"),
    ({"num_image": 32}, "emc2_convergence.num_image: unknown key"),
    ({"seeds": [0, -1]}, "emc2_convergence.seeds"),
    ({"seed": 1}, "emc2_convergence.seed: replaced by emc2_convergence.seeds"),
])
def test_a_bad_emc2_convergence_value_fails_validation_naming_the_key(smoke_params, section, key):
    params = copy.deepcopy(smoke_params)
    params["emc2_convergence"].update(section)
    with pytest.raises(ConfigError, match=f"^{key}"):
        validate_params(params)


@pytest.mark.parametrize(("change", "key"), [
    ("methods.flatclr.tau: .nan", "methods.flatclr.tau: expected a finite number"),
    ("methods.flatclr.tau: .inf", "methods.flatclr.tau: expected a finite number"),
    ("methods.flatclr.tau: abc", "methods.flatclr.tau: expected a number, got 'abc'"),
    ("train.optimizer.lr: .nan", "train.optimizer.lr: expected a finite number"),
    ("train.epochs: 2.5", "train.epochs: expected an integer, got 2.5"),
    ("train.epochs: true", "train.epochs: expected an integer, got True"),
    ("train.epochs: ten", "train.epochs: expected an integer, got 'ten'"),
    ("train.channels_last: 1", "train.channels_last: expected true or false"),
    ("methods.simclr.search.tau: [0.2, .nan]", r"methods.simclr.search.tau\[1\]: expected a finite number"),
    ("data.synthetic.noise: .nan", "data.synthetic.noise: expected a finite number"),
])
def test_validate_refuses_a_wrong_type_or_non_finite_number_naming_the_key(tmp_path, smoke_params, change, key):
    params = copy.deepcopy(smoke_params)
    dotted, _, value = change.partition(": ")
    *parents, last = dotted.split(".")
    node = params
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = yaml.safe_load(value)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=key):
        validate_params(load_params(path))
    with pytest.raises(ConfigError, match=key):
        validate_params(params)


def test_table3_needs_table1s_methods_run_on_its_datasets(smoke_params):
    """Table 3 reads the Table 1 rows of each of its datasets from table1's or table1_real's runs: a dataset
    where they are not all run (at table3's seeds) is refused before any run, naming table3.datasets."""
    params = copy.deepcopy(smoke_params)
    params["table3"]["datasets"] = ["fashion_mnist_mini"]  # smoke's table1_real runs two of table1's methods there
    with pytest.raises(ConfigError, match=r"table3\.datasets: 'fashion_mnist_mini'.*table1_real does not run"):
        validate_params(params)
    params["table1_real"]["methods"] = list(params["table1"]["methods"])
    validate_params(params)
    params["table3"]["datasets"] = ["synth100"]
    with pytest.raises(ConfigError, match="neither table1 nor table1_real runs it"):
        validate_params(params)
