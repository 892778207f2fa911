"""The generated pipeline (isogclr.pipeline): in sync with params.yaml, and with import-derived code dependencies."""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import pytest
import yaml

from isogclr.code_deps import module_closure, notebook_modules
from isogclr.config.profiles import load_params
from isogclr.config.typed import ConfigError
from isogclr.data.base import DATASETS
from isogclr.losses.loss_table import LOSSES, losses_of
from isogclr.pipeline import BIMODAL_ENTRY, TRAIN_ENTRY, build_pipeline, main

from .conftest import ROOT


def stage_deps(stage: dict[str, Any], key: str | None = None) -> list[str]:
    """The deps of a generated stage: of its item ``key`` when it is per method (a ``foreach``), else of every run."""
    if "foreach" not in stage:
        return stage["deps"]
    items = [stage["foreach"][key]] if key is not None else stage["foreach"].values()
    return sorted({d.replace("${item.loss}", item["loss"]) for item in items for d in stage["do"]["deps"]})


@pytest.fixture(scope="module")
def params():
    return load_params(ROOT / "params.yaml")


@pytest.fixture(scope="module")
def pipeline(params):
    return build_pipeline(params, ROOT)


def test_committed_dvc_yaml_is_the_generated_one():
    """`python -m isogclr pipeline --check`: dvc.yaml is what params.yaml and the code's imports give."""
    assert main(str(ROOT / "params.yaml"), str(ROOT / "dvc.yaml"), check=True) == 0, (
        "dvc.yaml is stale: run `python -m isogclr pipeline`")


def test_check_fails_on_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "dvc.yaml"
    stale.write_text((ROOT / "dvc.yaml").read_text().replace("isogclr train --method", "isogclr train  --method", 1))
    # the generator resolves code paths against the output's folder: run it against the project's tree
    (tmp_path / "src").symlink_to(ROOT / "src")
    (tmp_path / "notebooks").symlink_to(ROOT / "notebooks")
    assert main(str(ROOT / "params.yaml"), str(stale), check=True) == 1
    assert "dvc.yaml is stale" in capsys.readouterr().err


@pytest.mark.parametrize("path", ["src/isogclr/train/distributed.py", "src/isogclr/data/__init__.py",
                                  "src/isogclr/train/engine.py", "src/isogclr/losses/numerics.py",
                                  "src/isogclr/losses/base.py", "src/isogclr/io.py"])
def test_every_run_depends_on_the_modules_it_imports(pipeline, path):
    """The files the hand-written dvc.yaml missed (issue: an edit there reran nothing) are on every run's path."""
    for name, stage in pipeline["stages"].items():
        if name.startswith(("train", "study_")):
            assert path in stage_deps(stage), name


def test_runs_do_not_depend_on_the_reports_code(pipeline):
    for name, stage in pipeline["stages"].items():
        if name.startswith(("train", "study_")):
            command_line = ("src/isogclr/cli.py", "src/isogclr/commands.py")
            assert not any(d.startswith("src/isogclr/analysis/") or d in command_line for d in stage_deps(stage))
    assert "src/isogclr/train/loop.py" not in pipeline["stages"]["table1_unimodal"]["deps"]  # reports only read


def test_closure_follows_relative_function_level_and_package_imports(tmp_path):
    pkg = tmp_path / "src" / "isogclr"
    files = {
        "__init__.py": "",
        "a.py": "from . import b\n\ndef f():\n    from .sub.c import g\n    return g\n",
        "b.py": "import os\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .unused import T\n",
        "sub/__init__.py": "",
        "sub/c.py": "from ..d import h\n",
        "d.py": "",
        "unused.py": "",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(textwrap.dedent(text))
    # an import under `if TYPE_CHECKING:` (for annotations) never runs: unused.py is not a dependency
    assert module_closure(("isogclr.a",), tmp_path) == [
        f"src/isogclr/{n}" for n in ("__init__.py", "a.py", "b.py", "d.py", "sub/__init__.py", "sub/c.py")]



def test_bimodal_and_unimodal_runs_have_their_own_entry(params):
    unimodal, bimodal = module_closure(TRAIN_ENTRY, ROOT), module_closure(BIMODAL_ENTRY, ROOT)
    assert "src/isogclr/train/loop.py" in unimodal and "src/isogclr/train/bimodal.py" in bimodal


def test_a_new_study_is_a_params_block(params):
    """A study block with `report:` gets its stage and becomes an input of that report; nothing else to write."""
    params = copy.deepcopy(params)
    params["studies"]["beta0"] = {"methods": ["isogclr"], "knob": "methods.{method}.beta0", "report": "ablations",
                                  "values": [0.7, 0.8], "dataset": "synth10_lt", "seeds": [0, 1]}
    stages = build_pipeline(params, ROOT)["stages"]
    stage = stages["study_beta0"]
    # one stage per method runs every seed and value; each run folder is an output
    assert stage["matrix"] == {"method": "${studies.beta0.methods}"}
    assert "studies.beta0" in stage["params"] and "--tuned" not in stage["cmd"]
    assert "--study beta0" in stage["cmd"] and "--seed 0 1" in stage["cmd"] and "data/synthetic.json" in stage["deps"]
    assert [next(iter(m)) for m in stage["metrics"]] == [  # each run's scores and the knobs it used
        f"studies/beta0/${{item.method}}-{value}-s{seed}/{name}" for seed in (0, 1) for value in (0.7, 0.8)
        for name in ("metrics.json", "knobs.json")]
    assert all(next(iter(o.values())) == {"cache": False} for o in stage["outs"])  # in git: a clone is a replica
    assert "studies/beta0" in stages["ablations"]["deps"] and "studies.beta0" in stages["ablations"]["params"]
    assert "studies/beta0" not in stages["small_batch"]["deps"]


def test_a_study_naming_an_unknown_report_is_refused(params):
    params = copy.deepcopy(params)
    params["studies"]["rho"]["report"] = "ablation"
    with pytest.raises(ConfigError, match="unknown report.*'ablation'"):
        build_pipeline(params, ROOT)
    params["studies"]["rho"]["report"] = ["ablations", "ablation"]
    with pytest.raises(ConfigError, match="unknown report.*'ablation'"):
        build_pipeline(params, ROOT)


def test_a_study_read_by_two_reports_is_an_input_of_both(params):
    """`report: [a, b]`: one set of runs, both reports depend on them (the mini profile's long-tailed ladder is
    also Tables 3/4's second budget); a report it does not name does not."""
    stages = build_pipeline(params, ROOT)["stages"]
    assert params["studies"]["ladder_synth10_lt"]["report"] == ["budget_ladder", "table1_unimodal"]
    for report in ("budget_ladder", "table1_unimodal"):
        assert "studies/ladder_synth10_lt" in stages[report]["deps"]
        assert "studies.ladder_synth10_lt" in stages[report]["params"]
    assert "studies/ladder_synth10_lt" not in stages["ablations"]["deps"]


def test_one_metrics_and_one_knobs_file_per_run_and_comparison_plots(pipeline):
    train = pipeline["stages"]["train"]["do"]  # per method (test_a_method_depends_on_its_own_loss_module_only)
    seeds = load_params(ROOT / "params.yaml")["table1"]["seeds"]  # one stage per (method, dataset) runs every seed
    assert [list(m)[0] for m in train["metrics"]] == [f"runs/${{item.method}}-${{item.dataset}}-s{s}/{name}"
                                                      for s in seeds for name in ("metrics.json", "knobs.json")]
    assert train["cmd"].endswith(f"--seed {' '.join(map(str, seeds))} --tuned --export-seed "
                                 + " ".join(map(str, seeds[:3])))
    assert "tuning/${item.method}/selected.json" in train["deps"] and "table1.seeds" in train["params"]
    assert "plots" not in train and "plots" not in pipeline["stages"]["train"]  # no one-run charts: the top-level
    # plots compare runs
    (table1,) = [p for p in pipeline["plots"] if next(iter(p)).startswith("table1_loss")]
    assert len(next(iter(table1.values()))["y"]) == len(load_params(ROOT / "params.yaml")["table1"]["methods"])


def test_dvc_yaml_is_valid_yaml_with_a_header():
    text = (ROOT / "dvc.yaml").read_text()
    assert text.startswith("# Generated by `python -m isogclr pipeline`")
    assert "stages" in yaml.safe_load(text)


# --- narrow dependencies: a run's stage lists its own losses and datasets, and no image-text code -------------

UNIMODAL_STAGES = ("train", "train_real", "train_table3", "tune")


def _path(module: str) -> str:
    return "src/" + module.replace(".", "/") + ".py"


def _unimodal_stages(params, pipeline):
    """(stage, its methods, its datasets) of every unimodal training stage."""
    sections = {"train": "table1", "train_real": "table1_real", "train_table3": "table3"}
    for stage, section in sections.items():
        if section in params:
            yield stage, params[section]["methods"], params[section]["datasets"]
    if "tuning" in params:
        yield "tune", list(params["tuning"]["methods"]), [params["tuning"]["dataset"]]
    for name, spec in (params.get("studies") or {}).items():
        yield f"study_{name}", spec["methods"], [spec["dataset"]]


# the modules only image-text runs use: the bimodal losses (but the ones a unimodal loss builds on, none today),
# the text encoder and the image-text model, the caption and pair loaders, the generated pairs' spec, their config
IMAGE_TEXT_LOSSES = sorted({_path(LOSSES.module_of(n)) for n in losses_of("bimodal")})
IMAGE_TEXT_ONLY = sorted({*IMAGE_TEXT_LOSSES, *(f"src/isogclr/{m}.py" for m in (
    "models/text", "models/bimodal", "data/captions", "data/pairs_folder", "data/webdataset", "data/pair_semantics",
    "config/bimodal", "train/bimodal"))})


def test_image_text_modules_are_not_in_any_unimodal_run(params, pipeline):
    """Editing an image-text module (losses/cyclip.py, models/text.py, data/captions.py, config/bimodal.py, ...)
    leaves every unimodal run up to date: it is in no unimodal training stage's dependencies, and it is in the
    image-text stages'."""
    assert "src/isogclr/losses/cyclip.py" in IMAGE_TEXT_LOSSES and len(IMAGE_TEXT_LOSSES) == 5
    stages = list(_unimodal_stages(params, pipeline))
    assert {s for s, _, _ in stages} >= {"train", "tune", "study_rho"}
    for stage, _, _ in stages:
        deps = stage_deps(pipeline["stages"][stage])
        assert not set(IMAGE_TEXT_ONLY) & set(deps), (stage, sorted(set(IMAGE_TEXT_ONLY) & set(deps)))
        assert not any(d.startswith("src/isogclr/config/") and d.endswith(("convergence.py", "reports.py"))
                       for d in deps), stage
    for stage in ("train_bimodal", "tune_bimodal"):  # the image-text runs list them (the losses: their methods')
        assert set(IMAGE_TEXT_ONLY) - set(IMAGE_TEXT_LOSSES) <= set(stage_deps(pipeline["stages"][stage])), stage
    cyclip = [name for name, stage in pipeline["stages"].items() if "src/isogclr/losses/cyclip.py" in stage_deps(stage)]
    image_text = {"train_bimodal", "train_bimodal_side", "tune_bimodal",
                  *(f"study_{name}" for name in params.get("bimodal_studies") or {})}
    assert "train_bimodal_side" in cyclip and set(cyclip) <= image_text, cyclip  # cyclip is a side method


def test_a_run_depends_on_its_own_losses_and_datasets_only(params, pipeline):
    """Each unimodal stage lists the loss module of each of its methods (build_loss imports it by name) and the
    loader of each of its datasets; a unimodal loss no method of the stage uses is not listed."""
    all_losses = {_path(LOSSES.module_of(n)) for n in losses_of("unimodal")}
    for stage, methods, datasets in _unimodal_stages(params, pipeline):
        deps = set(stage_deps(pipeline["stages"][stage]))
        used = {_path(LOSSES.module_of(params["methods"][m]["loss"])) for m in methods}
        assert used <= deps, stage
        assert {_path(DATASETS.module_of(d)) for d in datasets} <= deps, stage
        imported = {d for u in used for d in module_closure((u.removeprefix("src/").removesuffix(".py")
                                                             .replace("/", "."),), ROOT)}
        assert not (all_losses - used - imported) & deps, stage  # e.g. vicreg.py only where vicreg runs
    bimodal = set(stage_deps(pipeline["stages"]["train_bimodal"]))
    assert {_path(LOSSES.module_of(params["methods"][m]["loss"])) for m in params["bimodal"]["methods"]} <= bimodal
    assert not {_path(LOSSES.module_of(n)) for n in ("simclr", "vicreg", "barlow_twins")} & bimodal


def test_a_name_is_imported_from_the_module_that_defines_it():
    """`from ..config.core import OptimConfig` depends on config/core.py and its package, not on the other parts
    of the config package, as a notebook's `from isogclr.config.sections import table_spec` depends on
    config/sections.py."""
    closure = module_closure(("isogclr.train.optim",), ROOT)  # `from ..config.core import OptimConfig`
    assert "src/isogclr/config/core.py" in closure and "src/isogclr/config/convergence.py" not in closure
    assert "isogclr.config.sections" in notebook_modules("table1_unimodal", ROOT)


def test_an_in_memory_run_does_not_depend_on_the_paper_scale_loaders(params, pipeline):
    """A Table 1 run: at most 42 source files (41: the typed overlays, the selection and the dataset declarations
    are modules of their own) and no streaming loader (train/loop.py imports it by name, for a run with
    train.stream only); a section on a streamed dataset depends on it."""
    deps = [d for d in stage_deps(pipeline["stages"]["train"], "isogclr-synth10") if d.startswith("src/")]
    assert len(deps) <= 42, deps
    paper_scale = {"src/isogclr/data/streaming.py", "src/isogclr/data/inaturalist.py", "src/isogclr/data/webdataset.py"}
    assert not paper_scale & set(deps)
    streamed = copy.deepcopy(params)
    streamed["table1"]["datasets"] = ["synth10", "imagenet100"]
    assert "src/isogclr/data/streaming.py" in stage_deps(build_pipeline(streamed, ROOT)["stages"]["train"])


def test_a_method_depends_on_its_own_loss_module_only(params, pipeline):
    """Table 1's runs of a method list its loss module and no other method's: an edit of losses/isogclr.py leaves
    SimCLR's runs up to date (the helpers several losses share, losses/gram.py, ..., stay shared)."""
    train = pipeline["stages"]["train"]
    methods = params["table1"]["methods"]
    own = {m: _path(LOSSES.module_of(params["methods"][m]["loss"])) for m in methods}
    assert len(set(own.values())) == len(methods) >= 3
    assert set(train["foreach"]) == {f"{m}-{d}" for m in methods for d in params["table1"]["datasets"]}
    for key, item in train["foreach"].items():
        deps = stage_deps(train, key)
        assert own[item["method"]] in deps and not (set(own.values()) - {own[item["method"]]}) & set(deps), key
    assert "${item.loss}" in train["do"]["deps"] and "matrix" not in train
    # a family whose losses build on one another keeps one list (isogclr_bimodal imports sogclr_bimodal)
    assert "matrix" in pipeline["stages"]["train_bimodal"]


@pytest.mark.slow
def test_editing_one_loss_module_makes_only_its_methods_runs_stale(tmp_path, params):
    """`dvc status` on a copy of the repository with its lock files: up to date; then, after an edit of
    losses/isogclr.py, the iSogCLR runs of Table 1, Table 1 real and the selection are stale, and no other."""
    import os
    import re
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    families = {"train": "table1", "train_real": "table1_real"}

    def stale() -> set[str]:
        done = subprocess.run(["dvc", "status", "pipelines/tune/dvc.yaml",
                               *(f"pipelines/{f}/dvc.yaml" for f in families)],
                              cwd=repo, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return {m[1].rpartition("dvc.yaml:")[2] for m in re.finditer(r"^(\S+):$", done.stdout, re.M)}

    assert stale() == set()
    loss = repo / "src" / "isogclr" / "losses" / "isogclr.py"
    loss.write_text(loss.read_text() + "\n# an edit\n")
    expected = {f"{family}@isogclr-{d}" for family, section in families.items() for d in params[section]["datasets"]}
    assert stale() == expected | {"tune@isogclr"}
