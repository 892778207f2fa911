"""``bimodal.state_device: cpu``: the per-pair state in host memory gives the numbers of the state on the device."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from isogclr.config.bimodal import bimodal_run_config
from isogclr.losses import build_loss
from isogclr.train import state_offload
from isogclr.train.state_offload import HostStateLoss, overlaps, state_bytes

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


def test_the_overlapped_copies_are_chosen_by_device_type():
    assert overlaps(torch.device("cuda")) and overlaps(torch.device("cuda", 1))
    assert not overlaps(torch.device("cpu")) and not overlaps(torch.device("meta"))
    loss = HostStateLoss(lambda n: build_loss("sogclr_bimodal", n, **LOSSES["sogclr_bimodal"]), N, B,
                         torch.device("cpu"))
    assert not loss.copies.overlap and not hasattr(loss.copies, "side")


def _fake_cuda(monkeypatch) -> list[str]:
    """torch.cuda's streams and events, and pinning, as no-ops that log their calls (this machine has no GPU):
    the CUDA branch's order of copies, flushes and waits then runs on CPU tensors."""
    calls: list[str] = []

    class Stream:
        def __init__(self, device=None):
            calls.append("side stream")

        def wait_event(self, event):
            calls.append("side waits")

        def wait_stream(self, stream):
            calls.append("compute waits")

    class Event:
        def record(self, stream=None):
            calls.append("record")

        def synchronize(self):
            calls.append("host waits")

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **k: calls.append("pin") or self.clone())
    monkeypatch.setattr(state_offload, "overlaps", lambda device: True)
    return calls


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_the_overlapped_branch_gives_the_same_numbers(name, monkeypatch):
    """The CUDA branch (pinned buffers, side stream, the write-back deferred to the next step) on CPU tensors: the
    on-device numbers bit for bit, the rows of a step reaching the host before the next step reads them."""
    def build(n):
        return build_loss(name, n, **LOSSES[name])

    plain = build(N)
    calls = _fake_cuda(monkeypatch)
    offloaded = HostStateLoss(build, N, B, torch.device("cpu"))
    assert offloaded.copies.overlap and calls.count("pin") == 3 * len(offloaded.copies.host)  # host + 2 staging
    for (loss, gi, gt), (loss1, gi1, gt1) in zip(_steps(offloaded), _steps(plain), strict=True):
        assert torch.equal(loss, loss1) and torch.equal(gi, gi1) and torch.equal(gt, gt1)
    assert offloaded.copies.pending is not None  # the last step's rows: still in the outgoing staging buffer
    state, state1 = offloaded.state_dict(), plain.state_dict()  # reading the state writes them in
    assert offloaded.copies.pending is None
    assert all(torch.equal(state[k], v) for k, v in state1.items())
    step = calls[calls.index("side stream") + 1:]
    assert step.count("host waits") == 6 and step.count("side waits") == 2 * 6 and step.count("compute waits") == 6


def test_per_pair_parameters_are_refused():
    with pytest.raises(ValueError, match="state_device: model"):
        HostStateLoss(lambda n: build_loss("clip_individual_tau", n), N, B, torch.device("cpu"))


def test_a_run_with_host_state_equals_the_run_with_device_state(tmp_path):
    from isogclr.data.pair_semantics import PairSpec
    from isogclr.data.synthetic_pairs import write_synthetic_pairs
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
