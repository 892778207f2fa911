# %% [markdown]
# # Bimodal (image-text) contrastive learning
#
# iSogCLR Tables 2/5/6/7, Figures 1 (right), 6/10/11 and appendix C.3; SogCLR Table 4.
#
# **The paper's claims** (Qiu et al., ICML 2023, section 6.2 and appendix C.3; CC3M pre-training,
# ResNet-50 + DistilBERT, batch 512, 30 epochs, 3 seeds):
#
# 1. iSogCLR beats CLIP, CyCLIP and SogCLR on zero-shot image-text retrieval (Flickr30K and MSCOCO,
#    Tables 2, 5, 6; "improves CLIP by 4%~17%" on retrieval);
# 2. iSogCLR improves zero-shot classification (Table 7: best on CIFAR100 and ImageNet1K, *not* on
#    CIFAR10, where SogCLR and CLIP are better);
# 3. SogCLR's two-way loss beats CLIP's InfoNCE at the same small batch, and CLIP's accuracy drops from
#    30 to 60 epochs while SogCLR's does not (SogCLR paper Table 4);
# 4. iSogCLR converges faster than CLIP (Figure 1, right: MSCOCO IR@1 per epoch);
# 5. CLIP with a fixed large temperature fails to converge (Figure 7 right / Table 8);
# 6. per-pair temperatures learned by plain autograd (CLIP with individual temperatures) drift upward
#    and training fails (appendix C.3);
# 7. pairs with frequent semantics learn large temperatures, rare ones small (Figures 6, 10, 11).

# %% [markdown]
# <details><summary>Our setting: how this page's runs stand in for the paper's</summary>
#
# **Our setting** (the profile in `params.yaml`, section `bimodal`): the central comparison (CLIP, SogCLR,
# iSogCLR) at 3 seeds, paired by seed, each at the knobs selected with the same budget on held-out training
# pairs (`bimodal_tuning`, table below); CyCLIP, CLIP with individual temperatures and CLIP with a large tau
# at the same 3 seeds (`side_seeds`), and SogCLR Table 4's second budget (8 epochs) too, so every comparison is
# paired by seed (a seed's runs share the initial weights, the pair order and the crops, keyed by pair). Generated image-caption pairs
# whose semantic clusters have a Zipf frequency profile (`python -m isogclr synthetic-pairs`), a
# small ResNet and a small DistilBERT trained from scratch. Our evaluation sets stand in for the
# paper's **by role only**: `retrieval_a` (images drawn from the training cluster distribution)
# ~ MSCOCO, `retrieval_b` (images uniform over clusters) ~ Flickr30K, `synth10` ~ CIFAR10, `synth100`
# ~ CIFAR100; ImageNet1K has no counterpart. Absolute numbers are not comparable with the paper's;
# only orderings and trends are. Every number below is read from a run's `metrics.json`,
# `train_log.csv` or `artifacts/tau.csv`.
#
# </details>

# %% tags=["parameters"]
params_path = "params.yaml"
runs_dir = "runs_bimodal"
studies_dir = "studies"
reports_dir = "reports"
tuning_dir = "tuning"

# %%
import json
import math
import textwrap
from pathlib import Path

from isogclr.reports.notebook_run import setup_report

setup_report()  # cwd: the repository root, found from any folder; whole table cells; figures shown inline
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display
from PIL import Image

from isogclr.analysis.bimodal import (RETRIEVAL_METRICS, ZEROSHOT_METRICS, bimodal_verdicts, budget_table,
                                      collect_bimodal_references, collect_bimodal_runs, collect_bimodal_study,
                                      load_bimodal_taus, load_train_logs, no_learning_floors, side_by_side,
                                      tau_extremes, tau_frequency_correlation, tau_frequency_verdict,
                                      TAU_FREQUENCY_CLAIM)
from isogclr.analysis.explain import pairs_scale_sentence
from isogclr.analysis.head_clusters import cluster_means, load_study_taus, slack_table, slack_verdict
from isogclr.analysis.stats import at_bound
from isogclr.analysis.studies import check_differs_only, studies_read_by, study_run_path
from isogclr.analysis.tables import paper_numbers, save_figure, write_table
from isogclr.analysis.verdicts import not_testable, with_runs, write_verdicts
from isogclr.analysis.tuning import candidates_table, selection_settings, selection_table
from isogclr.config.bimodal import (
    bimodal_paper_rows,
    bimodal_run_id,
    bimodal_runs,
    bimodal_settings,
    bimodal_study_spec,
)
from isogclr.config.profiles import load_params
from isogclr.config.sections import method_settings, profile_name
from isogclr.config.tuning import tuning_spec
from isogclr.reports.stage_minutes import timed
from isogclr.data.manifest import ensure_tracked

params = load_params(params_path)
spec = bimodal_settings(params)  # the typed bimodal section (epochs, batch size, data folder)
profile = profile_name(params)
plan = bimodal_runs(params)  # method -> its seeds (the central methods at bimodal.seeds, the side ones at side_seeds)
methods, paper_rows = list(plan), bimodal_paper_rows(params)
seeds = list(plan[methods[0]])  # the central comparison's seeds (bimodal.methods come first)
side = [m for m in methods if m in (params["bimodal"].get("side_methods") or [])]
other_seeds = [m for m in side if list(plan[m]) != seeds]  # side methods at other seeds than the central ones


def each_method(load, names: list[str]) -> pd.DataFrame:
    """``load(runs_dir, [method], its seeds)`` for every method of ``names``, concatenated."""
    return pd.concat([load(runs_dir, [m], list(plan[m])) for m in names], ignore_index=True)


runs = each_method(collect_bimodal_runs, methods)
# the no-learning rows (chance, the untrained pair of encoders: `train-bimodal --untrained-baseline`, the central
# runs) shown below the methods; their better is the floor of every comparison
references = collect_bimodal_references(runs_dir, [m for m in methods if m not in side], seeds)
floors = no_learning_floors(references)
paper = paper_numbers("isogclr_table2")
tables = Path(reports_dir) / "tables"
setting = (f"profile `{profile}`: {spec.epochs} epochs, batch {spec.batch_size}, "
           f"mean ± std over seeds {seeds}"
           + (f" ({', '.join(other_seeds)}: seeds {list(plan[other_seeds[0]])})" if other_seeds else "")
           + "; paper: CC3M, 30 epochs, batch 512, 3 seeds")
print(pairs_scale_sentence(params, spec.epochs, spec.batch_size, len(seeds), **timed("bimodal", params)))

# %% [markdown]
# ## The selection on held-out training pairs
#
# Every method of the central comparison gets the same budget (`bimodal_tuning` in params.yaml): the same
# number of candidates over its own knobs, each trained for the reported runs' epochs on the training pairs
# minus a cluster-stratified 20% of their images, and scored by the mean of IR and TR Recall@1, @5 and @10
# among the held-out pairs (the retrieval papers' rsum / 6; R@1 alone counts a handful of pairs here). The
# test sets (`retrieval_*`, `zeroshot/*`) are not read; the reported runs read them once, at the selected knobs.

# %%
if tuning_spec(params, "bimodal_tuning") is not None:
    selection = selection_table(params, tuning_dir, "bimodal_tuning")
    chosen = selection_settings(params, tuning_dir, "bimodal_tuning")
    budgets = sorted(set(selection["candidates"]))  # one number when every method got the same budget
    caption_selection = (f"Image-text selection, profile `{profile}`: {', '.join(map(str, budgets))} candidates "
                         f"per method, each trained {chosen['epochs']} epochs with {chosen['validation_fraction']:.0%} "
                         f"of the training images held out, seeds {chosen['seeds']}; validation recall = mean of IR "
                         "and TR R@1, R@5, R@10 (%), mean over seeds; the test sets are not read.")
else:
    selection = pd.DataFrame({"note": ["no bimodal_tuning section in params.yaml: every method runs with its own "
                                       "params.yaml knobs"]})
    caption_selection = f"Image-text selection, profile `{profile}`: none."
write_table(selection, tables / "tuning_selection_bimodal", caption_selection)
print(caption_selection)
selection

# %%
if tuning_spec(params, "bimodal_tuning") is not None:
    display(candidates_table(params, tuning_dir, "bimodal_tuning").round(2))

# %% [markdown]
# ## Retrieval (Tables 2, 5, 6)

# %%
retrieval = side_by_side(pd.concat([runs, references]), paper, RETRIEVAL_METRICS, paper_rows)
write_table(retrieval, tables / "bimodal_retrieval",
            f"Zero-shot retrieval Recall@k (%), IR = text->image, TR = image->text; {setting}. "
            "retrieval_a ~ MSCOCO (Table 6), retrieval_b ~ Flickr30K (Table 5), by role only.")
retrieval

# %% [markdown]
# ## Zero-shot classification (Tables 2, 7)

# %%
zeroshot = side_by_side(pd.concat([runs, references]), paper, ZEROSHOT_METRICS, paper_rows)
write_table(zeroshot, tables / "bimodal_zeroshot",
            f"Zero-shot classification top-k (%); {setting}. synth10 ~ CIFAR10, synth100 ~ CIFAR100 (Table 7); "
            "ImageNet1K has no counterpart.")
zeroshot

# %% [markdown]
# ## SogCLR Table 4 (two-way SogCLR vs CLIP's InfoNCE, two epoch budgets)
#
# The SogCLR paper reports zero-shot top-1 on ImageNet-S (CLIP-S, fixed tau 0.07 for both losses)
# after 30 and 60 epochs at batch 128 and 256. **Its claims**: SogCLR beats CLIP at the same small
# batch, and CLIP's accuracy *drops* from 30 to 60 epochs while SogCLR's does not. Our second budget
# is the `bimodal_epochs` study (`bimodal_studies` in params.yaml, knob `bimodal.epochs`), read beside
# the bimodal runs of the same methods and seeds; the saved configs of each pair must differ only in
# the number of epochs, which is checked first. Our counterparts of the paper's metric: zero-shot top-1
# on `synth10` and IR@1 on `retrieval_a`.

# %%
budget = bimodal_study_spec(params, "bimodal_epochs")
if budget.knob != "bimodal.epochs" or not set(budget.methods) <= set(methods) or not set(budget.seeds) <= set(seeds):
    raise ValueError(f"bimodal_studies.bimodal_epochs (knob {budget.knob}, {budget.methods}, seeds {budget.seeds}) "
                     f"must vary bimodal.epochs within bimodal ({methods}, seeds {seeds}): its other budget is those "
                     "runs")
check_differs_only([(Path(runs_dir) / bimodal_run_id(m, s),
                     study_run_path(studies_dir, "bimodal_epochs", m, v, s, command="train-bimodal"))
                    for m in budget.methods for v in budget.values for s in budget.seeds], key="train.epochs")
longer = collect_bimodal_study(params, "bimodal_epochs", studies_dir).rename(columns={"knob": "epochs"})
base = runs[runs.method.isin(budget.methods) & runs.seed.isin(budget.seeds)].assign(epochs=spec.epochs)
budgets = pd.concat([longer, base])
budgets["epochs"] = budgets["epochs"].astype(int)
cells = [("synth10", "top1"), ("retrieval_a", "ir_r1")]
table4 = budget_table(budgets, cells, paper_numbers("sogclr_table4"), {"sogclr_bimodal": "sogclr"})
caption4 = (f"SogCLR Table 4, profile `{profile}`: zero-shot top-1 on synth10 (~CIFAR10) and IR@1 "
            f"on retrieval_a (~MSCOCO), %, after {sorted(int(e) for e in budgets.epochs.unique())} epochs at batch "
            f"{spec.batch_size} (the {spec.epochs}-epoch runs are the bimodal runs above), mean ± std over seeds "
            f"{list(budget.seeds)}; paper: ImageNet-S zero-shot top-1, single runs.")
write_table(table4, tables / "sogclr_table4_epochs", caption4)
print(caption4)
table4

# %%
fig, axes = plt.subplots(1, len(cells), figsize=(4.5 * len(cells), 3.4))
for ax, (dataset, metric) in zip(axes, cells, strict=True):
    cell = budgets[(budgets.dataset == dataset) & (budgets.metric == metric)]
    for m in budget.methods:
        curve = cell[cell.method == m].groupby("epochs")["value"].mean()
        ax.plot(curve.index, curve.values, marker="o", label=m)
    ax.set(xlabel="pre-training epochs (one run per budget)", ylabel=f"{metric} (%)", title=f"{dataset} {metric}")
    ax.legend()
fig.suptitle("SogCLR Table 4: accuracy at two epoch budgets")
save_figure(fig, reports_dir, "sogclr_table4_epochs")

# %% [markdown]
# ## Convergence (Figure 1, right)
#
# The paper plots MSCOCO IR@1 per epoch for CLIP and iSogCLR. We log IR@1 on `retrieval_a` after every
# epoch (`bimodal.eval_every`) and the epoch's mean training loss. Each method minimises its own
# objective (the iSogCLR value is the batch estimate of F_B, rho terms included), so the losses are
# rescaled to [0, 1] per method: only their shapes compare.

# %%
logs = each_method(load_train_logs, methods)
curve_methods = [m for m in ("clip", "isogclr_bimodal", "sogclr_bimodal") if m in methods]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for m in curve_methods:
    mean = logs[logs.method == m].groupby("epoch")[["loss", "retrieval_a_ir_r1"]].mean()
    span = (mean["loss"].max() - mean["loss"].min()) or 1.0
    axes[0].plot(mean.index, (mean["loss"] - mean["loss"].min()) / span, marker="o", label=m)
    axes[1].plot(mean.index, mean["retrieval_a_ir_r1"], marker="o", label=m)
axes[0].set(xlabel="epoch", ylabel="(loss - min) / (max - min)", title="training loss, own objective, rescaled")
axes[1].set(xlabel="epoch", ylabel="IR@1 (%)", title="retrieval_a (~MSCOCO) IR@1 per epoch")
axes[1].legend()
save_figure(fig, reports_dir, "bimodal_convergence")

# %% [markdown]
# ## Individual temperatures by plain autograd (appendix C.3)
#
# `clip_individual_tau` learns one temperature per image and per text with the optimizer (AdamW,
# no weight decay); `isogclr_bimodal` updates them with Algorithm 2. The appendix reports that the
# autograd temperatures grow during training. (Its explanation has the sign reversed; see
# `docs/losses.md`: descent raises tau_i for anchors that have a negative closer than their positive.)

# %%
tau_methods = [m for m in ("clip_individual_tau", "isogclr_bimodal") if m in methods]
fig, ax = plt.subplots(figsize=(6, 3.5))
for m in tau_methods:
    for col, style in (("tau_image", "-"), ("tau_text", "--")):
        mean = logs[logs.method == m].groupby("epoch")[[f"{col}_mean", f"{col}_std"]].mean()
        ax.plot(mean.index, mean[f"{col}_mean"], style, marker="o", label=f"{m} {col}")
        ax.fill_between(mean.index, mean[f"{col}_mean"] - mean[f"{col}_std"],
                        mean[f"{col}_mean"] + mean[f"{col}_std"], alpha=0.15)
ax.set(xlabel="epoch", ylabel="mean temperature (± std over pairs)", title="learned per-pair temperatures")
ax.legend(fontsize=8)
save_figure(fig, reports_dir, "bimodal_individual_tau")

# %% [markdown]
# ## Learned temperature vs semantic frequency (section 6.3, Figures 6, 10, 11)
#
# Each training pair belongs to a generated semantic cluster whose training frequency is known.
# Spearman correlations of the learned temperatures with it, over pairs and over cluster means;
# and the mean tau_image of the pairs whose caption belongs to another pair (mismatched, as in web data).

# %%
taus = each_method(load_bimodal_taus, tau_methods)
correlation = tau_frequency_correlation(taus)
write_table(correlation.set_index(["method", "seed"]), tables / "bimodal_tau_frequency",
            f"Learned per-pair temperatures vs cluster frequency (Spearman), {setting}.")
correlation

# %% [markdown]
# **Where the temperatures sit.** A correlation read from temperatures pinned at a bound orders rounding noise.
# At ec849f6 the selection took rho 4.6 (0.24 below log(B - 1), the paper's offset at batch 512), and 99% of
# iSogCLR's image temperatures ended at tau_min: the claim was not testable. Its search now spans rho 1.6 and
# 2.1 (`methods.isogclr_bimodal.search`; measured on seed 0 before the change: at rho 4.6, 2.6 and 1.6, 99%, 52%
# and none of them at tau_min after 16 epochs, with held-out recall 9.96, 10.17 and 10.12 at 6 epochs). Per run
# below: the learned temperatures' mean and spread and the share within 1% of each bound (the verdicts' rule).

# %%
bounds_rows = []
for (m, s), df in taus.groupby(["method", "seed"], sort=False):
    for side in ("tau_image", "tau_text"):
        row = {"method": m, "seed": s, "temperature": side, "mean": df[side].mean(), "std": df[side].std()}
        for name in ("tau_min", "tau_max"):
            bound = df[name].iloc[0]
            row[f"% at {name}"] = (100 * at_bound(df[side], {name: bound})[0] if pd.notna(bound) else float("nan"))
        bounds_rows.append(row)
tau_bounds = pd.DataFrame(bounds_rows)
iso_knobs = (json.loads(Path(runs_dir, bimodal_run_id("isogclr_bimodal", seeds[0]), "knobs.json").read_text())
             if "isogclr_bimodal" in methods else {})  # iSogCLR's selected knobs, as its runs recorded them
write_table(tau_bounds.set_index(["method", "seed", "temperature"]).round(4), tables / "bimodal_tau_bounds",
            f"Learned per-pair temperatures: mean, std over pairs and the share within 1% of each bound, {setting}. "
            "iSogCLR's knobs (its runs' knobs.json): " + ", ".join(
                f"{k} {v}" for k, v in iso_knobs.items() if k != "loss") if iso_knobs else "")
tau_bounds.round(4)

# %%
k = 6
iso = taus[(taus.method == "isogclr_bimodal") & (taus.seed == seeds[0])] if "isogclr_bimodal" in tau_methods \
    else taus[taus.seed == seeds[0]]
largest, smallest = tau_extremes(iso, k)
ensure_tracked(Path(spec.data))  # a generated folder is rebuilt from its manifest if missing (fresh clone)
image_root = Path(spec.data) / "train"
fig, axes = plt.subplots(2, k, figsize=(2.2 * k, 5.6))  # constrained layout leaves room for the captions
for row, (title, picked) in enumerate((("largest", largest), ("smallest", smallest))):
    for ax, (_, r) in zip(axes[row], picked.iterrows(), strict=True):
        with Image.open(image_root / r["image"]) as img:
            ax.imshow(img.convert("RGB"))
        ax.set_axis_off()
        ax.set_title(f"tau {r['tau_image']:.4f}, freq {r['cluster_frequency']}"
                     + (" (mismatched)" if r["mismatched"] == 1 else ""), fontsize=7)
        ax.text(0.5, -0.04, textwrap.fill(textwrap.shorten(r["caption"], 75), 28), transform=ax.transAxes,
                ha="center", va="top", fontsize=6)
    axes[row][0].text(-0.15, 0.5, f"{title} tau_image", transform=axes[row][0].transAxes, rotation=90,
                      ha="right", va="center", fontsize=9)
fig.suptitle(f"{iso['method'].iloc[0]}: pairs with the largest (top) and smallest (bottom) learned tau_image")
save_figure(fig, reports_dir, "bimodal_tau_extremes")

# %%
pd.concat([largest.assign(group="largest"), smallest.assign(group="smallest")])[
    ["group", "index", "cluster", "cluster_frequency", "mismatched", "caption", "tau_image", "tau_text"]]

# %% [markdown]
# ## The mechanism: RGCL's prediction for the frequent clusters, on two kinds of cluster
#
# iSogCLR's tau_i solves a KL-constrained problem (RGCL, Sec. 4): putting all of an anchor's weight on its
# cluster, a share q of the batch, costs KL = log(1/q), so where **q > e^-rho** the constraint is slack and tau_i
# falls to tau_min; below it, tau_i stays above the floor. Above, a cluster is one exact combination of object,
# colour, background, size and position (its frequency counts *near-duplicates*); the object variant
# (`python -m isogclr synthetic-pairs-objects`, the same spec) makes a cluster one object with the other
# attributes free, so its frequency counts *semantic neighbours*, the paper's sense. iSogCLR at rho 1.6, 2.6 and
# 3.6 (e^-rho = 0.20, 0.074, 0.027) on both (`bimodal_studies.rho_pairs`, `rho_pairs_objects`), its other knobs as
# selected: per run, the clusters above e^-rho ("slack"), the mean over clusters of their tau_image and of the
# others', and the share of each group's pairs at tau_min.

# %%
SWEEPS = {"near-duplicates": "rho_pairs", "objects": "rho_pairs_objects"}  # a profile may run neither (paper)
sweep_taus = {}
for clusters, study in SWEEPS.items():
    if study in studies_read_by(params, "bimodal", section="bimodal_studies"):
        sweep = bimodal_study_spec(params, study)
        sweep_taus[clusters] = load_study_taus(studies_dir, study, "isogclr_bimodal", sweep.values, sweep.seeds)
not_run = [f"bimodal_studies.{SWEEPS[c]}" for c in SWEEPS if c not in sweep_taus]
sweep_table = (pd.concat({c: slack_table(t) for c, t in sweep_taus.items()}, names=["clusters", "row"])
               .reset_index("row", drop=True).set_index(["rho", "seed"], append=True).round(4)
               if sweep_taus else pd.DataFrame())
write_table(sweep_table, tables / "bimodal_rho_sweep",
            f"iSogCLR's rho sweep on the two kinds of cluster: clusters above e^-rho (slack) and below (bound), their "
            f"mean tau_image (over clusters) and share of pairs at tau_min, profile `{profile}`, {spec.epochs} epochs."
            + (f" Not run in this profile: {', '.join(not_run)}." if not_run else ""))
sweep_table

# %%
fig, axes = plt.subplots(1, max(len(sweep_taus), 1), figsize=(5.5 * max(len(sweep_taus), 1), 3.8), sharey=True,
                         squeeze=False)
if not sweep_taus:
    axes[0][0].text(0.5, 0.5, f"not run in profile {profile}", ha="center", va="center")
for ax, (clusters, t) in zip(axes[0], sweep_taus.items(), strict=True):
    means = cluster_means(t).groupby(["value", "cluster"])[["share", "tau_image"]].mean().reset_index()
    for i, (rho, one) in enumerate(means.groupby("value")):
        ax.scatter(one["share"], one["tau_image"], s=10, color=f"C{i}", label=f"rho {rho:g}")
        ax.axvline(math.exp(-rho), color=f"C{i}", linestyle="--", linewidth=1)
    ax.axhline(t["tau_min"].iloc[0], color="grey", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("cluster's share of the pairs (dashed: e^-rho)")
    ax.set_title(f"clusters = {clusters}", fontsize=10)
axes[0][0].set_ylabel("mean tau_image of the cluster (grey: tau_min)")
if sweep_taus:
    axes[0][0].legend(fontsize=8)
save_figure(fig, reports_dir, "bimodal_rho_sweep")

# %% [markdown]
# ## Do the claims hold at this scale?
#
# Every claim is tested on our runs paired by seed: the effect (positive = the paper's direction) is the
# mean over seeds of a per-seed difference with its 95% Student-t interval, beside the paper's own effect;
# the temperature claim is judged over clusters, the unit at which frequency varies (per seed, Spearman of the
# cluster-mean tau_image against the cluster frequency; the mean over seeds with a cluster bootstrap that resamples
# whole clusters; the pair-level correlations above are description only). **supported** / **contradicted**: the interval excludes 0 in / against the
# paper's direction; **inconclusive**: it contains 0; **not testable**: one seed, no counterpart at this
# scale, no learning, or temperatures at their bound (more than half of the learned tau_image within 1% of
# tau_min or tau_max: their ranks then order rounding noise), with the reason and the fraction. The verdicts
# are written to `reports/verdicts/bimodal.csv`.

# %%
settings = {m: method_settings(params, m) for m in methods}  # the side methods' knobs, named in the evidence
claims = bimodal_verdicts(runs, methods, paper, paper_rows, budgets, cells, paper_numbers("sogclr_table4"), logs, taus,
                          large_tau=settings.get("clip_large_tau", {}).get("tau"),
                          tau_init=settings.get("clip_individual_tau", {}).get("tau_init", 0.01), floors=floors,
                          sources={spec.epochs: f"the bimodal runs ({runs_dir})",
                                   **{int(v): f"{studies_dir}/bimodal_epochs" for v in budget.values}})
selected_rho = iso_knobs["rho"]
objects_claim = f"{TAU_FREQUENCY_CLAIM} (object clusters: semantic neighbours)"
if "objects" in sweep_taus:
    objects = sweep_taus["objects"]
    nearest = min(objects["value"].unique(), key=lambda v: abs(v - selected_rho))  # the sweep's rho nearest the selection
    claims += with_runs([tau_frequency_verdict(objects[objects.value == nearest].assign(method="isogclr_bimodal"),
                                               claim=f"{objects_claim[:-1]}; rho {nearest:g})")],
                        f"{studies_dir}/{SWEEPS['objects']}: rho {nearest:g}")
else:
    claims.append(not_testable(objects_claim, f"not run in profile {profile}: bimodal_studies.{SWEEPS['objects']}"))
for clusters, study in SWEEPS.items():
    claim = (f"RGCL (Sec. 4), {clusters} as clusters: a cluster whose share of the pairs exceeds e^-rho learns a "
             "smaller tau (towards tau_min) than the others")
    claims += (with_runs([slack_verdict(sweep_taus[clusters], claim)], f"{studies_dir}/{study}: rho "
                         + ", ".join(f"{v:g}" for v in sorted(sweep_taus[clusters]["value"].unique())))
               if clusters in sweep_taus else [not_testable(claim, f"not run in profile {profile}: bimodal_studies.{study}")])
verdicts = write_verdicts(claims, reports_dir, "bimodal")
verdicts
