"""Evaluation metrics on hand-made cases whose answers are known."""

from __future__ import annotations

import pytest
import torch

from isogclr.eval.knn import knn_accuracy
from isogclr.eval.linear_probe import ProbeConfig, linear_probe
from isogclr.eval.retrieval import class_embeddings, retrieval_recall, zero_shot_accuracy

E = torch.eye(4)


def test_knn_on_known_points():
    train_x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.2, 0.8]])
    train_y = torch.tensor([0, 0, 1, 1, 1])
    test_x = torch.tensor([[1.0, 0.05], [0.05, 1.0], [0.8, 0.2]])
    test_y = torch.tensor([0, 1, 1])  # the last point is nearer to class 0: 1-NN gets 2 of 3
    assert knn_accuracy(train_x, train_y, test_x, test_y, k=1) == pytest.approx(200 / 3)
    # k = 5 votes 3 to 2 for class 1 everywhere
    assert knn_accuracy(train_x, train_y, test_x, test_y, k=5) == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="k must be"):
        knn_accuracy(train_x, train_y, test_x, test_y, k=6)


def test_retrieval_recall_known_ranks():
    images = E[:3]
    # 2 captions per image: image 0's captions match it; image 1's first caption matches image 2 best
    texts = torch.stack([E[0], E[0], E[2] + 0.1 * E[1], E[1], E[2], E[2]])
    owner = torch.tensor([0, 0, 1, 1, 2, 2])
    r = retrieval_recall(images, texts, owner, ks=(1, 2))
    assert r["ir_r1"] == pytest.approx(100 * 5 / 6)  # caption 2 retrieves image 2 first
    assert r["ir_r2"] == pytest.approx(100.0)
    # TR: image 1's best caption (3) ranks after... captions 0,1 (sim 0) ties are not ahead; rank 1 is caption 3
    assert r["tr_r1"] == pytest.approx(100.0)


def test_zero_shot_topk():
    classes = class_embeddings([torch.stack([E[0], E[0] + 0.1 * E[1]]), E[1:2], E[2:3], E[3:4]])
    images = torch.stack([E[0], E[1], 0.6 * E[2] + 0.8 * E[3]])
    labels = torch.tensor([0, 1, 2])
    acc = zero_shot_accuracy(images, labels, classes, ks=(1, 2))
    assert acc["top1"] == pytest.approx(200 / 3) and acc["top2"] == pytest.approx(100.0)


def test_linear_probe_separable_data_and_final_epoch_reporting():
    g = torch.Generator().manual_seed(0)
    centers = 3 * torch.eye(3)
    y = torch.arange(300) % 3
    x = centers[y] + 0.3 * torch.randn(300, 3, generator=g)
    cfg = ProbeConfig(epochs=10, lr=1.0, milestones=(5,), batch_size=32)
    r = linear_probe(x[:200], y[:200], x[200:], y[200:], 3, cfg)
    assert r["top1"] == r["top1_final"] == pytest.approx(100.0)
    best = linear_probe(x[:200], y[:200], x[200:], y[200:], 3, ProbeConfig(epochs=3, lr=1.0, report="best"))
    assert best["top1"] == best["top1_best"] >= best["top1_final"]


def test_exact_objective_and_grad_norm_match_direct_autograd():
    from isogclr.eval.convergence import exact_objective_and_grad_norm, global_contrastive_loss

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.ReLU(), torch.nn.Linear(8, 5)).double()
    views = torch.randn(7, 2, 3, 2, 2, dtype=torch.float64)
    value, norm = exact_objective_and_grad_norm(model, views, tau=0.3, chunk=3)  # chunks of 3, 3, 1 images
    model.eval()
    direct = global_contrastive_loss(model(views.flatten(0, 1)).reshape(7, 2, -1), 0.3)
    grads = torch.autograd.grad(direct, list(model.parameters()))
    assert value == pytest.approx(direct.item(), rel=1e-12)
    assert norm == pytest.approx(sum((g ** 2).sum() for g in grads).item(), rel=1e-10)
    # the objective is the GCL with all (n - 1) * A negatives: with A = 2 it is SogCLR's v1 with gamma = 1
    from isogclr.losses.sogclr import SogCLRLoss

    feats = torch.nn.functional.normalize(model(views.flatten(0, 1)).reshape(7, 2, -1), dim=-1)
    sog = SogCLRLoss(7, tau=0.3, gamma=1.0)(feats[:, 0], feats[:, 1], torch.arange(7))
    assert sog.item() == pytest.approx(direct.item(), rel=1e-10)


def _probe_by_autograd(train_x, train_y, test_x, test_y, num_classes, cfg, seed=0):
    """The probe as nn.Linear + autograd + torch.optim.SGD(nesterov) + MultiStepLR: the reference."""
    from torch import nn
    from torch.nn import functional as F

    gen = torch.Generator().manual_seed(seed)
    clf = nn.Linear(train_x.shape[1], num_classes)
    with torch.no_grad():
        clf.weight.normal_(0, 0.01, generator=gen)
        clf.bias.zero_()
    opt = torch.optim.SGD(clf.parameters(), lr=cfg.lr, momentum=cfg.momentum, nesterov=True,
                          weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(cfg.milestones), gamma=cfg.gamma)
    accs = []
    for _ in range(cfg.epochs):
        order = torch.randperm(len(train_x), generator=gen)
        for i in range(0, len(order), cfg.batch_size):
            idx = order[i:i + cfg.batch_size]
            loss = F.cross_entropy(clf(train_x[idx]), train_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        with torch.no_grad():
            accs.append(100.0 * (clf(test_x).argmax(1) == test_y).float().mean().item())
    return clf, accs


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_linear_probe_is_sgd_with_nesterov_momentum(weight_decay):
    """The written-out update is torch.optim.SGD's (nesterov, weight decay, MultiStepLR) on the mean
    cross-entropy: the same accuracy at every epoch as autograd with the optimizer, on a noisy 4-class set
    whose accuracy moves from epoch to epoch."""
    torch.manual_seed(0)
    y = torch.randint(0, 4, (300,))
    x = torch.randn(300, 12) + 0.8 * torch.nn.functional.one_hot(y, 12).float()
    cfg = ProbeConfig(epochs=7, lr=2.0, batch_size=32, weight_decay=weight_decay, milestones=(2, 5), gamma=0.3)
    _, accs = _probe_by_autograd(x[:200], y[:200], x[200:], y[200:], 4, cfg, seed=3)
    r = linear_probe(x[:200], y[:200], x[200:], y[200:], 4, cfg, seed=3)
    assert len(set(accs)) > 2  # the comparison is not of a constant
    assert r["top1_final"] == pytest.approx(accs[-1], abs=1e-9) and r["top1_best"] == pytest.approx(max(accs), abs=1e-9)
