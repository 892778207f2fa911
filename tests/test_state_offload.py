"""``bimodal.state_device: cpu``: the per-pair state in host memory gives the numbers of the state on the device."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from isogclr.config import bimodal_run_config
from isogclr.losses import build_loss
from isogclr.train.state_offload import HostStateLoss, state_bytes

N, B, D = 40, 8, 5
LOSSES = {
    "sogclr_bimodal": {"tau": 0.1, "gamma": 0.8},
    "isogclr_bimodal": {"rho": 1.0, "tau_init": 0.05, "tau_min": 0.01, "tau_max": 0.5, "eta": 0.05},
}


def _steps(loss_fn, steps: int = 6):
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(steps):
        index = torch.randperm(N, generator=g)[:B]
        image = F.normalize(torch.randn(B, D, generator=g), dim=1).requires_grad_()
        text = F.normalize(torch.randn(B, D, generator=g), dim=1).requires_grad_()
        loss = loss_fn(image, text, index)
        loss.backward()
        out.append((loss.detach(), image.grad, text.grad))
    return out


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_host_state_gives_the_same_numbers_bit_for_bit(name):
    def build(n):
        return build_loss(name, n, **LOSSES[name])

    plain, offloaded = build(N), HostStateLoss(build, N, B, torch.device("cpu"))
    for (loss, gi, gt), (loss1, gi1, gt1) in zip(_steps(offloaded), _steps(plain), strict=True):
        assert torch.equal(loss, loss1) and torch.equal(gi, gi1) and torch.equal(gt, gt1)
    state, state1 = offloaded.state_dict(), plain.state_dict()
    assert state.keys() == state1.keys()
    for key in state1:
        assert torch.equal(state[key], state1[key]), key
    assert any(not torch.equal(state1[k], v) for k, v in build(N).state_dict().items())  # the state moved
    if name == "isogclr_bimodal":  # the temperatures read through the wrapper are the host's, all n of them
        assert offloaded.tau_image.shape == (N,) and torch.equal(offloaded.tau_image, plain.tau_image)
    # the device holds B rows per buffer, the host n
    assert state_bytes(offloaded.window, B) * N == state_bytes(plain, N) * B
    # a checkpoint of one loads into the other
    again = HostStateLoss(build, N, B, torch.device("cpu"))
    again.load_state_dict(plain.state_dict())
    assert all(torch.equal(again.state_dict()[k], v) for k, v in plain.state_dict().items())


def test_per_pair_parameters_are_refused():
    with pytest.raises(ValueError, match="state_device: model"):
        HostStateLoss(lambda n: build_loss("clip_individual_tau", n), N, B, torch.device("cpu"))


def test_a_run_with_host_state_equals_the_run_with_device_state(tmp_path):
    from isogclr.data.synthetic_pairs import PairSpec, write_synthetic_pairs
    from isogclr.train import bimodal

    write_synthetic_pairs(PairSpec(seed=3, image_size=16, num_pairs=64, num_clusters=8, retrieval_images=8,
                                   zeroshot_per_class=1), tmp_path / "pairs")
    params = {"methods": {"isogclr_bimodal": {"loss": "isogclr_bimodal", **LOSSES["isogclr_bimodal"]}},
              "bimodal": {"methods": ["isogclr_bimodal"], "seeds": [0], "data": str(tmp_path / "pairs"),
                          "image_size": 16, "epochs": 2, "batch_size": 16, "lr": 1e-3, "warmup_iters": 2,
                          "final_lr": 1e-6, "proj_dim": 16, "eval_every": 1, "device": "cpu", "num_threads": 1,
                          "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
                          "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2,
                                           "hidden_dim": 32, "max_length": 24}}}
    device = bimodal.train_bimodal_run(bimodal_run_config(params, "isogclr_bimodal", 0), tmp_path / "a",
                                       tmp_path / "ca")
    params["bimodal"]["state_device"] = "cpu"
    cfg = bimodal_run_config(params, "isogclr_bimodal", 0)
    assert cfg.to_dict()["train"]["state_device"] == "cpu"
    host = bimodal.train_bimodal_run(cfg, tmp_path / "b", tmp_path / "cb")
    assert host == device
    for name in ("train_log.csv", "artifacts/tau.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
