"""The Table 1 report (iSogCLR Tables 1, 3/4, 10): its tables and its verdicts, from the runs' numbers.

Input frames are those of :func:`~isogclr.analysis.tables.collect_runs`: one row per (method, dataset, seed) with
``top1``. The claims:

* :func:`table1_verdicts`: the orderings of :data:`PAIRS` on every dataset of a table section (paper's Table 1:
  SogCLR > SimCLR, iSogCLR > SogCLR, iSogCLR > SimCLR, and the same with the authors' conventions);
* :func:`all_methods_verdicts`: iSogCLR beats every baseline (Tables 1/3/4) and TaU+SimCLR (Table 10);
* :func:`epochs_verdicts`: every method gains from the longer budget, and iSogCLR is the best at each budget
  (Tables 3/4; the second budget is the study :func:`budget_study` names).

Every comparison is :func:`~isogclr.analysis.verdicts.compare` (paired by seed, 95% Student t, minimum detectable
effect). With reference rows (:func:`no_learning_floors`), a comparison whose two methods stay within
:data:`~isogclr.analysis.verdicts.NO_LEARNING_MARGIN` of the better no-learning probe is not testable (no learning).

Reference rows (:data:`REFERENCES`: chance, a linear probe on raw pixels, the probe of a randomly initialized
encoder; and the supervised reference, a method run of its own) are rows of the same frame shape as the methods'
(``method`` = the reference's name); :func:`with_references` shows them below the methods, labelled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..config.sections import TableSpec
from ..config.typed import ConfigError
from .preconditions import above_floor, require, room_below
from .stats import paired_differences
from .studies import studies_read_by
from .tables import MISSING, PAPER_COUNTERPART, cell, mean_std, paper_numbers, side_by_side
from .verdicts import NO_LEARNING_MARGIN, Verdict, best_of, compare, effect, not_testable, paper_difference, per_seed

PAPER_TABLE = "isogclr_table1"
REPORT = "table1_unimodal"  # the report of these tables (``studies.<name>.report`` of the budget study)
PAPER_EPOCHS_TABLE = "isogclr_table34"
# the orderings tested on every dataset of a table section (better, worse), when both methods were run
PAIRS = (("sogclr", "simclr"), ("isogclr", "sogclr"), ("isogclr", "simclr"), ("sogclr_official", "simclr"),
         ("isogclr_official", "sogclr_official"), ("isogclr_official", "simclr"))
ISOGCLR = ("isogclr", "isogclr_official")  # the claimed method (two conventions); every other method is a rival
TAU_SIMCLR = "tau_simclr"  # Table 10's rival (temperature predicted per input), not one of the baselines
# reference rows, in the order shown: label of each (the supervised reference is a method run, shown as a method)
REFERENCES = {"chance": "reference: chance", "raw_pixels": "reference: linear probe on raw pixels",
              "random_init": "reference: linear probe of a random-init encoder",
              "supervised": "reference: supervised (same encoder and budget)"}
NO_LEARNING = ("raw_pixels", "random_init")  # the probes that learn nothing: their best is a comparison's floor


def no_learning_floors(reference: pd.DataFrame | None, metric: str = "top1") -> dict[str, float]:
    """Per dataset, the best mean over seeds of the no-learning probes (:data:`NO_LEARNING`) in ``reference``
    (rows method, dataset, seed, ``metric``); {} without reference rows."""
    if reference is None or reference.empty:
        return {}
    rows = reference[reference["method"].isin(NO_LEARNING)]
    return {str(d): float(v) for d, v in rows.groupby(["dataset", "method"])[metric].mean()
            .groupby(level="dataset").max().items()}


def table1_verdicts(frame: pd.DataFrame, table: TableSpec, paper: pd.DataFrame | None = None,
                    floors: Mapping[str, float] | None = None, margin: float = NO_LEARNING_MARGIN) -> list[Verdict]:
    """The Table 1 orderings (:data:`PAIRS`) that the methods of ``frame`` allow, per dataset of ``table``: paired
    by seed, beside the paper's difference on the counterpart dataset (``paper``: the transcribed Table 1 by
    default). ``floors``: dataset -> best no-learning score (:func:`no_learning_floors`)."""
    paper = paper_numbers(PAPER_TABLE) if paper is None else paper
    floors = floors or {}
    out, row = [], table.paper_row
    for dataset in table.datasets:
        counterpart = PAPER_COUNTERPART.get(dataset, dataset)
        for better, worse in PAIRS:
            if {better, worse} <= set(frame.method):
                out.append(compare(f"Table 1: {better} > {worse} on {dataset} ({counterpart})",
                                   (better, per_seed(frame, method=better, dataset=dataset)),
                                   (worse, per_seed(frame, method=worse, dataset=dataset)),
                                   paper_effect=paper_difference(paper, row(better), row(worse),
                                                                 dataset=counterpart),
                                   floor=floors.get(dataset), margin=margin))
    return out


def longtail_gain_verdict(frame: pd.DataFrame, table: TableSpec, long_tailed: str, balanced: str,
                          better: str = "isogclr", worse: str = "simclr", paper: pd.DataFrame | None = None
                          ) -> Verdict:
    """iSogCLR's claim (iii), "the gains are larger on long-tailed data": an interaction, per seed

        [better - worse on ``long_tailed``] - [better - worse on ``balanced``]

    (the same seed's runs on both datasets), with its Student-t interval over seeds; the paper's effect is the same
    difference on the counterparts (CIFAR10-LT and CIFAR10 in Table 1: (iSogCLR - SimCLR) on CIFAR10-LT minus on
    CIFAR10)."""
    claim = f"Table 1 (iii): {better}'s gain over {worse} is larger on {long_tailed} than on {balanced}"
    datasets = set(frame.dataset)
    if not {long_tailed, balanced} <= datasets or not {better, worse} <= set(frame.method):
        return not_testable(claim, f"no runs: needs {better} and {worse} on {long_tailed} and {balanced}")
    paper = paper_numbers(PAPER_TABLE) if paper is None else paper
    gap = {d: paired_differences(per_seed(frame, method=better, dataset=d), per_seed(frame, method=worse, dataset=d))
           for d in (long_tailed, balanced)}
    seeds = sorted(set(gap[long_tailed]) & set(gap[balanced]))
    row = table.paper_row
    paper_gaps = [paper_difference(paper, row(better), row(worse), dataset=PAPER_COUNTERPART.get(d, d))
                  for d in (long_tailed, balanced)]
    return effect(claim, {s: gap[long_tailed][s] - gap[balanced][s] for s in seeds},
                  what=f"({better} - {worse}) on {long_tailed} - on {balanced}",
                  paper_effect=None if None in paper_gaps else paper_gaps[0] - paper_gaps[1],
                  detail=f"{better} - {worse}: " + "; ".join(
                      f"{d} {sum(gap[d][s] for s in seeds) / len(seeds):+.2f}" for d in (long_tailed, balanced))
                  if seeds else "")


def ceilings(reference: pd.DataFrame | None, metric: str = "top1") -> dict[str, float]:
    """Per dataset, the mean over seeds of the supervised reference (same encoder and budget, trained with labels)
    in ``reference``: the ceiling of a linear probe at this scale; {} without reference rows."""
    if reference is None or reference.empty:
        return {}
    rows = reference[reference["method"] == "supervised"]
    return {str(d): float(v) for d, v in rows.groupby("dataset")[metric].mean().items()}


def _in_regime(verdict: Verdict, means: Mapping[str, float], floor: float | None, ceiling: float | None,
               margin: float) -> Verdict:
    """``verdict`` under the preconditions that the compared methods learned (every mean above ``floor + margin``)
    and that the ceiling leaves room for the paper's effect (ceiling - the best mean >= |paper's effect|)."""
    checks = [above_floor(means, floor, margin)] if floor is not None else []
    if ceiling is not None and verdict.paper_effect is not None and not math.isnan(verdict.paper_effect):
        checks.append(room_below(means, ceiling, verdict.paper_effect))
    return require(verdict, *checks) if checks else verdict


def all_methods_verdicts(every: pd.DataFrame, methods: Sequence[str], datasets: Sequence[str], table: TableSpec,
                         paper: pd.DataFrame | None = None, floors: Mapping[str, float] | None = None,
                         ceiling: Mapping[str, float] | None = None, margin: float = NO_LEARNING_MARGIN
                         ) -> list[Verdict]:
    """Per dataset and per iSogCLR variant run there (:data:`ISOGCLR`): "beats all baselines" (Tables 1/3/4; every
    method of ``methods`` but the iSogCLR variants and TaU+SimCLR, :func:`~isogclr.analysis.verdicts.best_of`) and,
    when TaU+SimCLR was run, "beats TaU+SimCLR" (Table 10). ``table`` maps a method to its paper row. ``floors`` /
    ``ceiling`` (dataset -> no-learning score / supervised reference): the preconditions of :func:`_in_regime`."""
    paper = paper_numbers(PAPER_TABLE) if paper is None else paper
    floors, ceiling = floors or {}, ceiling or {}
    out = []
    baselines = [m for m in methods if m not in ISOGCLR and m != TAU_SIMCLR]
    for dataset in datasets:
        counterpart = PAPER_COUNTERPART.get(dataset, dataset)
        here = every[every.dataset == dataset]
        for name in [m for m in ISOGCLR if m in set(here.method)]:
            mine = (name, per_seed(here, method=name))
            paper_row = table.paper_row(name)
            means = {m: float(here[here.method == m].top1.mean()) for m in [name, *baselines]}
            out.append(_in_regime(best_of(
                f"Tables 1/3/4: {name} beats all {len(baselines)} baselines on {dataset}", mine,
                {m: per_seed(here, method=m) for m in baselines},
                paper_effects={m: paper_difference(paper, paper_row, m, dataset=counterpart) for m in baselines}),
                means, floors.get(dataset), ceiling.get(dataset), margin))
            if TAU_SIMCLR in set(here.method):
                pair = {m: float(here[here.method == m].top1.mean()) for m in (name, TAU_SIMCLR)}
                out.append(_in_regime(compare(
                    f"Table 10: {name} > TaU+SimCLR on {dataset}", mine,
                    (TAU_SIMCLR, per_seed(here, method=TAU_SIMCLR)),
                    paper_effect=paper_difference(paper, paper_row, TAU_SIMCLR, dataset=counterpart)),
                    pair, floors.get(dataset), ceiling.get(dataset), margin))
    return out


def paper_budgets(paper34: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The paper's Tables 3/4 rows on the counterpart of ``dataset``."""
    return paper34[paper34.dataset == PAPER_COUNTERPART.get(dataset, dataset)]


def epochs_table(budgets: pd.DataFrame, methods: Sequence[str], paper34: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """Rows: ``methods``. Columns: our mean ± std over seeds after each number of epochs (``budgets``: rows method,
    epochs, seed, top1), then the paper's number after each of its budgets on the counterpart of ``dataset``
    (``paper34``: the transcribed Tables 3/4)."""
    by_budget = mean_std(budgets, by=("method", "epochs"))
    counterpart = PAPER_COUNTERPART.get(dataset, dataset)
    theirs = paper_budgets(paper34, dataset)
    rows = []
    for method in methods:
        row = {"method": method}
        for e in sorted(int(e) for e in by_budget.epochs.unique()):
            r = by_budget[(by_budget.method == method) & (by_budget.epochs == e)].iloc[0]
            row[f"ours {e} ep"] = cell(r["mean"], r["std"], r["seeds"])
        for e in sorted(int(e) for e in theirs.epochs.unique()):
            r = theirs[(theirs.method == method) & (theirs.epochs == e)]
            row[f"paper {counterpart} {e} ep"] = cell(r["mean"].iloc[0], r["std"].iloc[0]) if len(r) else MISSING
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def budget_study(params: Mapping[str, Any]) -> str:
    """The study that gives Tables 3/4 their second pre-training budget: the one whose knob is ``train.epochs``
    and whose ``report`` lists this report (the mini profile's ``ladder_synth10_lt``, which is also a budget
    ladder; the paper profile's ``epochs``). Its other budget is Table 1's runs."""
    names = studies_read_by(params, REPORT, knob="train.epochs")
    if len(names) != 1:
        raise ConfigError(f"studies.*.report: Tables 3/4 read one study with knob train.epochs and report "
                          f"{REPORT}; found {names or 'none'}")
    return names[0]


def epochs_verdicts(budgets: pd.DataFrame, methods: Sequence[str], dataset: str, paper34: pd.DataFrame,
                    study_epochs: Sequence[int]) -> list[Verdict]:
    """Tables 3/4 on ``dataset`` from ``budgets`` (rows method, epochs, seed, top1): each method gains from the
    longest over the shortest budget; and, at each budget of the study (``study_epochs``; Table 1's own budget
    has its verdicts in :func:`table1_verdicts`), iSogCLR beats each other method. Our budgets stand for the
    paper's in order (shorter for shorter) when there are as many of each; otherwise the per-budget orderings
    have no paper number."""
    theirs = paper_budgets(paper34, dataset)
    ours_epochs = sorted(int(e) for e in budgets.epochs.unique())
    paper_epochs = sorted(int(e) for e in theirs.epochs.unique())
    shortest, longest = ours_epochs[0], ours_epochs[-1]
    paper_budget = dict(zip(ours_epochs, paper_epochs, strict=True)) if len(ours_epochs) == len(paper_epochs) else {}
    out = []
    for method in methods:
        out.append(compare(f"Tables 3/4: {method} gains from {longest} over {shortest} epochs on {dataset}",
                           (f"{method} {longest} ep", per_seed(budgets, method=method, epochs=longest)),
                           (f"{method} {shortest} ep", per_seed(budgets, method=method, epochs=shortest)),
                           paper_effect=paper_difference(theirs[theirs.method == method], paper_epochs[-1],
                                                         paper_epochs[0], rows_by="epochs")))
    for e in sorted(int(v) for v in study_epochs):
        for other in [m for m in methods if m != "isogclr"]:
            if "isogclr" in methods:
                out.append(compare(f"Tables 3/4: isogclr > {other} after {e} epochs on {dataset}",
                                   ("isogclr", per_seed(budgets, method="isogclr", epochs=e)),
                                   (other, per_seed(budgets, method=other, epochs=e)),
                                   paper_effect=paper_difference(theirs, "isogclr", other,
                                                                 epochs=paper_budget.get(e))))
    return out


def with_references(table: pd.DataFrame, reference: pd.DataFrame | None, metric: str = "top1") -> pd.DataFrame:
    """``table`` (rows: methods; columns ``ours <dataset>`` and ``paper <counterpart>``, as
    :func:`~isogclr.analysis.tables.side_by_side` builds it) with one row per reference of ``reference`` below
    the methods, labelled (:data:`REFERENCES`, in that order; another name keeps its own): our mean ± std over
    seeds per dataset where the reference has a number, ``—`` elsewhere (the paper columns included). A method
    row named like a reference (the supervised reference, run as a method) is moved below, labelled. Without
    reference rows or such a method, ``table`` unchanged."""
    stats = mean_std(reference, metric) if reference is not None and not reference.empty else \
        pd.DataFrame(columns=["method", "dataset", "mean", "std", "seeds"])
    present = set(stats.method) | (set(table.index) & set(REFERENCES))
    names = [n for n in REFERENCES if n in present] + [n for n in stats.method.unique() if n not in REFERENCES]
    if not names:
        return table
    moved = table.loc[[m for m in table.index if m in names]]
    out = table.drop(index=moved.index)
    rows = {}
    for name in names:
        row = dict(moved.loc[name]) if name in moved.index else {}
        for column in table.columns:
            dataset = column.removeprefix("ours ")
            mine = stats[(stats.method == name) & (stats.dataset == dataset)]
            if column.startswith("ours ") and len(mine):
                r = mine.iloc[0]
                row[column] = cell(r["mean"], r["std"], r["seeds"])
            row.setdefault(column, MISSING)
        rows[REFERENCES.get(name, f"reference: {name}")] = row
    extra = pd.DataFrame.from_dict(rows, orient="index", columns=table.columns)
    return pd.concat([out, extra]).rename_axis(table.index.name)


def table1_table(ours: pd.DataFrame, table: TableSpec, reference: pd.DataFrame | None = None,
                 paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 1: methods x (our mean ± std per dataset, the paper's number on its counterpart) from ``ours``
    (:func:`~isogclr.analysis.tables.mean_std` of the runs), the reference rows below (:func:`with_references`)."""
    paper = paper_numbers(PAPER_TABLE) if paper is None else paper
    return with_references(side_by_side(ours, paper, table.paper_rows), reference)
