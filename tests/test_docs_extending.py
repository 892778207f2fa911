"""docs/extending.md, performed (a loss, a dataset, a study, a claim): its files written, its insertions made and its
commands run, in order, in a temporary copy of the repository (the smoke profile's sizes: `profile mini` runs as
`profile smoke`, which extends it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from isogclr.analysis.verdicts import STATUSES

from .conftest import ROOT, tracked_copy

DOC = ROOT / "docs" / "extending.md"
STEP = re.compile(r"<!-- tutorial: (?P<action>\w+)(?: (?P<arg>[^>]*?))? -->\n```\w*\n(?P<body>.*?)```", re.S)


def steps(text: str) -> list[tuple[str, str, str]]:
    """The tutorial's steps: (action, argument, the fenced block that follows the marker)."""
    return [(m["action"], m["arg"] or "", m["body"]) for m in STEP.finditer(text)]


def perform(repo: Path, action: str, arg: str, body: str, env: dict[str, str]) -> str:
    """One step in ``repo``: write a file, insert or append a block, or run the block's commands."""
    if action == "file":
        (repo / arg).write_text(body)
    elif action == "append":
        path = repo / arg
        path.write_text(path.read_text().rstrip("\n") + "\n" + body)
    elif action == "insert":
        name, _, pattern = arg.partition(" after ")
        lines = (repo / name).read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if re.match(pattern, line))
        (repo / name).write_text("".join([*lines[:at + 1], body, *lines[at + 1:]]))
    elif action == "run":
        out = []
        for command in filter(None, (c.strip() for c in body.splitlines())):
            command = command.replace("isogclr profile mini", "isogclr profile smoke")
            done = subprocess.run(command, shell=True, cwd=repo, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            out.append(done.stdout)
        return "".join(out)
    else:
        raise ValueError(f"docs/extending.md: unknown tutorial action {action!r}")
    return ""


def test_the_markers_cover_the_four_tutorials():
    actions = [(a, arg) for a, arg, _ in steps(DOC.read_text())]
    assert ("file", "src/isogclr/losses/align_uniform.py") in actions
    assert ("insert", r"src/isogclr/losses/loss_table.py after ^UNIMODAL = \{") in actions  # its line in the table
    assert ("insert", "src/isogclr/losses/__init__.py after ^if TYPE_CHECKING:") in actions  # its IDE import
    assert ("insert", r"src/isogclr/dataset_specs.py after ^SPECS: dict\[str, DatasetSpec\] = _by_name\(") in actions
    assert ("append", "profiles/mini.yaml") in actions and sum(a == "run" for a, _ in actions) >= 6
    assert ("file", "notebooks/src/align_t.py") in actions  # a claim: its report notebook and registry line
    assert ("insert", r"src/isogclr/reports/report_table.py after ^REPORTS: dict\[str, Report\] = \{") in actions


@pytest.mark.slow
def test_the_tutorials_run_on_a_copy_of_the_repository(tmp_path):
    repo = tracked_copy(tmp_path / "repo")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(repo / "src")}  # the copy's code (with the new loss), not the checkout's
    outputs = [perform(repo, *step, env) for step in steps(DOC.read_text())]
    assert (repo / "pipelines" / "study_align_t" / "dvc.yaml").exists()
    assert "80 ['dark', 'light'] 50" in "".join(outputs)  # the new dataset and its long-tailed variant, by name
    assert json.loads((repo / "runs" / "simclr-noise_tones-s0" / "metrics.json").read_text())["top1"] >= 0
    runs = sorted(p.name for p in (repo / "studies" / "align_t").iterdir())
    assert runs == [f"align_uniform-{v}-s{s}" for v in ("1.0", "4.0") for s in (0, 1, 2)]
    table = next(out for out in outputs if "top1" in out)  # the study's runs, read back by the library
    assert table.count("align_uniform") == 6
    verdict = pd.read_csv(repo / "reports" / "verdicts" / "align_t.csv")  # the claim, judged by its report
    assert verdict["claim"].tolist() == ["align_uniform: t = 4 beats t = 1 on synth10_lt"]
    assert verdict["n_seeds"].tolist() == [3] and verdict["status"].iloc[0] in STATUSES
    assert (repo / "reports" / "align_t.ipynb").exists() and "align_t" in outputs[-1]
