"""train.optimizer.clip_grad_norm: the gradient's global L2 norm clipped before each step, off at 0.

The mini profile clips at 1 (the testbed's lever against chaos, docs/reproducibility.md); the paper profile and
smoke do not. Off, a run's config.json is the one written before the knob existed.
"""

from __future__ import annotations

import copy

import pytest
import torch

from isogclr.config.core import OptimConfig, run_config
from isogclr.config.profiles import load_params
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params
from isogclr.train.engine import fit

from .conftest import ROOT
from .engine_helpers import TinyTask


def _task() -> TinyTask:
    """One step of :class:`TinyTask` on inputs whose loss has a gradient of norm well above 1."""
    task = TinyTask(x_scale=10.0)
    task.epochs = task.steps_per_epoch = 1
    return task


def _step(tmp_path, **kwargs) -> tuple[TinyTask, list[torch.Tensor], list[torch.Tensor], list[dict]]:
    """One step of :func:`_task` through the engine; the task, its weights before, its gradient, the log."""
    task = _task()
    before = [p.detach().clone() for p in task.model.parameters()]
    task.model.zero_grad()
    task.loss(0).backward()
    grads = [p.grad.detach().clone() for p in task.model.parameters()]
    task.model.zero_grad(set_to_none=True)
    rows = fit(task, total_steps=1, warmup_steps=0, final_lr_fraction=1.0, ckpt_path=tmp_path / "ckpt.pt",
               curves_dir=None, **kwargs)
    return task, before, grads, rows


def test_the_step_uses_the_gradient_rescaled_to_the_clip_norm(tmp_path):
    task, before, grads, rows = _step(tmp_path, clip_grad_norm=0.5)
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    assert norm > 5  # the case clips: the gradient is 10x the bound
    for p, w, g in zip(task.model.parameters(), before, grads, strict=True):
        torch.testing.assert_close(p.detach(), w - 0.1 * g * (0.5 / norm))
    # the log's grad_norm is the norm before clipping (what the step had to be protected from)
    assert rows[-1]["grad_norm"] == pytest.approx(float(norm), rel=1e-5)


def test_clip_zero_is_the_plain_step(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, _, _, _ = _step(tmp_path / "a")
    off, before, grads, _ = _step(tmp_path / "b", clip_grad_norm=0.0)
    for p, q, w, g in zip(plain.model.parameters(), off.model.parameters(), before, grads, strict=True):
        assert torch.equal(p, q)
        torch.testing.assert_close(p.detach(), w - 0.1 * g)


@pytest.mark.parametrize("bad", [-1.0, "1", True, float("nan")])
def test_a_bad_clip_norm_is_refused_naming_the_key(bad):
    with pytest.raises(ValueError, match="train.optimizer.clip_grad_norm"):
        OptimConfig(clip_grad_norm=bad)


def test_a_bad_clip_norm_in_params_fails_validation():
    params = load_params(ROOT / "profiles" / "smoke.yaml")
    params["train"]["optimizer"]["clip_grad_norm"] = -0.5
    with pytest.raises((ConfigError, ValueError), match="clip_grad_norm"):
        validate_params(params)


def test_the_run_config_names_the_clip_only_when_it_clips():
    params = load_params(ROOT / "profiles" / "smoke.yaml")
    assert params["train"]["optimizer"].get("clip_grad_norm", 0) == 0
    off = run_config(params, "simclr", "synth10_lt", 0).to_dict()
    assert "clip_grad_norm" not in off["optimizer"]
    clipped = copy.deepcopy(params)
    clipped["train"]["optimizer"]["clip_grad_norm"] = 1.0
    on = run_config(clipped, "simclr", "synth10_lt", 0)
    assert on.optimizer.clip_grad_norm == 1.0 and on.to_dict()["optimizer"]["clip_grad_norm"] == 1.0
    assert {k: v for k, v in on.to_dict()["optimizer"].items() if k != "clip_grad_norm"} == off["optimizer"]


def test_the_mini_testbed_clips_and_the_other_profiles_do_not():
    clip = {name: load_params(ROOT / "profiles" / f"{name}.yaml")["train"]["optimizer"].get("clip_grad_norm", 0)
            for name in ("mini", "smoke", "paper")}
    assert clip == {"mini": 1.0, "smoke": 0.0, "paper": 0.0}
