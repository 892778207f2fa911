"""The parallel pipeline runner's scheduling (its use with DVC is in test_pipeline's end-to-end test)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from isogclr import machine
from isogclr.repro import run_schedule, worker_env


def _stage_command(tmp_path: Path, fail: set[str] = frozenset(), seconds: float = 0.5):
    """A stage that writes its start and end times to <tmp>/<stage>.txt, sleeping in between."""

    def command(stage: str) -> list[str]:
        code = (
            "import sys, time; from pathlib import Path\n"
            f"p = Path({str(tmp_path / stage)!r} + '.txt'); t = time.time()\n"
            f"time.sleep({seconds}); p.write_text(f'{{t}} {{time.time()}}')\n"
            f"sys.exit({1 if stage in fail else 0})\n"
        )
        return [sys.executable, "-c", code]

    return command


def _times(tmp_path: Path, stage: str) -> tuple[float, float]:
    start, end = (tmp_path / f"{stage}.txt").read_text().split()
    return float(start), float(end)


def test_upstream_stages_finish_first_and_independent_ones_overlap(tmp_path):
    upstream = {"a": set(), "b": set(), "c": {"a", "b"}, "d": {"c"}}
    failed = run_schedule(upstream, set(upstream), _stage_command(tmp_path), jobs=2, log=lambda _: None)
    assert failed == []
    a, b, c, d = (_times(tmp_path, s) for s in "abcd")
    assert c[0] >= max(a[1], b[1]) and d[0] >= c[1]
    assert max(a[0], b[0]) < min(a[1], b[1])  # a and b ran at the same time


def test_one_job_runs_stages_one_after_another(tmp_path):
    upstream = {"a": set(), "b": set()}
    run_schedule(upstream, set(upstream), _stage_command(tmp_path, seconds=0.3), jobs=1, log=lambda _: None)
    (a0, a1), (b0, b1) = _times(tmp_path, "a"), _times(tmp_path, "b")
    assert a1 <= b0 or b1 <= a0


def test_stages_outside_to_run_are_treated_as_done(tmp_path):
    upstream = {"data": set(), "run": {"data"}}
    run_schedule(upstream, {"run"}, _stage_command(tmp_path, seconds=0.0), jobs=2, log=lambda _: None)
    assert (tmp_path / "run.txt").exists() and not (tmp_path / "data.txt").exists()


def test_a_failure_stops_new_stages_and_is_reported(tmp_path):
    upstream = {"a": set(), "b": set(), "c": {"a"}, "e": {"b"}}
    lines: list[str] = []
    failed = run_schedule(upstream, set(upstream), _stage_command(tmp_path, fail={"a"}), jobs=2, log=lines.append)
    assert failed == ["a"]
    assert not (tmp_path / "c.txt").exists() and not (tmp_path / "e.txt").exists()
    assert (tmp_path / "b.txt").exists()  # it was already running and finished
    assert any(line.startswith("FAILED a") for line in lines)


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        run_schedule({"a": set()}, {"a"}, _stage_command(tmp_path), jobs=0)
    with pytest.raises(ValueError, match="not in the graph"):
        run_schedule({"a": set()}, {"a", "zzz"}, _stage_command(tmp_path), jobs=1)
    assert not list(tmp_path.iterdir())


def test_worker_env_splits_the_cores_unless_the_user_chose():
    assert worker_env(2, {"PATH": "/bin"})["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    assert worker_env(2, {"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"


def _tiny_project(root: Path) -> None:
    """A DVC project of two stages (``a`` makes ``a/out.txt``, ``b`` reads it); each stage counts its runs."""
    import subprocess

    import yaml

    dvc = str(Path(sys.executable).parent / "dvc")
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=root, check=True)
    stages = {"a": {"cmd": "echo run >> ran_a.txt && mkdir -p a && echo a > a/out.txt", "outs": ["a"]},
              "b": {"cmd": "echo run >> ran_b.txt && cat a/out.txt > b.txt", "deps": ["a"], "outs": ["b.txt"]}}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (root / "params.yaml").write_text("{}\n")


def test_force_reruns_every_stage_and_logs_its_times(tmp_path, monkeypatch):
    import isogclr.pipeline
    from isogclr import epoch_times as timing
    from isogclr import repro as runner

    monkeypatch.setattr(isogclr.pipeline, "main", lambda *a, **k: 0)  # dvc.yaml is the tiny one, not generated
    monkeypatch.delenv(timing.ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # as `make repro` runs it: DVC names the stages relative to the working directory
    _tiny_project(tmp_path)
    timing.record("a", [{"epoch": 1, "seconds": 1.0}], tmp_path / "timing.csv")
    timing.record("gone/run-s0", [{"epoch": 1, "seconds": 2.0}], tmp_path / "timing.csv")
    assert runner.repro(tmp_path, jobs=2) == 0
    assert (tmp_path / "b.txt").read_text() == "a\n"
    # the first repro ran every stage: a full one, so the stage log and the timing table are written
    log = (tmp_path / "reports" / "repro_stages.csv").read_text()
    assert sorted(line.split(",")[0] for line in log.splitlines()[1:]) == ["a", "b"]
    assert "| total | 2 |" in (tmp_path / "reports" / "timing.md").read_text()
    # beside them, the machine that ran the stages (the CSV's columns unchanged)
    assert json.loads((tmp_path / "reports" / "repro_machine.json").read_text()) == machine.describe()
    assert log.splitlines()[0] == "stage,start_s,end_s,seconds,ok,family,runs"
    # the record keeps the run the pipeline has (stage a's output folder) and drops the other
    assert {r["run"] for r in timing.read(tmp_path / "timing.csv")} == {"a"}
    assert runner.repro(tmp_path, jobs=2) == 0  # up to date: nothing reruns
    assert (tmp_path / "ran_a.txt").read_text().count("run") == 1
    assert runner.repro(tmp_path, jobs=2, force=True) == 0  # --force: both stages again
    assert (tmp_path / "ran_a.txt").read_text().count("run") == 2
    assert (tmp_path / "ran_b.txt").read_text().count("run") == 2
    assert "repro --force" in (tmp_path / "reports" / "timing.md").read_text()


def test_the_cli_and_make_pass_force_through():
    from isogclr.cli import build_parser

    assert build_parser().parse_args(["repro", "--force"]).force is True
    assert build_parser().parse_args(["repro"]).force is False
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "$(if $(filter-out 0,$(FORCE)), --force)" in makefile


def test_live_run_keeps_outputs_their_folders_and_listed_candidates(tmp_path):
    from isogclr.repro import live_run

    (tmp_path / "tuning" / "m").mkdir(parents=True)
    (tmp_path / "tuning" / "m" / "candidates.csv").write_text("candidate,rho,seed\n0,0.1,0\n1,0.2,0\n")
    outputs = {"runs/x-s0/metrics.json", "runs_convergence", "tuning/m/candidates.csv"}
    assert live_run("runs/x-s0", outputs, tmp_path)  # an output lies in the run's folder
    assert live_run("runs_convergence/emc2-A2", outputs, tmp_path)  # an output holds it
    assert live_run("tuning/m/runs/c1-s0", outputs, tmp_path)
    assert not live_run("tuning/m/runs/c2-s0", outputs, tmp_path)  # the selection has two candidates
    assert not live_run("tuning/m/runs/c0-s1", outputs, tmp_path)
    assert not live_run("runs/y-s0", outputs, tmp_path)
    assert not live_run("runs/x", outputs, tmp_path)  # a prefix of a name is not its folder


def test_stages_run_the_interpreter_that_runs_the_pipeline(tmp_path):
    """A stage's bare `python` (run through a shell, as DVC runs a stage's cmd) is this interpreter even when its
    folder is not on the user's PATH (`.venv/bin/python -m isogclr repro`)."""
    env = worker_env(1, {"PATH": "/usr/bin:/bin"})
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert env["PATH"].split(os.pathsep)[1:] == ["/usr/bin", "/bin"]
    out = tmp_path / "prefix.txt"
    failed = run_schedule({"s": set()}, {"s"}, lambda stage: [
        "/bin/sh", "-c", f"python -c 'import sys; open(\"{out}\", \"w\").write(sys.prefix)'"], 1, env=env,
        log=lambda line: None)
    assert failed == [] and out.read_text() == sys.prefix


def test_a_failed_stage_leaves_its_committed_outputs_as_they_were(tmp_path, monkeypatch, capsys):
    """DVC removes a stage's outputs before its command runs; when the command then fails, the runner puts back
    the outputs git tracks, byte for byte (an untracked output is left as DVC left it)."""
    import subprocess

    import yaml

    import isogclr.pipeline
    from isogclr import epoch_times as timing
    from isogclr import repro as runner

    monkeypatch.setattr(isogclr.pipeline, "main", lambda *a, **k: 0)  # dvc.yaml is the tiny one, not generated
    monkeypatch.delenv(timing.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(Path(sys.executable).parent / "dvc"), "init", "-q"], cwd=tmp_path, check=True)
    stage = {"cmd": "mkdir -p out && printf 'committed\\n' > out/table.csv && printf 'x' > scratch.txt",
             "outs": [{"out": {"cache": False}}, {"scratch.txt": {"cache": False}}]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"a": stage}}))
    (tmp_path / "params.yaml").write_text("{}\n")
    (tmp_path / ".gitignore").write_text("/scratch.txt\n/timing.csv*\n/reports/\n")
    assert runner.repro(tmp_path, jobs=1) == 0
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "results"], cwd=tmp_path, check=True)
    committed = (tmp_path / "out" / "table.csv").read_bytes()
    stage["cmd"] = "printf 'half' > out.partial && exit 3"  # a changed command that fails: the stage is stale
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"a": stage}}))
    capsys.readouterr()
    assert runner.repro(tmp_path, jobs=1) == 1
    assert (tmp_path / "out" / "table.csv").read_bytes() == committed
    assert not (tmp_path / "scratch.txt").exists()  # not git's: DVC removed it, the runner does not invent it
    err = capsys.readouterr().err
    assert "failed: a" in err and "restored from git's HEAD (1 files)" in err


def test_orphan_runs_lists_run_folders_no_stage_declares(tmp_path):
    """A run folder left behind by a params change is listed (and kept); declared ones, a folder holding a
    declared output and selection scratch are not."""
    from isogclr.repro import orphan_runs

    for folder in ("runs/a-s0", "runs/old-s0", "studies/epochs/simclr-6-s0", "studies/epochs/simclr-2-s0",
                   "tuning/m/runs/c0-s0"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "metrics.json").write_text("{}")
    outputs = {"runs/a-s0/metrics.json", "studies/epochs/simclr-2-s0", "tuning/m/candidates.csv"}
    assert orphan_runs(tmp_path, outputs) == ["runs/old-s0", "studies/epochs/simclr-6-s0"]
    assert (tmp_path / "runs/old-s0/metrics.json").is_file()  # nothing deleted
