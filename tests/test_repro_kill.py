"""A kill -9 of the runner (``python -m isogclr repro``) at any moment never leaves the pipeline unable to restart:
DVC's lock files are written atomically, a broken one is repaired from git before anything runs, and the restart
reaches the same outputs. The pipeline here is a tiny copy of the real one's layout (a family
``pipelines/fam/dvc.yaml`` of three stages, and a stage of ``dvc.yaml`` downstream of them) whose stages wait for a
``go/<item>`` file: the test kills on observable events (stages started, stages finished), never after a sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from isogclr import epoch_times as timing
from isogclr.locks import BrokenLockError, repair_locks

DVC = str(Path(sys.executable).parent / "dvc")
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
ITEMS = ["a", "b", "c"]
FAMILY = "pipelines/fam/dvc.yaml:fam@"

STEP = """\
import sys, time
from pathlib import Path
item = sys.argv[1]
Path("started").mkdir(exist_ok=True)
(Path("started") / item).write_text("")
with open("ran.txt", "a") as f:
    f.write(item + "\\n")
deadline = time.time() + 300  # a safety net only: the test gives the go or kills
while not (Path("go") / item).exists() and not (Path("go") / "all").exists():
    if time.time() > deadline:
        sys.exit(9)
    time.sleep(0.05)
Path("out").mkdir(exist_ok=True)
Path("out", item + ".txt").write_text("result " + item + "\\n")
"""

RUNNER = """\
import sys
import isogclr.pipeline
isogclr.pipeline.main = lambda *a, **k: 0  # dvc.yaml is the tiny one, not generated from params.yaml
from isogclr.repro import repro
sys.exit(repro(".", jobs=2, force="--force" in sys.argv))
"""


def _project(root: Path) -> None:
    """The tiny project, repro'd once and committed (outputs and lock files in git, as in the real one)."""
    root.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([DVC, "init", "-q"], cwd=root, check=True)
    (root / "step.py").write_text(STEP)
    (root / "runner.py").write_text(RUNNER)
    family = {"stages": {"fam": {"foreach": ITEMS, "do": {
        "cmd": "python step.py ${item}", "wdir": "../..", "deps": ["step.py"],
        "outs": [{"out/${item}.txt": {"cache": False}}]}}}}
    (root / "pipelines" / "fam").mkdir(parents=True)
    (root / "pipelines" / "fam" / "dvc.yaml").write_text(yaml.safe_dump(family))
    total = {"cmd": "cat out/a.txt out/b.txt out/c.txt > total.txt", "deps": [f"out/{i}.txt" for i in ITEMS],
             "outs": [{"total.txt": {"cache": False}}]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"total": total}}))
    (root / "params.yaml").write_text("{}\n")
    (root / ".gitignore").write_text("/started/\n/go/\n/ran.txt\n/runner.log\n/timing.csv*\n/reports/\n")
    (root / "go").mkdir()
    (root / "go" / "all").write_text("")
    assert _runner(root).wait(timeout=300) == 0, (root / "runner.log").read_text()
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "results"], cwd=root, check=True)
    _reset(root)


def _reset(root: Path) -> None:
    """No stage started, none allowed to go on."""
    for folder in ("started", "go"):
        for f in (root / folder).glob("*"):
            f.unlink()
    (root / "ran.txt").unlink(missing_ok=True)


def _runner(root: Path, *args: str) -> subprocess.Popen:
    """``python -m isogclr repro --jobs 2`` (through runner.py, for the tiny dvc.yaml) in its own process group, as
    ``setsid`` would start it; its output goes to runner.log."""
    log = open(root / "runner.log", "w")  # noqa: SIM115 (closed by the child's exit)
    env = {k: v for k, v in os.environ.items() if k != timing.ENV}  # the record is the project's timing.csv
    return subprocess.Popen([sys.executable, "runner.py", *args], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)


def _wait_for(condition, what: str, proc: subprocess.Popen, root: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
            raise AssertionError(f"never saw {what}:\n{(root / 'runner.log').read_text()}")
        time.sleep(0.05)


def _kill(proc: subprocess.Popen) -> None:
    """kill -9 -- -<pgid>: the runner, its DVC processes and their stage commands, all at once; returns when every
    one of them is gone (reaped), as they are when a user restarts: until then DVC counts a killed process's entry
    in its read/write lock file (.dvc/tmp/rwlock) as held."""
    import psutil

    group = [proc.pid, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 60
    while any(psutil.pid_exists(pid) for pid in group):
        assert time.monotonic() < deadline, "the killed processes were not reaped within 60 s"
        time.sleep(0.05)


def _ran(root: Path) -> list[str]:
    return sorted((root / "ran.txt").read_text().split()) if (root / "ran.txt").exists() else []


def _assert_same_outputs(root: Path) -> None:
    """Every tracked file (outputs and lock files) as committed, byte for byte, and DVC finds nothing to do."""
    diff = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                          text=True, check=True).stdout
    assert diff == "", diff
    assert (root / "total.txt").read_text() == "result a\nresult b\nresult c\n"
    status = subprocess.run([DVC, "status", "-q"], cwd=root, capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout.strip() == "", status.stdout + status.stderr


@pytest.mark.slow
def test_a_kill_at_any_point_restarts_to_the_same_outputs(tmp_path):
    root = tmp_path / "repo"
    _project(root)
    lock = root / "pipelines" / "fam" / "dvc.lock"

    # 1. killed while two stages of one family run, the family's lock then truncated as a kill in the middle of
    #    DVC's own write of it leaves it (an older version's, or a plain `dvc repro`'s)
    proc = _runner(root, "--force")
    _wait_for(lambda: len(list((root / "started").glob("*"))) == 2, "two family stages running", proc, root)
    _kill(proc)
    assert not (root / "out" / "a.txt").exists() and not (root / "out" / "b.txt").exists()  # DVC removed them
    text = lock.read_text()
    lock.write_text(text[:text.index("- path") + len("- path")])  # a prefix, as a kill in mid-write leaves it
    broken = subprocess.run([DVC, "status"], cwd=root, capture_output=True, text=True)
    assert broken.returncode != 0 and "dvc.lock" in broken.stderr  # DVC alone cannot go on
    _reset(root)
    (root / "go" / "all").write_text("")
    assert _runner(root).wait(timeout=300) == 0, (root / "runner.log").read_text()
    log = (root / "runner.log").read_text()
    assert "pipelines/fam/dvc.lock was broken" in log and "restored git's HEAD version" in log
    assert _ran(root) == ["a", "b"]  # the killed stages; c's committed output is recorded in HEAD's lock
    _assert_same_outputs(root)

    # 2. killed between stages: a and b finished (their lock entries written), c running
    _reset(root)
    proc = _runner(root, "--force")
    _wait_for(lambda: len(list((root / "started").glob("*"))) == 2, "two family stages running", proc, root)
    (root / "go" / "a").write_text("")
    (root / "go" / "b").write_text("")
    _wait_for(lambda: (root / "runner.log").read_text().count(f"finished {FAMILY}") == 2
              and (root / "started" / "c").exists(), "a and b finished, c started", proc, root)
    _kill(proc)
    assert lock.read_text() and not list(lock.parent.glob(".dvc.lock.isogclr-tmp-*"))
    _reset(root)
    (root / "go" / "all").write_text("")
    assert _runner(root).wait(timeout=300) == 0, (root / "runner.log").read_text()
    assert _ran(root) == ["c"]  # the finished stages kept their lock entries: only the killed one ran again
    assert "was broken" not in (root / "runner.log").read_text()
    _assert_same_outputs(root)

    # 3. killed when the last stage has started (every family stage done)
    _reset(root)
    (root / "go" / "all").write_text("")
    proc = _runner(root, "--force")
    _wait_for(lambda: "started total" in (root / "runner.log").read_text(), "the last stage started", proc, root)
    _kill(proc)
    _reset(root)
    (root / "go" / "all").write_text("")
    assert _runner(root).wait(timeout=300) == 0, (root / "runner.log").read_text()
    assert _ran(root) == []  # the family was done; only `total` (no step.py) could rerun
    _assert_same_outputs(root)


def test_a_kill_while_dvc_writes_a_lock_leaves_the_old_lock(tmp_path):
    """The writer DVC runs with under the runner (python -m isogclr.locks) killed in the middle of a lock file: the
    old file is intact, the temporary is left, and the runner's start removes it."""
    (tmp_path / "pipelines" / "fam").mkdir(parents=True)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    lock = tmp_path / "dvc.lock"
    lock.write_text("schema: '2.0'\nstages: {}\n")
    code = f"""
import os, signal
from isogclr.locks import install_atomic_writes
install_atomic_writes()
from dvc.utils.serialize import modify_yaml
def die_halfway(data, fd):
    fd.write("schema: '2.0'\\nstages:\\n  x:\\n    cmd: [")
    fd.flush()
    os.kill(os.getpid(), signal.SIGKILL)
import dvc.utils.serialize._yaml as y
y._dump = die_halfway
with modify_yaml({str(lock)!r}) as data:
    data["stages"] = {{"x": {{"cmd": "echo"}}}}
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert lock.read_text() == "schema: '2.0'\nstages: {}\n"
    left = list(tmp_path.glob(".dvc.lock.isogclr-tmp-*"))
    assert len(left) == 1 and "cmd: [" in left[0].read_text()
    subprocess.run([DVC, "init", "-q", "--no-scm"], cwd=tmp_path, check=True)
    lines: list[str] = []
    assert repair_locks(tmp_path, log=lines.append) == []
    assert not left[0].exists() and lines == [f"removed {left[0].name}, left by a kill while DVC wrote a file"]


def test_a_broken_lock_git_cannot_restore_is_refused_with_the_command(tmp_path):
    subprocess.run([DVC, "init", "-q", "--no-scm"], cwd=tmp_path, check=True)
    (tmp_path / "pipelines" / "fam").mkdir(parents=True)
    (tmp_path / "pipelines" / "fam" / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "pipelines" / "fam" / "dvc.lock").write_text("schema: '2.0'\nstages:\n  x:\n    cmd: [\n")
    with pytest.raises(BrokenLockError, match=r"pipelines/fam/dvc.lock cannot be read by DVC .*"
                                              r"rm pipelines/fam/dvc.lock$"):
        repair_locks(tmp_path, log=lambda line: None)
    (tmp_path / "pipelines" / "fam" / "dvc.lock").write_text("")  # DVC never writes an empty lock
    with pytest.raises(BrokenLockError, match="the file is empty"):
        repair_locks(tmp_path, log=lambda line: None)


def test_a_torn_rwlock_record_is_refused_with_the_command(tmp_path):
    subprocess.run([DVC, "init", "-q", "--no-scm"], cwd=tmp_path, check=True)
    (tmp_path / ".dvc" / "tmp").mkdir(exist_ok=True)
    (tmp_path / ".dvc" / "tmp" / "rwlock").write_text('{"read": {}, "wri')
    with pytest.raises(BrokenLockError, match=r"\.dvc/tmp/rwlock .* When no DVC process runs, remove it: "
                                              r"rm \.dvc/tmp/rwlock$"):
        repair_locks(tmp_path, log=lambda line: None)
    (tmp_path / ".dvc" / "tmp" / "rwlock").write_text('{"read": {}, "write": {}}')
    assert repair_locks(tmp_path, log=lambda line: None) == []
