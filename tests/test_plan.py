"""The typed resolution of a run: the selection, a study's value and train.by_dataset as overlays on the resolved
config (config/overlay.py, config/selection.py), the plan of every run of a profile (config/plan.py), and the
loss built once per run."""

import ast
import copy
import itertools
import json
import re

import pytest
import yaml

from isogclr.config.convergence import convergence_config
from isogclr.config.core import PIN, SEARCH, UNTUNED, pinned_knobs, run_config
from isogclr.config.overlay import RUN_SECTIONS, apply_setting
from isogclr.config.plan import RUN_ROOTS, Axes, plan, plan_axes, plan_keys
from isogclr.config.selection import with_selection
from isogclr.config.studies import study_run_config
from isogclr.config.tuning import TUNING_SECTIONS, tuning_candidates, tuning_spec
from isogclr.config.typed import ConfigError

from .conftest import ROOT


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
    # EMC2's convergence study, once per seed: its methods at A = num_augmentations, EMC2 at every A of
    # augmentation_values and with fresh views (A0); SimCLR's reference row is its convergence run
    study = params["emc2_convergence"]
    views = [("simclr", 2), ("sogclr", 2), ("emc2", 2)] + [("emc2", a) for a in study["augmentation_values"]] + [
        ("emc2", 0)]
    expected |= {f"runs_convergence/{m}-A{a}-s{s}" for m, a in views for s in study["seeds"]}
    assert set(dirs) == expected
    assert all(run.run_dir == f"{RUN_ROOTS[run.section]}/{run.config.run_id}" for run in runs)
    by_dir = {run.run_dir: run for run in runs}
    fresh = by_dir[f"runs_convergence/emc2-A0-s{study['seeds'][0]}"]
    assert fresh.section == "emc2_convergence" and fresh.config.config == convergence_config(params)  # A = 2 views'
    assert by_dir["runs_convergence/emc2-A4-s0"].config.config.num_augmentations == 4
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


    with Repo(str(ROOT)) as repo:
        outs = {o.def_path for stage in repo.index.stages for o in stage.outs}
    written = {Path(o).parent.as_posix() for o in outs if o.endswith("/train_log.csv")}
    planned = plan(load_params(ROOT / "params.yaml"), ROOT / "tuning")
    candidates = {r.run_dir for r in planned if r.section in TUNING_SECTIONS}
    convergence = {r.run_dir for r in planned if r.section == "emc2_convergence"}  # one stage, one folder
    assert written == {r.run_dir for r in planned} - candidates - convergence
    assert {f"tuning/{d.split('/')[1]}/candidates.csv" for d in candidates} <= outs
    assert {d.split("/")[0] for d in convergence} == {"runs_convergence"} and "runs_convergence" in outs
    assert len(written) > 200 and len(candidates) > 40  # the mini profile's runs, not an empty match


def test_the_plan_command_lists_every_run_with_its_resolved_settings(capsys):
    from isogclr.cli import main
    from isogclr.config.profiles import load_params


    params = ROOT / "params.yaml"
    assert main(["plan", "--params", str(params), "--tuning-dir", str(ROOT / "tuning"), "--section", "table1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table1 = [r for r in plan(load_params(params), ROOT / "tuning") if r.section == "table1"]
    assert lines[-1] == f"{len(table1)} runs" and len(lines) == len(table1) + 1
    for run, line in zip(table1, lines, strict=False):
        assert line.split()[:3] == ["table1", run.run_dir, run.config.dataset]
        assert f"epochs {run.config.train.epochs} " in line and repr(run.config.method.knobs()) in line


def test_validation_and_the_pipeline_need_no_selection(smoke_params, tmp_path):
    """A fresh clone has no tuning/<method>/selected.json yet: the plan's keys (the runs, unresolved), the validation
    and the pipeline read none; the configs of the tuned runs do."""
    from isogclr.config.validate import validate_params
    from isogclr.pipeline import build_pipeline

    with pytest.raises(ConfigError, match="selected.json: not found"):
        plan(smoke_params, tmp_path / "none")
    validate_params(smoke_params)
    assert "train" in build_pipeline(smoke_params, ROOT)["stages"]
    params = copy.deepcopy(smoke_params)
    _select(params, tmp_path)
    assert {k.run_dir for k in plan_keys(smoke_params)} == {r.run_dir for r in plan(params, tmp_path)}


def test_the_plan_axes_are_the_lists_of_params_yaml(smoke_params):
    """Each group of planned runs spans its section's lists, in their order (what the pipeline and the validation
    read instead of the lists)."""
    axes = plan_axes(plan_keys(smoke_params))
    for section in ("table1", "table1_real", "table3", "references", "pretrain"):
        table = smoke_params.get(section)
        if table:
            assert axes[section] == Axes(tuple(table["methods"]), tuple(table["datasets"]), (), tuple(table["seeds"]))
    for key in ("studies", "bimodal_studies"):
        for name, spec in (smoke_params.get(key) or {}).items():
            assert axes[f"{key}.{name}"] == Axes(tuple(spec["methods"]), (spec["dataset"],) if "dataset" in spec
                                                 else (), tuple(spec["values"]), tuple(spec.get("seeds", [0])))
    bimodal = smoke_params["bimodal"]
    assert (axes["bimodal"].methods, axes["bimodal"].seeds) == (tuple(bimodal["methods"]), tuple(bimodal["seeds"]))
    assert axes["bimodal.side_methods"].methods == tuple(bimodal["side_methods"])
    assert axes["bimodal.side_methods"].seeds == tuple(bimodal.get("side_seeds") or bimodal["seeds"][:1])
    spec = tuning_spec(smoke_params, "tuning")
    assert axes["tuning"] == Axes(tuple(spec.methods), (spec.dataset,), tuple(range(spec.candidates)), spec.seeds)
    study = smoke_params["emc2_convergence"]
    assert axes["emc2_convergence"].seeds == tuple(study["seeds"])
    assert axes["emc2_convergence"].values == (2, *(a for a in study["augmentation_values"] if a != 2), 0)


def _declared(params: dict, stage: dict) -> set[str]:
    """The outputs and metrics a generated stage declares, for every item of its matrix or foreach."""
    def listed(value: list | str) -> list:  # a matrix's list, or the ${section.key} of params.yaml that holds it
        if isinstance(value, list):
            return value
        found = params
        for key in value.removeprefix("${").removesuffix("}").split("."):
            found = found[key]
        return found

    if "foreach" in stage:
        items, stage = list(stage["foreach"].values()), stage["do"]
    elif "matrix" in stage:
        matrix = {axis: listed(value) for axis, value in stage["matrix"].items()}
        items = [dict(zip(matrix, values, strict=True)) for values in itertools.product(*matrix.values())]
    else:
        items = [{}]
    paths = [next(iter(out)) for out in stage.get("outs", []) + stage.get("metrics", [])]
    return {re.sub(r"\$\{item\.(\w+)\}", lambda m, item=item: str(item[m[1]]), path) for item in items
            for path in paths}


def test_each_training_family_of_the_pipeline_writes_the_runs_the_plan_gives_it():
    """The generated pipeline of params.yaml, stage family by family (as the stage record names them:
    isogclr.analysis.cost.run_family): the folders a family declares for its runs (a run's train_log.csv, a
    selection's tuning/<method>/candidates.csv, the convergence study's runs_convergence) hold exactly the planned
    runs of that family, and no other stage declares a run."""
    from isogclr.analysis.cost import run_family
    from isogclr.config.profiles import load_params
    from isogclr.pipeline import build_pipeline

    params = load_params(ROOT / "params.yaml")
    homes = {}  # stage -> the folders of its runs
    for name, stage in build_pipeline(params, ROOT)["stages"].items():
        paths = _declared(params, stage)
        homes[name] = ({p.removesuffix("/train_log.csv") for p in paths if p.endswith("/train_log.csv")}
                       | {p.removesuffix("/candidates.csv") for p in paths if p.endswith("/candidates.csv")}
                       | paths & {"runs_convergence"})
    planned: dict[str, set[str]] = {}
    for run in plan(params, ROOT / "tuning"):
        planned.setdefault(run_family(run, params["bimodal"].get("side_methods") or []), set()).add(run.run_dir)
    assert {name for name, folders in homes.items() if folders} == set(planned)
    for family, dirs in planned.items():
        def holds(home: str, run_dir: str) -> bool:
            return run_dir == home or run_dir.startswith(f"{home}/")

        assert all(any(holds(h, d) for h in homes[family]) for d in dirs), family
        assert all(any(holds(h, d) for d in dirs) for h in homes[family]), family
    assert {"train", "tune", "study_batch_size", "train_bimodal_side", "emc2_convergence_runs"} <= set(planned)


def test_only_the_plan_nests_loops_over_a_sections_lists():
    """One enumeration of the runs: no module of config/ but plan.py, and not the pipeline, nests a loop over a
    section's methods, datasets, values or seeds in another (they take the runs from the plan: plan_keys,
    plan_axes). The stage templates (pipeline_stages.py) are left out: they write a family's outputs from its
    axes, its method a DVC placeholder."""
    lists = ("methods", "datasets", "values", "seeds")

    def axis(node: ast.AST) -> str | None:
        return next((a for a in lists if re.search(rf"\b{a}\b", ast.unparse(node))), None)

    def nested(node: ast.AST, outer: tuple[str, ...] = ()) -> list[tuple[int, tuple[str, ...]]]:
        """(line, the lists looped over) of every loop over a list inside a loop over another."""
        if isinstance(node, ast.For):
            inner = (*outer, axis(node.iter)) if axis(node.iter) else outer
            found = [(node.lineno, inner)] if outer and inner != outer else []
            found += nested(node.iter, outer)
            return found + [f for child in (*node.body, *node.orelse) for f in nested(child, inner)]
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            found, current = [], outer
            for generator in node.generators:
                found += nested(generator.iter, current)
                if axis(generator.iter):
                    found += [(node.lineno, (*current, axis(generator.iter)))] if current else []
                    current = (*current, axis(generator.iter))
                found += [f for condition in generator.ifs for f in nested(condition, current)]
            parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
            return found + [f for part in parts for f in nested(part, current)]
        return [f for child in ast.iter_child_nodes(node) for f in nested(child, outer)]

    src = ROOT / "src" / "isogclr"
    loops = {path.relative_to(src).as_posix(): nested(ast.parse(path.read_text()))
             for path in [*sorted((src / "config").glob("*.py")), src / "pipeline.py"]}
    assert ("methods", "datasets", "seeds") in {lists for _, lists in loops.pop("config/plan.py")}  # it finds them
    assert {name: found for name, found in loops.items() if found} == {}
