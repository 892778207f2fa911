"""The small-batch report (SogCLR Tables 2/3/6, EMC2 at a small and the standard batch, EMC2's burn-in): its claims.

Input frames are the studies' runs (:func:`~isogclr.analysis.studies.collect_study`: one row per method, knob value
``value``, seed, with ``top1`` and ``knn1_top1``). Every comparison is paired by seed
(:func:`~isogclr.analysis.verdicts.compare` / :func:`~isogclr.analysis.verdicts.best_of`), beside the paper's effect
where its tables have one (``paper``: the transcribed ``sogclr_batch`` table: table, method, batch, epochs, top1).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .verdicts import Verdict, best_of, compare, not_testable, paper_difference, per_seed

TABLE6_METHODS = ("simclr", "flatclr", "simo", "sogclr")  # SogCLR Table 6's small-batch methods
EMC2_BASELINES = ("simclr", "sogclr", "negcache")  # the EMC2 paper's rivals
EMC2_METRICS = (("top1", "linear probe"), ("knn1_top1", "1-NN"))


def batch_verdicts(by_batch: pd.DataFrame, values: Sequence[int], paper: pd.DataFrame) -> list[Verdict]:
    """SogCLR Tables 2/3: SogCLR > SimCLR at each batch size of ``values`` (the paper's effect where its Table 3, 100
    epochs, has that batch size), and SogCLR at the smallest batch matches or beats SimCLR at the largest (paper:
    SogCLR at its smallest batch minus SimCLR at its largest)."""
    paper3 = paper[(paper.table == 3) & (paper.epochs == 100)]
    out = [compare(f"SogCLR Tables 2/3: SogCLR > SimCLR at batch {b}",
                   ("sogclr", per_seed(by_batch, method="sogclr", value=b)),
                   ("simclr", per_seed(by_batch, method="simclr", value=b)),
                   paper_effect=paper_difference(paper3, "sogclr", "simclr", number="top1", batch=b)) for b in values]
    smallest, largest = min(values), max(values)
    paper_small = (paper3[(paper3.method == "sogclr") & (paper3.batch == paper3.batch.min())].top1.max()
                   - paper3[(paper3.method == "simclr") & (paper3.batch == paper3.batch.max())].top1.max())
    out.append(compare(f"SogCLR: SogCLR at batch {smallest} matches or beats SimCLR at batch {largest}",
                       (f"sogclr b={smallest}", per_seed(by_batch, method="sogclr", value=smallest)),
                       (f"simclr b={largest}", per_seed(by_batch, method="simclr", value=largest)),
                       paper_effect=paper_small))
    return out


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
