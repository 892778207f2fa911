# %% [markdown]
# # Figures 2 and 3 (iSogCLR paper): the robust global contrastive loss of one anchor, solved exactly
#
# RGCL (eq. 6) weighs an anchor's m negatives by the worst-case distribution p in a KL ball of radius
# rho around uniform: max_p p.h - tau0 KL(p, 1/m) s.t. KL(p, 1/m) <= rho, where
# h_j = s(anchor, z_j) - s(anchor, positive). Its dual (eq. 7) is a contrastive loss with the anchor's own
# temperature tau = lambda + tau0 >= tau0 (lambda the multiplier of the KL constraint), and the optimum is
# p* = softmax(h / tau*). Nothing here is trained: both figures are exact solutions, by a generic
# constrained optimizer on the primal (SLSQP) and by a 1-D minimisation of the dual, which check each other.
#
# **The paper's claims** (Qiu et al., ICML 2023, Sec. 4):
# 1. (Figure 2, i) RGCL is hardness-aware: for h = [0, -1] and rho = 0.2 the harder negative gets the larger
#    weight, "p* = (0.8, 0.2)".
# 2. (Figure 2, ii) two equally hard negatives (h = [-0.5, -0.5]) get equal weights.
# 3. (Figure 2, iii) a larger rho makes p* more non-uniform (a higher degree of hardness-awareness).
# 4. (Figure 3, Sec. 4.2) an anchor with *frequent* semantics (many similar negatives) has a p* that would be
#    far from uniform, so its KL constraint binds hard and its optimal tau is *large*, which makes its RGCL p*
#    flatter than under a global temperature (CLIP's); an anchor with *rare* semantics gets a *small* tau.
#    The paper shows this with CC3M features of a cat and a bridge image (1000 random negatives; CLIP's global
#    tau 0.01, the bridge's learned tau 0.006).

# %% [markdown]
# <details><summary>Our setting: how this page's runs stand in for the paper's</summary>
#
# **Our Figure 3 construction**: we do not have CC3M features, so the anchors come from a population with
# known semantics: unit features around 10 random class centres with long-tailed class frequencies
# (head / tail = 100, like CIFAR-LT); 1000 random negatives; the frequent anchor is from the head class
# (~40% of the negatives share its class), the rare anchor from the tail class (almost none do).
# `rho_semantics` and `global_tau` are our training's iSogCLR rho and SimCLR/SogCLR tau, as the runs that are not
# tuned get them from `params_path` (`methods.isogclr`, `methods.simclr`); without it, the values below.
#
# </details>

# %% tags=["parameters"]
reports_dir = "reports"
params_path = None  # params.yaml: rho_semantics and global_tau from its methods
# Figure 2: the paper's example radius, and the KL boundaries drawn
rho = 0.2
rhos = [0.1, 0.2, 0.4]
# the smoothing KL weight, which is also the lower bound of tau (our tau_min)
tau0 = 0.05
# Figure 3: our iSogCLR rho and our SimCLR / SogCLR global temperature
rho_semantics = 0.3
global_tau = 0.2
negatives = 1000
seed = 0

# %%
from pathlib import Path

from isogclr.reports.notebook_run import setup_report

setup_report()  # cwd: the repository root, found from any folder; whole table cells; figures shown inline
print("Scale: exact computations (the RGCL optimum by a closed form and by two solvers), no training, no seeds.")
if params_path is not None:
    from isogclr.config.profiles import load_params
    from isogclr.config.sections import method_settings

    rho_semantics = method_settings(load_params(params_path), "isogclr")["rho"]
    global_tau = method_settings(load_params(params_path), "simclr")["tau"]
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.special import softmax

from isogclr.analysis.rgcl import (
    anchor_row,
    feasible_interval,
    optimum_row,
    primal_plane,
    rgcl_dual,
    rgcl_dual_objective,
    rgcl_verdicts,
    semantic_frequency_anchors,
)
from isogclr.analysis.tables import save_figure, write_table
from isogclr.analysis.verdicts import write_verdicts

figure2_h = {"h = [0, -1]": np.array([0.0, -1.0]), "h = [-0.5, -0.5]": np.array([-0.5, -0.5])}
paper_says = {("h = [0, -1]", rho): "p* = (0.8, 0.2) at rho = 0.2", ("h = [-0.5, -0.5]", rho): "p* equal weights"}
rows = []
for name, h in figure2_h.items():
    for r in sorted(set(rhos) | {rho}):
        rows.append({"case": f"Fig. 2, {name}", **optimum_row(h, r, tau0, paper_says.get((name, r), ""))})

# %% [markdown]
# ## Figure 2: contours of the RGCL objective over the weights of two negatives
#
# The background is the objective p.h - tau0 KL(p, 1/2) over the square of (p1, p2); the red line is the
# simplex p1 + p2 = 1, the dashed curves are KL(p, 1/2) = rho, and the markers are the exact optima p*
# (from the dual; the primal solver agrees, see the table).

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
for ax, (name, h) in zip(axes, figure2_h.items(), strict=True):
    grid = primal_plane(h, tau0)
    filled = ax.contourf(grid["p1"], grid["p2"], grid["objective"], levels=30, cmap="viridis")
    fig.colorbar(filled, ax=ax, shrink=0.85, label="p.h - tau0 KL(p, 1/2)")
    ax.plot([0, 1], [1, 0], color="red", lw=2, label="simplex p1 + p2 = 1")
    for i, r in enumerate(sorted(rhos)):
        style = ("--", "-.", ":")[i % 3]
        ax.contour(grid["p1"], grid["p2"], grid["kl"], levels=[r], colors="white", linestyles=style)
        lo, hi = feasible_interval(r)
        ax.plot([], [], color="black", ls=style, label=f"KL = {r} (feasible p1 in [{lo:.2f}, {hi:.2f}])")
        p = rgcl_dual(h, r, tau0).p
        ax.plot(*p, marker="*", ms=13 if r == rho else 9, color="orange" if r == rho else "white", mec="black")
    p = rgcl_dual(h, rho, tau0).p
    ax.annotate(f"p* = ({p[0]:.3f}, {p[1]:.3f})\nrho = {rho}", p, xytext=(0.45, 0.85), textcoords="axes fraction",
                color="white", arrowprops={"arrowstyle": "->", "color": "white"})
    ax.set_xlabel("p1 (weight of z1)")
    ax.set_ylabel("p2 (weight of z2)")
    ax.set_title(f"{name}, tau0 = {tau0}")
    ax.set_aspect("equal")
    ax.legend(loc="lower left", fontsize=7)
save_figure(fig, reports_dir, "rgcl_contours")

# %% [markdown]
# ## Figure 3: optimal p* for an anchor with frequent vs rare semantics
#
# Left: the RGCL optimum p* = softmax(h / tau*) of each anchor, negatives sorted by weight (m p_j = 1 is
# uniform). Middle: the same anchors under one global temperature, the paper's CLIP comparison. Right: the
# dual (eq. 7) as a function of tau, minimised at tau*. When the KL constraint binds, KL(p*) = rho for every
# anchor: tau* is whatever temperature brings that anchor's weights back to the KL ball, so an anchor whose
# negatives are more spread in hardness (many similar ones: frequent semantics) needs a larger tau.
# The rare anchor's few same-class negatives (false negatives, on real data) get the largest weights of all:
# a small tau keeps KL(p*) at rho by letting a handful of hard negatives dominate.

# %%
frequent, rare = semantic_frequency_anchors(m=negatives, seed=seed)
paper_fig3 = {"frequent": "cat image (CC3M): large tau, RGCL p* flatter than CLIP's",
              "rare": "bridge image (CC3M): learned tau 0.006 < CLIP's 0.01"}
for anchor in (frequent, rare):
    rows.append({"case": f"Fig. 3, {anchor.name} semantics",
                 **anchor_row(anchor, rho_semantics, tau0, global_tau, paper_fig3[anchor.name])})
table = pd.DataFrame(rows).set_index("case").astype(object).fillna("")
caption = (f"Exact RGCL optima (eq. 6 primal by SLSQP, eq. 7 dual by 1-D minimisation), tau0 = {tau0}. "
           f"Figure 3 anchors: {negatives} negatives from a long-tailed population with known classes, seed {seed}; "
           f"kl_at_global_tau is KL(softmax(h / {global_tau}), 1/m).")
write_table(table, Path(reports_dir) / "tables" / "rgcl_optimum", caption)
print(caption)
table

# %%
fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 3.8))
taus = np.geomspace(tau0, 2.0, 200)
for anchor, color in ((frequent, "tab:red"), (rare, "tab:blue")):
    dual = rgcl_dual(anchor.h, rho_semantics, tau0)
    label = f"{anchor.name} ({anchor.same_class.sum()} same-class negatives)"
    left.plot(np.sort(dual.p)[::-1] * negatives, color=color, label=f"{label}, tau* = {dual.tau:.3f}")
    middle.plot(np.sort(softmax(anchor.h / global_tau))[::-1] * negatives, color=color, label=label)
    right.plot(taus, rgcl_dual_objective(anchor.h, taus, rho_semantics, tau0), color=color, label=anchor.name)
    right.plot(dual.tau, dual.value, "o", color=color)
for ax, title in ((left, f"RGCL optimum (rho = {rho_semantics}): p* = softmax(h / tau*)"),
                  (middle, f"global temperature: softmax(h / {global_tau})")):
    ax.axhline(1.0, color="gray", ls=":", label="uniform 1/m")
    ax.set_yscale("log")
    ax.set_xlabel("negatives, sorted by weight")
    ax.set_ylabel("m * p_j")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
right.set_xscale("log")
right.set_xlabel("tau")
right.set_ylabel("dual objective (eq. 7)")
right.set_title("dual objective, optimum marked", fontsize=9)
right.legend(fontsize=7)
save_figure(fig, reports_dir, "rgcl_optimal_p")

# %% [markdown]
# ## Verdicts
#
# These are exact computations (closed forms and exact optima, no seeds, no sampling), so each verdict is the
# sign of a margin that is positive when the claim holds (**supported** > 0, **contradicted** < 0, a tie is
# **inconclusive**). Claim 1 is supported when the exact p* rounds to the paper's (0.8, 0.2) at one decimal
# (the paper gives one decimal); the exact value is in the evidence so the rounding is visible. Claim 4 is tested on the mechanism
# (tau* and the flatness of p*), not on the paper's CC3M numbers, which need its trained CLIP / iSogCLR
# features: those are "not testable at this scale".

# %%
verdicts = rgcl_verdicts(table, figure2_h, frequent, rare, rho=rho, rhos=rhos, tau0=tau0, rho_semantics=rho_semantics,
                         global_tau=global_tau, negatives=negatives)
write_verdicts(verdicts, reports_dir, "rgcl_analysis")
