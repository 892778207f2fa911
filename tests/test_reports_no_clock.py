"""No wall clock in any tracked report: times live only in the timing record (``timing.csv``, ``reports/timing.md``,
``reports/repro_stages.csv``).

* The notebook sources read no clock and no timing record, and the executed reports hold no execution timestamps
  (papermill's ``start_time`` / ``end_time`` / ``duration``, Jupyter's ``execution``) and no seconds.
* Rerunning every report stage of the pipeline twice, in a copy of the repository with its committed runs, leaves
  every file byte-identical (slow: about the reports' share of a repro, twice).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

TIMING_RECORD = ("timing.csv", "reports/timing.md", "reports/repro_stages.csv")
CLOCK_MODULES = {"time", "datetime", "timeit"}
RUN_KEYS = {"start_time", "end_time", "duration"}
# a number of seconds as a report would print it: "12 s", "3.4 s", "12 seconds", "0:01:02" (not "b = 32 s..."-like
# prose: a digit, a space, then s alone)
SECONDS = re.compile(r"\b\d+(\.\d+)? ?(s|sec|seconds)\b|\b\d{1,2}:\d{2}:\d{2}\b")


def report_stages(root: Path = ROOT) -> dict[str, str]:
    """The pipeline's report stages (``python -m isogclr report`` / ``report-index``) and their commands."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return {name: stage["cmd"] for name, stage in stages.items()
            if isinstance(stage, dict) and str(stage.get("cmd", "")).startswith(("python -m isogclr report",))}


def test_the_pipeline_has_report_stages():
    stages = report_stages()
    assert {"small_batch", "emc2_convergence", "index"} <= set(stages)


@pytest.mark.parametrize("script", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_a_report_notebook_reads_no_clock(script):
    """No clock module, no perf_counter, no timing record: a report's output cannot depend on the machine's speed."""
    tree = ast.parse(script.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & CLOCK_MODULES, ast.unparse(node)
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            assert module.split(".")[0] not in CLOCK_MODULES, ast.unparse(node)
            assert module not in ("isogclr.epoch_times", "isogclr.analysis.repro_timing"), ast.unparse(node)
            assert not (module == "isogclr" and {a.name for a in node.names} & {"timing"}), ast.unparse(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert "timing.csv" not in node.value, node.value
        if isinstance(node, ast.Subscript):
            assert "seconds" not in ast.unparse(node.slice), ast.unparse(node)


def _executed_reports() -> list[Path]:
    return sorted((ROOT / "reports").glob("*.ipynb"))


def times_in(nb: dict) -> list[str]:
    """Where an executed notebook (its JSON) holds a time: execution timestamps or durations in its metadata, or
    seconds in an output's text, plain-text, HTML or markdown."""
    found = [f"metadata.papermill.{k}" for k in sorted(RUN_KEYS & set(nb["metadata"].get("papermill", {})))]
    for cell in nb["cells"]:
        where = cell.get("id", "?")
        if "execution" in cell["metadata"] or RUN_KEYS & set(cell["metadata"].get("papermill", {})):
            found.append(f"{where}: execution metadata")
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + [v for k, v in output.get("data", {}).items()
                                                 if k in ("text/plain", "text/html", "text/markdown")]
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                hit = re.search(r"seconds", text) or SECONDS.search(text)
                if hit:
                    found.append(f"{where}: {text[max(0, hit.start() - 60):hit.end() + 20]!r}")
    return found


@pytest.mark.parametrize("report", _executed_reports(), ids=lambda p: p.stem)
def test_an_executed_report_holds_no_time(report):
    """The committed report: no execution timestamps or durations in its metadata, no seconds in its outputs."""
    assert times_in(json.loads(report.read_text())) == []


def test_the_time_finder_can_fail():
    def notebook(text: str, **metadata) -> dict:
        return {"metadata": {"papermill": metadata}, "cells": [{"id": "c", "metadata": {}, "outputs": [
            {"output_type": "stream", "text": [text]}]}]}

    assert times_in(notebook("report: 2 s\n")) == ["c: 'report: 2 s\\n'"]
    assert len(times_in(notebook("training seconds (timing.csv)"))) == 1 and times_in(notebook("took 0:01:02"))
    assert times_in(notebook("b = 32, 1-NN top-1 (%)", duration=3.2)) == ["metadata.papermill.duration"]
    assert times_in(notebook("synth10: 500 images x 2 views, 6 epochs, seed 0")) == []


# --- two reruns of every report stage --------------------------------------------------------------------------


def _copy_with_outputs(dest: Path) -> Path:
    """The repository's tracked and untracked (not ignored) files, committed outputs included, copied to ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _digests(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (the kernel's scratch and caches left out), by relative path."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and "__pycache__" not in rel and ".ipynb_checkpoints" not in rel:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _run(repo: Path, stages: dict[str, str]) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
    env.pop("ISOGCLR_TIMING_CSV", None)  # the copy's own record (no report writes it)
    for name, cmd in stages.items():
        run = subprocess.run(cmd, shell=True, cwd=repo, env=env, capture_output=True, text=True)
        assert run.returncode == 0, f"{name}: {run.stdout[-2000:]}{run.stderr[-3000:]}"


@pytest.mark.slow
def test_two_reruns_of_every_report_leave_every_file_byte_identical(tmp_path):
    """Every report stage, run twice on the same runs (in a copy of the repository), writes the same bytes into
    every file: notebooks, their HTML, tables, figures, verdicts and the index; only the timing record may move."""
    repo = _copy_with_outputs(tmp_path / "repo")
    stages = report_stages(repo)
    # the generated data first, as the pipeline's data and training stages leave it for the reports (a report that
    # finds a folder missing regenerates it, and the notice, with its seconds, lands in the executed notebook)
    _run(repo, {"restore-data": "python -m isogclr restore-data"})
    _run(repo, stages)
    first = _digests(repo)
    _run(repo, stages)
    second = _digests(repo)
    changed = sorted(k for k in set(first) | set(second) if first.get(k) != second.get(k) and k not in TIMING_RECORD)
    assert not changed, f"a second rerun of the report stages changed {changed}"
    assert any(k.startswith("reports/html/") for k in first) and "reports/figures/emc2_curves.png" in first
