"""EMC2: the Metropolis-Hastings chains, their stationary distribution, burn-in, persistence and the
gradient estimator of eqs. 10-11, against float64 references with explicit loops."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from isogclr.losses import LOSSES, build_loss
from isogclr.losses.emc2 import EMC2Loss

B, D = 4, 3


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    z2 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return z1, z2


def views(z1, z2):
    return torch.cat([z1, z2])


def candidates(row, b):
    """Columns of the 2B - 2 negatives of anchor row ``row`` (all views but its own two)."""
    own = {row, (row + b) % (2 * b)}
    return [c for c in range(2 * b) if c not in own]


def softmax_targets(z1, z2, beta):
    """p_a(k) = exp(beta z_a.z_k) / Z_a over each row's candidates (EMC2 eq. 5)."""
    v = views(z1, z2).detach()
    b = len(z1)
    targets = torch.zeros(2 * b, 2 * b, dtype=v.dtype)
    for row in range(2 * b):
        cols = candidates(row, b)
        weights = torch.stack([torch.exp(beta * v[row] @ v[c]) for c in cols])
        targets[row, cols] = weights / weights.sum()
    return targets


def ref_global_loss(z1, z2, beta):
    """mean_a [-beta z_a.z_a+ + log sum_{k in N_a} exp(beta z_a.z_k)] - log(2B - 2) (eq. 1, batch = dataset)."""
    v = views(z1, z2)
    b = len(z1)
    total = 0.0
    for row in range(2 * b):
        neg = sum(torch.exp(beta * v[row] @ v[c]) for c in candidates(row, b))
        total = total - beta * v[row] @ v[(row + b) % (2 * b)] + torch.log(neg / (2 * b - 2))
    return total / (2 * b)


def ref_estimator(z1, z2, beta, counts):
    """Eq. 11: (beta / 2B) sum_a [-z_a.z_a+ + (1/#samples) sum_r z_a.Z_a^(r)] from the chain samples."""
    v = views(z1, z2)
    b = len(z1)
    total = 0.0
    for row in range(2 * b):
        used = counts[row].sum()
        negative = sum(counts[row, c] * (v[row] @ v[c]) for c in range(2 * b)) / used if used > 0 else 0.0
        total = total + beta * (negative - v[row] @ v[(row + b) % (2 * b)])
    return total / (2 * b)


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


def test_gradient_is_the_estimator_of_eqs_10_11_and_value_is_the_global_loss():
    beta = 2.0
    loss_fn = EMC2Loss(B, beta=beta, seed=3)
    for step in range(3):  # later steps start from the stored states
        z1, z2 = features(step)
        loss = loss_fn(z1, z2, torch.arange(B))
        counts = loss_fn.last_counts
        num_steps, burn_in = loss_fn.steps(B)
        assert torch.equal(counts.sum(1), torch.full((2 * B,), float(num_steps - burn_in), dtype=counts.dtype))
        assert (counts[~torch.isin(torch.arange(2 * B * 2 * B).view(2 * B, 2 * B),
                                   torch.tensor([r * 2 * B + c for r in range(2 * B)
                                                 for c in candidates(r, B)]))] == 0).all()
        torch.testing.assert_close(loss, ref_global_loss(z1, z2, beta))
        ref = ref_estimator(z1, z2, beta, counts)
        assert_close(grads(loss, z1, z2), grads(ref, z1, z2))


@pytest.mark.parametrize("num_augmentations", [None, 2])
def test_chain_samples_converge_to_the_softmax_distribution(num_augmentations):
    """Fixed features, batch = dataset: the post-burn-in states of a chain are distributed as
    p_a = softmax(beta z_a.z_k) over its candidates (total variation < 0.05, fixed seed).

    With two pre-computed augmentations every anchor view has its own chain: every row is an
    exact M-H chain. With fresh augmentations one chain serves both views of a sample: the
    view-2 row's chain is exact; the view-1 row starts from a state drawn for the view-2
    anchor, so its samples follow p_{view 1} only as far as the burn-in allows (exact when
    the two views agree, the homogeneity the paper's practical algorithm relies on)."""
    beta, iterations = 3.0, 1500
    z1, z2 = (z.detach() for z in features(10))
    loss_fn = EMC2Loss(B, beta=beta, num_augmentations=num_augmentations, seed=0)
    augs = {} if num_augmentations is None else {"aug1": torch.zeros(B, dtype=torch.long),
                                                 "aug2": torch.ones(B, dtype=torch.long)}
    cases = [(z1, z2, slice(0, 2 * B) if num_augmentations else slice(B, 2 * B))]
    if num_augmentations is None:
        cases.append((z1, z1.clone(), slice(0, 2 * B)))  # agreeing views: both rows are exact
    for a, b, exact_rows in cases:
        total = torch.zeros(2 * B, 2 * B, dtype=torch.float64)
        for _ in range(iterations):
            loss_fn(a, b, torch.arange(B), **augs)
            total += loss_fn.last_counts
        empirical = total / total.sum(1, keepdim=True)
        tv = 0.5 * (empirical - softmax_targets(a, b, beta)).abs().sum(1)
        assert tv[exact_rows].max() < 0.05, tv


def test_averaged_gradient_approaches_the_exact_gradient():
    beta, iterations = 2.0, 600
    z1, z2 = features(11)
    exact = grads(ref_global_loss(z1, z2, beta), z1, z2)
    loss_fn = EMC2Loss(B, beta=beta, seed=1)
    mean = [torch.zeros_like(z1), torch.zeros_like(z2)]
    for _ in range(iterations):
        for acc, g in zip(mean, grads(loss_fn(z1, z2, torch.arange(B)), z1, z2), strict=True):
            acc += g / iterations
    error = torch.cat([(m - e).flatten() for m, e in zip(mean, exact, strict=True)]).norm()
    assert error / torch.cat([e.flatten() for e in exact]).norm() < 0.05


def test_burn_in_samples_are_left_out():
    z1, z2 = (z.detach() for z in features(12))
    for burn_in in (0, 3, 5):
        loss_fn = EMC2Loss(B, beta=1.0, num_steps=6, burn_in=burn_in, seed=2)
        loss_fn.record_trace = True
        loss_fn(z1, z2, torch.arange(B))
        trace = loss_fn.last_trace  # (2B, R) column of each chain after each step
        assert trace.shape == (2 * B, 6) and (trace >= 0).all()  # fresh chains accept their first proposal
        expected = torch.zeros(2 * B, 2 * B, dtype=torch.float64)
        for row in range(2 * B):
            for col in trace[row, burn_in:]:
                expected[row, col] += 1
        assert torch.equal(loss_fn.last_counts, expected)
    with pytest.raises(ValueError, match="burn_in"):
        EMC2Loss(B, num_steps=4, burn_in=4)
    assert EMC2Loss(B).steps(256) == (510, 255)  # the paper's R = 2b - 2 candidates, P = b - 1


def test_chains_persist_across_iterations():
    """A stored state is where the next iteration's chain starts: with a huge beta and the stored
    state at each row's most similar candidate, no proposal is ever accepted."""
    z1, z2 = (z.detach() for z in features(13))
    loss_fn = EMC2Loss(B, beta=1000.0, num_steps=300, burn_in=0, num_augmentations=2, seed=4)
    augs = {"aug1": torch.zeros(B, dtype=torch.long), "aug2": torch.ones(B, dtype=torch.long)}
    loss_fn(z1, z2, torch.arange(B), **augs)  # 300 uphill-only steps: every chain reaches its argmax
    sim = views(z1, z2) @ views(z1, z2).T
    best = torch.tensor([max(candidates(r, B), key=lambda c, r=r: sim[r, c]) for r in range(2 * B)])
    code = torch.cat([torch.arange(B) * 2, torch.arange(B) * 2 + 1])  # sample * A + augmentation
    assert torch.equal(loss_fn.state.T.reshape(-1), code[best])  # state[i, a] of row (a, i)
    loss_fn.num_steps = 5
    loss_fn.record_trace = True
    loss_fn(z1, z2, torch.arange(B), **augs)
    assert (loss_fn.last_trace == best[:, None]).all()
    fresh = EMC2Loss(B, beta=1000.0, num_steps=5, burn_in=0, num_augmentations=2, seed=4)
    fresh.record_trace = True
    fresh(z1, z2, torch.arange(B), **augs)
    assert not (fresh.last_trace[:, 0] == best).all()  # a fresh chain starts at a random proposal


def test_out_of_batch_state_keeps_its_stored_score_and_is_left_out_of_the_gradient():
    n = 8
    loss_fn = EMC2Loss(n, beta=2.0, num_steps=5, burn_in=0, seed=5)
    loss_fn.state[4, 0] = 0 * 2 + 1  # sample 4 points to view 2 of sample 0 ...
    loss_fn.state_score[4, 0] = 1e9  # ... with a stored score no in-batch candidate beats
    z1, z2 = features(14)
    index = torch.arange(4, 8)  # sample 0 is not in the batch
    loss = loss_fn(z1, z2, index)
    assert loss_fn.state[4, 0] == 1 and loss_fn.state_score[4, 0] == 1e9  # never left
    counts = loss_fn.last_counts
    assert counts[0].sum() == 0 and counts[B].sum() == 0  # both anchor rows of sample 4: no in-batch sample
    assert_close(grads(loss, z1, z2), grads(ref_estimator(z1, z2, 2.0, counts), z1, z2))
    untouched = loss_fn.state[:4, 0]
    assert (untouched[1:] == -1).all()  # samples not in the batch keep their (empty) state


def test_finite_augmentations_keep_one_chain_per_augmentation():
    n, a = 10, 3
    loss_fn = EMC2Loss(n, beta=1.0, num_augmentations=a, seed=6)
    loss_fn.record_trace = True
    assert loss_fn.state.shape == (n, a)
    z1, z2 = (z.detach() for z in features(15))
    index = torch.tensor([9, 2, 5, 7])
    aug1, aug2 = torch.tensor([0, 1, 2, 0]), torch.tensor([2, 1, 0, 1])  # sample 2 uses augmentation 1 twice
    loss_fn(z1, z2, index, aug1=aug1, aug2=aug2)
    final = loss_fn.last_trace[:, -1]
    column_code = torch.cat([index * a + aug1, index * a + aug2])
    for i in range(B):
        assert loss_fn.state[index[i], aug2[i]] == column_code[final[i + B]]  # view-2 row wins a shared chain
        if aug1[i] != aug2[i]:
            assert loss_fn.state[index[i], aug1[i]] == column_code[final[i]]
    assert (loss_fn.state[[0, 1, 3, 4, 6, 8]] == -1).all()
    with pytest.raises(ValueError, match="aug1"):
        loss_fn(z1, z2, index)
    with pytest.raises(ValueError, match="num_augmentations"):
        EMC2Loss(n)(z1, z2, index, aug1=aug1, aug2=aug2)


def test_state_and_generator_survive_save_and_restore():
    n = 12
    original = build_loss("emc2", n, beta=3.0, seed=7)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randperm(n, generator=g)[:B] for _ in range(4)]
    feats = [[z.detach().float() for z in features(s)] for s in range(4)]
    for idx, (z1, z2) in zip(batches[:2], feats[:2], strict=True):
        original(z1, z2, idx)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = build_loss("emc2", n, beta=3.0, seed=123)  # another seed: the saved generator state wins
    restored.load_state_dict(torch.load(buffer))
    for idx, (z1, z2) in zip(batches[2:], feats[2:], strict=True):
        outs = []
        for loss_fn in (original, restored):
            a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
            loss = loss_fn(a, b, idx)
            outs.append((loss, *grads(loss, a, b), loss_fn.state.clone(), loss_fn.state_score.clone()))
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)
    assert "_extra_state" in original.state_dict()


def test_seed_determinism():
    z1, z2 = (z.detach() for z in features(16))
    counts = []
    for seed in (0, 0, 1):
        loss_fn = EMC2Loss(B, beta=1.0, seed=seed)
        loss_fn(z1, z2, torch.arange(B))
        counts.append(loss_fn.last_counts)
    assert torch.equal(counts[0], counts[1]) and not torch.equal(counts[0], counts[2])


@pytest.mark.parametrize("case", ["identical", "antipodal"])
def test_beta_200_is_finite_in_float32(case):
    g = torch.Generator().manual_seed(0)
    z = F.normalize(torch.randn(1, D, generator=g), dim=1).repeat(B, 1)
    if case == "antipodal":
        z[::2] *= -1
    loss_fn = EMC2Loss(B, beta=200.0)  # tau = 0.005
    for _ in range(3):
        z1, z2 = z.clone().requires_grad_(), (z if case == "identical" else -z).clone().requires_grad_()
        loss = loss_fn(z1, z2, torch.arange(B))
        assert torch.isfinite(loss) and all(torch.isfinite(x).all() for x in grads(loss, z1, z2))
    assert torch.isfinite(loss_fn.state_score).all()


def test_bf16_autocast_matches_float32():
    z1, z2 = (z.detach().float() for z in features(17, b=16, d=8))
    results = []
    for enabled in (False, True):
        loss_fn = EMC2Loss(16, beta=200.0, seed=9)
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            loss = loss_fn(a, b, torch.arange(16))
        results.append((loss.detach(), *grads(loss, a, b), loss_fn.state.clone()))
    for x, y in zip(*results, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_registry_and_errors():
    assert LOSSES["emc2"] is EMC2Loss and EMC2Loss.expects_normalized
    assert math.isclose(build_loss("emc2", 10, beta=14.28).beta, 14.28)
    with pytest.raises(ValueError, match="beta"):
        EMC2Loss(10, beta=-1.0)
    with pytest.raises(ValueError, match="repeated"):
        EMC2Loss(10)(*features(), torch.tensor([0, 0, 1, 2]))
