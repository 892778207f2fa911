"""The EMC2 convergence report's claims (analysis/emc2.py) on small hand-made result tables."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from isogclr.analysis.emc2 import augmentation_verdicts, convergence_verdicts

CFG = SimpleNamespace(seed=0, num_images=64, num_augmentations=2, batch_size=8, epochs=3, eval_every=1)


def test_convergence_verdicts_compare_emc2_with_the_best_baseline():
    curve = pd.DataFrame([{"method": m, "epoch": e, "samples_seen": 64 * e, "grad_norm_sq": g}
                          for m, gs in (("simclr", (1.0, 0.5)), ("sogclr", (1.0, 0.2)), ("emc2", (1.0, 0.02)))
                          for e, g in enumerate(gs)])
    first, second = convergence_verdicts(curve, CFG)
    assert first.effect == pytest.approx(math.log10(0.2 / 0.02)) and first.status == "not testable"  # one seed
    assert "the best baseline (sogclr) / EMC2 = 10.00" in first.evidence and "emc2: 1 -> 0.02" in first.evidence
    assert second.effect == pytest.approx(1.0 - 2.0)


def test_augmentation_verdicts_with_and_without_the_fresh_views_run():
    aug = pd.DataFrame({"method": ["simclr", "emc2", "emc2", "emc2", "emc2"], "num_augmentations": [2, 2, 4, 8, 0],
                        "knn1_top1": [30.0, 31.0, 32.5, 33.0, 34.0], "grad_norm_sq": [0.1, 0.05, 0.04, 0.03, 0.02]})
    grows, approaches = augmentation_verdicts(aug, CFG, fresh_views=0)
    assert grows.effect == pytest.approx(2.0) and "rises at every step" in grows.evidence
    assert approaches.effect == pytest.approx(3.0 - 1.0) and "fresh views every step 34.00%" in approaches.evidence
    _, missing = augmentation_verdicts(aug[aug.num_augmentations != 0], CFG, fresh_views=0)
    assert missing.status == "not testable" and "infinite_augmentation is false" in missing.evidence
