"""The small-batch report (SogCLR Tables 2/3/6, EMC2 at a small and the standard batch, EMC2's burn-in): its claims.

Input frames are the studies' runs (:func:`~isogclr.analysis.studies.collect_study`: one row per method, knob value
``value``, seed, with ``top1`` and ``knn1_top1``). Every comparison is paired by seed
(:func:`~isogclr.analysis.verdicts.compare` / :func:`~isogclr.analysis.verdicts.best_of`), beside the paper's effect
where its tables have one (``paper``: the transcribed ``sogclr_batch`` table: table, method, batch, epochs, top1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from .preconditions import above_floor, mean_of, premise, require
from .verdicts import NO_LEARNING_MARGIN, Verdict, best_of, compare, effect, not_testable, paper_difference, per_seed

TABLE6_METHODS = ("simclr", "flatclr", "simo", "sogclr")  # SogCLR Table 6's small-batch methods
EMC2_BASELINES = ("simclr", "sogclr", "negcache")  # the EMC2 paper's rivals
EMC2_METRICS = (("top1", "linear probe"), ("knn1_top1", "1-NN"))


def batch_verdicts(by_batch: pd.DataFrame, values: Sequence[int], paper: pd.DataFrame,
                   floor: float | None = None, headline: pd.DataFrame | None = None,
                   equal_steps: pd.DataFrame | None = None, steps_budget: str = "",
                   runs: Sequence[str] = ("", "", "")) -> list[Verdict]:
    """SogCLR Tables 2/3: SogCLR > SimCLR at each batch size of ``values`` (the paper's effect where its Table 3, 100
    epochs, has that batch size), and the headline as an interaction (:func:`headline_verdict`, ``floor``: the best
    no-learning score of the study's dataset).

    ``headline``: the runs of the headline at a budget of its own (a study where the large batch learns; default
    ``by_batch``), at equal epochs; ``equal_steps``: runs at the smallest of their batch sizes for as many steps
    as ``headline``'s largest batch takes (fewer epochs), the same interaction at equal steps beside it
    (``steps_budget``: the sentence that says so). ``runs``: the runs each kind of row reads (the batch study's, the
    headline's, the equal-steps one's: ``Verdict.runs``), "" for none named."""
    paper3 = paper[(paper.table == 3) & (paper.epochs == 100)]
    out = [compare(f"SogCLR Tables 2/3: SogCLR > SimCLR at batch {b}",
                   ("sogclr", per_seed(by_batch, method="sogclr", value=b)),
                   ("simclr", per_seed(by_batch, method="simclr", value=b)),
                   paper_effect=paper_difference(paper3, "sogclr", "simclr", number="top1", batch=b)) for b in values]
    out = [replace(v, runs=runs[0] or None) for v in out]
    head = by_batch if headline is None else headline
    sizes = sorted(set(head.value)) if headline is not None else list(values)
    out.append(replace(headline_verdict(head, sizes, paper3, floor), runs=(runs[1] or runs[0]) or None))
    if equal_steps is not None:
        small, large = min(sizes), max(sizes)
        frame = pd.concat([head[head.value == large], equal_steps[equal_steps.value == small]])
        out.append(replace(headline_verdict(frame, [small, large], paper3, floor, label="equal steps",
                                            budget=steps_budget or "equal steps"), runs=runs[2] or None))
    return out


def headline_verdict(by_batch: pd.DataFrame, values: Sequence[int], paper3: pd.DataFrame,
                     floor: float | None = None, margin: float = NO_LEARNING_MARGIN, label: str = "",
                     budget: str = "") -> Verdict:
    """SogCLR's headline as the paper means it: shrinking the batch costs SogCLR less than SimCLR. The effect per
    seed is the interaction

        [SogCLR(b_small) - SogCLR(b_large)] - [SimCLR(b_small) - SimCLR(b_large)]

    (b_small, b_large: the smallest and largest of ``values``), with its Student-t interval over seeds; the paper's
    effect is the same difference between the smallest and largest batch of its Table 3 at 100 epochs (``paper3``,
    the transcribed rows method, batch, top1). Equal epochs, as the paper: b_small takes b_large / b_small
    times the steps; ``label`` names another budget the runs share (equal steps: b_small for fewer epochs), a
    claim of its own, and ``budget`` says it in the evidence. Preconditions: the large-batch runs learned (both
    means above ``floor + margin``, when a floor is given) and the paper's premise holds, SimCLR drops as its
    batch shrinks (SimCLR(b_large) - SimCLR(b_small) supported)."""
    small, large = min(values), max(values)
    sog_s, sog_l = (per_seed(by_batch, method="sogclr", value=b) for b in (small, large))
    sim_s, sim_l = (per_seed(by_batch, method="simclr", value=b) for b in (small, large))
    seeds = sorted(set(sog_s) & set(sog_l) & set(sim_s) & set(sim_l))
    paper_at = paper3.set_index(["method", "batch"])["top1"].to_dict()
    corners = [("sogclr", paper3.batch.min()), ("sogclr", paper3.batch.max()), ("simclr", paper3.batch.min()),
               ("simclr", paper3.batch.max())]
    a, b, c, d = (paper_at.get(k) for k in corners)
    paper_effect = None if None in (a, b, c, d) else (a - b) - (c - d)
    old = compare("", (f"sogclr b={small}", sog_s), (f"simclr b={large}", sim_l))
    interaction = effect(
        f"SogCLR: shrinking the batch from {large} to {small} costs SogCLR less than SimCLR "
        f"(the interaction{', ' + label if label else ''})",
        {s: (sog_s[s] - sog_l[s]) - (sim_s[s] - sim_l[s]) for s in seeds},
        what=f"(sogclr b={small} - b={large}) - (simclr b={small} - b={large})", paper_effect=paper_effect,
        detail=f"{budget or f'equal epochs, b={small} takes {large // small}x the steps of b={large}'}; SogCLR "
               f"b={small} - SimCLR b={large} (the former row): {_estimate(old)}")
    dropped = compare(f"SimCLR drops from b={large} to b={small}", (f"simclr b={large}", sim_l),
                      (f"simclr b={small}", sim_s))
    checks = [premise(f"SimCLR drops as its batch shrinks (b={large} - b={small})", dropped)]
    if floor is not None:
        checks.insert(0, above_floor({f"simclr b={large}": mean_of(sim_l), f"sogclr b={large}": mean_of(sog_l)},
                                     floor, margin))
    return require(interaction, *checks)


def final_steps(curves: pd.DataFrame) -> dict[int, int]:
    """The optimizer steps a study's runs took, per batch size (``curves``: :func:`~isogclr.analysis.studies.
    study_curves`; the runs of one batch size take the same steps)."""
    return {int(b): int(s) for b, s in curves.groupby("value")["step"].max().items()}


def _estimate(verdict: Verdict) -> str:
    """A verdict's effect and interval in a line of evidence; one seed has no interval, no seed no effect."""
    if verdict.effect is None:
        return "no seed in common"
    if verdict.ci_low is None:
        return f"{verdict.effect:+.2f} (one seed: no interval)"
    return f"{verdict.effect:+.2f} [{verdict.ci_low:+.2f}, {verdict.ci_high:+.2f}]"


def table6_verdict(small_all: pd.DataFrame, batch: int, paper: pd.DataFrame) -> Verdict:
    """SogCLR Table 6: SogCLR beats every small-batch method of :data:`TABLE6_METHODS` that ran (``small_all``: the
    runs at ``batch``), beside the paper's Table 6 (100 epochs) differences."""
    paper6 = paper[(paper.table == 6) & (paper.epochs == 100)].set_index("method")["top1"]
    present = [m for m in TABLE6_METHODS if m in set(small_all.method)]
    return best_of(f"SogCLR Table 6: SogCLR is the best small-batch method (b = {batch})",
                   ("sogclr", per_seed(small_all, method="sogclr")),
                   {m: per_seed(small_all, method=m) for m in present if m != "sogclr"},
                   paper_effects={m: paper6.get("sogclr", float("nan")) - paper6.get(m, float("nan"))
                                  for m in present})


def emc2_verdicts(runs: pd.DataFrame, batch: int, require_all: bool = False) -> list[Verdict]:
    """EMC2 beats SimCLR, SogCLR and Negative Cache at ``batch`` (``runs``: every method's runs at that batch), per
    metric of :data:`EMC2_METRICS`. ``require_all``: without EMC2 or any of the three baselines, each claim is not
    testable (naming the runs there are); otherwise the baselines that ran are the rivals."""
    present = set(runs.method)
    baselines = [m for m in EMC2_BASELINES if m in present]
    out = []
    for metric, label in EMC2_METRICS:
        claim = f"EMC2: EMC2 beats SimCLR, SogCLR and Negative Cache at b = {batch} ({label})"
        if require_all and ("emc2" not in present or len(baselines) < len(EMC2_BASELINES)):
            out.append(not_testable(claim, f"runs at b = {batch}: {sorted(present)} (the batch_size study must "
                                           "include this batch size)"))
            continue
        out.append(best_of(claim, ("emc2", per_seed(runs, metric, method="emc2")),
                           {m: per_seed(runs, metric, method=m) for m in baselines}))
    return out


def burn_in_verdict(burn_all: pd.DataFrame, batch: int) -> Verdict:
    """EMC2 Figure 4: a burn-in of P = ``batch`` - 1 beats none (P = 0), paired by seed (``burn_all``: EMC2's runs
    with the burn-in as ``value``); not testable without a P = 0 run."""
    if 0 not in set(burn_all.value):
        return not_testable("EMC2 Figure 4: accuracy improves with burn-in P up to about b",
                            "P = 0 is not among studies.burn_in.values")
    return compare("EMC2 Figure 4: a burn-in of about b beats no burn-in",
                   (f"P={batch - 1}", per_seed(burn_all, method="emc2", value=batch - 1)),
                   ("P=0", per_seed(burn_all, method="emc2", value=0)))


def curve_verdicts(curves: pd.DataFrame, batches: Sequence[int]) -> list[Verdict]:
    """EMC2's curves against samples seen, at each of ``batches`` (``curves``: rows method, value (the batch),
    seed, samples_seen, knn1_top1, every evaluation): per run, the 1-NN top-1 averaged over its evaluations (all
    runs of one batch evaluate at the same samples seen, so this is the area under the curve against samples seen
    divided by its length); "EMC2 beats SimCLR, SogCLR and Negative Cache" paired by seed
    (:func:`~isogclr.analysis.verdicts.best_of`). Against wall-clock time: not testable (no runs record a clock)."""
    out = []
    for b in batches:
        here = curves[curves.value == b].groupby(["method", "seed"], as_index=False)["knn1_top1"].mean()
        claim = f"EMC2 curves: EMC2's 1-NN accuracy over the samples seen beats its baselines at b = {b}"
        present = set(here.method)
        if "emc2" not in present:
            out.append(not_testable(claim, f"no runs: no EMC2 curve at b = {b} ({sorted(present)})"))
            continue
        out.append(best_of(claim, ("emc2", per_seed(here, "knn1_top1", method="emc2")),
                           {m: per_seed(here, "knn1_top1", method=m) for m in EMC2_BASELINES if m in present}))
    out.append(not_testable("EMC2 curves: EMC2's accuracy against wall-clock time beats its baselines",
                            "no runs: no run records a clock per evaluation (a rerun must be byte-identical); the "
                            "stages' wall times (timing.csv) cover whole studies, not one method's curve"))
    return out
