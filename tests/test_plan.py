"""The typed resolution of a run: the selection, a study's value and train.by_dataset as overlays on the resolved
config (config/overlay.py, config/selection.py), the plan of every run of a profile (config/plan.py), and the
loss built once per run."""

import copy
import json

import pytest
import yaml

from isogclr.config.core import PIN, SEARCH, UNTUNED, pinned_knobs, run_config
from isogclr.config.overlay import RUN_SECTIONS, apply_setting
from isogclr.config.plan import plan
from isogclr.config.selection import with_selection
from isogclr.config.studies import study_run_config
from isogclr.config.tuning import TUNING_SECTIONS, tuning_candidates, tuning_spec
from isogclr.config.typed import ConfigError


def _select(params, tuning_dir, pick=-1):
    """A selection for every tuned method of ``params``: its candidate ``pick``."""
    for section in TUNING_SECTIONS:
        for method in (tuning_spec(params, section).methods if params.get(section) else {}):
            (tuning_dir / method).mkdir(parents=True, exist_ok=True)
            knobs = tuning_candidates(params, method)[pick]
            (tuning_dir / method / "selected.json").write_text(json.dumps({"knobs": knobs}))


def test_the_selection_overlay_is_the_config_of_the_former_dict_rewrite(smoke_params, tmp_path):
    """with_selection on the resolved config == run_config of params whose methods.<m> was rewritten to the
    selected knobs, its pinned knobs over them (what tuning._with_knobs did)."""
    params = copy.deepcopy(smoke_params)
    params["methods"]["isogclr"][PIN] = {"rho": 0.5}
    _select(params, tmp_path)
    for method in params["tuning"]["methods"]:
        spec = params["methods"][method]
        rewritten = copy.deepcopy(params)
        rewritten["methods"][method] = {**{k: v for k, v in spec.items() if k not in (SEARCH, UNTUNED, PIN)},
                                        **json.loads((tmp_path / method / "selected.json").read_text())["knobs"],
                                        **pinned_knobs(spec, method)}
        for dataset in ("synth10", "synth10_lt"):
            expected = run_config(rewritten, method, dataset, 1)
            assert with_selection(params, run_config(params, method, dataset, 1), tmp_path) == expected
    assert with_selection(params, run_config(params, "isogclr", "synth10", 0), tmp_path).method.kwargs["rho"] == 0.5


def test_a_study_overlay_of_a_bad_key_or_value_fails_naming_it(smoke_params):
    params = copy.deepcopy(smoke_params)
    study = next(iter(params["studies"]))
    spec = params["studies"][study]
    method, value = spec["methods"][0], spec["values"][0]
    for knob, match in (("model.encoder.widht", r"studies.{s}.knob: model.encoder.widht: unknown key of model.encoder"),
                        ("nothing.here", r"studies.{s}.knob: nothing is not a section of params.yaml"),
                        ("methods.{method}.rho.x", r"studies.{s}.knob: methods.\w+.rho.x: expected methods.<m")):
        bad = copy.deepcopy(params)
        bad["studies"][study]["knob"] = knob
        with pytest.raises(ConfigError, match="^" + match.format(s=study)):
            study_run_config(bad, study, method, value, 0)
    bad = copy.deepcopy(params)
    bad["studies"][study]["overrides"] = {"train.batch_size": 1}
    with pytest.raises(ConfigError, match=rf"^studies.{study}.overrides.train.batch_size: train: need .*batch_size"):
        study_run_config(bad, study, method, value, 0)
    cfg = run_config(params, "simclr", "synth10", 0)
    with pytest.raises(ConfigError, match=r"^train.by_dataset.synth10: train.optimizer.lr: expected a number"):
        apply_setting(cfg, "train.optimizer.lr", "fast", "train.by_dataset.synth10", RUN_SECTIONS)
    assert apply_setting(cfg, "methods.isogclr.rho", 0.1, "here").method == cfg.method  # another method's knob


def test_by_dataset_is_a_typed_overlay(smoke_params):
    params = copy.deepcopy(smoke_params)
    params["train"]["by_dataset"] = {"synth10": {"model.encoder": {"arch": "resnet18", "width": 8},
                                                 "train.batch_size": 24, "methods.simclr.tau": 0.7}}
    cfg = run_config(params, "simclr", "synth10", 0)
    assert (cfg.encoder.width, cfg.train.batch_size, cfg.method.kwargs["tau"]) == (8, 24, 0.7)
    other = run_config(params, "simclr", "synth10_lt", 0)
    assert other.train.batch_size == params["train"]["batch_size"]
    assert run_config(params, "sogclr", "synth10", 0).method == run_config(smoke_params, "sogclr", "synth10", 0).method
    params["train"]["by_dataset"]["synth10"]["train.batch_size"] = 1
    with pytest.raises(ConfigError, match=r"^train.by_dataset.synth10: train: need"):
        run_config(params, "simclr", "synth10", 0)


def test_the_plan_lists_every_run_of_the_smoke_profile_once_with_its_folder(smoke_params, tmp_path):
    params = copy.deepcopy(smoke_params)
    _select(params, tmp_path, pick=0)
    runs = plan(params, tmp_path)
    dirs = [run.run_dir for run in runs]
    assert len(dirs) == len(set(dirs))
    expected = set()
    for section in ("table1", "table1_real", "table3", "references", "pretrain"):
        table = params.get(section) or {}
        expected |= {f"runs/{m}-{d}-s{s}" for m in table.get("methods", []) for d in table["datasets"]
                     for s in table["seeds"]}
    for section in TUNING_SECTIONS:
        spec = tuning_spec(params, section)
        expected |= {f"tuning/{m}/runs/c{c}-s{s}" for m in spec.methods for c in range(spec.candidates)
                     for s in spec.seeds}
    for key in ("studies", "bimodal_studies"):
        expected |= {f"studies/{n}/{m}-{v}-s{s}" for n, st in (params.get(key) or {}).items() for m in st["methods"]
                     for v in st["values"] for s in st.get("seeds", [0])}
    bimodal = params["bimodal"]
    side_seeds = bimodal.get("side_seeds") or bimodal["seeds"][:1]
    expected |= {f"runs_bimodal/{m}-s{s}" for m in bimodal["methods"] for s in bimodal["seeds"]}
    expected |= {f"runs_bimodal/{m}-s{s}" for m in bimodal.get("side_methods") or [] for s in side_seeds}
    assert set(dirs) == expected
    by_dir = {run.run_dir: run for run in runs}
    table1 = params["table1"]
    tuned = by_dir[f"runs/{table1['methods'][0]}-{table1['datasets'][0]}-s{table1['seeds'][0]}"]
    assert tuned.section == "table1" and tuned.config == with_selection(
        params, run_config(params, table1["methods"][0], table1["datasets"][0], table1["seeds"][0]), tmp_path)
    with pytest.raises(ConfigError, match="selected.json: not found"):
        plan(params, tmp_path / "none")


def test_a_train_command_builds_its_runs_loss_once_each(smoke_params, smoke_data, tmp_path, monkeypatch):
    """After the validation (which builds every method's loss once, on 2 samples, to check its arguments), a
    `train` of 2 seeds builds 2 losses: one per run, by the trainer."""
    from isogclr import commands
    from isogclr.cli import main
    from isogclr.config import core

    params = copy.deepcopy(smoke_params)
    params["data"]["root"] = str(smoke_data)
    params["train"].update(epochs=1, epochs_by_dataset={}, eval_every=0)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    built, validated = [], []
    read_params, build_loss = commands.read_params, core.build_loss
    monkeypatch.setattr(commands, "read_params", lambda args: (read_params(args), validated.append(1))[0])
    monkeypatch.setattr(core, "build_loss", lambda *a, **k: (built.append(a[:2]) if validated else None)
                        or build_loss(*a, **k))
    assert main(["train", "--method", "simclr", "--dataset", "synth10", "--seed", "0", "1", "--params", str(path),
                 "--out", str(tmp_path / "runs"), "--checkpoints", str(tmp_path / "ckpt")]) == 0
    assert [loss for loss, _ in built] == ["simclr", "simclr"] and all(n > 2 for _, n in built)


def test_the_pipeline_runs_the_plan_and_nothing_else():
    """The committed pipeline (dvc.yaml and its families) against the plan of params.yaml: every run folder a stage
    writes (its train_log.csv) is a planned run, every planned run is written by a stage, and a selection's candidates
    are run by their method's tuning stage (which declares its candidates.csv, not the candidates' folders)."""
    from pathlib import Path

    from dvc.repo import Repo

    from isogclr.config.profiles import load_params

    from .conftest import ROOT

    with Repo(str(ROOT)) as repo:
        outs = {o.def_path for stage in repo.index.stages for o in stage.outs}
    written = {Path(o).parent.as_posix() for o in outs if o.endswith("/train_log.csv")}
    planned = plan(load_params(ROOT / "params.yaml"), ROOT / "tuning")
    candidates = {r.run_dir for r in planned if r.section in TUNING_SECTIONS}
    assert written == {r.run_dir for r in planned} - candidates
    assert {f"tuning/{d.split('/')[1]}/candidates.csv" for d in candidates} <= outs
    assert len(written) > 200 and len(candidates) > 40  # the mini profile's runs, not an empty match


def test_the_plan_command_lists_every_run_with_its_resolved_settings(capsys):
    from isogclr.cli import main
    from isogclr.config.profiles import load_params

    from .conftest import ROOT

    params = ROOT / "params.yaml"
    assert main(["plan", "--params", str(params), "--tuning-dir", str(ROOT / "tuning"), "--section", "table1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table1 = [r for r in plan(load_params(params), ROOT / "tuning") if r.section == "table1"]
    assert lines[-1] == f"{len(table1)} runs" and len(lines) == len(table1) + 1
    for run, line in zip(table1, lines, strict=False):
        assert line.split()[:3] == ["table1", run.run_dir, run.config.dataset]
        assert f"epochs {run.config.train.epochs} " in line and repr(run.config.method.knobs()) in line
