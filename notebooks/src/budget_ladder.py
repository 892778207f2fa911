# %% [markdown]
# # The central comparison against the pre-training budget (iSogCLR Table 1, budget ladders)
#
# **The paper's claims** (Qiu et al., ICML 2023, Table 1 and Sec. 6.3; 400 epochs, ResNet-18): on long-tailed
# data iSogCLR beats SimCLR and SogCLR (CIFAR10-LT: +1.28 and +0.67 points; CIFAR100-LT: +3.73 and +0.71),
# and its learned per-sample temperatures are larger for samples of frequent semantics than for rare ones.

# %% [markdown]
# <details><summary>Our setting: how this page's runs stand in for the paper's</summary>
#
# **Why a ladder**: our Table 1 trains a few tens of epochs at most, and each per-sample temperature of iSogCLR
# moves once per epoch (when its sample is drawn), so it has moved only as many times. A budget ladder
# (`studies.<name>` with `knob: train.epochs` and `report: budget_ladder` in params.yaml) trains the same three
# methods on one long-tailed dataset at several budgets and seeds, to show where (if anywhere) the paper's
# ordering appears as the budget grows and which way the gaps move; a budget is tested with at least 3 seeds. A ladder on a dataset of Table 1 whose seeds it covers
# reuses Table 1's runs as the point at Table 1's budget.
#
# **Tuning**: every method's knobs were selected with the same budget of candidates on a validation split
# carved from the training set (`tuning` in params.yaml; the selection is at the end of this report); the
# candidates never see the test split, which is read once, by the tuned runs below.
#
# </details>

# %% tags=["parameters"]
params_path = "params.yaml"
runs_dir = "runs"
studies_dir = "studies"
tuning_dir = "tuning"
reports_dir = "reports"

# %%
from pathlib import Path

from isogclr.reports.notebook_run import setup_report

setup_report()  # cwd: the repository root, found from any folder; whole table cells; figures shown inline
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from isogclr.analysis.ladder import (
    CLAIM_WORDS,
    TAU_CLAIM,
    gap_summary,
    ladder_correlations,
    ladder_gaps,
    ladder_runs,
    ladder_studies,
    ladder_summary,
    ladder_table,
    ladder_temperatures,
    ladder_verdicts,
    ordering_sentence,
    status_sentence,
    statuses_by_budget,
    table1_budget,
    trend_sentence,
)
from isogclr.analysis.explain import scale_sentence
from isogclr.analysis.tables import MISSING, PAPER_COUNTERPART, save_figure, write_table
from isogclr.analysis.testbed import reference_rows
from isogclr.analysis.verdicts import write_verdicts
from isogclr.config.profiles import load_params
from isogclr.config.sections import profile_name, table_spec
from isogclr.config.studies import study_spec
from isogclr.config.tuning import tuning_spec
from isogclr.reports.stage_minutes import timed

params = load_params(params_path)
BETTER, RIVALS = "isogclr", ("simclr", "sogclr")
ladders = {}
for study in ladder_studies(params):
    spec = study_spec(params, study)
    frame = ladder_runs(params, study, runs_dir, studies_dir)
    taus = ladder_temperatures(frame, BETTER) if BETTER in spec.methods else None
    correlations = None if taus is None else ladder_correlations(params, study, taus=taus)
    rivals = [m for m in RIVALS if m in spec.methods]
    ladders[study] = {
        "spec": spec, "frame": frame, "taus": taus, "rivals": rivals,
        "summary": ladder_summary(frame),
        "gaps": ladder_gaps(frame, BETTER, rivals),
        "correlations": correlations,
        "correlation_summary": None if correlations is None else ladder_summary(correlations, "spearman",
                                                                                by=("epochs",)),
        "table1": table1_budget(params, study),
    }

if ladders:
    print(scale_sentence(params, {ladder["spec"].dataset: " and ".join(str(e) for e in sorted(
        {int(x) for x in ladder["frame"]["epochs"]})) for ladder in ladders.values()},
        max(len(ladder["spec"].seeds) for ladder in ladders.values()), **timed("budget_ladder", params)))
tables = [ladder_table(study, ladder["spec"].dataset, ladder["summary"], ladder["gaps"], ladder["correlation_summary"])
          for study, ladder in ladders.items()]
table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame({"note": ["no budget ladder in this profile"]})
if tables:  # the ladder's name only where two ladders share a dataset
    table = table.drop(columns=[] if table.duplicated(["dataset", "epochs"]).any() else ["ladder"])
    table = table.set_index("dataset")
borrowed = "; ".join(f"the {ladder['table1'][1]}-epoch point of studies.{study} is {ladder['table1'][0]}'s runs"
                     for study, ladder in ladders.items() if ladder["table1"])
caption = (f"Budget ladders, profile `{profile_name(params)}`: linear-probe top-1 (%) per method, the paired "
           f"gaps iSogCLR − SimCLR and iSogCLR − SogCLR (points) and Spearman(learned tau, class frequency) of "
           f"iSogCLR over samples, each as mean [95% Student-t interval over seeds]; "
           + ("; ".join(f"{ladder['spec'].dataset}: studies.{study}, seeds {list(ladder['spec'].seeds)}"
                        for study, ladder in ladders.items()) or "no ladder")
           + (f"; {borrowed}" if borrowed else "") + ". Paper: 400 epochs.")
write_table(table, Path(reports_dir) / "tables" / "budget_ladder", caption)
print(caption)
display(table)
# how much was learned: the ladders' datasets' reference rows (the `references` stages; supervised at the
# dataset's Table 1 budget), whose no-learning floor also bounds every comparison below
ref_spec = table_spec(params, "references")  # None: a profile without reference rows
ladder_datasets = [] if ref_spec is None else [d for d in dict.fromkeys(ladder["spec"].dataset
                                                                        for ladder in ladders.values())
                                               if d in ref_spec.datasets]
references = reference_rows(runs_dir, ladder_datasets, ref_spec.seeds) if ladder_datasets else None
reference_table = (pd.DataFrame({"note": ["no reference rows for the ladders' datasets in this profile"]})
                   if references is None else references.round(2).reset_index())
write_table(reference_table, Path(reports_dir) / "tables" / "budget_ladder_references",
            "Reference rows of the ladders' datasets, linear-probe top-1 (%): chance, the raw-pixel probe, the "
            "random-init probe (mean of its initializations), the floor (the better of those two) and the "
            "supervised reference (same encoder, at the dataset's pre-training epochs)")
display(reference_table)

# %% [markdown]
# ## Accuracy, gaps and the tau-frequency correlation against the budget
#
# One row of panels per ladder: (left) each method's top-1 with its 95% interval over seeds; (middle)
# iSogCLR's paired gaps to SimCLR and SogCLR with their intervals (above the zero line: the paper's direction);
# (right) the Spearman correlation of iSogCLR's learned per-sample tau with its class frequency, mean over
# seeds with its 95% interval (above zero: frequent semantics get larger tau, the paper's claim).
# The x axis is logarithmic in epochs.


# %%
def _errorbar(ax, rows, y, label=None, **style):
    """Mean with its 95% interval (a budget with one seed: the point, no bar)."""
    low, high = (rows[y] - rows["ci_low"]).fillna(0), (rows["ci_high"] - rows[y]).fillna(0)
    ax.errorbar(rows["epochs"], rows[y], yerr=[low, high], marker="o", capsize=3, label=label, **style)


fig, axes = plt.subplots(max(1, len(ladders)), 3, figsize=(13, 3.4 * max(1, len(ladders))), squeeze=False)
for ladder, row in zip(ladders.values(), axes, strict=False):
    acc, gap, rho = row
    budgets = sorted(ladder["summary"]["epochs"].unique())
    dataset = f"{ladder['spec'].dataset} ({len(ladder['spec'].seeds)} seeds)"
    for method in ladder["spec"].methods:
        _errorbar(acc, ladder["summary"][ladder["summary"]["method"] == method], "mean", label=method)
    acc.set(ylabel="linear-probe top-1 (%)", title=f"{dataset}: accuracy")
    acc.legend(fontsize=8)
    for rival in ladder["rivals"]:
        _errorbar(gap, ladder["gaps"][ladder["gaps"]["worse"] == rival], "gap", label=f"{BETTER} − {rival}")
    gap.axhline(0, color="grey", lw=0.8)
    gap.set(ylabel="paired gap (points)", title=f"{dataset}: iSogCLR's gaps")
    gap.legend(fontsize=8)
    if ladder["correlation_summary"] is not None:
        _errorbar(rho, ladder["correlation_summary"], "mean", color="tab:green")
    rho.axhline(0, color="grey", lw=0.8)
    rho.set(ylabel="Spearman(tau, class freq.)", title=f"{dataset}: learned tau vs frequency")
    for ax in row:
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(int(e)) for e in budgets])
        ax.minorticks_off()
        ax.set_xlabel("pre-training epochs")
if not ladders:
    axes[0][0].text(0.5, 0.5, "no budget ladder in this profile", ha="center", va="center")
    for ax in axes[0]:
        ax.set_axis_off()
save_figure(fig, reports_dir, "budget_ladder")

# %% [markdown]
# ## Verdicts per budget
#
# At each budget with at least 3 seeds: "iSogCLR > SimCLR" and "iSogCLR > SogCLR", paired by seed (mean of the
# per-seed differences with its 95% Student-t interval, beside the paper's difference at 400 epochs on the
# dataset's counterpart), and "tau grows with class frequency", judged over classes, the unit at which frequency
# varies (per seed, Spearman of the class-mean tau against the class frequency; the mean over seeds with a cluster
# bootstrap that resamples whole classes; the sample-level numbers of the table are description). **supported** /
# **contradicted**: the interval excludes 0 in / against the paper's direction; **inconclusive**: it contains
# 0; **not testable**: fewer than 3 seeds at that budget (the reason is given).

# %%
verdicts = []
for study, ladder in ladders.items():
    floor = None if references is None or ladder["spec"].dataset not in references.index else \
        float(references.loc[ladder["spec"].dataset, "floor"])
    verdicts += ladder_verdicts(params, study, ladder["frame"], ladder["taus"], better=BETTER, worse=ladder["rivals"],
                                floor=floor)
write_verdicts(verdicts, reports_dir, "budget_ladder")

# %% [markdown]
# ## Where does the paper's ordering appear?
#
# Computed from the verdicts and the gaps above, per ladder: at which budgets each gap's interval lies above 0
# (the paper's direction), below 0 or contains 0; at which budgets iSogCLR is above both rivals (the paper's
# ordering); and which way each gap and the correlation move from the smallest to the largest budget.

# %%
lines = []
for study, ladder in ladders.items():
    dataset, budgets = ladder["spec"].dataset, sorted(int(e) for e in ladder["frame"]["epochs"].unique())
    counterpart = PAPER_COUNTERPART.get(dataset, dataset)
    gap_status = {rival: statuses_by_budget(verdicts, study, dataset, f"{BETTER} > {rival}", budgets)
                  for rival in ladder["rivals"]}
    lines.append(f"**{dataset}** (studies.{study}, for {counterpart}; budgets {budgets} epochs, seeds "
                 f"{list(ladder['spec'].seeds)}): "
                 + ordering_sentence(verdicts, study, dataset, BETTER, ladder["rivals"], budgets))
    for rival in ladder["rivals"]:
        lines.append(f"- {status_sentence(gap_status[rival], f'The interval of {BETTER} − {rival}')} "
                     + trend_sentence(gap_summary(ladder["gaps"], rival), f"The mean gap {BETTER} − {rival}"))
    if ladder["correlation_summary"] is not None:
        tau_status = statuses_by_budget(verdicts, study, dataset, TAU_CLAIM, budgets)
        lines.append(f"- {status_sentence(tau_status, 'That tau grows with class frequency', CLAIM_WORDS)} "
                     + trend_sentence(ladder["correlation_summary"], "The mean Spearman(tau, class frequency)",
                                      unit="", digits=3))
display(Markdown("\n".join(lines) if lines else "No budget ladder in this profile (`studies.*.report: "
                                                 "budget_ladder`): nothing to compare."))

# %% [markdown]
# ## The hyper-parameter selection (validation split, same budget for every method)
#
# Each tuned method (`tuning.methods` in params.yaml) was given the same number of candidates from its own
# search space; every candidate was trained on the tuning dataset's training split minus a stratified
# validation part and scored by linear-probe top-1 on that part (mean over the tuning seeds); the best
# candidate's knobs are used by every `tuned: true` run (Table 1, the ladders). The test split is not read
# during the selection. The table gives each method's space, the candidates it tried, the selection, the
# validation accuracy of the selected, best and worst candidates, and the params.yaml value each selected knob
# replaced where it differs.
#
# How much a selection can say: the column `selection` compares the winner's margin over the runner-up, paired
# by seed, with the selection's own noise: `resolved` when its 95% t interval over the tuning seeds lies above 0,
# `within its noise` when another draw of the seeds could have picked the runner-up (with the seeds a paired t
# test would need to resolve a margin of that size at the spread measured), and `noise not measured` at one
# tuning seed. A selection within its noise is the budget's best guess, made the same way for every method: the
# candidates it could not tell apart differ by less than the interval's upper end.

# %%
from isogclr.analysis.tuning import candidates_table, selection_settings, selection_table, validation_words

if tuning_spec(params) is not None:
    selection = selection_table(params, tuning_dir)
    settings = selection_settings(params, tuning_dir)
    budgets = sorted(set(selection["candidates"]))
    same = (f"every method tried {budgets[0]} candidates" if len(budgets) == 1 else
            "the methods tried different numbers of candidates: "
            + ", ".join(f"{m} {n}" for m, n in selection["candidates"].items()))
    caption_selection = (f"Hyper-parameter selection, profile `{profile_name(params)}`: {same}, each trained "
                         f"{settings['epochs']} epochs on {settings['dataset']} {validation_words(settings)}, seeds "
                         f"{settings['seeds']}; validation top-1 (%), mean over seeds; the test split is not read.")
else:
    selection = pd.DataFrame({"note": ["no tuning section in params.yaml: every method runs with its own "
                                       "params.yaml knobs"]})
    caption_selection = f"Hyper-parameter selection, profile `{profile_name(params)}`: none."
write_table(selection, Path(reports_dir) / "tables" / "tuning_selection", caption_selection)
print(caption_selection)
selection

# %% [markdown]
# ### The selected hyper-parameters

# %%
if tuning_spec(params) is not None:
    replaced = {m: "as in params.yaml" if r == MISSING else f"params.yaml had {r}"
                for m, r in selection["replaces in params.yaml"].items()}
    display(Markdown("\n".join(f"- **{m}**: {r['selected']} (validation top-1 {r['val top-1 selected']:.2f}%; "
                               f"{replaced[m]})" for m, r in selection.iterrows())))
    display(candidates_table(params, tuning_dir).round(2))
