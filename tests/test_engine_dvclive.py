"""The training run's DVCLive folder: files only (no DVC repo, git or Studio side effects), rebuilt on replay."""

from __future__ import annotations

import json
import subprocess

from dvclive import Live

from isogclr.train.curves import FilesOnlyLive, log_epoch, open_curves

ROWS = [{"epoch": 1, "step": 12, "loss": 5.5, "lr": 1.2, "tau_mean": 0.3, "tau_std": 0.01},
        {"epoch": 2, "step": 24, "loss": 5.0, "lr": 0.2, "tau_mean": 0.25, "tau_std": 0.02}]
WALL_CLOCK = {"timestamp", "seconds", "samples_per_s"}


def test_the_overridden_dvclive_hooks_exist():
    """FilesOnlyLive switches DVCLive's repository and Studio set-up off by overriding these; a DVCLive
    release that renames them would silently bring the side effects back, so fail here instead."""
    assert callable(vars(Live).get("_init_dvc")) and callable(vars(Live).get("_init_studio"))
    assert set(vars(FilesOnlyLive)) >= {"_init_dvc", "_init_studio"}


def test_no_dvc_init_in_a_git_repository(tmp_path, monkeypatch):
    """The stock Live runs ``dvc init`` in a git repository without DVC; the run's logger must not."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    live = open_curves(tmp_path / "run" / "dvclive", ROWS)
    assert not (tmp_path / ".dvc").exists()
    assert sorted(p.name for p in (tmp_path / "run" / "dvclive").iterdir()) == ["metrics.json", "plots"]
    assert live.summary["step"] == 2
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, check=True, capture_output=True,
                            text=True).stdout
    assert status.split() == ["??", "run/"]  # nothing staged, nothing else written


def test_replay_drops_a_step_logged_after_the_last_checkpoint(tmp_path):
    """A kill between the DVCLive write of epoch 3 and its checkpoint: the restart rebuilds from rows 1-2."""
    folder = tmp_path / "dvclive"
    live = open_curves(folder, ROWS)
    log_epoch(live, {**ROWS[1], "epoch": 3, "loss": 4.0})  # written, then killed before the checkpoint
    live.make_summary()
    open_curves(folder, ROWS)
    lines = (folder / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
    assert lines == ["step\tloss", "1\t5.5", "2\t5.0"]  # no timestamp column: replays are byte-identical
    assert json.loads((folder / "metrics.json").read_text()) == {**{k: v for k, v in ROWS[1].items()
                                                                   if k not in ("epoch", "step")}, "step": 2}


def assert_no_wall_clock(folder) -> None:
    """No file of a DVCLive folder has a wall-clock column (tsv/csv header) or key (json): reruns are identical."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    assert files
    for path in files:
        if path.suffix in (".tsv", ".csv"):
            header = path.read_text().splitlines()[0].replace(",", "\t").split("\t")
            assert not WALL_CLOCK & set(header), path
        elif path.suffix == ".json":
            assert not WALL_CLOCK & set(json.loads(path.read_text())), path
        assert path.stem not in WALL_CLOCK, path


def test_no_wall_clock_even_if_a_row_has_it(tmp_path):
    """Rows from an older checkpoint may still carry seconds / samples_per_s: they are not curves."""
    folder = tmp_path / "dvclive"
    open_curves(folder, [{**row, "seconds": 1.5, "samples_per_s": 300.0} for row in ROWS])
    assert_no_wall_clock(folder)
