"""One writer per run: only rank 0 writes the timing record, a selection and a run's outputs; the timing record goes
where the run's outputs go (the project's ``timing.csv`` for a run inside the project, else beside the run)."""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from isogclr import epoch_times as timing

from .process_helpers import free_port, torchrun_env

WORLD = 2


@pytest.fixture
def no_record_override(monkeypatch):
    """The record's own placement (the tests' autouse fixture points every run at one temporary file)."""
    monkeypatch.delenv(timing.ENV, raising=False)


def test_a_run_inside_the_project_goes_to_the_projects_record(tmp_path, monkeypatch, no_record_override):
    monkeypatch.chdir(tmp_path)
    key = timing.run_key(tmp_path / "runs" / "simclr-s0")
    assert key == "runs/simclr-s0" and timing.record_location(key) == (timing.Path("timing.csv"), key)
    timing.record(key, [{"epoch": 1, "seconds": 1.5}])
    assert (tmp_path / "timing.csv").read_text() == "run,epoch,seconds\nruns/simclr-s0,1,1.5\n"


def test_a_run_written_elsewhere_keeps_its_record_beside_it(tmp_path, monkeypatch, no_record_override):
    """``--out`` outside the project: the project's timing.csv is not touched, the record sits beside the run."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    (project / "timing.csv").write_text("run,epoch,seconds\nruns/a,1,2.0\n")
    monkeypatch.chdir(project)
    key = timing.run_key(elsewhere / "simclr-s0")
    assert key == (elsewhere / "simclr-s0").resolve().as_posix()
    timing.record(key, [{"epoch": 1, "seconds": 3.25}, {"epoch": 2, "seconds": 3.0}])
    assert (project / "timing.csv").read_text() == "run,epoch,seconds\nruns/a,1,2.0\n"
    assert (elsewhere / "timing.csv").read_text() == "run,epoch,seconds\nsimclr-s0,1,3.25\nsimclr-s0,2,3.0\n"
    from .timing_helpers import run_seconds  # the reader finds the same place

    assert run_seconds(elsewhere / "simclr-s0").to_dict("list") == {"epoch": [1, 2], "train_seconds": [3.25, 6.25]}


def test_the_override_takes_every_run(tmp_path, monkeypatch):
    monkeypatch.setenv(timing.ENV, str(tmp_path / "one.csv"))
    assert timing.record_location("/somewhere/run") == (tmp_path / "one.csv", "/somewhere/run")


def test_a_process_of_rank_1_may_not_write_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(RuntimeError, match="rank 0 only, and this process is rank 1"):
        timing.record("runs/x", [{"epoch": 1, "seconds": 1.0}], path=tmp_path / "timing.csv")
    assert not (tmp_path / "timing.csv").exists()
    monkeypatch.setenv("RANK", "0")
    timing.record("runs/x", [{"epoch": 1, "seconds": 1.0}], path=tmp_path / "timing.csv")
    assert (tmp_path / "timing.csv").exists()


# --- tune with two gloo processes: rank 0 scores and writes, every rank returns its selection -----------------------



def _tune_worker(rank: int, params: dict, port: int, out: str, diverge: bool) -> None:
    torchrun_env(rank, WORLD, port)
    from isogclr import io
    from isogclr.losses.numerics import TrainingDiverged
    from isogclr.train import tuning

    writes = []

    def logged(save):
        def write(payload, path):
            writes.append(str(path))
            return save(payload, path)
        return write

    tuning.save_text, tuning.save_json = logged(io.save_text), logged(io.save_json)

    def train(cfg, run_dir, ckpt_dir) -> dict:
        if not dist.is_initialized():  # as the trainers join the group (isogclr.train.distributed.setup)
            dist.init_process_group("gloo")
        dist.barrier()  # the candidates train together
        if diverge:
            raise TrainingDiverged("loss is nan")
        tau = cfg.to_dict()["method"]["kwargs"]["tau"]
        return {"top1": 50.0 + 100 * tau} if rank == 0 else {}  # the unimodal trainer evaluates on rank 0 only

    try:
        result = {"selection": tuning.tune_method(params, "simclr", train, out, os.path.join(out, "ckpt"))}
    except TrainingDiverged as err:
        result = {"diverged": str(err)}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({**result, "writes": writes}, f)
    dist.destroy_process_group()


def _tune_params(smoke_params) -> dict:
    params = copy.deepcopy(smoke_params)
    params["methods"]["simclr"]["search"] = {"tau": [0.2, 0.3]}
    return params


def test_rank_1_of_tune_trains_every_candidate_writes_nothing_and_returns_rank_0s_selection(tmp_path, monkeypatch,
                                                                                             smoke_params):
    """One process playing rank 1 (its broadcast hears rank 0's selection): the fast form of the test below."""
    from isogclr.train import tuning

    monkeypatch.setenv("RANK", "1")
    sent, trained = [], []
    monkeypatch.setattr(tuning.distributed, "broadcast_object",
                        lambda obj: sent.append(obj) or ("selection", {"knobs": {"tau": 0.3}}))
    selection = tuning.tune_method(_tune_params(smoke_params), "simclr",
                                   lambda cfg, run_dir, ckpt: trained.append(cfg.run_id) or {}, tmp_path)
    assert selection == {"knobs": {"tau": 0.3}} and sent == [None] and len(trained) == 2  # 2 candidates, 1 seed
    assert not list(tmp_path.rglob("*"))  # nothing written


@pytest.mark.slow  # 2 processes: about 40 s (a loaded 2-core machine)
def test_two_processes_of_tune_write_one_selection(tmp_path, smoke_params):
    out = tmp_path / "tuning"
    out.mkdir()
    mp.spawn(_tune_worker, args=(_tune_params(smoke_params), free_port(), str(out), False), nprocs=WORLD, join=True)
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]
    assert sorted(ranks[0]["writes"]) == [str(out / "simclr" / "candidates.csv"), str(out / "simclr" / "selected.json")]
    assert ranks[1]["writes"] == []  # rank 1 trained (the barrier) and wrote nothing
    assert ranks[0]["selection"] == ranks[1]["selection"] == json.loads((out / "simclr" / "selected.json").read_text())
    assert ranks[0]["selection"]["knobs"] == {"tau": 0.3} and ranks[0]["selection"]["val_top1"] == 80.0


@pytest.mark.slow  # 2 processes: about 40 s (a loaded 2-core machine)
def test_two_processes_of_tune_that_all_diverge_both_fail_and_write_nothing(tmp_path, smoke_params):
    out = tmp_path / "tuning"
    out.mkdir()
    mp.spawn(_tune_worker, args=(_tune_params(smoke_params), free_port(), str(out), True), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        result = json.loads((out / f"rank{rank}.json").read_text())
        assert "every candidate diverged" in result["diverged"] and result["writes"] == []
    assert not (out / "simclr").exists()


# --- the real image-text trainer with two gloo processes: one timing writer, the record beside the run ------------


def _train_worker(rank: int, params: dict, out: str, ckpt: str, port: int, log: str) -> None:
    torchrun_env(rank, WORLD, port)
    os.environ.pop(timing.ENV, None)
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.train import bimodal

    record = timing.record

    def logged(run, rows, path=None):
        with open(log, "a") as f:
            f.write(f"{rank} {run}\n")
        return record(run, rows, path)

    timing.record = logged
    bimodal.train_bimodal_run(bimodal_run_config(params, "clip", 0), out, ckpt)
    dist.destroy_process_group()


@pytest.mark.slow
def test_a_two_process_image_text_run_has_one_timing_writer_and_its_record_beside_it(tmp_path, monkeypatch):
    from isogclr.data.pair_semantics import PairSpec
    from isogclr.data.synthetic_pairs import write_synthetic_pairs

    root = tmp_path / "pairs"
    write_synthetic_pairs(PairSpec(seed=3, image_size=16, num_pairs=32, num_clusters=4, retrieval_images=8,
                                   zeroshot_per_class=1), root)
    params = {
        "methods": {"clip": {"loss": "clip", "tau": 0.05}},
        "bimodal": {
            "methods": ["clip"], "seeds": [0], "data": str(root), "image_size": 16, "epochs": 2, "batch_size": 16,
            "lr": 1e-3, "weight_decay": 0.02, "warmup_iters": 1, "final_lr": 1e-6, "proj_dim": 8, "eval_every": 0,
            "device": "cpu", "num_threads": 1, "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
            "text_encoder": {"vocab_size": 100, "dim": 8, "n_layers": 1, "n_heads": 2, "hidden_dim": 16,
                             "max_length": 16},
        },
    }
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # the processes start here: the run is written outside it
    out, log = tmp_path / "elsewhere" / "clip-s0", tmp_path / "writers.log"
    mp.spawn(_train_worker, args=(params, str(out), str(tmp_path / "ckpt"), free_port(), str(log)), nprocs=WORLD,
             join=True)
    assert log.read_text() == f"0 {out.resolve().as_posix()}\n"  # rank 0 only
    assert not (project / "timing.csv").exists()
    rows = timing.read(tmp_path / "elsewhere" / "timing.csv")
    assert [(r["run"], r["epoch"]) for r in rows] == [("clip-s0", 1), ("clip-s0", 2)]
