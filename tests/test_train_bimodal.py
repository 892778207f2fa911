"""The image-text run: outputs and their ranges, resume after an interruption, per-pair temperatures, config errors."""

from __future__ import annotations

import copy
import csv
import json

import pandas as pd
import pytest
import torch

from isogclr import epoch_times as timing
from isogclr import machine
from isogclr.config.bimodal import bimodal_run_config
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params
from isogclr.data.pair_semantics import PairSpec
from isogclr.data.synthetic_pairs import write_synthetic_pairs
from isogclr.train import bimodal

SPEC = PairSpec(seed=3, image_size=16, num_pairs=96, num_clusters=8, mismatch_fraction=0.05, retrieval_images=12,
                zeroshot_per_class=2)
METHODS = {
    "clip": {"loss": "clip", "tau": 0.05},
    "isogclr_bimodal": {"loss": "isogclr_bimodal", "rho": 3.0, "tau_init": 0.03, "tau_min": 0.005, "tau_max": 0.1,
                        "eta": 0.01},
    "clip_individual_tau": {"loss": "clip_individual_tau", "tau_init": 0.03, "tau_min": 0.005, "tau_max": 0.5},
    "simclr": {"loss": "simclr", "tau": 0.2},
}


@pytest.fixture(scope="module")
def params(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(SPEC, root)
    return {
        "methods": METHODS,
        "bimodal": {
            "methods": ["clip", "isogclr_bimodal", "clip_individual_tau"], "seeds": [0], "data": str(root),
            "image_size": 16, "epochs": 2, "batch_size": 32, "lr": 1e-3, "weight_decay": 0.02, "warmup_iters": 2,
            "final_lr": 1e-6, "proj_dim": 16, "eval_every": 1, "device": "cpu", "num_threads": 1,
            "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
            "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2, "hidden_dim": 32,
                             "max_length": 24},
        },
    }


def test_run_writes_metrics_in_range(tmp_path, params, _timing_record):
    cfg = bimodal_run_config(params, "clip", 0)
    metrics = bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    expected = {f"retrieval_{s}_{d}_r{k}" for s in "ab" for d in ("ir", "tr") for k in (1, 5, 10)}
    expected |= {f"synth{c}_top{k}" for c in (10, 100) for k in (1, 3, 5)}
    assert set(metrics) == expected
    assert all(0.0 <= v <= 100.0 for v in metrics.values())
    assert metrics["retrieval_a_ir_r1"] <= metrics["retrieval_a_ir_r5"] <= metrics["retrieval_a_ir_r10"]
    run = tmp_path / "run"
    assert set(json.loads((run / "metrics.json").read_text())) == expected
    log = list(csv.DictReader((run / "train_log.csv").open()))
    assert [int(r["epoch"]) for r in log] == [1, 2]
    assert {"loss", "lr", "retrieval_a_ir_r1"} <= set(log[0])
    assert not {"seconds", "samples_per_s", "timestamp"} & set(log[0])  # wall clock: in the timing record
    assert [r["epoch"] for r in timing.read(_timing_record)] == [1, 2]
    assert timing.read(_timing_record)[0]["run"] == timing.run_key(run)
    files = {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file() and "dvclive" not in p.parts}
    assert files == {"metrics.json", "knobs.json", "train_log.csv", "artifacts/config.json", "artifacts/tokenizer.json",
                     "artifacts/machine.json", "local/model.pt", "local/run.lock"}
    assert json.loads((run / "artifacts" / "machine.json").read_text()) == machine.describe()
    assert json.loads((run / "knobs.json").read_text()) == {"loss": cfg.method.loss, **cfg.method.kwargs}
    state = torch.load(run / "local" / "model.pt", weights_only=True)  # float32, for the user only
    assert state and all(isinstance(v, torch.Tensor) for v in state.values())
    assert not (run / "artifacts" / "tau.csv").exists()  # a global temperature: no per-pair file
    assert not (tmp_path / "ckpt" / "checkpoint.pt").exists()


def test_the_trainer_locks_its_run_folder(tmp_path, params):
    """train_bimodal_run passes its output folder to fit as run_dir: a second writer of that folder is refused."""
    from isogclr.io import BusyError

    from .test_reliability import _held_elsewhere

    with _held_elsewhere(tmp_path / "run" / "local" / "run.lock") as holder:
        with pytest.raises(BusyError, match=f"pid {holder.pid}"):
            bimodal.train_bimodal_run(bimodal_run_config(params, "clip", 0), tmp_path / "run", tmp_path / "ckpt")
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_resume_after_interruption_gives_the_same_result(tmp_path, params, monkeypatch):
    cfg = bimodal_run_config(params, "isogclr_bimodal", 0)
    straight = bimodal.train_bimodal_run(cfg, tmp_path / "straight", tmp_path / "ckpt_straight")

    def stop(run_id: str, epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt("interrupted after epoch 1")

    monkeypatch.setattr(bimodal, "on_epoch_end", stop)
    with pytest.raises(KeyboardInterrupt):
        bimodal.train_bimodal_run(cfg, tmp_path / "resumed", tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists()
    # an interrupted run has written its live curves only (and its lock file, local/run.lock): no metrics, no artifacts
    assert sorted(p.name for p in (tmp_path / "resumed").iterdir()) == ["dvclive", "local"]
    assert [p.name for p in (tmp_path / "resumed" / "local").iterdir()] == ["run.lock"]
    monkeypatch.undo()
    resumed = bimodal.train_bimodal_run(cfg, tmp_path / "resumed", tmp_path / "ckpt")
    assert resumed == straight
    for name in ("artifacts/tau.csv", "metrics.json"):
        assert (tmp_path / "straight" / name).read_text() == (tmp_path / "resumed" / name).read_text()
    losses = [[r["loss"] for r in csv.DictReader((tmp_path / d / "train_log.csv").open())]
              for d in ("straight", "resumed")]
    assert losses[0] == losses[1]
    curves = [(tmp_path / d / "dvclive" / "plots" / "metrics" / "loss.tsv").read_text()
              for d in ("straight", "resumed")]
    assert curves[0] == curves[1] and len(curves[0].splitlines()) == 1 + cfg.train.epochs
    summary = json.loads((tmp_path / "resumed" / "dvclive" / "metrics.json").read_text())
    assert summary["retrieval_a_ir_r1"] == round(resumed["retrieval_a_ir_r1"], 4)


@pytest.mark.parametrize("method", ["isogclr_bimodal", "clip_individual_tau"])
def test_tau_csv_has_one_row_per_pair_within_bounds(tmp_path, params, method):
    cfg = bimodal_run_config(params, method, 0)
    bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    rows = list(csv.DictReader((tmp_path / "run" / "artifacts" / "tau.csv").open()))
    assert len(rows) == SPEC.num_pairs
    assert [int(r["index"]) for r in rows] == list(range(SPEC.num_pairs))
    lo, hi = METHODS[method]["tau_min"], METHODS[method]["tau_max"]
    for r in rows:
        assert lo - 1e-7 <= float(r["tau_image"]) <= hi + 1e-7 and lo - 1e-7 <= float(r["tau_text"]) <= hi + 1e-7
        assert int(r["cluster"]) >= 0 and int(r["cluster_frequency"]) >= 1 and r["caption"]
    assert sum(int(r["mismatched"]) for r in rows) == round(SPEC.mismatch_fraction * SPEC.num_pairs)
    log = list(csv.DictReader((tmp_path / "run" / "train_log.csv").open()))
    assert {"tau_image_mean", "tau_image_std", "tau_text_mean", "tau_text_std"} <= set(log[0])


@pytest.mark.parametrize(("change", "key"), [
    (lambda p: p["bimodal"].update(methods=["clip", "nope"]), "bimodal.methods: unknown method 'nope'"),
    (lambda p: p["bimodal"].update(methods=["simclr"]), "bimodal.methods: method 'simclr' uses the unimodal"),
    (lambda p: p["bimodal"].update(seeds=[]), "bimodal.seeds:"),
    (lambda p: p["bimodal"].update(seeds=[-1]), "bimodal.seeds:"),
    (lambda p: p["bimodal"].update(batch_size=1), "bimodal:"),
    (lambda p: p["bimodal"].update(precision="fp16"), "bimodal:"),
    (lambda p: p["bimodal"].update(epoch=3), "bimodal.epoch: unknown key"),
    (lambda p: p["bimodal"]["image_encoder"].update(width=3), "bimodal.image_encoder:"),
    (lambda p: p["bimodal"]["text_encoder"].update(dim=15), "bimodal.text_encoder.dim:"),
    (lambda p: p["bimodal"]["text_encoder"].update(layers=2), "bimodal.text_encoder.layers: unknown key"),
    (lambda p: p["bimodal"].update(paper_rows={"cyclip": "cyclip"}), "bimodal.paper_rows:"),
    (lambda p: p["methods"]["isogclr_bimodal"].update(tau_min=0.5), "methods.isogclr_bimodal:"),
])
def test_config_errors_name_the_key(params, change, key):
    bad = copy.deepcopy(params)
    change(bad)
    with pytest.raises(ConfigError) as err:
        validate_params(bad)
    assert str(err.value).startswith(key), str(err.value)


def test_run_config_resolves_and_rejects_unimodal_methods(params):
    cfg = bimodal_run_config(params, "isogclr_bimodal", 1)
    assert cfg.run_id == "isogclr_bimodal-s1" and cfg.method.loss == "isogclr_bimodal"
    assert cfg.to_dict()["text_encoder"]["dim"] == 16
    with pytest.raises(ConfigError, match="^bimodal.methods: method 'simclr'"):
        bimodal_run_config(params, "simclr", 0)


def test_cli_train_bimodal_writes_the_run_folder(tmp_path, params):
    import yaml

    from isogclr.cli import main

    path = tmp_path / "params.yaml"
    small = copy.deepcopy(params)
    small["bimodal"].update(epochs=1, eval_every=0)
    path.write_text(yaml.safe_dump(small))
    args = ["train-bimodal", "--method", "clip", "--seed", "0", "--params", str(path), "--out", str(tmp_path / "runs"),
            "--checkpoints", str(tmp_path / "ckpt")]
    assert main(args) == 0
    metrics = json.loads((tmp_path / "runs" / "clip-s0" / "metrics.json").read_text())
    assert "synth100_top5" in metrics
    assert main(["train-bimodal", "--method", "simclr", *args[3:]]) == 2  # a ConfigError, reported with its key


def test_report_helpers_parse_metrics_and_set_paper_rows(tmp_path):
    from isogclr.analysis.bimodal import RETRIEVAL_METRICS, ZEROSHOT_METRICS, collect_bimodal_runs, side_by_side
    from isogclr.analysis.tables import paper_numbers

    run = tmp_path / "isogclr_bimodal-s0"
    run.mkdir()
    keys = [f"retrieval_{s}_{m}" for s in "ab" for m in RETRIEVAL_METRICS] + [
        f"synth{c}_{m}" for c in (10, 100) for m in ZEROSHOT_METRICS]
    (run / "metrics.json").write_text(json.dumps({k: float(i) for i, k in enumerate(keys)}))
    runs = collect_bimodal_runs(tmp_path, ["isogclr_bimodal"], [0])
    assert set(runs["dataset"]) == {"retrieval_a", "retrieval_b", "synth10", "synth100"}
    assert runs.set_index(["dataset", "metric"]).loc[("retrieval_b", "tr_r10"), "value"] == 11.0
    table = side_by_side(runs, paper_numbers("isogclr_table2"), RETRIEVAL_METRICS, {"isogclr_bimodal": "isogclr"})
    assert table.loc[("retrieval_a (MSCOCO)", "isogclr_bimodal", "paper (isogclr)"), "ir_r1"] == "23.27 ± 0.18"
    assert table.loc[("retrieval_b (Flickr30K)", "isogclr_bimodal", "ours"), "ir_r1"] == "6.00 (n=1)"
    with pytest.raises(FileNotFoundError, match="train-bimodal --method clip"):
        collect_bimodal_runs(tmp_path, ["clip"], [0])


def test_bimodal_study_runs_and_the_budget_table(tmp_path, smoke_params):
    from isogclr.analysis.bimodal import budget_table, collect_bimodal_runs, collect_bimodal_study
    from isogclr.analysis.tables import paper_numbers

    params = {**smoke_params, "bimodal_studies": {"bimodal_epochs": {
        "methods": ["clip", "sogclr_bimodal"], "knob": "bimodal.epochs", "values": [4], "seeds": [0]}}}
    for folder, scale in ((tmp_path / "runs", 1.0), (tmp_path / "studies" / "bimodal_epochs", 2.0)):
        for method in ("clip", "sogclr_bimodal"):
            run = folder / (f"{method}-s0" if scale == 1.0 else f"{method}-4-s0")
            run.mkdir(parents=True)
            top1 = scale * (10.0 if method == "clip" else 20.0)
            (run / "metrics.json").write_text(json.dumps({"synth10_top1": top1, "retrieval_a_ir_r1": top1 + 1}))
    with pytest.raises(FileNotFoundError, match="train-bimodal --study bimodal_epochs --method clip --value 4"):
        collect_bimodal_study(params, "bimodal_epochs", tmp_path / "nowhere")
    longer = collect_bimodal_study(params, "bimodal_epochs", tmp_path / "studies")
    assert set(longer["knob"]) == {4} and len(longer) == 4
    base = collect_bimodal_runs(tmp_path / "runs", ["clip", "sogclr_bimodal"], [0]).assign(epochs=2)
    both = pd.concat([longer.rename(columns={"knob": "epochs"}), base])
    table = budget_table(both, [("synth10", "top1")], paper_numbers("sogclr_table4"), {"sogclr_bimodal": "sogclr"})
    assert table.loc["clip", "ours synth10 top1 2 ep"] == "10.00 (n=1)"
    assert table.loc["sogclr_bimodal", "ours synth10 top1 4 ep"] == "40.00 (n=1)"
    assert table.loc["sogclr_bimodal", "paper top1 b=128 60 ep"] == "71.3"  # SogCLR Table 4
    assert table.loc["clip", "paper top1 b=256 30 ep"] == "69.0"


def test_tau_frequency_correlation_of_constant_temperatures_is_nan_without_a_warning(recwarn):
    import math

    import pandas as pd

    from isogclr.analysis.bimodal import tau_frequency_correlation

    taus = pd.DataFrame({"method": "clip_individual_tau", "seed": 0, "cluster": [0, 0, 1, 2],
                         "cluster_frequency": [2, 2, 1, 1], "mismatched": [0, 1, 0, 0],
                         "tau_image": [0.005] * 4, "tau_text": [0.01, 0.02, 0.03, 0.04]})
    row = tau_frequency_correlation(taus).iloc[0]
    assert math.isnan(row["spearman_tau_image_pairs"]) and not math.isnan(row["spearman_tau_text_pairs"])
    assert not [w for w in recwarn if "constant" in str(w.message)]


def test_resume_from_a_checkpoint_of_the_former_layout_moves_its_wall_clock(tmp_path, params, monkeypatch,
                                                                             _timing_record):
    """A checkpoint written before the timing record kept seconds / samples_per_s in its rows: a resumed run
    writes them to the timing record, not to train_log.csv."""
    cfg = bimodal_run_config(params, "clip", 0)

    def stop(run_id: str, epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt("interrupted after epoch 1")

    monkeypatch.setattr(bimodal, "on_epoch_end", stop)
    with pytest.raises(KeyboardInterrupt):
        bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    monkeypatch.undo()
    path = tmp_path / "ckpt" / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    for row, t in zip(state["log_rows"], state.pop("timings"), strict=True):
        row.update(seconds=t["seconds"], samples_per_s=t["samples_per_s"])
    torch.save(state, path)
    bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    header = (tmp_path / "run" / "train_log.csv").read_text().splitlines()[0].split(",")
    assert not {"seconds", "samples_per_s"} & set(header)
    assert [r["epoch"] for r in timing.read(_timing_record)] == [1, 2]


def test_chance_of_a_random_ranking():
    from isogclr.eval.retrieval import retrieval_chance, zero_shot_chance

    assert zero_shot_chance(10) == {"top1": 10.0, "top3": 30.0, "top5": 50.0}
    chance = retrieval_chance(200, 5)
    assert chance["ir_r1"] == 0.5 and chance["ir_r10"] == 5.0
    assert chance["tr_r1"] == pytest.approx(0.5)  # 5 of 1,000 captions are the image's
    assert chance["tr_r5"] == pytest.approx(100 * (1 - (995 * 994 * 993 * 992 * 991) / (1000 * 999 * 998 * 997 * 996)))
    # a simulation of random rankings agrees
    g = torch.Generator().manual_seed(0)
    ranks = torch.stack([torch.randperm(20, generator=g)[:5] for _ in range(20_000)])  # 4 images x 5 captions
    hits = (ranks < 5).any(1).float().mean().item() * 100  # captions 0-4 belong to the query image
    assert hits == pytest.approx(retrieval_chance(4, 5, ks=(5,))["tr_r5"], abs=1.0)


def test_untrained_baseline_adds_the_no_learning_rows_and_changes_nothing_else(tmp_path, params):
    cfg = bimodal_run_config(params, "clip", 0)
    plain = bimodal.train_bimodal_run(cfg, tmp_path / "a", tmp_path / "ckpt_a")
    both = bimodal.train_bimodal_run(cfg, tmp_path / "b", tmp_path / "ckpt_b", untrained_baseline=True)
    assert {k: v for k, v in both.items() if not k.startswith(("untrained_", "chance_"))} == plain
    assert set(both) == set(plain) | {f"untrained_{k}" for k in plain} | {f"chance_{k}" for k in plain}
    assert both["chance_synth10_top1"] == 10.0 and both["chance_retrieval_a_ir_r1"] == 100 / 12
    assert all(0 <= both[f"untrained_{k}"] <= 100 for k in plain)
    assert (tmp_path / "a" / "train_log.csv").read_text() == (tmp_path / "b" / "train_log.csv").read_text()
