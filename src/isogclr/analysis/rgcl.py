"""The robust global contrastive loss (RGCL) of one anchor, solved exactly (iSogCLR paper, Sec. 4).

Primal (eq. 6): max_{p in simplex, KL(p, 1/m) <= rho} p.h - tau0 KL(p, 1/m).
Dual (eq. 7):   min_{tau >= tau0} tau log mean_j exp(h_j / tau) + (tau - tau0) rho,
with optimum p*_j = softmax(h / tau*)_j (Appendix A). The primal is solved here by a generic
constrained optimizer, independently of the dual's closed form, so the two can check each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import logsumexp, softmax


@dataclass(frozen=True)
class RGCLSolution:
    value: float
    p: np.ndarray
    tau: float | None = None  # the dual's optimal temperature


def kl_to_uniform(p: np.ndarray) -> float:
    p = np.clip(p, 1e-300, 1.0)
    return float(np.sum(p * np.log(p * len(p))))


def rgcl_dual(h: np.ndarray, rho: float, tau0: float, tau_max: float = 1e3) -> RGCLSolution:
    """Minimise the dual (eq. 7) over tau in [tau0, tau_max]; return its value, tau* and p*."""
    h = np.asarray(h, dtype=float)

    def objective(tau: float) -> float:
        return tau * (logsumexp(h / tau) - np.log(len(h))) + (tau - tau0) * rho

    # the objective is convex in tau (a perspective of log-mean-exp plus a linear term): search in log tau
    res = minimize_scalar(lambda t: objective(np.exp(t)), bounds=(np.log(tau0), np.log(tau_max)),
                          method="bounded", options={"xatol": 1e-12})
    tau = float(np.exp(res.x))
    if objective(tau0) <= objective(tau):
        tau = tau0
    return RGCLSolution(value=objective(tau), p=softmax(h / tau), tau=tau)


def rgcl_primal(h: np.ndarray, rho: float, tau0: float) -> RGCLSolution:
    """Maximise the primal (eq. 6) over the simplex with SLSQP (small m only)."""
    h = np.asarray(h, dtype=float)
    m = len(h)

    def neg_objective(p: np.ndarray) -> float:
        return -(p @ h - tau0 * kl_to_uniform(p))

    constraints = [{"type": "eq", "fun": lambda p: p.sum() - 1.0},
                   {"type": "ineq", "fun": lambda p: rho - kl_to_uniform(p)}]
    best = None
    for start in (np.full(m, 1.0 / m), softmax(h), softmax(h / 0.3)):
        res = minimize(neg_objective, start, method="SLSQP", bounds=[(1e-12, 1.0)] * m, constraints=constraints,
                       options={"ftol": 1e-14, "maxiter": 1000})
        if res.success and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise RuntimeError(f"SLSQP did not converge for h={h}, rho={rho}, tau0={tau0}")
    return RGCLSolution(value=float(-best.fun), p=best.x / best.x.sum())
