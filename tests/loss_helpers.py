"""Shared helpers of the loss tests: random and extreme features, gradient comparison."""

from __future__ import annotations

import torch
import torch.nn.functional as F

B, D = 6, 5


def features(seed=0, b=B, d=D, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z1 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    z2 = F.normalize(torch.randn(b, d, generator=g, dtype=dtype), dim=1).requires_grad_()
    return z1, z2


def extreme(case, b=B, d=D):
    g = torch.Generator().manual_seed(0)
    base = F.normalize(torch.randn(1, d, generator=g), dim=1)
    z1 = base.repeat(b, 1)
    if case == "identical":
        return z1, z1.clone()
    if case == "antipodal":
        z1[::2] *= -1
        return z1, -z1
    noise = 1e-3 * torch.randn(2, b, d, generator=g)
    return F.normalize(z1 + noise[0], dim=1), F.normalize(z1 + noise[1], dim=1)


def grads(value, *tensors):
    return torch.autograd.grad(value, tensors)


def assert_close(a, b, tol=1e-10):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)
