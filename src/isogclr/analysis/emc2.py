"""The EMC2 convergence report's claims (EMC2 Figure 7: the exact squared gradient norm; Figure 3: the number of
pre-computed augmentations), from the study's result files (``runs_convergence/convergence.csv`` and
``augmentations.csv``, a ``seed`` column each). Every effect is one number per seed (the study runs once per seed of
``emc2_convergence.seeds``, its methods sharing that seed's initial weights, views and batches), tested over the seeds
(:func:`~isogclr.analysis.verdicts.effect`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .preconditions import Check, fell, require
from .verdicts import Verdict, effect, not_testable


def _by_seed(table: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """``table``'s rows per seed (its ``seed`` column), in seed order."""
    return {int(seed): rows.drop(columns="seed") for seed, rows in table.groupby("seed", sort=True)}


def convergence_verdicts(curve: pd.DataFrame, cfg: Any) -> list[Verdict]:
    """Figure 7 from ``curve`` (rows seed, method, epoch, samples_seen, grad_norm_sq): EMC2's final exact ||grad
    F||^2 is below the best of the other methods' (effect per seed: log10 of best baseline / EMC2), and about two
    orders of magnitude below (that log10 ratio minus 2), under the precondition :func:`toward_stationarity`.
    ``cfg``: the study's settings (num_images, num_augmentations, batch_size, epochs, eval_every)."""
    ratios, finals = {}, []
    for seed, rows in _by_seed(curve).items():
        final = rows.sort_values("epoch").groupby("method").last()
        baselines = final.drop(index="emc2")
        ratios[seed] = baselines.grad_norm_sq.min() / final.loc["emc2", "grad_norm_sq"]
        finals.append(f"seed {seed}: " + ", ".join(f"{m} {g:.3g}" for m, g in final.grad_norm_sq.items()))
    samples = int(curve.samples_seen.max())
    log_ratios = {seed: math.log10(r) for seed, r in ratios.items()}
    shown = ", ".join(f"{r:.2f}" for r in ratios.values())
    return [  # per seed: log10 of the ratio best baseline / EMC2, > 0 when EMC2 is lower
        effect("Fig. 7: EMC2 reaches a lower exact squared gradient norm than SimCLR and SogCLR",
               log_ratios, what="log10(best baseline / EMC2 final ||grad F||^2)", unit="",
               detail=f"final ||grad F||^2 after {samples} samples ({'; '.join(finals)}); the best baseline / EMC2 "
                      f"per seed {shown}; {cfg.num_images} synth10 images x {cfg.num_augmentations} views, batch "
                      f"{cfg.batch_size}, {cfg.epochs} epochs; an early-training snapshot, no method is near "
                      f"stationarity and the norms fluctuate between evaluations (every {cfg.eval_every} epochs)"),
        require(effect("Fig. 7: EMC2's squared gradient norm is about two orders of magnitude below the baselines'",
                       {seed: v - 2 for seed, v in log_ratios.items()}, what="log10(best baseline / EMC2) - 2",
                       unit="", detail=f"best baseline / EMC2 per seed {shown} (paper: ~100, after a long run at "
                                       "lr 1e-3, b = 4 on STL-10)"), toward_stationarity(curve)),
    ]


def toward_stationarity(curve: pd.DataFrame) -> Check:
    """The precondition of a claim about the level a gradient norm settles at: the runs head for a stationary
    point, i.e. the median over runs (method, seed) of the final exact ||grad F||^2 is at most its median at the
    first evaluation (:func:`~isogclr.analysis.preconditions.fell`). EMC2's two orders of magnitude are read at the
    end of a long run that has settled; a norm still rising from its initial value is far from that regime."""
    runs = curve.sort_values("epoch").groupby(["method", "seed"])["grad_norm_sq"]
    return fell("the squared gradient norm", "stationarity", float(runs.first().median()),
                float(runs.last().median()))


def augmentation_verdicts(augmentations: pd.DataFrame, cfg: Any, fresh_views: int) -> list[Verdict]:
    """Figure 3 from ``augmentations`` (rows seed, method, num_augmentations, knn1_top1, grad_norm_sq; EMC2's run
    with fresh views every step has ``num_augmentations == fresh_views``): EMC2's 1-NN accuracy rises with the
    number A of pre-computed views (per seed, the largest A minus the smallest; the evidence says on how many seeds
    it rises at every step), and comes closer to the fresh-views run's (|gap| at the smallest A minus at the
    largest; not testable without that run)."""
    emc2 = augmentations[augmentations.method == "emc2"]
    values = sorted(set(emc2.num_augmentations) - {fresh_views})
    low, high = values[0], values[-1]
    rises, gains, closer, lines, has_fresh = 0, {}, {}, [], True
    for seed, rows in _by_seed(emc2).items():
        emc2_all = rows.set_index("num_augmentations").sort_index()
        knn = emc2_all.drop(index=fresh_views, errors="ignore").knn1_top1
        rises += bool((knn.diff().dropna() > 0).all())
        gains[seed] = knn.iloc[-1] - knn.iloc[0]
        line = f"seed {seed}: " + ", ".join(f"A={a} {v:.2f}%" for a, v in knn.items())
        if fresh_views in emc2_all.index:
            reference = emc2_all.loc[fresh_views, "knn1_top1"]
            gaps = (knn - reference).abs()
            closer[seed] = gaps.iloc[0] - gaps.iloc[-1]
            line += f", fresh views {reference:.2f}%"
        else:
            has_fresh = False
        lines.append(line)
    out = [effect(
        "Fig. 3: EMC2's accuracy improves as the number of pre-computed augmentations grows",
        gains, what=f"1-NN top-1 at A={high} - at A={low}",
        detail=f"1-NN top-1 ({'; '.join(lines)}); rises at every step on {rises} of {len(gains)} seeds; "
               f"{cfg.epochs} epochs, batch {cfg.batch_size}")]
    claim = "Fig. 3: with more pre-computed augmentations EMC2 approaches the infinite-augmentation EMC2"
    if not has_fresh:
        return out + [not_testable(claim, "emc2_convergence.infinite_augmentation is false in params.yaml")]
    return out + [effect(claim, closer, what=f"|gap| at A={low} - at A={high}",
                         detail="1-NN top-1 of EMC2 with fresh views every step, and the |gap| to it per seed: "
                                + "; ".join(f"seed {s}: {g:.2f}" for s, g in closer.items()) + " points")]
