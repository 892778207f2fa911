"""benchmarks/cross_machine.py: every Table 1 verdict recomputed with a sample's scores in place of the committed
ones."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

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


# the emulation's name in the report: a label only, these tests train nothing and set no ATEN_CPU_CAPABILITY, so
# they run on any CPU (the benchmark's own reruns under it are made by hand, not by a test)
EMULATED = "avx2"


def _report(work: Path, out: Path, methods) -> pd.DataFrame:
    cross_machine.report(ROOT / "params.yaml", work, list(methods), ["synth10_lt"], [0, 1, 2], EMULATED, out)
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


def _kept_emulation(out: Path) -> dict[str, bytes]:
    """The committed emulation's csvs copied into ``out`` (its reruns are not kept): what --report keeps."""
    out.mkdir(parents=True)
    kept = {}
    for name in ("cross_machine.csv", "cross_machine_runs.csv"):
        kept[name] = (ROOT / "reports" / "benchmarks" / name).read_bytes()
        (out / name).write_bytes(kept[name])
    return kept


def test_a_real_second_machine_is_reported_beside_the_kept_emulation(tmp_path):
    _sample(tmp_path / "other", {"isogclr": 10.0})  # other/runs/<run>/metrics.json: iSogCLR 10 points better
    folder = tmp_path / "other" / "runs"
    (folder / "machine.json").write_text(json.dumps({"cpu": "Test CPU", "isa": "avx2", "aten_cpu_capability": "AVX2"}))
    out = tmp_path / "out"
    kept = _kept_emulation(out)
    text = cross_machine.report(ROOT / "params.yaml", tmp_path / "no-reruns", ["simclr"], ["synth10_lt"], [0], EMULATED,
                                out, other=folder)
    assert {name: (out / name).read_bytes() for name in kept} == kept  # the emulation's numbers, unchanged
    runs = pd.read_csv(out / "cross_machine_real_runs.csv")
    assert len(runs) == 3 and (runs["change"].round(6) == 10.0).all() and set(runs["method"]) == {"isogclr"}
    table = pd.read_csv(out / "cross_machine_real.csv").set_index("claim")
    n_seeds = len(load_params(ROOT / "params.yaml")["table1"]["seeds"])
    lt = table.loc["Table 1: isogclr > simclr on synth10_lt (CIFAR10-LT)"]
    assert abs(lt["effect moved"] - 10.0 * 3 / n_seeds) < 1e-3 and lt["status other machine"] != "contradicted"
    assert text == (out / "cross_machine.md").read_text()
    assert text.startswith("# Cross-machine") and f"--report --other {folder.resolve()}`" in text
    assert "## A real second machine" in text and "## The emulation: ATEN_CPU_CAPABILITY=avx2" in text
    assert "Test CPU, ISA avx2, ATen kernels AVX2" in text  # the other machine, from its machine.json
    assert "median |change| **10.00** points" in text and "median |change| **0.09** points" in text


def test_the_committed_second_machine_moves_the_runs_and_one_verdict(tmp_path):
    """The 21 synth10_lt runs retrained on an AVX2-only EPYC (benchmarks/other_machines): what the report says."""
    out = tmp_path / "out"
    _kept_emulation(out)
    cross_machine.report(ROOT / "params.yaml", tmp_path / "no-reruns", ["simclr"], ["synth10_lt"], [0], EMULATED, out,
                         other=cross_machine.OTHER)
    runs = pd.read_csv(out / "cross_machine_real_runs.csv")
    assert len(runs) == 21
    assert round(runs["change"].abs().median(), 2) == 0.80 and round(runs["change"].abs().max(), 2) == 2.50
    assert round(runs["change"].std(), 2) == 1.13
    table = pd.read_csv(out / "cross_machine_real.csv").set_index("claim")
    status = table[["status committed", "status other machine"]].apply(tuple, axis=1)
    assert status["Table 1: isogclr > simclr on synth10_lt (CIFAR10-LT)"] == ("contradicted", "inconclusive")
    assert status["Table 1: isogclr > sogclr on synth10_lt (CIFAR10-LT)"] == ("contradicted", "contradicted")
    assert status["Table 1: sogclr > simclr on synth10_lt (CIFAR10-LT)"] == ("inconclusive", "inconclusive")
    assert table["status kept"].sum() == 6
    record = json.loads((cross_machine.OTHER / "machine.json").read_text())
    assert record["isa"] == "avx2" and record["aten_cpu_capability"] == "AVX2" and "recorded" in record


def test_a_folder_that_is_no_table1_run_is_named(tmp_path):
    (tmp_path / "other" / "simclr-synth10_lt-s99").mkdir(parents=True)
    (tmp_path / "other" / "simclr-synth10_lt-s99" / "metrics.json").write_text('{"top1": 1.0}')
    spec = cross_machine.table_spec(load_params(ROOT / "params.yaml"), "table1")
    with pytest.raises(ValueError, match="simclr-synth10_lt-s99"):
        cross_machine.other_machine_runs(tmp_path / "other", spec)


def test_the_emulation_refuses_a_capability_this_cpu_lacks(tmp_path, monkeypatch):
    """On a CPU without AVX-512 (constructed flags), an avx512 emulation stops before any training."""
    monkeypatch.setattr(cross_machine.machine, "cpu_flags", lambda: frozenset({"sse2", "avx", "avx2"}))
    monkeypatch.setattr(cross_machine.subprocess, "run", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit, match="--capability avx512: this CPU \\(avx2\\)"):
        cross_machine.train_sample(ROOT / "params.yaml", tmp_path, ["simclr"], ["synth10_lt"], [0], "avx512")
