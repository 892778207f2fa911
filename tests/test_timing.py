"""The timing record timing.csv: replace a run's rows, read back, sorted output, two writers at once; and the
lock it takes, isogclr.io.locked."""

from __future__ import annotations

import fcntl
import multiprocessing
import subprocess
import sys
import threading
import time

import pytest

from isogclr import epoch_times as timing
from isogclr import io


def test_record_replaces_a_runs_rows_and_reads_back(tmp_path):
    path = tmp_path / "timing.csv"
    assert timing.read(path) == [] and timing.read(path, as_frame=True).empty  # missing file: empty record
    timing.record("runs/b-s0", [{"epoch": 2, "seconds": 2.00049, "samples_per_s": 10.04},
                                {"epoch": 1, "seconds": 1.0, "samples_per_s": 12.0}], path=path)
    timing.record("runs/a-s0", [{"epoch": 1, "seconds": 3.5}], path=path)
    assert path.read_text() == ("run,epoch,seconds,samples_per_s\n"
                                "runs/a-s0,1,3.5,\n"
                                "runs/b-s0,1,1.0,12.0\n"
                                "runs/b-s0,2,2.0,10.0\n")  # sorted by (run, epoch), seconds to 3 decimals
    timing.record("runs/b-s0", [{"epoch": 1, "seconds": 0.5, "samples_per_s": 20.0}], path=path)  # a rerun
    assert timing.read(path) == [{"run": "runs/a-s0", "epoch": 1, "seconds": 3.5},
                                 {"run": "runs/b-s0", "epoch": 1, "seconds": 0.5, "samples_per_s": 20.0}]
    timing.record("runs_convergence/emc2-A2", [{"step": 124, "seconds": 1.5}, {"step": 62, "seconds": 1.25}],
                  path=path)
    frame = timing.read(path, as_frame=True)
    assert list(frame.columns) == ["run", "epoch", "step", "seconds", "samples_per_s"]
    steps = frame[frame.run == "runs_convergence/emc2-A2"]
    assert steps["step"].tolist() == [62, 124] and steps["epoch"].isna().all()
    assert not (tmp_path / "timing.csv.lock").read_text()  # the lock file is empty (and git-ignored)


def test_the_file_depends_only_on_its_content(tmp_path):
    rows = {"runs/x": [{"epoch": e, "seconds": e / 3} for e in (3, 1, 2)], "runs/a": [{"epoch": 1, "seconds": 1}]}
    texts = []
    for order in (("runs/x", "runs/a"), ("runs/a", "runs/x")):
        path = tmp_path / f"{order[0].replace('/', '_')}.csv"
        for run in order:
            timing.record(run, rows[run], path=path)
        texts.append(path.read_text())
    assert texts[0] == texts[1]


def test_bad_rows_are_refused(tmp_path):
    with pytest.raises(ValueError, match="epoch or a step"):
        timing.record("runs/a", [{"seconds": 1.0}], path=tmp_path / "t.csv")
    with pytest.raises(ValueError, match="columns"):
        timing.record("runs/a", [{"epoch": 1, "seconds": 1.0, "loss": 2.0}], path=tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()


def test_run_key_is_the_folder_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert timing.run_key(tmp_path / "runs" / "isogclr-synth10-s0") == "runs/isogclr-synth10-s0"
    assert timing.run_key("studies/batch_size/simclr-32-s0") == "studies/batch_size/simclr-32-s0"


def test_default_path_is_timing_csv_or_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(timing.ENV, raising=False)
    assert str(timing.default_path()) == "timing.csv"
    monkeypatch.setenv(timing.ENV, str(tmp_path / "t.csv"))
    timing.record("runs/a", [{"epoch": 1, "seconds": 1.0}])
    assert timing.read(tmp_path / "t.csv") == [{"run": "runs/a", "epoch": 1, "seconds": 1.0}]


def _writer(path: str, worker: int, runs: int) -> None:
    for i in range(runs):
        timing.record(f"runs/w{worker}-{i:02d}", [{"epoch": e, "seconds": worker + e / 10} for e in (1, 2, 3)],
                      path=path)


def test_two_processes_recording_at_once_lose_no_row(tmp_path):
    path = tmp_path / "timing.csv"
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(str(path), worker, 15)) for worker in (1, 2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    rows = timing.read(path)
    assert len(rows) == 2 * 15 * 3
    assert rows == sorted(rows, key=lambda r: (r["run"], r["epoch"]))
    assert {r["run"] for r in rows} == {f"runs/w{w}-{i:02d}" for w in (1, 2) for i in range(15)}


def test_importable_without_pandas():
    code = ("import sys; sys.modules['pandas'] = None; import isogclr.epoch_times as t; "
            "assert t.read('missing.csv') == []")
    subprocess.run([sys.executable, "-c", code], check=True)


def _lock_is_free(path) -> bool:
    """Whether another open file description can take ``path``'s exclusive flock right now (not waiting)."""
    with open(path, "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return True


def test_locked_holds_an_exclusive_lock_and_a_second_holder_waits(tmp_path):
    path = tmp_path / "missing" / "x.lock"  # neither the file nor its folder exists yet
    events: list[str] = []
    entered = threading.Event()

    def second() -> None:
        entered.set()
        with io.locked(path):
            events.append("second holds it")

    with io.locked(path):
        assert path.is_file() and not _lock_is_free(path)
        thread = threading.Thread(target=second)
        thread.start()
        entered.wait(10)
        time.sleep(0.3)  # time enough for the thread to take the lock, were it not held
        events.append("first releases it")
    thread.join(10)
    assert not thread.is_alive()
    assert events == ["first releases it", "second holds it"]
    assert _lock_is_free(path) and path.is_file()  # released, and the lock file stays


def test_lock_released_when_the_block_raises(tmp_path):
    path = tmp_path / "x.lock"
    with pytest.raises(RuntimeError), io.locked(path):
        raise RuntimeError("boom")
    assert _lock_is_free(path)


def test_atomic_writes_get_the_umask_permissions_not_mkstemps(tmp_path):
    io.save_bytes(b"\x00\x01", tmp_path / "b.bin")
    io.save_text("text\n", tmp_path / "t.txt")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01" and (tmp_path / "t.txt").read_text() == "text\n"
    for name in ("b.bin", "t.txt"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~io._UMASK
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_prune_drops_only_the_runs_that_no_longer_exist(tmp_path):
    path = tmp_path / "timing.csv"
    timing.record("runs/a-s0", [{"epoch": 1, "seconds": 1.0}], path)
    timing.record("runs/gone-s0", [{"epoch": 1, "seconds": 2.0}, {"epoch": 2, "seconds": 2.0}], path)
    before = path.read_bytes()
    assert timing.prune(lambda run: True, path) == [] and path.read_bytes() == before
    assert timing.prune(lambda run: run != "runs/gone-s0", path) == ["runs/gone-s0"]
    assert timing.read(path) == [{"run": "runs/a-s0", "epoch": 1, "seconds": 1.0}]


def test_timing_report_groups_the_stage_log_by_claim(tmp_path):
    from isogclr.analysis.repro_timing import claim_group, write_timing_report

    log = tmp_path / "repro_stages.csv"
    log.write_text("stage,start_s,end_s,seconds,ok,family,runs\n"
                   "synthetic,0.0,30.0,30.0,1,synthetic,0\n"
                   "pipelines/tune/dvc.yaml:tune@isogclr,30.0,150.0,120.0,1,tune,3\n"
                   "pipelines/tune/dvc.yaml:tune@simclr,30.0,90.0,60.0,1,tune,3\n"
                   "pipelines/study_ladder_synth10_lt/dvc.yaml:study_ladder_synth10_lt@simclr-s0,150.0,390.0,240.0,1,"
                   "study_ladder_synth10_lt,3\n"
                   "pipelines/study_gamma/dvc.yaml:study_gamma@sogclr-s0,150.0,210.0,60.0,1,study_gamma,3\n"
                   "index,390.0,420.0,30.0,1,index,0\n")
    text = write_timing_report(log, tmp_path / "timing.md", jobs=2, force=True, stages=6, commit="abc1234")
    assert (tmp_path / "timing.md").read_text() == text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| data, the reports and the index | 2 |  | 1.0 | 0.5 |",
                    "| selection on the validation split, unimodal | 2 | 6 | 3.0 | 1.5 |",
                    "| budget ladders and the temperature-frequency ground truth | 1 | 3 | 4.0 | 2.0 |",
                    "| side studies (Table 3, ablations, batch size, EMC2) | 1 | 3 | 1.0 | 0.5 |",
                    "| total | 6 | 12 | 9.0 | 4.5 |"]
    assert "Commit abc1234, 6 of 6 stages, 2 at a time: the schedule took **7.0 min**" in text
    assert "make repro FORCE=1" in text
    assert claim_group("train_bimodal_side", 1) == "image-text side methods"
    assert claim_group("train_new_family", 2) == "train_new_family"  # unknown, with runs: its own name
