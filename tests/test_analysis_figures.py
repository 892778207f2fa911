"""The report helpers behind the Figure 2-5 notebooks (rgcl_analysis, feature_tsne): exact RGCL optima and t-SNE."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from isogclr.analysis.embeddings import (
    centroid_distance,
    extremes_summary,
    knn_accuracy,
    load_features,
    load_train_features,
    separation_metrics,
    subsample,
    tau_extremes,
    tsne_embedding,
)
from isogclr.analysis.rgcl import (
    anchor_row,
    feasible_interval,
    kl_to_uniform,
    optimum_row,
    primal_plane,
    rgcl_dual,
    rgcl_dual_objective,
    semantic_frequency_anchors,
)


def clustered(n: int, classes: int, dim: int, noise: float, seed: int, sizes: np.ndarray | None = None):
    """Features around random class centres (``noise`` relative to the centres' unit norm) and their labels."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, dim)) / np.sqrt(dim)
    labels = (np.repeat(np.arange(classes), sizes) if sizes is not None else rng.integers(0, classes, n))
    x = centres[labels] + noise * rng.standard_normal((len(labels), dim)) / np.sqrt(dim)
    return x.astype(np.float32), labels


def write_fake_runs(root: Path, dataset: str = "synth10", lt_dataset: str = "synth10_lt", seed: int = 0,
                    methods: tuple[str, ...] = ("simclr", "sogclr", "isogclr"), n_train: int = 400,
                    n_test: int = 300, dim: int = 32) -> Path:
    """Run directories with ``artifacts/features.pt`` (train features too, and ``tau.csv``, for the
    long-tailed iSogCLR run) of the shapes a training run writes, for executing the feature_tsne notebook without
    training."""
    for i, method in enumerate(methods):
        train_x, train_y = clustered(n_train, 10, dim, noise=2.0 - 0.5 * i, seed=10 * i)
        test_x, test_y = clustered(n_test, 10, dim, noise=2.0 - 0.5 * i, seed=10 * i + 1)
        _save(root / f"{method}-{dataset}-s{seed}", train_x, train_y, test_x, test_y)
    sizes = np.maximum(2, (60 * 0.1 ** (np.arange(10) / 9)).astype(int))
    train_x, train_y = clustered(0, 10, dim, noise=1.0, seed=99, sizes=sizes)
    test_x, test_y = clustered(100, 10, dim, noise=1.0, seed=98)
    run = root / f"isogclr-{lt_dataset}-s{seed}"
    _save(run, train_x, train_y, test_x, test_y)
    tau = 0.05 + 0.1 * np.random.default_rng(seed).random(len(train_y))
    pd.DataFrame({"index": np.arange(len(train_y)), "source_index": np.arange(len(train_y)) * 3, "label": train_y,
                  "superclass": -1, "tau": tau}).to_csv(run / "artifacts" / "tau.csv", index=False)
    return root


def _save(run: Path, train_x, train_y, test_x, test_y) -> None:
    """As a training run with ``export`` writes them: the test split in float16 in artifacts (and the train
    split, used only for the long-tailed iSogCLR run's Figure 5), all in float32 in local."""
    (run / "artifacts").mkdir(parents=True, exist_ok=True)
    (run / "local").mkdir(parents=True, exist_ok=True)
    (run / "metrics.json").write_text("{}")
    torch.save({"test": torch.from_numpy(test_x).half(), "test_labels": torch.from_numpy(test_y).long(),
                "train": torch.from_numpy(train_x).half(), "train_labels": torch.from_numpy(train_y).long()},
               run / "artifacts" / "features.pt")
    torch.save({"train": torch.from_numpy(train_x), "train_labels": torch.from_numpy(train_y),
                "test": torch.from_numpy(test_x), "test_labels": torch.from_numpy(test_y)},
               run / "local" / "features.pt")


# --- Figure 2 -----------------------------------------------------------------------------------------------


def test_figure2_optimum_matches_the_paper_to_its_precision():
    """h = [0, -1], rho = 0.2: the exact optimum is (0.8052, 0.1948), the paper's (0.8, 0.2) to one decimal."""
    row = optimum_row(np.array([0.0, -1.0]), rho=0.2, tau0=0.05)
    assert row["p_primal"] == row["p_dual"] == "(0.8052, 0.1948)"
    assert row["tau_star"] == pytest.approx(0.7047, abs=1e-4)  # 1 / log(p1 / p2)
    assert row["kl_p_star"] == pytest.approx(0.2)  # the constraint binds
    assert row["primal_minus_dual"] == "< 1e-12" or abs(float(row["primal_minus_dual"])) < 1e-8
    from isogclr.analysis.rgcl import residual_text
    assert residual_text(3.61e-15) == residual_text(-3.83e-15) == "< 1e-12" and residual_text(2.5e-9) == "2.5e-09"
    assert row["h"] == "(0, -1)"


def test_feasible_interval_is_the_kl_boundary_on_the_simplex():
    lo, hi = feasible_interval(0.2)
    assert lo == pytest.approx(1 - hi)
    assert kl_to_uniform(np.array([hi, 1 - hi])) == pytest.approx(0.2, abs=1e-10)
    # the optimum of the hard case sits on the boundary, at the end towards the harder negative
    assert rgcl_dual(np.array([0.0, -1.0]), 0.2, 0.05).p[0] == pytest.approx(hi, abs=1e-6)
    with pytest.raises(ValueError):
        feasible_interval(0.7)


def test_primal_plane_on_the_simplex_is_the_primal_objective():
    grid = primal_plane(np.array([0.0, -1.0]), tau0=0.05, n=101, eps=1e-9)
    # along the anti-diagonal p1 + p2 = 1 (rows are p2, columns p1) the grid equals p.h - tau0 KL(p, 1/2)
    i = 30
    p1, p2 = grid["p1"][100 - i, i], grid["p2"][100 - i, i]
    assert p1 + p2 == pytest.approx(1.0, abs=1e-8)
    expected = -p2 - 0.05 * kl_to_uniform(np.array([p1, p2]))
    assert grid["objective"][100 - i, i] == pytest.approx(expected, abs=1e-7)
    with pytest.raises(ValueError):
        primal_plane(np.zeros(3), 0.05)


def test_dual_objective_is_minimised_at_tau_star():
    h = np.array([0.0, -1.0, -0.3])
    dual = rgcl_dual(h, 0.2, 0.05)
    taus = np.geomspace(0.05, 5.0, 400)
    values = rgcl_dual_objective(h, taus, 0.2, 0.05)
    assert values.shape == taus.shape
    assert values.min() >= dual.value - 1e-9
    assert rgcl_dual_objective(h, dual.tau, 0.2, 0.05) == pytest.approx(dual.value)


# --- Figure 3 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_frequent_semantics_get_the_larger_optimal_tau(seed):
    frequent, rare = semantic_frequency_anchors(m=1000, seed=seed)
    assert frequent.same_class.sum() > 20 * max(rare.same_class.sum(), 1)
    f, r = anchor_row(frequent, 0.3, 0.05, 0.2), anchor_row(rare, 0.3, 0.05, 0.2)
    assert f["tau_star"] > 1.5 * r["tau_star"]
    # both constraints bind at the optimum; under a global tau the frequent anchor's p* would be far less uniform
    assert f["kl_p_star"] == pytest.approx(0.3, abs=1e-3) and r["kl_p_star"] == pytest.approx(0.3, abs=1e-3)
    assert f["kl_at_global_tau"] > 0.3 > r["kl_at_global_tau"]


def test_semantic_frequency_anchors_are_deterministic():
    a, b = semantic_frequency_anchors(m=50, seed=3), semantic_frequency_anchors(m=50, seed=3)
    np.testing.assert_array_equal(a[0].h, b[0].h)
    np.testing.assert_array_equal(a[1].same_class, b[1].same_class)
    assert np.all(a[0].h < 0.5)  # h_j = s(anchor, z_j) - s(anchor, positive), positive is a close view


def test_semantic_frequency_anchors_do_not_depend_on_the_blas_kernel():
    """Figure 3's inputs are the same bytes under another CPU model's BLAS kernel (OpenBLAS picks it by CPU:
    unrounded, the dot products differed in their last bits and the rendered figure by a pixel). Only the kernels
    this CPU can execute (a SkylakeX kernel dies with SIGILL without AVX-512): the widest of each ISA level."""
    import os
    import subprocess
    import sys

    from isogclr.machine import cpu_flags, openblas_coretypes

    flags = cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo: the CPU's flags, hence its OpenBLAS kernels, are unknown")
    kernels = [k for k in openblas_coretypes(flags) if k in ("SkylakeX", "Haswell", "Sandybridge", "Prescott")]
    if len(kernels) < 2:
        pytest.skip(f"this CPU runs fewer than two of OpenBLAS's kernels ({kernels}): nothing to compare")
    code = ("import hashlib; from isogclr.analysis.rgcl import semantic_frequency_anchors as s; "
            "from isogclr.machine import numpy_blas; "
            "print(numpy_blas()['blas_coretype'], "
            "hashlib.sha256(b''.join(a.h.tobytes() for a in s(m=1000, seed=0))).hexdigest())")
    outs = {core: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 env={**os.environ, "OPENBLAS_CORETYPE": core}).stdout.split() for core in kernels}
    assert len({used for used, _ in outs.values()}) == len(kernels), outs  # each run used another kernel
    assert len({digest for _, digest in outs.values()}) == 1, outs


# --- Figures 4 and 5 ----------------------------------------------------------------------------------------


def test_tsne_is_deterministic_for_a_fixed_seed():
    x, _ = clustered(150, 5, 16, noise=1.0, seed=0)
    first, second = tsne_embedding(x, seed=0, max_iter=250), tsne_embedding(x, seed=0, max_iter=250)
    assert first.shape == (150, 2)
    np.testing.assert_array_equal(first, second)


def test_separation_is_larger_for_clustered_than_for_random_features():
    x, y = clustered(300, 5, 16, noise=0.7, seed=1)
    noise = np.random.default_rng(2).standard_normal(x.shape)
    good, bad = separation_metrics(x, y), separation_metrics(noise, y)
    assert good["silhouette_cosine"] > 0.2 > bad["silhouette_cosine"]
    assert good["knn5_features"] > 90 > 50 > bad["knn5_features"]
    embedding = tsne_embedding(x, seed=0, max_iter=250)
    assert separation_metrics(x, y, embedding)["knn5_tsne"] > 90


def test_knn_accuracy_leaves_the_point_out():
    x = np.array([[0.0], [0.1], [10.0], [10.1]])
    assert knn_accuracy(x, np.array([0, 0, 1, 1]), k=1) == 100.0
    assert knn_accuracy(x, np.array([0, 1, 0, 1]), k=1) == 0.0  # with itself counted it would be 100


def test_subsample_and_tau_extremes():
    assert subsample(10, 20, 0).tolist() == list(range(10))
    picked = subsample(1000, 100, 0)
    assert len(set(picked)) == 100 and np.all(np.diff(picked) > 0)
    np.testing.assert_array_equal(picked, subsample(1000, 100, 0))
    large, small = tau_extremes(np.arange(20.0)[::-1], 0.1)
    assert np.flatnonzero(large).tolist() == [0, 1] and np.flatnonzero(small).tolist() == [18, 19]


def test_extremes_summary_and_centroid_distance():
    x, y = clustered(0, 2, 8, noise=0.5, seed=0, sizes=np.array([30, 10]))
    distance = centroid_distance(x, y)
    tau = pd.DataFrame({"label": y, "tau": -distance})  # closest to the centre = largest tau
    summary = extremes_summary(tau, x, fraction=0.1)
    assert summary.loc["largest tau", "samples"] == 4
    assert summary.loc["largest tau", "centroid_distance_mean"] < summary.loc["smallest tau", "centroid_distance_mean"]
    assert summary.loc["all", "class_frequency_mean"] == pytest.approx((30 * 30 + 10 * 10) / 40)
    with pytest.raises(ValueError):
        extremes_summary(tau, x[:-1])


def test_fake_runs_load(tmp_path):
    root = write_fake_runs(tmp_path)
    features = load_features(root, "isogclr-synth10-s0")
    assert set(features) == {"test", "test_labels"}  # the committed export: the test split only
    assert features["test"].shape == (300, 32) and features["test"].dtype == np.float32
    assert features["test_labels"].shape == (300,) and features["test_labels"].dtype == np.int64
    lt = load_train_features(root, "isogclr-synth10_lt-s0")
    assert len(pd.read_csv(root / "isogclr-synth10_lt-s0" / "artifacts" / "tau.csv")) == len(lt["train"])
    with pytest.raises(FileNotFoundError, match="dvc repro"):
        load_features(root, "simclr-synth10-s1")
    (root / "simclr-synth10-s1").mkdir()
    (root / "simclr-synth10-s1" / "metrics.json").write_text("{}")  # trained, but not exported
    with pytest.raises(FileNotFoundError, match="was not exported: only the first Table 1 seed exports features"):
        load_features(root, "simclr-synth10-s1")
    with pytest.raises(FileNotFoundError, match="was not exported"):
        load_train_features(root, "simclr-synth10-s1")
    blob = torch.load(root / "simclr-synth10-s0" / "artifacts" / "features.pt", weights_only=True)
    torch.save({k: v for k, v in blob.items() if not k.startswith("train")},
               root / "simclr-synth10-s0" / "artifacts" / "features.pt")
    with pytest.raises(FileNotFoundError, match="no train features"):
        load_train_features(root, "simclr-synth10-s0")
