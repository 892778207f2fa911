"""The README's `dvc exp show` recipe, run on this repository's committed runs: it fits a screen."""

from __future__ import annotations

import csv
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DVC = Path(sys.executable).parent / "dvc"


def readme_recipe() -> list[str]:
    """The `dvc exp show --csv ...` command of the README, as arguments."""
    line = next(line for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith(".venv/bin/dvc exp show --csv"))
    return shlex.split(line)[1:]


def test_readme_recipe_keeps_table1_and_the_knobs():
    if not (ROOT / ".git").exists() or not any((ROOT / "runs").glob("*/metrics.json")):
        pytest.skip("needs the committed runs of a git checkout")
    shown = subprocess.run([str(DVC), *readme_recipe()], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert shown.returncode == 0, shown.stderr
    header, *rows = list(csv.reader(io.StringIO(shown.stdout)))
    readme = (ROOT / "README.md").read_text()
    assert f"keeps the experiment, Table 1's linear-probe top-1 at\nthe first seed and the knob changed, " \
           f"{len(header)} columns" in readme  # the README states the count this recipe gives
    metrics = [c for c in header if re.fullmatch(r"runs/[a-z_]+-synth10(_lt)?-s0/metrics.json:top1", c)]
    assert len(metrics) >= 2 and "methods.isogclr.tau_min" in header, header
    assert len(header) <= 16 and rows  # fits a screen


def test_dvc_exp_show_lists_the_knobs_each_table1_run_used():
    """Each run writes knobs.json (its method's knobs after the selection), declared as metrics: the README's
    second recipe shows them beside the run, e.g. SimCLR's selected tau."""
    runs = sorted((ROOT / "runs").glob("*-synth10-s0/knobs.json"))
    if not (ROOT / ".git").exists() or not runs:
        pytest.skip("needs the committed runs of a git checkout")
    line = next(line for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith(".venv/bin/dvc exp show --csv") and "knobs.json" in line)
    shown = subprocess.run([str(DVC), *shlex.split(line)[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert shown.returncode == 0, shown.stderr
    header, workspace, *_ = list(csv.reader(io.StringIO(shown.stdout)))
    row = dict(zip(header, workspace, strict=True))
    import json

    for method in ("simclr", "sogclr", "isogclr"):
        knobs = json.loads((ROOT / "runs" / f"{method}-synth10-s0" / "knobs.json").read_text())
        assert row[f"runs/{method}-synth10-s0/knobs.json:loss"] == method
        selected = json.loads((ROOT / "tuning" / method / "selected.json").read_text())["knobs"]
        for knob, value in selected.items():  # the tuned run used the selection's knobs
            assert knobs[knob] == value and float(row[f"runs/{method}-synth10-s0/knobs.json:{knob}"]) == value
