"""benchmarks/noise.py keeps every run's result in a committed table and reads it back beside its runs folder."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import noise  # noqa: E402


def _run(runs: Path, seed: int, score: float) -> dict:
    result = {"setting": "lr0.8", "method": "simclr", "dataset": "synth10_lt", "seed": seed, "perturbed": False,
              "val_top1": score, "loss_by_epoch": [1.0, 0.5]}
    path = noise.run_path(runs, "default", "lr0.8", "simclr", "synth10_lt", seed, False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def test_committed_runs_are_read_beside_the_runs_folder(tmp_path):
    runs, committed = tmp_path / "runs", tmp_path / "noise_runs.csv"
    rows = [_run(runs, 0, 30.0)]
    kept = pd.DataFrame([{k: v for k, v in r.items() if k != "loss_by_epoch"} | {"tag": "default"}
                         for r in [*rows, {**rows[0], "seed": 1, "val_top1": 31.0}]])
    kept.to_csv(committed, index=False)
    _run(runs, 2, 32.0)
    results = noise.load_results(runs, committed)
    assert sorted(results["seed"]) == [0, 1, 2]  # seed 0 in both, once; seed 1 from the table; seed 2 new
    assert results.set_index("seed").loc[1, "val_top1"] == 31.0


def test_a_run_that_scores_otherwise_than_committed_is_an_error(tmp_path):
    runs, committed = tmp_path / "runs", tmp_path / "noise_runs.csv"
    row = _run(runs, 0, 30.0)
    pd.DataFrame([{k: v for k, v in row.items() if k != "loss_by_epoch"} | {"tag": "default", "val_top1": 29.0}]
                 ).to_csv(committed, index=False)
    with pytest.raises(RuntimeError, match="score otherwise than committed"):
        noise.load_results(runs, committed)
