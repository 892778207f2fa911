from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _timing_record(tmp_path):
    """Training runs in a test write their wall-clock times to a temporary timing record, never the project's
    timing.csv (isogclr.epoch_times reads ISOGCLR_TIMING_CSV; subprocesses inherit it). Set without ``monkeypatch``,
    so that a test's ``monkeypatch.undo()`` keeps it."""
    path = tmp_path / "timing.csv"
    previous = os.environ.get("ISOGCLR_TIMING_CSV")
    os.environ["ISOGCLR_TIMING_CSV"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("ISOGCLR_TIMING_CSV", None)
    else:
        os.environ["ISOGCLR_TIMING_CSV"] = previous


@pytest.fixture(scope="session")
def smoke_params() -> dict:
    from isogclr.config.profiles import load_params

    return load_params(ROOT / "profiles" / "smoke.yaml")  # an overlay of the mini profile, merged


@pytest.fixture(scope="session")
def smoke_data(tmp_path_factory, smoke_params) -> Path:
    """The smoke profile's synthetic data, generated once per session; returns the data root."""
    from isogclr.config.datasets import synthetic_spec
    from isogclr.data.synthetic import write_synthetic

    root = tmp_path_factory.mktemp("data")
    write_synthetic(synthetic_spec(smoke_params), root / "synthetic")
    return root


def tracked_copy(dest: Path) -> Path:
    """Copy the repository's tracked (and untracked, not ignored) files into ``dest`` and make it a git repo."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        # the pipeline's outputs are left out; reports/benchmarks and reports/testbed are inputs (the testbed report's)
        output = name.startswith(("runs", "studies/", "reports/")) and not name.startswith(("reports/benchmarks/",
                                                                                           "reports/testbed/"))
        if src.is_file() and not output and not name.endswith("dvc.lock"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    return dest


def printed_by(code: str) -> str:
    """What ``code`` prints, run by a fresh interpreter (the modules an import loads are those of a new process)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
