"""The ablations report's claims (analysis/ablations.py) on small hand-made study frames."""

from __future__ import annotations

import pandas as pd
import pytest

from isogclr.analysis.ablations import gamma_verdict, rho_verdict, tau_distribution_verdict, tau_verdicts


def study(method: str, means: dict[float, float], seeds=(0, 1, 2), wobble=0.2) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame([{"method": method, "value": v, "seed": s, "top1": m + wobble * ((s * 7 + i) % 3)}
                         for i, (v, m) in enumerate(means.items()) for s in seeds])


def test_rho_insensitivity_within_the_tolerance():
    flat = rho_verdict(study("isogclr", {0.1: 40.0, 0.2: 40.1, 0.4: 40.05}), pd.Series({0.1: 77.9, 0.4: 78.4}))
    assert flat.status == "supported" and flat.paper_effect == pytest.approx(0.5)
    steep = rho_verdict(study("isogclr", {0.1: 40.0, 0.2: 44.0, 0.4: 48.0}), pd.Series({0.1: 77.9}))
    assert steep.status == "contradicted"


def test_tau_verdicts_compare_every_tau_init_with_simclrs_best_tau():
    curves = pd.concat([study("simclr", {0.1: 30.0, 0.3: 36.0, 0.5: 34.0}),
                        study("isogclr", {0.1: 38.0, 0.3: 38.2, 0.7: 38.1}, wobble=0.02)])
    paper8 = pd.DataFrame({0.1: [85.85, 89.0], 0.5: [88.74, 89.24]}, index=["paper CIFAR10 simclr",
                                                                          "paper CIFAR10 isogclr"])
    sensitive, insensitive, beats = tau_verdicts(curves, paper8)
    assert sensitive.status == "supported" and sensitive.paper_effect == pytest.approx(88.74 - 85.85)
    assert insensitive.status == "supported"
    assert beats.claim.startswith("Table 8 / Figure 7") and "simclr tau 0.3" in beats.evidence
    assert beats.paper_effect == pytest.approx(89.0 - 88.74)


def test_tau_distributions_and_gamma():
    temps = pd.DataFrame([{"seed": s, "value": v, "tau": 0.2 + 0.01 * v + 0.001 * k}
                          for s in range(2) for v in (0.1, 0.7) for k in range(5)])
    v = tau_distribution_verdict(temps, epochs=5)
    assert v.effect == pytest.approx(0.5 * 0.6 - 0.006) and "after 5 epochs" in v.evidence
    gamma = study("sogclr", {0.5: 41.0, 0.9: 42.0, 1.0: 40.0})
    g = gamma_verdict(gamma, pd.Series({0.9: 65.2, 1.0: 62.8}))
    assert "gamma 0.9" in g.evidence and g.paper_effect == pytest.approx(2.4) and g.status == "supported"
    assert gamma_verdict(gamma[gamma.value != 1.0], pd.Series(dtype=float)).status == "not testable"
