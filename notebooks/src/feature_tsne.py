# %% [markdown]
# # Figures 4 and 5 (iSogCLR paper): t-SNE of learned features and where the extreme temperatures sit
#
# **The paper's claims** (Qiu et al., ICML 2023, Sec. 6.3):
# 1. (Figure 4, CIFAR10 test features, one t-SNE panel per method) "the feature representations learned by
#    iSogCLR are better separated" than SimCLR's and SogCLR's. The paper shows pictures only, no number.
# 2. (Figure 5, right, CIFAR100-LT) "most of samples with large tau values are in the centers of clusters,
#    while most of samples with small tau values are separated from clusters"; the small-tau samples come
#    more often from tail classes (Figure 5, left; tested as a number in `temperature_vs_frequency`).

# %% [markdown]
# <details><summary>Our setting: how this page's runs stand in for the paper's</summary>
#
# **Our test**: the same pictures for our runs (`dataset` stands in for CIFAR10, `lt_dataset` for the
# long-tailed set), and numbers that make "better separated" checkable: per panel, the silhouette score of
# the classes in feature space (cosine distance, on L2-normalised encoder features), the leave-one-out 5-NN
# accuracy of the classes in feature space (cosine) and in the 2-D t-SNE embedding. For Figure 5 we compare
# the mean cosine distance to the class centre (in feature space) of the 10% largest-tau and the 10%
# smallest-tau training samples. Test features are the frozen encoder outputs (float16) that the first three
# Table 1 seeds' runs export (`artifacts/features.pt`, committed, with the *train* features too for the iSogCLR
# runs: Figure 5 reads them beside the learned temperatures `tau.csv`). t-SNE (scikit-learn, PCA init, fixed
# `random_state`) runs on at most `max_points` points per panel. Every number is computed for each of those
# seeds and the claims are tested over them, paired by seed (the methods of a seed share its initial weights,
# data order and augmentation draws); the pictures show the first seed.
#
# </details>

# %% tags=["parameters"]
params_path = "params.yaml"
runs_dir = "runs"
reports_dir = "reports"
dataset = None  # None: the first of table1.datasets
seeds = None  # None: the first three of table1.seeds (the seeds whose runs export their features)
methods = ["simclr", "sogclr", "isogclr"]
lt_dataset = None  # None: the first of temperatures.datasets
tau_method = "isogclr"
max_points = 2000
perplexity = 30.0

# %%
from pathlib import Path

from isogclr.reports.notebook_run import setup_report

setup_report()  # cwd: the repository root, found from any folder; whole table cells; figures shown inline
import matplotlib.pyplot as plt
import pandas as pd

from isogclr.analysis.embeddings import (
    extremes_summary,
    load_features,
    load_train_features,
    separation_metrics,
    subsample,
    tau_extremes,
    tsne_embedding,
    tsne_verdicts,
)
from isogclr.analysis.explain import scale_sentence
from isogclr.analysis.tables import save_figure, write_table
from isogclr.analysis.temperatures import load_temperatures
from isogclr.analysis.verdicts import write_verdicts
from isogclr.config.core import run_id
from isogclr.config.profiles import load_params
from isogclr.config.sections import profile_name, table_spec, temperature_spec
from isogclr.config.studies import pretraining_epochs
from isogclr.reports.stage_minutes import timed

params = load_params(params_path)
profile = profile_name(params)
dataset = dataset or table_spec(params, "table1").datasets[0]
seeds = table_spec(params, "table1").seeds[:3] if seeds is None else seeds
print(scale_sentence(params, {dataset: pretraining_epochs(params, dataset=dataset)}, len(seeds),
                     **timed("feature_tsne", params)))
seed = seeds[0]  # the pictures' seed
lt_dataset = lt_dataset or temperature_spec(params).datasets[0]
rows, panels = [], {}
for one_seed in seeds:
    for method in methods:
        rid = run_id(method, dataset, one_seed)
        features = load_features(runs_dir, rid)
        keep = subsample(len(features["test"]), max_points, one_seed)
        x, y = features["test"][keep], features["test_labels"][keep]
        embedding = tsne_embedding(x, seed=one_seed, perplexity=perplexity)
        if one_seed == seed:
            panels[method] = (embedding, y)
        rows.append({"seed": one_seed, "method": method, "run": rid, "split": "test", "points": len(keep),
                     **separation_metrics(x, y, embedding)})
table = pd.DataFrame(rows).set_index(["seed", "method"])
caption = (f"Class separation of the test features of `{dataset}` (seeds {seeds}, profile "
           f"`{profile}`): silhouette (cosine, feature space), leave-one-out 5-NN accuracy (%) "
           f"in feature space and in the t-SNE embedding, on {table['points'].iloc[0]} test points per run.")
write_table(table.round(4), Path(reports_dir) / "tables" / "feature_tsne", caption)
print(caption)
table.round(4)

# %%
fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 4.2), squeeze=False)
for ax, method in zip(axes[0], methods, strict=True):
    embedding, y = panels[method]
    ax.scatter(embedding[:, 0], embedding[:, 1], c=y, cmap="tab10" if y.max() < 10 else "tab20", s=3,
               linewidths=0, rasterized=True)
    ax.set_title(f"{method}: silhouette {table.loc[(seed, method), 'silhouette_cosine']:.3f}, "
                 f"5-NN {table.loc[(seed, method), 'knn5_tsne']:.1f}%", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle(f"t-SNE of {dataset} test features (seed {seed}), coloured by class", fontsize=10)
save_figure(fig, reports_dir, "feature_tsne")

# %% [markdown]
# ## Figure 5 analog: the learned temperatures of the long-tailed run
#
# The 10% largest and 10% smallest tau are taken over the whole training set, then the t-SNE shows (at most
# `max_points` of) the first seed's training features coloured by class, with those two groups marked. The
# distances to the class centres (the table) are computed for every seed, in feature space (no t-SNE).

# %%
lt_runs = {one_seed: run_id(tau_method, lt_dataset, one_seed) for one_seed in seeds}
summaries = {}
for one_seed, one_run in lt_runs.items():
    lt_features = load_train_features(runs_dir, one_run)
    taus = load_temperatures(runs_dir, [one_run])
    summaries[one_seed] = extremes_summary(taus, lt_features["train"], fraction=0.1)
lt_run = lt_runs[seed]  # the picture: the first seed
lt_features = load_train_features(runs_dir, lt_run)
taus = load_temperatures(runs_dir, [lt_run])
large, small = tau_extremes(taus["tau"].to_numpy(), 0.1)
keep = subsample(len(taus), max_points, seed)
lt_embedding = tsne_embedding(lt_features["train"][keep], seed=seed, perplexity=perplexity)
labels = taus["label"].to_numpy()[keep]
fig, ax = plt.subplots(figsize=(6, 5))
ax.scatter(lt_embedding[:, 0], lt_embedding[:, 1], c=labels, cmap="tab10" if labels.max() < 10 else "tab20", s=4,
           alpha=0.35, linewidths=0, rasterized=True)
for mask, color, name in ((large[keep], "red", "10% largest tau"), (small[keep], "blue", "10% smallest tau")):
    ax.scatter(lt_embedding[mask, 0], lt_embedding[mask, 1], s=16, facecolors="none", edgecolors=color, label=name)
ax.legend(fontsize=8)
ax.set_xticks([])
ax.set_yticks([])
ax.set_title(f"{lt_run}: train features, coloured by class", fontsize=10)
save_figure(fig, reports_dir, "tau_tsne")
pd.concat(summaries, names=["seed"]).round(4)

# %% [markdown]
# ## Verdicts
#
# Claim 1, per metric (silhouette, 5-NN accuracies): iSogCLR beats every baseline, each comparison paired by
# seed; claim 2: the largest-tau samples are closer to their class centre than the smallest-tau ones (effect per
# seed: the smallest-tau group's mean distance minus the largest-tau group's). Each is tested over the seeds
# with a 95% t interval.

# %%
verdicts = tsne_verdicts(table, summaries, claimed="isogclr", dataset=dataset, lt_runs=lt_runs)
write_verdicts(verdicts, reports_dir, "feature_tsne")
