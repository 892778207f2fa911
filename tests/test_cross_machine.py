"""benchmarks/cross_machine.py: every Table 1 verdict recomputed with a sample's scores in place of the committed
ones."""

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import cross_machine  # noqa: E402

from isogclr.config.core import run_id  # noqa: E402
from isogclr.config.profiles import load_params  # noqa: E402


def _sample(work: Path, shift: dict[str, float], seeds=(0, 1, 2), dataset="synth10_lt") -> None:
    for method, delta in shift.items():
        for seed in seeds:
            run = run_id(method, dataset, seed)
            metrics = json.loads((ROOT / "runs" / run / "metrics.json").read_text())
            metrics["top1"] += delta
            (work / "runs" / run).mkdir(parents=True)
            (work / "runs" / run / "metrics.json").write_text(json.dumps(metrics))


def _report(work: Path, out: Path, methods) -> pd.DataFrame:
    cross_machine.report(ROOT / "params.yaml", work, list(methods), ["synth10_lt"], [0, 1, 2], "avx2", out)
    return pd.read_csv(out / "cross_machine.csv")


def test_the_same_scores_keep_every_verdict(tmp_path):
    _sample(tmp_path, {"simclr": 0.0, "sogclr": 0.0, "isogclr": 0.0})
    table = _report(tmp_path, tmp_path / "out", ["simclr", "sogclr", "isogclr"])
    assert len(table) == 7  # three orderings on each of the two sets, and claim (iii)
    assert table["status kept"].all()
    assert table["effect moved"].abs().max() == 0


def test_a_moved_sample_moves_the_verdicts_that_read_it(tmp_path):
    _sample(tmp_path, {"isogclr": 10.0})  # iSogCLR 10 points better on synth10_lt at 3 seeds
    table = _report(tmp_path, tmp_path / "out", ["isogclr"]).set_index("claim")
    lt = table.loc["Table 1: isogclr > simclr on synth10_lt (CIFAR10-LT)"]
    n_seeds = len(load_params(ROOT / "params.yaml")["table1"]["seeds"])
    assert abs(lt["effect moved"] - 10.0 * 3 / n_seeds) < 1e-3  # the mean paired difference over Table 1's seeds
    assert lt["moved / half-width"] > 1
    balanced = table.loc["Table 1: isogclr > simclr on synth10 (CIFAR10)"]
    assert balanced["effect moved"] == 0 and balanced["status kept"]
    runs = pd.read_csv(tmp_path / "out" / "cross_machine_runs.csv")
    assert len(runs) == 3 and (runs["change"].round(6) == 10.0).all()
