"""Negative Cache: Gumbel-max sampling from the cache, the gradient estimator, refresh and state."""

from __future__ import annotations

import io

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.negcache import NegativeCacheLoss

B, D = 5, 4


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    z2 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return z1, z2


def ref_cache_loss(z1, z2, cache, index, beta, filled):
    """mean_a [-beta z_a.z_a+ + log mean_{j != i, filled} exp(beta z_a.c_j)] with explicit sums."""
    anchors, positives = torch.cat([z1, z2]), torch.cat([z2, z1])
    sample = index.repeat(2)
    total = 0.0
    for a in range(len(anchors)):
        js = [j for j in range(len(cache)) if filled[j] and j != sample[a]]
        neg = sum(torch.exp(beta * anchors[a] @ cache[j]) for j in js) / len(js)
        total = total - beta * anchors[a] @ positives[a] + torch.log(neg)
    return total / len(anchors)


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


def test_gumbel_max_samples_the_softmax_over_the_cache():
    n, beta, draws = 9, 3.0, 20000
    loss_fn = NegativeCacheLoss(n, dim=D, beta=beta, num_negatives=draws, seed=0).double()
    g = torch.Generator().manual_seed(1)
    cache = F.normalize(torch.randn(n, D, generator=g, dtype=torch.float64), dim=1)
    loss_fn.update_cache(torch.arange(n), cache)
    z1, z2 = (z.detach() for z in features(2))
    index = torch.tensor([0, 3, 4, 7, 8])
    z1 = cache[index]  # the batch's own entries are (re)written with view 1
    samples = loss_fn.sample(z1, z2, index)  # (2B, draws)
    anchors = torch.cat([z1, z2])
    for a in range(2 * B):
        own = int(index[a % B])
        logits = beta * anchors[a] @ cache.T
        logits[own] = -torch.inf
        target = torch.softmax(logits, 0)
        empirical = torch.bincount(samples[a], minlength=n).double() / draws
        assert empirical[own] == 0
        assert 0.5 * (empirical - target).abs().sum() < 0.02


def test_gradient_with_fresh_negatives_is_the_sampled_estimator():
    """With the negatives' fresh features given: beta [-grad z_a.z_a+ + mean_k grad z_a.n_k]."""
    n, k, beta = 12, 3, 2.0
    loss_fn = NegativeCacheLoss(n, dim=D, beta=beta, num_negatives=k).double()
    g = torch.Generator().manual_seed(7)
    loss_fn.update_cache(torch.arange(n), F.normalize(torch.randn(n, D, generator=g, dtype=torch.float64), dim=1))
    z1, z2 = features(3)
    index = torch.tensor([1, 4, 6, 9, 11])
    negative_index = loss_fn.sample(z1.detach(), z2.detach(), index)
    negatives = F.normalize(torch.randn(2 * B, k, D, generator=g, dtype=torch.float64), dim=2).requires_grad_()
    loss = loss_fn(z1, z2, index, negatives=negatives, negative_index=negative_index)
    assert torch.equal(loss_fn.last_negative_index, negative_index)
    anchors, positives = torch.cat([z1, z2]), torch.cat([z2, z1])
    ref = 0.0
    for a in range(2 * B):
        ref = ref + beta * (-(anchors[a] @ positives[a]) + sum(anchors[a] @ negatives[a, j] for j in range(k)) / k)
    ref = ref / (2 * B)
    assert_close(grads(loss, z1, z2, negatives), grads(ref, z1, z2, negatives))
    torch.testing.assert_close(loss, ref_cache_loss(z1, z2, loss_fn.cache, index, beta, loss_fn.filled))


def test_expected_gradient_is_the_global_gradient_when_the_cache_is_fresh():
    """Batch = dataset, cache = current view-1 features: in-batch negatives use the live features,
    and the average over many Gumbel draws is the gradient of the global loss over the cache."""
    beta, k = 2.0, 4000
    loss_fn = NegativeCacheLoss(B, dim=D, beta=beta, num_negatives=k, seed=2).double()
    z1, z2 = features(4)
    loss = loss_fn(z1, z2, torch.arange(B))
    ref = ref_cache_loss(z1, z2, z1, torch.arange(B), beta, torch.ones(B, dtype=torch.bool))
    torch.testing.assert_close(loss, ref)
    got, want = grads(loss, z1, z2), grads(ref, z1, z2)
    error = torch.cat([(a - b).flatten() for a, b in zip(got, want, strict=True)]).norm()
    assert error / torch.cat([w.flatten() for w in want]).norm() < 0.05


def test_stale_cache_entries_get_no_gradient():
    n = 20
    loss_fn = NegativeCacheLoss(n, dim=D, beta=1.0, num_negatives=50, seed=3).double()
    g = torch.Generator().manual_seed(8)
    loss_fn.update_cache(torch.arange(n), F.normalize(torch.randn(n, D, generator=g, dtype=torch.float64), dim=1))
    z1, z2 = features(5)
    index = torch.tensor([0, 1, 2, 3, 4])
    loss = loss_fn(z1, z2, index)
    sampled = loss_fn.last_negative_index
    assert (sampled >= B).any() and (sampled < B).any()  # both stale and live negatives were drawn
    g1, _ = grads(loss, z1, z2)
    assert torch.isfinite(g1).all()


def test_refresh_is_round_robin_at_rate_rho():
    loss_fn = NegativeCacheLoss(10, dim=D, rho=0.25)
    assert loss_fn.refresh_indices().tolist() == [0, 1, 2]
    assert loss_fn.refresh_indices().tolist() == [3, 4, 5]
    assert loss_fn.refresh_indices().tolist() == [6, 7, 8]
    assert loss_fn.refresh_indices().tolist() == [9, 0, 1]
    fresh = F.normalize(torch.randn(3, D, generator=torch.Generator().manual_seed(9)), dim=1)
    loss_fn.update_cache(torch.tensor([9, 0, 1]), fresh)
    assert torch.equal(loss_fn.cache[[9, 0, 1]], fresh) and loss_fn.filled.sum() == 3


def test_state_and_generator_survive_save_and_restore():
    n = 12
    original = build_loss("negcache", n, dim=D, beta=2.0, num_negatives=2, seed=5)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randperm(n, generator=g)[:B] for _ in range(4)]
    feats = [[z.detach().float() for z in features(s)] for s in range(4)]
    for idx, (z1, z2) in zip(batches[:2], feats[:2], strict=True):
        original(z1, z2, idx)
    original.refresh_indices()
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = build_loss("negcache", n, dim=D, beta=2.0, num_negatives=2, seed=99)
    restored.load_state_dict(torch.load(buffer))
    for idx, (z1, z2) in zip(batches[2:], feats[2:], strict=True):
        outs = []
        for loss_fn in (original, restored):
            a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
            loss = loss_fn(a, b, idx)
            outs.append((loss, *grads(loss, a, b), loss_fn.last_negative_index, loss_fn.refresh_indices()))
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_beta_200_is_finite_in_float32(sign):
    z = F.normalize(torch.ones(B, D), dim=1)
    loss_fn = NegativeCacheLoss(B, dim=D, beta=200.0)
    for _ in range(2):
        z1, z2 = z.clone().requires_grad_(), (sign * z).requires_grad_()
        loss = loss_fn(z1, z2, torch.arange(B))
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads(loss, z1, z2))


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(6, b=16, d=8))
    results = []
    for enabled in (False, True):
        loss_fn = NegativeCacheLoss(16, dim=8, beta=200.0, seed=4)
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = loss_fn(a, b, torch.arange(16))
        results.append((loss.detach(), *grads(loss, a, b), loss_fn.last_negative_index))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["negcache"] is NegativeCacheLoss and NegativeCacheLoss.expects_normalized
    loss_fn = build_loss("negcache", 10, dim=D)
    assert loss_fn.cache.shape == (10, D)
    with pytest.raises(ValueError, match="rho"):
        NegativeCacheLoss(10, rho=2.0)
    z1, z2 = features()
    with pytest.raises(ValueError, match="negatives must be"):
        loss_fn(z1.float(), z2.float(), torch.arange(B), negatives=torch.zeros(B, 1, D))
