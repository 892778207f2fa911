"""The no-learning rows of a table: what a linear probe reaches before any training.

A table of learned representations is only readable beside what needs no learning. For one dataset,
with the run's own probe (``probe`` in params.yaml) on the same splits as the methods' runs:

* ``chance``: 100 / number of classes (the test splits are balanced);
* ``raw_pixels_top1``: the linear probe on the normalized pixels, standardized feature-wise (a probe on
  raw pixels is badly conditioned otherwise);
* ``random_init_s<k>_top1``: the probe on the frozen features of the encoder as initialized by seed ``k``
  (the same initial model as a method's run at seed ``k``), for each of ``references.random_inits``;
* ``floor_top1``: the better of the raw-pixel probe and the mean random-init probe, the score a method must
  clear to have learned anything (:func:`isogclr.analysis.verdicts.compare` calls a comparison of two
  methods both within a margin of it not testable).

The supervised reference (the ceiling at the same budget) is a method of its own, ``supervised``
(:class:`isogclr.losses.supervised.SupervisedLoss`), trained by :func:`isogclr.train.loop.train_run`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..config.core import RunConfig
from ..data.augment import eval_transform
from ..eval.linear_probe import linear_probe
from ..io import save_json
from ..models import ContrastiveModel
from .loop import evaluate_encoder, load_splits


def raw_pixel_probe(train_data, test_data, cfg: RunConfig) -> float:
    """Top-1 (%) of the linear probe on normalized, then standardized, pixels."""
    def pixels(images: torch.Tensor) -> torch.Tensor:
        return torch.cat([eval_transform(images[i:i + 1024]).flatten(1) for i in range(0, len(images), 1024)])

    probe = dataclasses.replace(cfg.probe, feature_norm="standardize")
    return linear_probe(pixels(train_data.images), train_data.labels, pixels(test_data.images), test_data.labels,
                        train_data.num_classes, probe, seed=0)["top1"]


def no_learning(cfg: RunConfig, inits: list[int] | tuple[int, ...], out_dir: Path | None = None) -> dict[str, float]:
    """The no-learning rows of ``cfg.dataset`` (see the module docstring); written to ``out_dir/metrics.json``."""
    if not inits:
        raise ValueError("references.random_inits: give at least one initialization seed")
    if cfg.stream is not None:
        raise ValueError(f"{cfg.dataset}: the no-learning rows are computed for in-memory datasets only")
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    train_data, test_data, train_eval = load_splits(cfg)
    metrics = {"chance": 100.0 / train_data.num_classes, "raw_pixels_top1": raw_pixel_probe(train_eval, test_data, cfg)}
    for seed in inits:
        torch.manual_seed(seed)
        model = ContrastiveModel(cfg.encoder, cfg.head)
        scores = evaluate_encoder(model, train_eval, test_data, cfg, torch.device("cpu"))
        metrics[f"random_init_s{seed}_top1"] = scores["top1"]
    random_mean = sum(metrics[f"random_init_s{s}_top1"] for s in inits) / len(inits)
    metrics["floor_top1"] = max(metrics["raw_pixels_top1"], random_mean)
    metrics = {key: round(value, 4) for key, value in metrics.items()}
    if out_dir is not None:
        save_json(metrics, Path(out_dir) / "metrics.json")
    return metrics
