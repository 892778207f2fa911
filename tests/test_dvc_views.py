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
