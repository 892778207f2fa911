"""Budget ladders and the tuning selection, read back from fabricated run folders."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from isogclr.analysis.ladder import (
    TAU_CLAIM,
    ladder_claim,
    ladder_correlations,
    ladder_gaps,
    ladder_runs,
    ladder_studies,
    ladder_summary,
    ladder_temperatures,
    ladder_verdicts,
    status_sentence,
    table1_budget,
    trend_sentence,
)
from isogclr.analysis.stats import seeds_needed, t_interval
from isogclr.analysis.tuning import candidates_table, selection_margin, selection_table
from isogclr.config.studies import study_reports

from .conftest import ROOT

METHODS = ["simclr", "sogclr", "isogclr"]
CLASS_SIZES = (40, 20, 10, 5)  # a long-tailed labelling of the fabricated tau.csv


def _ladder_params(smoke_params, values=(5, 10), seeds=(0, 1, 2), table1_seeds=(0,)) -> dict:
    params = copy.deepcopy(smoke_params)
    params["table1"]["seeds"] = list(table1_seeds)
    params["studies"] = {k: v for k, v in params["studies"].items()
                         if "budget_ladder" not in study_reports(v.get("report"))}
    params["studies"]["ladder_lt"] = {"methods": METHODS, "knob": "train.epochs", "report": "budget_ladder",
                                      "values": list(values), "dataset": "synth10_lt", "seeds": list(seeds)}
    return params


def _write_run(path: Path, top1: float, rng: np.random.Generator | None = None, slope: float = 1.0) -> None:
    """metrics.json and, given ``rng``, artifacts/tau.csv whose tau grows with class size by ``slope``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.json").write_text(json.dumps({"top1": top1, "knn1_top1": top1 - 2}))
    if rng is not None:
        labels = np.repeat(np.arange(len(CLASS_SIZES)), CLASS_SIZES)
        sizes = np.asarray(CLASS_SIZES)[labels]
        tau = 0.3 + slope * 0.01 * sizes + rng.normal(0, 0.02, len(labels))
        (path / "artifacts").mkdir(exist_ok=True)
        pd.DataFrame({"index": range(len(labels)), "source_index": range(len(labels)), "label": labels,
                      "superclass": labels, "tau": tau}).to_csv(path / "artifacts" / "tau.csv", index=False)


def _fabricate(root: Path, params: dict, gap: float = 5.0, noise: float = 0.1) -> None:
    """Every run of every ladder in params (and the Table 1 runs it borrows): iSogCLR ``gap`` points above the
    others, plus small per-seed noise; iSogCLR's temperatures grow with class frequency."""
    rng = np.random.default_rng(0)
    for study in ladder_studies(params):
        spec = params["studies"][study]
        budgets = [(v, root / "studies" / study / "{m}-" f"{v}-s{{s}}") for v in spec["values"]]
        budgets.append((None, root / "runs" / f"{{m}}-{spec['dataset']}-s{{s}}"))
        for _, pattern in budgets:
            for seed in spec["seeds"]:
                base = 50.0 + rng.normal(0, 1.0)  # a seed's shared luck: pairing by seed removes it
                for method in spec["methods"]:
                    top1 = base + (gap if method == "isogclr" else 0.0) + rng.normal(0, noise)
                    path = Path(str(pattern).format(m=method, s=seed))
                    _write_run(path, top1, rng if method == "isogclr" else None)


def test_ladder_runs_includes_table1_budget_only_when_its_seeds_cover_the_ladder(tmp_path, smoke_params):
    for table1_seeds, expect in (((0,), None), ((0, 1, 2), ("table1", 2))):
        params = _ladder_params(smoke_params, table1_seeds=table1_seeds)
        assert ladder_studies(params) == ["ladder_lt"]
        assert table1_budget(params, "ladder_lt") == expect
    root = tmp_path
    _fabricate(root, params)
    frame = ladder_runs(params, "ladder_lt", root / "runs", root / "studies")
    assert list(frame.columns) == ["method", "epochs", "seed", "top1", "knn1_top1", "run_path"]
    assert sorted(frame["epochs"].unique()) == [2, 5, 10] and len(frame) == 3 * 3 * 3
    assert frame[frame.epochs == 2]["run_path"].str.contains("/runs/").all()
    # Table 1 with one seed: its runs are not the ladder's (the ladder's 3 seeds are not all there)
    short = ladder_runs(_ladder_params(smoke_params), "ladder_lt", root / "runs", root / "studies")
    assert sorted(short["epochs"].unique()) == [5, 10]
    # the Table 1 run and the ladder's must differ only in the number of epochs (checked where both saved a config)
    for folder, epochs in ((root / "runs" / "isogclr-synth10_lt-s0", 2),
                           (root / "studies" / "ladder_lt" / "isogclr-5-s0", 5)):
        (folder / "artifacts" / "config.json").write_text(json.dumps({"run_id": folder.name,
                                                                      "train": {"epochs": epochs, "lr": 0.1}}))
    ladder_runs(params, "ladder_lt", root / "runs", root / "studies")
    (root / "runs" / "isogclr-synth10_lt-s0" / "artifacts" / "config.json").write_text(json.dumps(
        {"run_id": "x", "train": {"epochs": 2, "lr": 0.2}}))
    with pytest.raises(ValueError, match=r"differ in \['train.epochs', 'train.lr'\]"):
        ladder_runs(params, "ladder_lt", root / "runs", root / "studies")
    # a ladder that has Table 1's budget itself uses its own runs
    assert table1_budget(_ladder_params(smoke_params, values=(2, 5), table1_seeds=(0, 1, 2)), "ladder_lt") is None


def test_missing_ladder_run_names_the_command(tmp_path, smoke_params):
    params = _ladder_params(smoke_params, table1_seeds=(0, 1, 2))
    _fabricate(tmp_path, params)
    shutil.rmtree(tmp_path / "runs" / "sogclr-synth10_lt-s1")
    with pytest.raises(FileNotFoundError, match=r"sogclr-synth10_lt-s1/metrics.json is missing: .*dvc repro"):
        ladder_runs(params, "ladder_lt", tmp_path / "runs", tmp_path / "studies")
    with pytest.raises(FileNotFoundError, match="dvc repro study_ladder_lt"):
        ladder_runs(params, "ladder_lt", tmp_path / "runs", tmp_path / "nowhere")


def test_summary_and_gaps_use_the_t_interval(tmp_path, smoke_params):
    params = _ladder_params(smoke_params)
    _fabricate(tmp_path, params)
    frame = ladder_runs(params, "ladder_lt", tmp_path / "runs", tmp_path / "studies")
    summary = ladder_summary(frame)
    row = summary[(summary.method == "sogclr") & (summary.epochs == 10)].iloc[0]
    runs = frame[(frame.method == "sogclr") & (frame.epochs == 10)]
    expected = t_interval(dict(zip(runs.seed, runs.top1, strict=True)))
    assert row["n"] == 3 and (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (expected.estimate, expected.low, expected.high))
    gaps = ladder_gaps(frame)
    assert set(gaps["worse"]) == {"simclr", "sogclr"} and sorted(gaps["epochs"].unique()) == [5, 10]
    g = gaps[(gaps.worse == "simclr") & (gaps.epochs == 5)].iloc[0]
    a = frame[(frame.method == "isogclr") & (frame.epochs == 5)].set_index("seed")["top1"]
    b = frame[(frame.method == "simclr") & (frame.epochs == 5)].set_index("seed")["top1"]
    paired = t_interval((a - b).to_dict())
    assert (g["gap"], g["ci_low"], g["ci_high"]) == pytest.approx((paired.estimate, paired.low, paired.high))
    one = ladder_summary(frame[frame.seed == 0])
    assert (one["n"] == 1).all() and one["ci_low"].isna().all() and one["mean"].notna().all()


def test_five_points_at_three_seeds_is_supported_and_one_seed_is_not_testable(tmp_path, smoke_params):
    params = _ladder_params(smoke_params)
    _fabricate(tmp_path, params, gap=5.0, noise=0.1)
    frame = ladder_runs(params, "ladder_lt", tmp_path / "runs", tmp_path / "studies")
    frame = frame[(frame.epochs == 10) | (frame.seed == 0)]  # 5 epochs: one seed left
    taus = ladder_temperatures(frame)
    verdicts = {v.claim: v for v in ladder_verdicts(params, "ladder_lt", frame, taus)}
    assert len(verdicts) == 6
    for rival in ("simclr", "sogclr"):
        supported = verdicts[ladder_claim("ladder_lt", "synth10_lt", 10, f"isogclr > {rival}")]
        assert supported.status == "supported" and supported.n_seeds == 3
        assert supported.effect == pytest.approx(5.0, abs=0.5)
        assert supported.paper_effect == pytest.approx({"simclr": 1.28, "sogclr": 0.67}[rival])  # CIFAR10-LT
        untested = verdicts[ladder_claim("ladder_lt", "synth10_lt", 5, f"isogclr > {rival}")]
        assert untested.status == "not testable" and "fewer than the 3" in untested.evidence
    # the fabricated runs give each class one frequency in every seed: its identity is its frequency
    fixed = verdicts[ladder_claim("ladder_lt", "synth10_lt", 10, TAU_CLAIM)]
    assert fixed.status == "not testable" and "identity and frequency are one thing" in fixed.evidence
    assert verdicts[ladder_claim("ladder_lt", "synth10_lt", 5, TAU_CLAIM)].status == "not testable"
    corr = ladder_correlations(params, "ladder_lt", taus=taus)
    assert len(corr) == 4 and (corr["spearman"] > 0.5).all()
    statuses = {10: "supported", 5: "not testable"}
    assert status_sentence(statuses, "The gap") == ("The gap lies above 0 (the paper's direction) at 10 epochs; is "
                                                    "not tested (fewer than 3 seeds) at 5 epochs.")
    trend = pd.DataFrame({"epochs": [5, 10], "mean": [1.0, 2.0], "ci_low": [0.5, 1.8], "ci_high": [1.5, 2.2]})
    assert "larger at the largest budget; the two ends' 95% intervals do not overlap" in trend_sentence(trend, "x")


def test_two_seeds_are_not_enough(tmp_path, smoke_params):
    params = _ladder_params(smoke_params, seeds=(0, 1))
    _fabricate(tmp_path, params)
    frame = ladder_runs(params, "ladder_lt", tmp_path / "runs", tmp_path / "studies")
    assert {v.status for v in ladder_verdicts(params, "ladder_lt", frame)} == {"not testable"}


def _tuning(params: dict, root: Path) -> dict:
    params = copy.deepcopy(params)
    params["tuning"] = {"dataset": "synth10_lt", "epochs": 20, "validation_fraction": 0.2, "seeds": [0, 1],
                        "candidates": 2, "methods": ["simclr", "isogclr"]}
    spaces = {"simclr": {"tau": [0.1, 0.3]}, "isogclr": [{"rho": 0.3, "tau_init": 0.7}, {"rho": 0.4, "tau_init": 0.1}]}
    for method, space in spaces.items():  # each method's search space lives with it (untuned: smoke's)
        params["methods"][method]["search"] = space
        searched = set(space) if isinstance(space, dict) else set(space[0])
        for knob in [k for k, v in params["methods"][method].items() if v == "selected" and k not in searched]:
            del params["methods"][method][knob]  # a knob no longer searched: no longer marked
    scores = {"simclr": [[40.0, 42.0], [45.0, 47.0]], "isogclr": [[50.0, 50.0], [44.0, 46.0]]}
    for method, space in spaces.items():
        candidates = ([{"tau": t} for t in space["tau"]] if isinstance(space, dict) else space)
        rows = [{"candidate": i, **c, "seed": s, "val_top1": scores[method][i][s]}
                for i, c in enumerate(candidates) for s in (0, 1)]
        best = max(range(2), key=lambda i: sum(scores[method][i]))
        (root / method).mkdir(parents=True)
        pd.DataFrame(rows).to_csv(root / method / "candidates.csv", index=False)
        (root / method / "selected.json").write_text(json.dumps({
            "method": method, "dataset": "synth10_lt", "epochs": 20, "validation_fraction": 0.2, "seeds": [0, 1],
            "candidates": 2, "space": space, "knobs": candidates[best], "val_top1": sum(scores[method][best]) / 2}))
    return params


def test_selection_table(tmp_path, smoke_params):
    params = _tuning(smoke_params, tmp_path / "tuning")
    table = selection_table(params, tmp_path / "tuning")
    assert list(table.index) == ["simclr", "isogclr"]
    simclr, isogclr = table.loc["simclr"], table.loc["isogclr"]
    assert simclr["search space"] == "tau ∈ {0.1, 0.3}" and simclr["candidates"] == 2 and simclr["seeds"] == "0, 1"
    assert simclr["selected"] == "tau=0.3" and simclr["replaces in params.yaml"] == "—"  # the smoke value is 0.3
    assert (simclr["val top-1 selected"], simclr["val top-1 best"], simclr["val top-1 worst"]) == (46.0, 46.0, 41.0)
    # the winner's margin over the runner-up, paired by seed: 5, 5 (no spread) is resolved; 6, 4 is within the
    # t interval's half-width at 2 seeds (12.71 x 1.414 / 1.414)
    assert (simclr["margin over runner-up"], simclr["selection"]) == ("+5.00 [+5.00, +5.00]", "resolved")
    assert (isogclr["margin over runner-up"], isogclr["selection"]) == (
        "+5.00 [-7.71, +17.71]", "within its noise (3 seeds would resolve a margin this size)")
    assert isogclr["search space"] == "2 listed over rho ∈ {0.3, 0.4}; tau_init ∈ {0.1, 0.7}"
    assert isogclr["selected"] == "rho=0.3, tau_init=0.7" and isogclr["replaces in params.yaml"] == "—"
    params["methods"]["isogclr"]["untuned"] = 1  # the untuned runs' candidate: what the selection replaces
    assert selection_table(params, tmp_path / "tuning").loc["isogclr", "replaces in params.yaml"] == \
        "rho: 0.4 → 0.3; tau_init: 0.1 → 0.7"
    candidates = candidates_table(params, tmp_path / "tuning")
    assert list(candidates.columns) == ["method", "candidate", "tau", "rho", "tau_init", "seeds", "val_top1",
                                        "selected"]
    assert candidates["selected"].tolist() == [False, True, True, False]
    assert candidates["val_top1"].tolist() == [41.0, 46.0, 50.0, 45.0]


def test_a_selection_within_its_noise_names_the_seeds_that_would_resolve_it():
    # candidate 1 beats 0 by 0.2 on average with paired differences 0.7, -0.3, 0.2 (sd 0.5): at 3 seeds the
    # interval holds 0, and a paired t test needs 52 seeds for 80% power at a margin of 0.2 with that spread
    frame = pd.DataFrame({"candidate": [0, 1] * 3, "seed": [0, 0, 1, 1, 2, 2],
                          "val_top1": [40.0, 40.7, 41.0, 40.7, 39.0, 39.2]})
    margin = selection_margin(frame)
    assert margin["margin"] == pytest.approx(0.2) and margin["low"] < 0 < margin["high"]
    assert margin["selection"] == f"within its noise ({seeds_needed(0.2, 0.5)} seeds would resolve a margin this size)"
    assert 40 < seeds_needed(0.2, 0.5) < 60


def test_selection_margin_at_one_seed_says_its_noise_is_not_measured():
    frame = pd.DataFrame({"candidate": [0, 1, 2], "seed": [0, 0, 0], "val_top1": [40.0, 41.5, 39.0]})
    margin = selection_margin(frame)
    assert margin["margin"] == pytest.approx(1.5) and margin["selection"] == "noise not measured (one seed)"


def test_missing_or_stale_tuning_files_name_the_stage(tmp_path, smoke_params):
    params = _tuning(smoke_params, tmp_path / "tuning")
    (tmp_path / "tuning" / "isogclr" / "candidates.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"isogclr/candidates.csv is missing: .*tune@isogclr of "
                                                r"pipelines/tune/dvc.yaml"):
        selection_table(params, tmp_path / "tuning")
    (tmp_path / "tuning" / "simclr" / "selected.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"simclr/selected.json is missing: .*pipelines/tune/dvc.yaml"):
        candidates_table(params, tmp_path / "tuning")
    params = _tuning(smoke_params, tmp_path / "again")
    params["tuning"]["epochs"] = 40
    with pytest.raises(ValueError, match=r"other settings .*epochs: 20 in .*, 40 in params.yaml"):
        selection_table(params, tmp_path / "again")


@pytest.mark.slow
def test_report_runs_end_to_end_on_fabricated_runs(tmp_path, smoke_params):
    """The budget_ladder notebook, executed by papermill on fabricated runs and tuning files."""
    from isogclr.reports.notebook_run import execute_report

    repo = tmp_path / "repo"
    params = _tuning(_ladder_params(smoke_params, table1_seeds=(0, 1, 2)), repo / "tuning")
    params["studies"]["ladder_one_seed"] = {"methods": METHODS, "knob": "train.epochs", "report": "budget_ladder",
                                            "values": [5], "dataset": "synth10_lt", "seeds": [0]}
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    (repo / "dvc.yaml").write_text("stages: {}\n")
    _fabricate(repo, params)
    (repo / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / "budget_ladder.ipynb", repo / "notebooks")
    execute_report(repo / "notebooks" / "budget_ladder.ipynb", repo / "reports" / "budget_ladder.ipynb", cwd=repo)
    reports = repo / "reports"
    for out in ("tables/budget_ladder.md", "tables/budget_ladder.csv", "tables/tuning_selection.md",
                "tables/tuning_selection.csv", "figures/budget_ladder.png", "verdicts/budget_ladder.csv"):
        assert (reports / out).is_file(), out
    verdicts = pd.read_csv(reports / "verdicts" / "budget_ladder.csv")
    statuses = dict(zip(verdicts.claim, verdicts.status, strict=True))
    assert statuses[ladder_claim("ladder_lt", "synth10_lt", 10, "isogclr > sogclr")] == "supported"
    assert set(verdicts[verdicts.n_seeds == 1].status) == {"not testable"}
    nb = json.loads((reports / "budget_ladder.ipynb").read_text())
    text = json.dumps(nb)
    assert "appears at 2, 5 and 10 epochs." in text
    assert "appears at no budget of this ladder (not tested at 2 and 5 epochs: fewer than 3 seeds)" in text
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if o.get("name") == "stderr"], "a warning was printed"
