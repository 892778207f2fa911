"""EMC2's convergence study runner (isogclr.train.convergence) on tiny settings."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from isogclr import epoch_times as timing
from isogclr.config.convergence import ConvergenceConfig
from isogclr.config.typed import ConfigError
from isogclr.data import load_dataset
from isogclr.eval.convergence import (
    all_pairs_contrastive_loss,
    exact_objective,
    exact_objective_and_grad_norm,
    global_contrastive_loss,
)
from isogclr.models import EncoderConfig, HeadConfig
from isogclr.train.convergence import (
    CURVE_COLUMNS,
    FRESH_VIEWS,
    _ConvergenceTask,
    precompute_views,
    run_study,
    train_method,
)


def tiny(root, **overrides) -> ConvergenceConfig:
    values = {"data_root": str(root), "num_images": 16, "num_augmentations": 2, "batch_size": 4, "epochs": 2,
              "eval_every": 1, "encoder": EncoderConfig(width=4), "head": HeadConfig(2, 16, 8), "num_threads": 1}
    values.update(overrides)
    return ConvergenceConfig(**values)


def test_study_columns_finite_and_deterministic(smoke_data, tmp_path, _timing_record):
    cfg = tiny(smoke_data)
    first = run_study(cfg, augmentation_values=(2, 3), augmentation_methods=("emc2",), reference_methods=("simclr",),
                      ckpt_dir=tmp_path / "ckpt", out_dir=tmp_path / "study")
    curve = first.convergence
    assert list(curve.columns) == CURVE_COLUMNS
    assert sorted(curve.method.unique()) == ["emc2", "simclr", "sogclr"]
    assert curve.groupby("method").epoch.apply(list).map(tuple).unique().tolist() == [(0, 1, 2)]
    assert (curve.samples_seen == curve.epoch * 4 * (16 // 4)).all()
    assert curve[["objective", "grad_norm_sq"]].map(math.isfinite).all().all()
    assert "seconds" not in curve.columns and "train_seconds" not in first.augmentations.columns  # no wall clock
    # the wall clock goes to the timing record: one row per epoch of every run, the step at its end
    record = timing.read(_timing_record)
    names = ["emc2-A2-s0", "emc2-A3-s0", "simclr-A2-s0", "sogclr-A2-s0"]
    assert sorted(run.name for run in first.runs) == names
    assert sorted({r["run"] for r in record}) == [timing.run_key(tmp_path / "study" / name) for name in names]
    assert all(set(r) == {"run", "step", "seconds"} and r["step"] in (4, 8) and r["seconds"] >= 0 for r in record)
    assert not list((tmp_path / "ckpt").rglob("*.pt"))  # every run's checkpoint is removed once it has finished
    assert (curve.grad_norm_sq > 0).all()
    # every method starts from the same weights, so the same exact value at epoch 0
    assert curve[curve.epoch == 0].objective.nunique() == 1
    aug = first.augmentations
    assert [(r.method, r.num_augmentations) for r in aug.itertuples()] == [("emc2", 2), ("emc2", 3), ("simclr", 2)]
    assert aug[["objective", "grad_norm_sq", "knn1_top1"]].map(math.isfinite).all().all()
    assert ((aug.knn1_top1 >= 0) & (aug.knn1_top1 <= 100)).all()
    second = run_study(cfg, augmentation_values=(2, 3), augmentation_methods=("emc2",),
                       reference_methods=("simclr",))
    cols = ["objective", "grad_norm_sq"]
    assert second.convergence[cols].equals(curve[cols])
    assert second.augmentations[cols + ["knn1_top1"]].equals(aug[cols + ["knn1_top1"]])


def test_infinite_augmentation_trains_on_fresh_views_reproducibly(smoke_data):
    cfg = tiny(smoke_data, methods=("emc2",))
    study = run_study(cfg, augmentation_values=(2,), reference_methods=(), knn=False, infinite_augmentation=True)
    rows = study.augmentations.set_index("num_augmentations")
    assert rows.index.tolist() == [2, FRESH_VIEWS]
    # same initial weights and batches, F on the same fixed views: only the training views differ
    assert math.isfinite(rows.loc[FRESH_VIEWS, "objective"])
    assert rows.loc[FRESH_VIEWS, "objective"] != rows.loc[2, "objective"]
    again = run_study(cfg, augmentation_values=(2,), reference_methods=(), knn=False, infinite_augmentation=True)
    assert again.augmentations[["objective", "grad_norm_sq"]].equals(study.augmentations[["objective", "grad_norm_sq"]])
    images = load_dataset(cfg.dataset, cfg.data_root, "train").images[:cfg.num_images]
    views = precompute_views(images, 2, cfg.augment, cfg.seed)
    with pytest.raises(ValueError, match="only for emc2"):
        train_method("simclr", views, cfg, fresh_from=images)


def test_views_fixed_across_epochs_and_pairs_distinct(smoke_data):
    cfg = tiny(smoke_data, num_augmentations=3, methods=("emc2",), epochs=2)
    images = load_dataset(cfg.dataset, cfg.data_root, "train").images[:cfg.num_images]
    views = precompute_views(images, 3, cfg.augment, cfg.seed)
    again = precompute_views(images, 3, cfg.augment, cfg.seed)
    assert torch.equal(views, again)  # seeded, and the global generator is left alone
    assert not torch.equal(views[:, 0], views[:, 1])
    before = views.clone()
    run = train_method("emc2", views, cfg, record_views=True)
    assert torch.equal(views, before)  # training reads the fixed views, never re-augments
    steps = len(run.view_ids)
    assert steps == 2 * (16 // 4)
    for index, aug1, aug2 in run.view_ids:
        assert (aug1 < aug2).all() and (aug2 < 3).all() and len(set(index.tolist())) == len(index)
    # each epoch visits every image once (batch 4 divides 16)
    epoch1 = torch.cat([i for i, _, _ in run.view_ids[:steps // 2]])
    assert sorted(epoch1.tolist()) == list(range(16))


def test_all_pairs_objective_matches_the_library_at_two_views():
    torch.manual_seed(0)
    feats = torch.randn(5, 2, 4, dtype=torch.float64)
    assert all_pairs_contrastive_loss(feats, 0.3).item() == pytest.approx(global_contrastive_loss(feats, 0.3).item())
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 6)).double()
    views = torch.randn(6, 2, 3, 2, 2, dtype=torch.float64)
    assert exact_objective(model, views, 0.3, chunk=4) == exact_objective_and_grad_norm(model, views, 0.3, chunk=4)
    # A > 2: the two-pass gradient equals direct autograd of the all-pairs objective
    views = torch.randn(6, 3, 3, 2, 2, dtype=torch.float64)
    value, norm = exact_objective(model, views, 0.3, chunk=4)
    direct = all_pairs_contrastive_loss(model(views.flatten(0, 1)).reshape(6, 3, -1), 0.3)
    grads = torch.autograd.grad(direct, list(model.parameters()))
    assert value == pytest.approx(direct.item(), rel=1e-12)
    assert norm == pytest.approx(sum((g ** 2).sum() for g in grads).item(), rel=1e-10)


@pytest.mark.parametrize(("field", "value"), [
    ("num_images", 0), ("num_augmentations", 1), ("batch_size", 1), ("epochs", 0), ("eval_every", 0),
    ("methods", ("simclr", "nope")), ("methods", ()), ("beta", 0.0), ("lr", -1.0), ("gamma", 1.5),
    ("momentum", 1.0), ("weight_decay", -1.0), ("num_threads", -1), ("encoder", "resnet18"),
])
def test_invalid_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(ConvergenceConfig(), **{field: value})


def test_batch_larger_than_subset_is_rejected():
    with pytest.raises(ValueError, match="batch_size"):
        ConvergenceConfig(num_images=4, batch_size=8)


def test_the_pipeline_stage_writes_the_study_and_its_resolved_config(smoke_data, tmp_path, _timing_record):
    """`python -m isogclr convergence`: the report reads these three files and nothing else."""
    import json

    import pandas as pd

    from isogclr.train.convergence import write_study

    params = {"data": {"root": str(smoke_data)}, "model": {"encoder": {"width": 4}, "head": {
        "layers": 2, "hidden_dim": 16, "out_dim": 8}}, "methods": {"emc2": {"beta": 5.0}},
              "emc2_convergence": {"num_images": 16, "batch_size": 4, "epochs": 1, "eval_every": 1, "num_threads": 1,
                                   "augmentation_values": [2], "infinite_augmentation": False,
                                   "seeds": [0, 3]}}
    write_study(params, tmp_path / "runs_convergence")
    out = tmp_path / "runs_convergence"
    config = json.loads((out / "config.json").read_text())
    assert config["num_images"] == 16 and config["tau"] == 0.2 and config["fresh_views"] == FRESH_VIEWS
    assert config["augmentation_values"] == [2] and config["encoder"]["width"] == 4
    assert config["seeds"] == [0, 3] and config["seed"] == 0
    from isogclr import machine  # the machine that ran the study, beside its config

    assert json.loads((out / "machine.json").read_text()) == {**machine.describe(), "torch_threads": 1}  # the runs'
    both = pd.read_csv(out / "convergence.csv")
    assert list(both.columns) == ["seed", *CURVE_COLUMNS] and set(both.seed) == {0, 3}
    assert set(pd.read_csv(out / "augmentations.csv").method) == {"emc2", "simclr"}
    assert "train_seconds" not in pd.read_csv(out / "augmentations.csv").columns
    # each seed is its own study: seed 3's rows are those of a one-seed study at seed 3, and differ from seed 0's
    write_study({**params, "emc2_convergence": {**params["emc2_convergence"], "seeds": [3]}}, tmp_path / "alone")
    alone = pd.read_csv(tmp_path / "alone" / "convergence.csv")
    pd.testing.assert_frame_equal(both[both.seed == 3].reset_index(drop=True), alone)
    assert not np.allclose(both[both.seed == 0].objective.to_numpy(), alone.objective.to_numpy())
    # the times: in the timing record, one row per epoch of every run, read back for the report
    from isogclr import epoch_times as timing

    from .timing_helpers import convergence_seconds

    record = [r for r in timing.read(_timing_record) if r["run"].startswith(timing.run_key(out))]
    assert sorted({r["run"] for r in record}) == [timing.run_key(out / f"{m}-A2-s{s}")
                                                  for m in ("emc2", "simclr", "sogclr") for s in (0, 3)]
    from isogclr.config.plan import plan_keys  # the plan lists these runs, by the folders the study writes

    assert sorted(timing.run_key(tmp_path / k.run_dir) for k in plan_keys(params)) == sorted({r["run"] for r in record})
    assert all(set(r) == {"run", "step", "seconds"} and r["step"] == 4 for r in record)
    curve = pd.read_csv(out / "convergence.csv")
    seconds = convergence_seconds(curve, out)
    assert seconds[curve.step == 0].eq(0).all() and seconds[curve.step == 4].gt(0).all()
    totals = convergence_seconds(pd.read_csv(out / "augmentations.csv"), out, final=True)
    assert totals.notna().all()
    assert convergence_seconds(curve, tmp_path / "elsewhere").isna().all()  # no row in the record: NaN
    with pytest.raises(ValueError, match="emc2_convergence.epoch: unknown key"):
        write_study({**params, "emc2_convergence": {"epoch": 3}}, out)
    with pytest.raises(ValueError, match="emc2_convergence.seed: replaced by emc2_convergence.seeds"):
        write_study({**params, "emc2_convergence": {"seed": 3}}, out)
    with pytest.raises(ValueError, match="emc2_convergence.seeds: must be a non-empty list of distinct"):
        write_study({**params, "emc2_convergence": {"seeds": [1, 1]}}, out)


def test_a_run_resumed_from_its_checkpoint_gives_the_uninterrupted_curve(smoke_data, tmp_path):
    """Each run is a Task of the one engine: stopped after an epoch, it resumes from its checkpoint."""
    from isogclr.train.convergence import _threads
    from isogclr.train.engine import fit

    cfg = tiny(smoke_data, epochs=3)
    images = load_dataset(cfg.dataset, cfg.data_root, "train").images[:cfg.num_images]
    views = precompute_views(images, 2, cfg.augment, cfg.seed)
    whole = train_method("emc2", views, cfg)
    ckpt = tmp_path / "emc2-A2" / "checkpoint.pt"

    def run(stop_at: int | None = None) -> tuple[list[dict], _ConvergenceTask]:
        task = _ConvergenceTask("emc2", views, cfg, cfg.eval_every, record_views=False, fresh_from=None)

        def interrupt(epoch: int) -> None:
            if epoch == stop_at:
                raise KeyboardInterrupt

        with _threads(cfg.num_threads):  # as train_method: the same float results
            rows = fit(task, total_steps=task.steps_per_epoch * cfg.epochs, warmup_steps=0, final_lr_fraction=1.0,
                       ckpt_path=ckpt, curves_dir=None, on_epoch_end=interrupt)
        return rows, task

    with pytest.raises(KeyboardInterrupt):
        run(stop_at=1)
    rows, task = run()
    curve = [(r["epoch"], r["step"], r["objective"], r["grad_norm_sq"]) for r in rows if "objective" in r]
    assert curve == list(whole.curve[["epoch", "step", "objective", "grad_norm_sq"]].itertuples(index=False, name=None))
    assert all(torch.equal(a, b) for a, b in zip(task.model.state_dict().values(), whole.model.state_dict().values(),
                                                 strict=True))
    # a checkpoint of other settings is refused, not resumed
    other = _ConvergenceTask("emc2", views, dataclasses.replace(cfg, lr=0.01), 1, record_views=False, fresh_from=None)
    with pytest.raises(ValueError, match="other settings"):
        fit(other, total_steps=other.steps_per_epoch * 4, warmup_steps=0, final_lr_fraction=1.0, ckpt_path=ckpt,
            curves_dir=None)


def test_the_learning_rate_is_constant(smoke_data, monkeypatch):
    """Plain SGD at cfg.lr on every step: train_method asks the engine for a schedule factor of exactly 1."""
    cfg = tiny(smoke_data, epochs=2)
    images = load_dataset(cfg.dataset, cfg.data_root, "train").images[:cfg.num_images]
    rates = []
    sgd_step = torch.optim.SGD.step

    def step(self, *args, **kwargs):  # noqa: ANN001, ANN202
        rates.extend(group["lr"] for group in self.param_groups)
        return sgd_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.SGD, "step", step)
    train_method("simclr", precompute_views(images, 2, cfg.augment, cfg.seed), cfg)
    assert len(rates) == 2 * 2 * (16 // 4) and set(rates) == {cfg.lr}


def test_the_section_is_read_and_checked_by_the_config_module():
    from isogclr.config.convergence import convergence_config, convergence_study

    params = {"methods": {"emc2": {"beta": 4}}, "emc2_convergence": {
        "epochs": 2, "methods": ["emc2"], "augmentation_values": [2, 5], "infinite_augmentation": True}}
    cfg, spec = convergence_config(params), convergence_study(params)
    assert (cfg.epochs, cfg.methods, cfg.beta, cfg.tau) == (2, ("emc2",), 4.0, 0.25)
    assert (spec.augmentation_values, spec.infinite_augmentation) == ((2, 5), True)
    assert convergence_config(params, epochs=3).epochs == 3
    bad = [({"batch_size": 1}, "emc2_convergence.batch_size"), ({"lr": "fast"}, "emc2_convergence.lr"),
           ({"augmentation_values": [1]}, "emc2_convergence.augmentation_values"),
           ({"infinite_augmentation": "yes"}, "emc2_convergence.infinite_augmentation"),
           ({"epoch": 3}, "emc2_convergence.epoch: unknown key")]
    for section, key in bad:
        with pytest.raises(ConfigError, match=f"^{key}"):
            convergence_study(p := {"emc2_convergence": section})
            convergence_config(p)
    with pytest.raises(ConfigError, match="^methods.emc2.beta"):
        convergence_config({"methods": {"emc2": {"beta": -1}}})
