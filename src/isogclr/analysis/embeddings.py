"""t-SNE of learned features and how well they separate the classes (iSogCLR Figures 4 and 5).

A t-SNE picture alone does not test "iSogCLR's features are better separated", so each panel also
gets numbers: the silhouette score of the classes in feature space (cosine distance) and the
leave-one-out k-NN accuracy of the classes, in feature space (cosine) and in the 2-D embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.manifold import TSNE
from sklearn.metrics import silhouette_score
from sklearn.neighbors import NearestNeighbors

from ..io import load_torch
from .verdicts import Verdict, best_of, effect, not_testable


def _exported(runs_dir: Path | str, run: str) -> dict:
    path = Path(runs_dir) / run / "artifacts" / "features.pt"
    if not path.exists():
        if (Path(runs_dir) / run / "metrics.json").exists():
            raise FileNotFoundError(f"{path} is missing: run {run} was not exported: only the first Table 1 seed "
                                    f"exports features (`python -m isogclr train ... --export-seed N`)")
        raise FileNotFoundError(f"{path} is missing: run `dvc repro` (the training run {run} writes it; only the "
                                f"first Table 1 seed exports features)")
    return load_torch(path, f"features of run {run}", f"delete it and rerun the training run {run} that writes it "
                      "(`dvc repro` brings it back)")


def load_features(runs_dir: Path | str, run: str) -> dict[str, np.ndarray]:
    """``runs/<run>/artifacts/features.pt`` (committed; written by exported runs only) as numpy arrays:
    ``test`` (float32, stored in float16) and ``test_labels`` (int64)."""
    blob = _exported(runs_dir, run)
    return {"test": torch.as_tensor(blob["test"]).float().numpy(),
            "test_labels": torch.as_tensor(blob["test_labels"]).long().numpy()}


def load_train_features(runs_dir: Path | str, run: str) -> dict[str, np.ndarray]:
    """A run's features of the train split, ``train`` (float32, stored in float16) and ``train_labels``, aligned
    with its ``tau.csv``: exported (``artifacts/features.pt``) by the first Table 1 seed of a loss with
    per-sample temperatures on a long-tailed set."""
    blob = _exported(runs_dir, run)
    if "train" not in blob:
        raise FileNotFoundError(f"{Path(runs_dir) / run / 'artifacts' / 'features.pt'} has no train features: only "
                                f"an exported long-tailed run of a loss with per-sample temperatures keeps them")
    return {"train": torch.as_tensor(blob["train"]).float().numpy(),
            "train_labels": torch.as_tensor(blob["train_labels"]).long().numpy()}


def subsample(n: int, max_points: int, seed: int) -> np.ndarray:
    """Sorted indices of at most ``max_points`` of ``n`` items, drawn without replacement (all if n is small)."""
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm (the contrastive losses compare features by cosine similarity)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def tsne_embedding(features: np.ndarray, seed: int = 0, perplexity: float = 30.0, max_iter: int = 1000) -> np.ndarray:
    """2-D t-SNE of the L2-normalised features; deterministic for a fixed ``seed`` (PCA init, exact seed)."""
    x = l2_normalize(features)
    tsne = TSNE(n_components=2, perplexity=min(perplexity, (len(x) - 1) / 3), init="pca", random_state=seed,
                max_iter=max_iter, n_jobs=1)
    return tsne.fit_transform(x).astype(np.float64)


def knn_accuracy(x: np.ndarray, labels: np.ndarray, k: int = 5, metric: str = "euclidean") -> float:
    """Leave-one-out k-NN accuracy (%) of the labels: each point is classified by its k nearest other points."""
    labels = np.asarray(labels)
    _, idx = NearestNeighbors(n_neighbors=k + 1, metric=metric).fit(x).kneighbors(x)
    neighbours = labels[idx[:, 1:]]  # drop the point itself
    votes = np.array([np.bincount(row, minlength=labels.max() + 1) for row in neighbours])
    return float(100.0 * np.mean(votes.argmax(axis=1) == labels))


def separation_metrics(features: np.ndarray, labels: np.ndarray, embedding: np.ndarray | None = None,
                       k: int = 5) -> dict[str, float]:
    """Class separation: silhouette (cosine) and k-NN accuracy in feature space; k-NN accuracy in the embedding."""
    x, labels = l2_normalize(features), np.asarray(labels)
    out = {"silhouette_cosine": float(silhouette_score(x, labels, metric="cosine")),
           f"knn{k}_features": knn_accuracy(x, labels, k, metric="cosine")}
    if embedding is not None:
        out[f"knn{k}_tsne"] = knn_accuracy(embedding, labels, k)
    return out


def tau_extremes(tau: np.ndarray, fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the samples with the ``fraction`` largest and the ``fraction`` smallest tau (ties broken by index)."""
    tau = np.asarray(tau, dtype=float)
    k = max(1, int(round(fraction * len(tau))))
    order = np.argsort(tau, kind="stable")
    small, large = np.zeros(len(tau), bool), np.zeros(len(tau), bool)
    small[order[:k]], large[order[-k:]] = True, True
    return large, small


def centroid_distance(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each sample's cosine distance to the (normalised) mean feature of its class: small = in the cluster's centre."""
    x, labels = l2_normalize(features), np.asarray(labels)
    centres = l2_normalize(np.stack([x[labels == c].mean(axis=0) if np.any(labels == c) else np.zeros(x.shape[1])
                                     for c in range(labels.max() + 1)]))
    return 1.0 - np.sum(x * centres[labels], axis=1)


def extremes_summary(tau: pd.DataFrame, features: np.ndarray, fraction: float = 0.1) -> pd.DataFrame:
    """Figure 5's groups (largest / smallest tau, and all samples) of one run's training set, with per group:
    size, mean tau, mean training-set size of the samples' classes, and mean cosine distance to the class centre
    in feature space (the paper: large-tau samples sit in cluster centres, small-tau ones away from clusters).

    ``tau`` is the run's ``tau.csv`` (rows in train order), ``features`` its train features in the same order.
    """
    if len(tau) != len(features):
        raise ValueError(f"tau.csv has {len(tau)} rows but there are {len(features)} train features")
    large, small = tau_extremes(tau["tau"].to_numpy(), fraction)
    labels = tau["label"].to_numpy()
    frequency = tau.groupby("label")["label"].transform("size").to_numpy()
    distance = centroid_distance(features, labels)
    rows = []
    for name, mask in (("largest tau", large), ("smallest tau", small), ("all", np.ones(len(tau), bool))):
        rows.append({"group": name, "samples": int(mask.sum()), "tau_mean": float(tau["tau"].to_numpy()[mask].mean()),
                     "class_frequency_mean": float(frequency[mask].mean()),
                     "centroid_distance_mean": float(distance[mask].mean())})
    return pd.DataFrame(rows).set_index("group")


SEPARATION_COLUMNS = (("silhouette_cosine", ""), ("knn5_features", "points"), ("knn5_tsne", "points"))


def tsne_verdicts(table: pd.DataFrame, summaries: Mapping[int, pd.DataFrame], *, claimed: str, dataset: str,
                  lt_runs: Mapping[int, str]) -> list[Verdict]:
    """The claims of Figures 4 and 5, paired by seed. Figure 4, per separation metric of ``table`` (index (seed,
    method); :data:`SEPARATION_COLUMNS` of :func:`separation_metrics`): ``claimed`` beats every other method
    (:func:`~isogclr.analysis.verdicts.best_of`; not testable without ``claimed`` and a baseline). Figure 5: the
    largest-tau samples of each seed's long-tailed run (``lt_runs[seed]``) sit closer to their class centre than
    the smallest-tau ones (``summaries[seed]``: :func:`extremes_summary`; effect per seed: the smallest-tau group's
    mean distance minus the largest-tau group's)."""
    out = []
    methods = list(dict.fromkeys(table.index.get_level_values("method")))
    for column, unit in SEPARATION_COLUMNS:
        claim = f"Fig. 4: {claimed}'s {dataset} test features are better separated than the baselines' ({column})"
        if claimed not in methods or len(methods) < 2:
            out.append(not_testable(claim, f"{methods}: needs {claimed} and a baseline"))
            continue
        by_method = {m: {int(seed): float(v) for (seed, _), v in table[column].xs(m, level="method",
                                                                                  drop_level=False).items()}
                     for m in methods}
        out.append(best_of(claim, (claimed, by_method.pop(claimed)), by_method, unit=unit))
    near = {seed: one.loc["largest tau", "centroid_distance_mean"] for seed, one in summaries.items()}
    far = {seed: one.loc["smallest tau", "centroid_distance_mean"] for seed, one in summaries.items()}
    sizes = "; ".join(f"seed {seed}: {one.loc['largest tau', 'class_frequency_mean']:.0f} vs "
                      f"{one.loc['smallest tau', 'class_frequency_mean']:.0f}" for seed, one in summaries.items())
    runs = ", ".join(sorted({run.rsplit("-s", 1)[0] for run in lt_runs.values()}))  # the claim names no seed
    out.append(effect(
        f"Fig. 5: large-tau samples sit in cluster centres, small-tau ones away from clusters ({runs})",
        {seed: far[seed] - near[seed] for seed in summaries},
        what="distance of the 10% smallest-tau - of the 10% largest-tau", unit="",
        detail="mean cosine distance to the class centre, 10% largest tau / 10% smallest tau / all: " + "; ".join(
            f"seed {seed}: {near[seed]:.4f} / {far[seed]:.4f} / {one.loc['all', 'centroid_distance_mean']:.4f}"
            for seed, one in summaries.items()) + f"; mean class size of the two groups (training samples) {sizes}"))
    out.append(not_testable("Fig. 5 (right): the t-SNE of iSogCLR's CIFAR100-LT features groups by superclass",
                            "no runs: no unimodal run on a long-tailed 100-class set with superclasses (the generated "
                            "100-class set, synth100, is trained only as the image-text encoder's supervised "
                            "pre-training; synth10's classes are one per superclass)"))
    return out
