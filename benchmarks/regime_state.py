"""SogCLR's moving averages u_i against the exact per-sample denominator over the whole set (issue 56).

SogCLR (eq. 9) keeps u_i <- (1 - gamma) u_i + gamma g_i(w; B), a moving average of the mini-batch estimate of

    g_i(w) = E_aug [ mean over the 2(n - 1) views z of the other samples of exp(z_a^T z / tau) ],   (eq. 2)

so that its gradient estimator (eq. 10) divides by an estimate of the whole set's denominator, not the batch's.
A run of a regime design keeps its final state (``local/state.pt``: the projection head and ``u.log_s``, one
column per view) beside ``local/encoder.pt``; small sets make g_i exact: this module computes it with the final
weights over every other sample's two views, averaged over ``draws`` fresh augmentation draws (keyed epochs past
the run's own, so no draw the run saw), with BatchNorm in training mode over the whole set as one batch.

Per run it reports, over the samples (each sample: the mean over its two views, of u and of g):
* the Spearman correlation of u_i and the exact g_i, the median |u_i / g_i - 1| and the mean log(u_i / g_i);
* the same for one fresh mini-batch estimate (the run's batch size, one epoch's partition, draw 0): what u_i
  would be with gamma = 1 and no staleness, the reference for the moving average's error.

Usage: ``python benchmarks/regime.py --report`` calls :func:`denominator_rows` for every SogCLR run that kept its
state; ``python benchmarks/regime_state.py RUN_DIR PARAMS`` prints one run's row.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats

DRAWS = 4
POOL_PER_CLASS = 500  # the fixed probe pool: 5,000 balanced labeled images
FIRST_DRAW_EPOCH = 100_000  # keyed epochs of the fresh draws: past any run's own


def design_config(params_file: Path, method: str, dataset: str, seed: int):  # noqa: ANN201
    """The run config of ``method`` on ``dataset`` at ``seed`` under a design's params file (``--tuned``, every
    knob at its selection or pin), its probe scored on the validation split: what every regime run trains."""
    import argparse

    from isogclr.commands import read_params
    from isogclr.config.selection import grid_run_config

    params = read_params(argparse.Namespace(params=str(params_file)))
    return dataclasses.replace(grid_run_config(params, method, dataset, seed, True), validation_split=True)


def _views(task, draw_epoch: int) -> torch.Tensor:
    """(n, 2, d) normalized projections of every training sample's two views under one keyed draw."""
    from isogclr.data import keyed
    from isogclr.data.augment import SIMCLR_DRAWS, to_float

    index = torch.arange(task.n)
    images, _, idx = task.dataset.__getitems__(index.tolist())
    x = to_float(images)
    views = torch.cat([task.augment(x, keyed.uniforms(task.cfg.seed, draw_epoch, idx, v, SIMCLR_DRAWS))
                       for v in (0, 1)])
    with torch.no_grad():
        _, proj = task.model(views)
    z = F.normalize(proj.float(), dim=1)
    return torch.stack(z.chunk(2), dim=1)


def exact_log_g(z: torch.Tensor, tau: float) -> torch.Tensor:
    """(n,) log of mean_a g_ia over the two views a, g_ia the mean of exp(z_a^T z / tau) over the 2(n - 1) views
    of the other samples (eq. 2 over the whole set)."""
    n = z.shape[0]
    flat = z.reshape(2 * n, -1)
    owner = torch.arange(n).repeat_interleave(2)
    log_g = torch.cat([  # (2n,): row 2i + a; 1,024 rows at a time
        torch.logsumexp((flat[r:r + 1024] @ flat.T / tau).masked_fill(
            owner[r:r + 1024, None] == owner[None, :], -math.inf), dim=1)
        for r in range(0, 2 * n, 1024)]) - math.log(2 * n - 2)
    return torch.logsumexp(log_g.reshape(n, 2), dim=1) - math.log(2)


def batch_log_g(z: torch.Tensor, tau: float, batch: int,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(samples, log g) of the mini-batch estimate over one epoch's partition (the last incomplete batch dropped,
    as the loader does): each sample's negatives are the 2(B - 1) views of its batch."""
    order = torch.randperm(z.shape[0], generator=generator)
    rows, values = [], []
    for b in range(z.shape[0] // batch):
        idx = order[b * batch:(b + 1) * batch]
        rows.append(idx)
        values.append(exact_log_g(z[idx], tau))
    return torch.cat(rows), torch.cat(values)


def _agreement(log_est: np.ndarray, log_exact: np.ndarray) -> dict[str, float]:
    ratio = np.exp(log_est - log_exact)
    return {"spearman": float(stats.spearmanr(log_est, log_exact).statistic),
            "median |ratio - 1|": float(np.median(np.abs(ratio - 1))),
            "mean log ratio": float(np.mean(log_est - log_exact))}


def denominator_row(run_dir: Path, params_file: Path, dataset: str, seed: int, draws: int = DRAWS) -> dict:
    """One SogCLR run's final u_i against the exact g_i (see the module docstring)."""
    from isogclr.train import distributed
    from isogclr.train.loop import UnimodalTask, load_splits

    torch.set_num_threads(1)
    cfg = design_config(params_file, "sogclr", dataset, seed)
    ctx = distributed.setup(torch.device("cpu"))
    task = UnimodalTask(cfg, ctx, *load_splits(cfg), False)
    state = torch.load(run_dir / "local" / "state.pt", weights_only=True)
    task.model.encoder.load_state_dict(torch.load(run_dir / "local" / "encoder.pt", weights_only=True))
    task.model.head.load_state_dict(state["head"])
    task.model.train()  # BatchNorm over the whole set as one batch, as training normalizes over its batch
    log_u = state["loss"]["u.log_s"].double()
    log_u = torch.logsumexp(log_u, dim=1) - math.log(log_u.shape[1])  # the mean over the views' columns
    tau = float(task.loss_fn.tau)
    zs = [_views(task, FIRST_DRAW_EPOCH + k) for k in range(draws)]
    log_g = torch.logsumexp(torch.stack([exact_log_g(z.double(), tau) for z in zs]), dim=0) - math.log(draws)
    visited = torch.isfinite(log_u)
    rows, log_b = batch_log_g(zs[0].double(), tau, task.batch_size, torch.Generator().manual_seed(seed))
    exact = log_g.numpy()
    return {"n": task.n, "visited": int(visited.sum()), "tau": tau, "gamma": float(task.loss_fn.u.beta),
            "batch": task.batch_size, "draws": draws,
            **{f"u: {k}": round(v, 4) for k, v in _agreement(log_u[visited].numpy(), exact[visited.numpy()]).items()},
            **{f"batch: {k}": round(v, 4) for k, v in _agreement(log_b.numpy(), exact[rows.numpy()]).items()}}


if __name__ == "__main__":
    run, params_path = Path(sys.argv[1]), Path(sys.argv[2])
    ds, s = run.name.rsplit("-s", 1)
    print(denominator_row(run, params_path, ds.split("-", 1)[1], int(s)))


def pool_probe(params_file: Path, method: str, dataset: str, seed: int, pool_root: Path,
               run_dir: Path | None = None, pool_per_class: int = POOL_PER_CLASS) -> float:
    """Validation top-1 of a linear probe trained on a fixed labeled pool instead of the run's own training set:
    the first ``pool_per_class`` images a class of the balanced ``synth10`` training split under ``pool_root``
    (the committed data), scored on the design's validation split with the run's probe settings. The features are
    those of the run's encoder (``run_dir/local/encoder.pt``), or with ``run_dir`` None the no-learning rows: the
    encoder as ``seed`` initializes it (``seed`` >= 0, as :func:`isogclr.train.references.no_learning`) or the raw
    pixels (``seed`` -1). The same pool for every design: its level measures the representation, not how many
    labels the design's own (small, long-tailed) training set leaves the probe."""
    from isogclr.data import load_dataset
    from isogclr.eval.linear_probe import extract_features, linear_probe
    from isogclr.models import ContrastiveModel
    from isogclr.train.references import raw_pixel_probe

    torch.set_num_threads(1)
    cfg = design_config(params_file, method, dataset, max(seed, 0))
    full = load_dataset("synth10", pool_root, "train")
    keep = torch.cat([torch.nonzero(full.labels == c).flatten()[:pool_per_class] for c in range(full.num_classes)])
    pool = dataclasses.replace(full, images=full.images[keep], labels=full.labels[keep],
                               source_index=full.source_index[keep], superclass=None, extra={})
    val = load_dataset(dataset, cfg.data_root, "val")
    if run_dir is None and seed < 0:
        return float(raw_pixel_probe(pool, val, cfg))
    torch.manual_seed(max(seed, 0))
    encoder = ContrastiveModel(cfg.encoder, cfg.head).encoder
    if run_dir is not None:
        encoder.load_state_dict(torch.load(run_dir / "local" / "encoder.pt", weights_only=True))
    device = torch.device("cpu")
    return float(linear_probe(extract_features(encoder, pool.images, device), pool.labels,
                              extract_features(encoder, val.images, device), val.labels, pool.num_classes,
                              cfg.probe, seed=max(seed, 0))["top1"])
