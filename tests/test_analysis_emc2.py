"""The EMC2 convergence report's claims (analysis/emc2.py) on small hand-made result tables."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from isogclr.analysis.emc2 import augmentation_verdicts, convergence_verdicts

CFG = SimpleNamespace(seed=0, num_images=64, num_augmentations=2, batch_size=8, epochs=3, eval_every=1)


def _curve(final_by_seed: dict[int, tuple[float, float, float]]) -> pd.DataFrame:
    """Rows (seed, method, epoch 0 and 1) with the final grad norms (simclr, sogclr, emc2) of each seed."""
    return pd.DataFrame([{"seed": s, "method": m, "epoch": e, "samples_seen": 64 * e, "grad_norm_sq": g}
                         for s, finals in final_by_seed.items()
                         for m, last in zip(("simclr", "sogclr", "emc2"), finals, strict=True)
                         for e, g in enumerate((1.0, last))])


def test_convergence_verdicts_compare_emc2_with_the_best_baseline_per_seed():
    first, second = convergence_verdicts(_curve({0: (0.5, 0.2, 0.02), 1: (0.3, 0.4, 0.01), 2: (0.5, 0.2, 0.01)}),
                                         CFG)
    per_seed = [math.log10(0.2 / 0.02), math.log10(0.3 / 0.01), math.log10(0.2 / 0.01)]
    assert first.n_seeds == 3 and first.effect == pytest.approx(sum(per_seed) / 3)
    assert first.status == "supported" and "per seed 10.00, 30.00, 20.00" in first.evidence
    assert second.effect == pytest.approx(sum(per_seed) / 3 - 2) and second.status == "contradicted"
    one = convergence_verdicts(_curve({0: (0.5, 0.2, 0.02)}), CFG)[0]  # one seed: no interval
    assert one.status == "not testable" and one.effect == pytest.approx(1.0)


def _aug(seed: int, knn: tuple[float, float, float, float]) -> pd.DataFrame:
    return pd.DataFrame({"seed": seed, "method": ["simclr", "emc2", "emc2", "emc2", "emc2"],
                         "num_augmentations": [2, 2, 4, 8, 0], "knn1_top1": [30.0, *knn],
                         "grad_norm_sq": [0.1, 0.05, 0.04, 0.03, 0.02]})


def test_augmentation_verdicts_with_and_without_the_fresh_views_run():
    aug = pd.concat([_aug(0, (31.0, 32.5, 33.0, 34.0)), _aug(1, (30.0, 29.0, 32.0, 34.0)),
                     _aug(2, (31.0, 32.0, 34.0, 34.5))], ignore_index=True)
    grows, approaches = augmentation_verdicts(aug, CFG, fresh_views=0)
    assert grows.effect == pytest.approx((2.0 + 2.0 + 3.0) / 3) and grows.n_seeds == 3
    assert "rises at every step on 2 of 3 seeds" in grows.evidence
    assert approaches.effect == pytest.approx(((3 - 1) + (4 - 2) + (3.5 - 0.5)) / 3)
    assert "seed 1: 2.00" in approaches.evidence
    _, missing = augmentation_verdicts(aug[aug.num_augmentations != 0], CFG, fresh_views=0)
    assert missing.status == "not testable" and "infinite_augmentation is false" in missing.evidence
