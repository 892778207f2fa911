"""End to end: the DVC pipeline on the smoke profile in a temporary copy of the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from isogclr.config.profiles import profile_text

from .conftest import ROOT, tracked_copy

BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_dvc_repro_smoke_profile_writes_table1(tmp_path):
    repo = tracked_copy(tmp_path / "repo")
    (repo / "params.yaml").write_text(profile_text(repo / "profiles" / "smoke.yaml"))  # `make repro PROFILE=smoke`
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    # what `make repro` runs: DVC, two stages at a time, then a plain `dvc repro` that finds nothing left
    run = subprocess.run([sys.executable, "-m", "isogclr", "repro", "--jobs", "2"], cwd=repo, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "started pipelines/train/dvc.yaml:train@simclr-synth10" in run.stdout and "FAILED" not in run.stdout
    check = run.stdout.split("checking with a plain `dvc repro`")[1]
    assert "Running stage" not in check, check[-2000:]  # the parallel schedule left nothing to run

    table = (repo / "reports" / "tables" / "table1_unimodal.md").read_text()
    assert "profile `smoke`" in table
    for method in ("simclr", "sogclr", "isogclr"):
        assert f"| {method}" in table
    assert "paper CIFAR10" in table and "89.24" in table  # iSogCLR's CIFAR10 number from the paper
    executed = json.loads((repo / "reports" / "table1_unimodal.ipynb").read_text())
    assert all(c.get("outputs") is not None for c in executed["cells"] if c["cell_type"] == "code")
    assert not any(o.get("output_type") == "error" for c in executed["cells"] for o in c.get("outputs", []))
    assert (repo / "reports" / "figures" / "table1_unimodal.png").stat().st_size > 0
    # the numbers in the table are the runs' numbers
    top1 = json.loads((repo / "runs" / "isogclr-synth10-s0" / "metrics.json").read_text())["top1"]
    assert f"{top1:.2f} (n=1)" in table
    for report in ("ablations", "small_batch", "rgcl_analysis", "feature_tsne", "emc2_convergence", "bimodal"):
        executed = json.loads((repo / "reports" / f"{report}.ipynb").read_text())
        assert not any(o.get("output_type") == "error" for c in executed["cells"] for o in c.get("outputs", []))
        assert (repo / "reports" / "verdicts" / f"{report}.csv").read_text().count("\n") >= 2
    index = (repo / "reports" / "README.md").read_text()
    assert "profile `smoke`" in index and "Ablations" in index and (repo / "reports" / "index.html").exists()
    real = (repo / "reports" / "tables" / "table1_real.md").read_text()  # Fashion-MNIST, read from its image folder
    top1 = json.loads((repo / "runs" / "isogclr-fashion_mnist_mini-s0" / "metrics.json").read_text())["top1"]
    assert "ours fashion_mnist_mini" in real and f"{top1:.2f} (n=1)" in real
    assert (repo / "data" / "fashion_mnist_mini" / "train").is_dir()
    loss_curve = (repo / "runs" / "isogclr-synth10-s0" / "dvclive" / "plots" / "metrics" / "loss.tsv").read_text()
    assert loss_curve.splitlines()[0] == "step\tloss" and len(loss_curve.splitlines()) == 3  # 2 smoke epochs
    standard = (repo / "reports" / "tables" / "standard_batch.md").read_text()  # EMC2 at the standard batch
    assert all(f"| {m}" in standard for m in ("simclr", "sogclr", "negcache", "emc2"))
    augmentations = (repo / "reports" / "tables" / "emc2_augmentations.md").read_text()
    assert "(0, 'emc2', 'inf')" in augmentations  # the infinite-augmentation EMC2 beside the pre-computed A (seed 0)
    budgets = (repo / "reports" / "tables" / "table34_epochs.md").read_text()  # Tables 3/4: two epoch budgets
    assert "ours 1 ep" in budgets and "ours 2 ep" in budgets and "paper CIFAR10-LT 800 ep" in budgets
    assert "79.69" in budgets  # iSogCLR's CIFAR10-LT number after 800 epochs (paper Table 4)
    table4 = (repo / "reports" / "tables" / "sogclr_table4_epochs.md").read_text()  # SogCLR Table 4: two budgets
    assert "ours synth10 top1 1 ep" in table4 and "ours synth10 top1 2 ep" in table4 and "71.3" in table4
    top1 = json.loads((repo / "studies" / "bimodal_epochs" / "clip-1-s0" / "metrics.json").read_text())["synth10_top1"]
    assert f"{top1:.2f} (n=1)" in table4
    correlation = (repo / "reports" / "tables" / "temperature_vs_frequency.md").read_text()
    assert "isogclr-synth10_lt-s0" in correlation and "spearman_samples" in correlation

    # a second repro runs nothing (how long DVC takes to check ~60 stages is a speed matter, not asserted here)
    again = subprocess.run([str(BIN / "dvc"), "repro"], cwd=repo, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "Running stage" not in again.stdout
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=repo, env=env, capture_output=True, text=True)
    assert "up to date" in status.stdout

    metrics = subprocess.run([str(BIN / "dvc"), "metrics", "show"], cwd=repo, env=env, capture_output=True,
                             text=True)
    assert "runs/isogclr-synth10-s0/metrics.json" in metrics.stdout
    assert "dvclive/metrics.json" not in metrics.stdout  # one metrics file per run

    # an edit on a run's import path reruns the runs (the hand-written dvc.yaml missed this file)
    distributed = repo / "src" / "isogclr" / "train" / "distributed.py"
    original = distributed.read_text()
    distributed.write_text(original + "\n# an edit\n")
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=repo, env=env, capture_output=True, text=True)
    assert "train@isogclr-synth10:" in status.stdout and "train_bimodal@clip:" in status.stdout, status.stdout
    assert "synthetic:" not in status.stdout  # the data generator does not import it
    distributed.write_text(original)

    # an ablation knob of one method invalidates only that method's runs
    params = (repo / "params.yaml").read_text()
    from dvc.utils.hydra import apply_overrides  # what `dvc exp run -S` does to params.yaml

    apply_overrides(str(repo / "params.yaml"), ["methods.isogclr.tau_min=0.02"])
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=repo, env=env, capture_output=True, text=True)
    # a family's stage is addressed as pipelines/<family>/dvc.yaml:<stage>@<item>: keep <stage>@<item>
    changed = [line.rstrip(":").rpartition(".yaml:")[2] for line in status.stdout.splitlines()
               if not line.startswith((" ", "\t"))]
    changed = [c for c in changed if c.strip()]
    runs = [c for c in changed if "@" in c]  # training runs; the rest are reports that read methods.isogclr
    assert runs and all(c.partition("@")[2].split("-")[0] == "isogclr" for c in runs), status.stdout
    assert "train@isogclr-synth10" in runs and "study_rho@isogclr" in runs and "tune@isogclr" in runs
    assert set(changed) - set(runs) <= {"ablations", "rgcl_analysis", "budget_ladder"}, status.stdout
    (repo / "params.yaml").write_text(params)

    # a clone of the repro'd repository is a replica: every output a stage declares is in git (the generated
    # data come back from their manifests when a run needs them), so nothing is out of date
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, capture_output=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "repro"], cwd=repo,
                   check=True, capture_output=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    assert not (clone / "data" / "synthetic").exists() and (clone / "data" / "synthetic.json").is_file()
    status = subprocess.run([str(BIN / "dvc"), "status"], cwd=clone, env=env, capture_output=True, text=True)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout + status.stderr
    dry = subprocess.run([str(BIN / "dvc"), "repro", "--dry"], cwd=clone, env=env, capture_output=True, text=True)
    assert dry.returncode == 0 and "Running stage" not in dry.stdout, dry.stdout + dry.stderr


def test_dvc_config_disables_analytics():
    config = (ROOT / ".dvc" / "config").read_text()
    assert "analytics = false" in config and "check_update = false" in config


def test_paper_profile_dag_builds_without_running(tmp_path):
    """The paper profile validates and its DAG (every table section's methods x datasets x seeds + reports) is built."""
    repo = tracked_copy(tmp_path / "repo")
    (repo / "params.yaml").write_text(profile_text(repo / "profiles" / "paper.yaml"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([sys.executable, "-m", "isogclr", "validate", "--skip-data"], cwd=repo, env=env, check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "isogclr", "pipeline"], cwd=repo, env=env, check=True, capture_output=True)
    stages = subprocess.run([str(BIN / "dvc"), "stage", "list", "--all", "--name-only"], cwd=repo, env=env,
                            check=True, capture_output=True, text=True).stdout.split()
    stages = [s.rpartition(".yaml:")[2] for s in stages]  # pipelines/<family>/dvc.yaml:<stage> -> <stage>
    profile = yaml.safe_load((repo / "params.yaml").read_text())

    def grid(section: str) -> int:  # methods x datasets of a table section (one stage runs every seed)
        return len(profile[section]["methods"]) * len(profile[section]["datasets"])

    train = [s for s in stages if s.startswith("train@")]
    assert len(train) == grid("table1") and "train@isogclr-cifar100_lt" in train
    assert "train@isogclr-imagenet100" in train and "train@simclr-inaturalist" in train  # streamed, 224 px
    assert "table1_unimodal" in stages and "index" in stages
    assert len([s for s in stages if s.startswith("train_table3@")]) == grid("table3")
    # a unimodal study: one stage per method, its seeds and values in one process
    assert "study_rho@isogclr" in stages and "study_burn_in@emc2" in stages
    assert "study_standard_batch@emc2" in stages and "study_standard_batch@negcache" in stages
    assert "study_epochs@isogclr" in stages  # Tables 3/4: 800 epochs beside Table 1's 400, seeds 0-2
    assert not [s for s in stages if s.startswith("study_epochs@") and s[-2:] in ("-0", "-1", "-2")]
    assert "study_bimodal_epochs@clip-60-0" in stages  # SogCLR Table 4: 60 epochs beside the bimodal runs' 30
    assert len([s for s in stages if s.startswith("train_real@")]) == grid("table1_real")  # Fashion-MNIST (+ LT)
    assert "emc2_convergence" in stages and "emc2_convergence_runs" in stages
    dag = subprocess.run([str(BIN / "dvc"), "dag", "--dot"], cwd=repo, env=env, capture_output=True, text=True)
    assert dag.returncode == 0
    assert '"pipelines/train/dvc.yaml:train@isogclr-cifar10" -> "table1_unimodal"' in dag.stdout
    assert '"pipelines/study_epochs/dvc.yaml:study_epochs@isogclr" -> "table1_unimodal"' in dag.stdout
    assert ('"pipelines/study_bimodal_epochs/dvc.yaml:study_bimodal_epochs@sogclr_bimodal-60-0" -> "bimodal"'
            in dag.stdout)
