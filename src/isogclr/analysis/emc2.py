"""The EMC2 convergence report's claims (EMC2 Figure 7: the exact squared gradient norm; Figure 3: the number of
pre-computed augmentations), from the study's result files (``runs_convergence/convergence.csv`` and
``augmentations.csv``). The study runs one seed, so every effect is one number per seed: the claims are not
testable at this scale, and the evidence gives the numbers (:func:`~isogclr.analysis.verdicts.effect`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .verdicts import Verdict, effect, not_testable


def convergence_verdicts(curve: pd.DataFrame, cfg: Any) -> list[Verdict]:
    """Figure 7 from ``curve`` (rows method, epoch, samples_seen, grad_norm_sq): EMC2's final exact ||grad F||^2
    is below the best of the other methods' (effect: log10 of best baseline / EMC2), and about two orders of
    magnitude below (that log10 ratio minus 2). ``cfg``: the study's settings (seed, num_images,
    num_augmentations, batch_size, epochs, eval_every)."""
    final = curve.sort_values("epoch").groupby("method").last()
    emc2_g = final.loc["emc2", "grad_norm_sq"]
    baselines = final.drop(index="emc2")
    best_base = baselines.grad_norm_sq.idxmin()
    ratio = baselines.grad_norm_sq.min() / emc2_g
    norms = ", ".join(f"{m} {g:.3g}" for m, g in final.grad_norm_sq.items())
    samples = int(final.samples_seen.max())
    trajectory = "; ".join(f"{m}: " + " -> ".join(f"{g:.3g}" for g in rows.grad_norm_sq)
                           for m, rows in curve.groupby("method", sort=False))
    return [  # per seed (the study runs one): log10 of the ratio best baseline / EMC2, > 0 when EMC2 is lower
        effect("Fig. 7: EMC2 reaches a lower exact squared gradient norm than SimCLR and SogCLR",
               {cfg.seed: math.log10(ratio)}, what="log10(best baseline / EMC2 final ||grad F||^2)", unit="",
               detail=f"final ||grad F||^2 after {samples} samples: {norms}; the best baseline ({best_base}) / EMC2 = "
                      f"{ratio:.2f}; {cfg.num_images} synth10 images x {cfg.num_augmentations} views, batch "
                      f"{cfg.batch_size}, {cfg.epochs} epochs, one seed; an early-training snapshot, no method is "
                      f"near stationarity and the norms fluctuate between evaluations (every {cfg.eval_every} "
                      f"epochs from epoch 0: {trajectory})"),
        effect("Fig. 7: EMC2's squared gradient norm is about two orders of magnitude below the baselines'",
               {cfg.seed: math.log10(ratio) - 2}, what="log10(best baseline / EMC2) - 2", unit="",
               detail=f"best baseline / EMC2 = {ratio:.2f} (paper: ~100, after a long run at lr 1e-3, b = 4 on "
                      "STL-10)"),
    ]


def augmentation_verdicts(augmentations: pd.DataFrame, cfg: Any, fresh_views: int) -> list[Verdict]:
    """Figure 3 from ``augmentations`` (rows method, num_augmentations, knn1_top1, grad_norm_sq; EMC2's run with
    fresh views every step has ``num_augmentations == fresh_views``): EMC2's 1-NN accuracy rises with the number A
    of pre-computed views (the largest A minus the smallest; the evidence says whether it rises at every step), and
    comes closer to the fresh-views run's (|gap| at the smallest A minus at the largest; not testable without that
    run)."""
    emc2_all = augmentations[augmentations.method == "emc2"].set_index("num_augmentations").sort_index()
    emc2_aug = emc2_all.drop(index=fresh_views, errors="ignore")
    knn = emc2_aug.knn1_top1
    rises = bool((knn.diff().dropna() > 0).all())
    out = [effect(
        "Fig. 3: EMC2's accuracy improves as the number of pre-computed augmentations grows",
        {cfg.seed: knn.iloc[-1] - knn.iloc[0]}, what=f"1-NN top-1 at A={knn.index[-1]} - at A={knn.index[0]}",
        detail="1-NN top-1 " + ", ".join(f"A={a}: {v:.2f}%" for a, v in knn.items())
        + f" ({'rises at every step' if rises else 'not monotone'}; one seed, {cfg.epochs} epochs, batch "
          f"{cfg.batch_size}); final ||grad F||^2 "
        + ", ".join(f"A={a}: {g:.3g}" for a, g in emc2_aug.grad_norm_sq.items()))]
    claim = "Fig. 3: with more pre-computed augmentations EMC2 approaches the infinite-augmentation EMC2"
    if fresh_views not in emc2_all.index:
        return out + [not_testable(claim, "emc2_convergence.infinite_augmentation is false in params.yaml")]
    reference = emc2_all.loc[fresh_views, "knn1_top1"]
    gaps = (knn - reference).abs()
    return out + [effect(
        claim, {cfg.seed: gaps.iloc[0] - gaps.iloc[-1]}, what=f"|gap| at A={gaps.index[0]} - at A={gaps.index[-1]}",
        detail=f"1-NN top-1 of EMC2 with fresh views every step {reference:.2f}%; |gap| to it " + ", ".join(
            f"A={a}: {g:.2f}" for a, g in gaps.items()) + " points (one seed: run-to-run noise is about a point)")]
