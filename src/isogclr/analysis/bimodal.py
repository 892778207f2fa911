"""The bimodal report: our image-text runs beside the iSogCLR paper's Tables 2/5/6/7 (and SogCLR's Table 4).

Our evaluation sets stand in for the paper's by role only (same protocol, generated data):

* ``retrieval_a`` ~ MSCOCO: its images follow the training (Zipf) cluster distribution, like a test
  set from the same long-tailed web-like distribution;
* ``retrieval_b`` ~ Flickr30K: its images are uniform over the clusters (rare semantics as common
  as frequent ones);
* ``synth10`` ~ CIFAR10, ``synth100`` ~ CIFAR100 (zero-shot classification with prompt templates);
  ImageNet1K has no counterpart.

Its claims, each a function returning verdicts (:mod:`.verdicts`; paired by seed): :func:`ordering_verdicts`
(Tables 2/5/6/7), :func:`table4_verdicts` (SogCLR Table 4), :func:`convergence_verdict` (Figure 1, right),
:func:`large_tau_verdict` (Figure 7, right), :func:`autograd_tau_verdict` (appendix C.3) and
:func:`tau_frequency_verdict` (section 6.3); :func:`bimodal_verdicts` gathers them in the report's order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import spearmanr

from ..config.bimodal import bimodal_run_id, bimodal_study_spec
from ..dataset_specs import GENERATED
from .correlations import at_bound_reason
from .groups import frequency_verdict_over_groups, group_table
from .preconditions import Check, require, saturated
from .studies import study_run_path
from .tables import cell, mean_std
from .temperatures import frame_bounds, run_taus
from .verdicts import NO_LEARNING_MARGIN, Verdict, combine, compare, effect, not_testable, paper_difference, per_seed

# the generated pairs' evaluation sets -> the paper's datasets they stand in for (isogclr.dataset_specs.GENERATED)
PAPER_COUNTERPART = dict(GENERATED["synthetic_pairs"].counterparts)
RETRIEVAL_METRICS = ("ir_r1", "ir_r5", "ir_r10", "tr_r1", "tr_r5", "tr_r10")
ZEROSHOT_METRICS = ("top1", "top3", "top5")


def _run_dir(runs_dir: Path | str, method: str, seed: int) -> Path:
    path = Path(runs_dir) / bimodal_run_id(method, seed)
    if not (path / "metrics.json").exists():
        raise FileNotFoundError(f"{path / 'metrics.json'} is missing: run `dvc repro` (or `python -m isogclr "
                                f"train-bimodal --method {method} --seed {seed}`)")
    return path


# the no-learning rows a run records with ``train-bimodal --untrained-baseline``: metrics.json prefix -> row name
NO_LEARNING_ROWS = {"chance_": "chance", "untrained_": "untrained pair"}


def _metric_rows(run: Path, prefix: str = "") -> list[dict[str, Any]]:
    """One row (dataset, metric, value) per number of a run's ``metrics.json`` (``retrieval_a_ir_r1``, ...): the
    run's own (``prefix`` ""), or one of its no-learning rows (``prefix`` a key of :data:`NO_LEARNING_ROWS`)."""
    rows = []
    for key, value in json.loads((run / "metrics.json").read_text()).items():
        if prefix and not key.startswith(prefix) or not prefix and key.startswith(tuple(NO_LEARNING_ROWS)):
            continue
        key = key[len(prefix):]
        metric = next(x for x in (*RETRIEVAL_METRICS, *ZEROSHOT_METRICS) if key.endswith(f"_{x}"))
        rows.append({"dataset": key[:-len(metric) - 1], "metric": metric, "value": value})
    return rows


def collect_bimodal_references(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """The no-learning rows (:data:`NO_LEARNING_ROWS`: chance, the untrained pair of encoders) recorded by the runs
    of ``methods`` x ``seeds``, as a long table like :func:`collect_bimodal_runs` whose ``method`` is the row's
    name, one row per (seed, dataset, metric): the mean over the methods' runs of that seed (the untrained pair
    depends on the seed only). Empty when no run recorded them."""
    rows = [{"method": name, "seed": s, **row} for prefix, name in NO_LEARNING_ROWS.items() for m in methods
            for s in seeds for row in _metric_rows(_run_dir(runs_dir, m, s), prefix)]
    frame = pd.DataFrame(rows, columns=["method", "seed", "dataset", "metric", "value"])
    return frame.groupby(["method", "seed", "dataset", "metric"], as_index=False, sort=False)["value"].mean()


def no_learning_floors(references: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(dataset, metric) -> the better of chance and the untrained pair's mean over seeds: a comparison's floor."""
    if references.empty:
        return {}
    means = references.groupby(["dataset", "metric", "method"])["value"].mean()
    return {(str(d), str(m)): float(v) for (d, m), v in means.groupby(level=["dataset", "metric"]).max().items()}


def collect_bimodal_runs(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """Long table: method, seed, dataset, metric, value, one row per number of each run's ``metrics.json``."""
    return pd.DataFrame([{"method": m, "seed": s, **row} for m in methods for s in seeds
                         for row in _metric_rows(_run_dir(runs_dir, m, s))])


def collect_bimodal_study(params: dict[str, Any], study: str, root: Path | str = "studies") -> pd.DataFrame:
    """The long table of :func:`collect_bimodal_runs` for the runs of ``bimodal_studies.<study>``,
    with the knob's value of each run in column ``knob``."""
    spec = bimodal_study_spec(params, study)
    return pd.DataFrame([{"method": m, "knob": v, "seed": s, **row}
                         for m in spec.methods for v in spec.values for s in spec.seeds
                         for row in _metric_rows(study_run_path(root, study, m, v, s, command="train-bimodal"))])


def budget_table(runs: pd.DataFrame, cells: list[tuple[str, str]], paper: pd.DataFrame,
                 paper_rows: dict[str, str]) -> pd.DataFrame:
    """Rows: methods. Columns: our mean ± std over seeds of each (dataset, metric) cell per number of
    epochs (column ``epochs`` of ``runs``), then the paper's number per (batch size, epochs) of its row
    ``paper_rows.get(method, method)`` (SogCLR Table 4: columns method, batch_size, epochs, top1)."""
    table = pd.DataFrame(index=pd.Index(runs["method"].unique(), name="method"))
    for dataset, metric in cells:
        for epochs in sorted(runs["epochs"].unique()):
            mine = runs[(runs.dataset == dataset) & (runs.metric == metric) & (runs.epochs == epochs)]
            stats = mean_std(mine, "value", by=("method",)).set_index("method")
            table[f"ours {dataset} {metric} {epochs} ep"] = [cell(*stats.loc[m, ["mean", "std", "seeds"]])
                                                              for m in table.index]
    for (batch, epochs), theirs in paper.groupby(["batch_size", "epochs"]):
        top1 = theirs.set_index("method")["top1"]
        table[f"paper top1 b={batch} {epochs} ep"] = [f"{top1[r]:.1f}" if r in top1 else "—"
                                                      for r in (paper_rows.get(m, m) for m in table.index)]
    return table


def side_by_side(runs: pd.DataFrame, paper: pd.DataFrame, metrics: tuple[str, ...],
                 paper_rows: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows (dataset, method, source: ours / paper); columns ``metrics``; cells mean ± std over seeds.

    The paper row of a method is ``paper_rows.get(method, method)``; methods the paper does not
    report get no paper row. ``dataset`` reads ``ours (paper counterpart)``.
    """
    paper_rows = paper_rows or {}
    runs = runs[runs["metric"].isin(metrics)]
    stats = mean_std(runs, "value", by=("dataset", "method", "metric")).set_index(["dataset", "method", "metric"])
    rows, index = [], []
    order = list(PAPER_COUNTERPART)
    datasets = sorted(runs["dataset"].unique(), key=lambda d: (order.index(d) if d in order else len(order), d))
    for dataset in datasets:
        counterpart = PAPER_COUNTERPART.get(dataset)
        label = f"{dataset} ({counterpart or 'no counterpart'})"
        theirs = paper[paper["dataset"] == counterpart].set_index(["method", "metric"])
        for method in runs["method"].unique():
            rows.append([cell(*stats.loc[(dataset, method, m), ["mean", "std", "seeds"]]) for m in metrics])
            index.append((label, method, "ours"))
            row = paper_rows.get(method, method)
            if (row, metrics[0]) in theirs.index:
                rows.append([cell(theirs.loc[(row, m), "mean"], theirs.loc[(row, m), "std"]) for m in metrics])
                index.append((label, method, f"paper ({row})"))
    return pd.DataFrame(rows, columns=list(metrics),
                        index=pd.MultiIndex.from_tuples(index, names=["dataset", "method", "source"]))


def ordering_verdict(runs: pd.DataFrame, claim: str, better: str, worse: str, dataset: str, metric: str,
                     paper: pd.DataFrame | None = None, paper_rows: dict[str, str] | None = None,
                     floor: float | None = None, margin: float = NO_LEARNING_MARGIN) -> Verdict:
    """"``better`` beats ``worse``" on one of our numbers, paired by seed (:func:`.verdicts.compare`: mean
    paired difference with its 95% t interval over seeds). The paper's effect is its ``better - worse`` on the
    counterpart of ``dataset`` (``paper``: the transcribed Tables 2/5/6/7; ``paper_rows`` maps our method to
    the paper's row), None where the paper has no such number. ``floor``: the metric's no-learning score
    (chance, or the untrained pair of encoders); both methods within ``margin`` of it: not testable (no
    learning)."""
    rows = paper_rows or {}
    paper_effect = None if paper is None else paper_difference(
        paper, rows.get(better, better), rows.get(worse, worse), dataset=PAPER_COUNTERPART.get(dataset),
        metric=metric)
    return compare(f"{claim} [{dataset} {metric}]", (better, per_seed(runs, "value", method=better,
                                                                      dataset=dataset, metric=metric)),
                   (worse, per_seed(runs, "value", method=worse, dataset=dataset, metric=metric)),
                   paper_effect=paper_effect, floor=floor, margin=margin)


def load_train_logs(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """Every run's ``train_log.csv`` with its method and seed."""
    frames = []
    for m in methods:
        for s in seeds:
            df = pd.read_csv(_run_dir(runs_dir, m, s) / "train_log.csv")
            frames.append(df.assign(method=m, seed=s))
    return pd.concat(frames, ignore_index=True)


def load_bimodal_taus(runs_dir: Path | str, methods: list[str], seeds: list[int]) -> pd.DataFrame:
    """``artifacts/tau.csv`` of every (method, seed) run that has per-pair temperatures, with method, seed and the
    run's temperature bounds (:func:`.temperatures.recorded_bounds`: columns ``tau_min``, ``tau_max``)."""
    frames = []
    for m in methods:
        for s in seeds:
            run = _run_dir(runs_dir, m, s)
            if (run / "artifacts" / "tau.csv").exists():
                frames.append(run_taus(run, method=m, seed=s))
    if not frames:
        raise FileNotFoundError(f"no tau.csv under {runs_dir} for {methods}: only losses with per-pair "
                                "temperatures (isogclr_bimodal, clip_individual_tau) write one")
    return pd.concat(frames, ignore_index=True)


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rho, NaN (not a warning) when either side is constant: a temperature pinned at its bound
    for every pair has no correlation with anything."""
    if x.nunique() < 2 or y.nunique() < 2:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def tau_frequency_correlation(taus: pd.DataFrame) -> pd.DataFrame:
    """Per (method, seed): Spearman correlation of tau_image / tau_text with the pair's cluster frequency,
    over pairs and over cluster means (NaN where the temperatures are all equal), and the mean tau of
    mismatched vs matched pairs."""
    rows = []
    for (method, seed), df in taus.groupby(["method", "seed"], sort=False):
        row = {"method": method, "seed": seed, "pairs": len(df)}
        per_cluster = df.groupby("cluster").agg(tau_image=("tau_image", "mean"), tau_text=("tau_text", "mean"),
                                                frequency=("cluster_frequency", "first"))
        for col in ("tau_image", "tau_text"):
            row[f"spearman_{col}_pairs"] = _spearman(df[col], df["cluster_frequency"])
            row[f"spearman_{col}_clusters"] = _spearman(per_cluster[col], per_cluster["frequency"])
            row[f"{col}_mean"] = df[col].mean()
        row["tau_image_mismatched"] = df.loc[df["mismatched"] == 1, "tau_image"].mean()
        row["tau_image_matched"] = df.loc[df["mismatched"] == 0, "tau_image"].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def tau_extremes(taus: pd.DataFrame, k: int, column: str = "tau_image") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The k pairs with the largest and the k with the smallest learned ``column`` (one run's taus)."""
    return taus.nlargest(k, column), taus.nsmallest(k, column)


# --- the claims -----------------------------------------------------------------------------------------------

Floors = Mapping[tuple[str, str], float]  # (dataset, metric) -> the no-learning score (chance, untrained encoders)


def ordering_verdicts(runs: pd.DataFrame, methods: Sequence[str], paper: pd.DataFrame,
                      paper_rows: dict[str, str] | None = None, floors: Floors | None = None) -> list[Verdict]:
    """The orderings of iSogCLR Tables 2/5/6/7 that the ``methods`` run allow (``runs``: the long table of
    :func:`collect_bimodal_runs`), each :func:`ordering_verdict`: iSogCLR > CLIP on IR@1 and TR@1 of both
    retrieval sets; iSogCLR > SogCLR and > CyCLIP on IR@1; iSogCLR > CLIP zero-shot on CIFAR100 and the paper's
    exception, CLIP > iSogCLR on CIFAR10; and ImageNet1K, not testable. ``floors``: (dataset, metric) ->
    no-learning score."""
    floors = floors or {}
    has = set(methods).issuperset
    out: list[Verdict] = []

    def order(claim: str, better: str, worse: str, dataset: str, metric: str) -> Verdict:
        return ordering_verdict(runs, claim, better, worse, dataset, metric, paper, paper_rows,
                                floor=floors.get((dataset, metric)))

    if has({"isogclr_bimodal", "clip"}):
        for dataset in ("retrieval_a", "retrieval_b"):
            for metric in ("ir_r1", "tr_r1"):
                out.append(order("Tables 2/5/6: iSogCLR > CLIP on retrieval", "isogclr_bimodal", "clip", dataset,
                                 metric))
    for baseline in ("sogclr_bimodal", "cyclip"):
        if has({"isogclr_bimodal", baseline}):
            for dataset in ("retrieval_a", "retrieval_b"):
                out.append(order(f"Tables 2/5/6: iSogCLR > {baseline} on retrieval", "isogclr_bimodal", baseline,
                                 dataset, "ir_r1"))
    if has({"isogclr_bimodal", "clip"}):
        out.append(order("Table 7: iSogCLR > CLIP zero-shot on CIFAR100", "isogclr_bimodal", "clip", "synth100",
                         "top1"))
        out.append(order("Table 7: CLIP > iSogCLR zero-shot on CIFAR10 (the paper's exception)", "clip",
                         "isogclr_bimodal", "synth10", "top1"))
    out.append(not_testable("Tables 2/7: iSogCLR best zero-shot on ImageNet1K",
                            "at this scale: the generated data has no 1000-class counterpart"))
    return out


def clip_saturated(logs: pd.DataFrame, epochs: int, max_gain: float = 1.0,
                   metric: str = "retrieval_a_ir_r1") -> Check:
    """The precondition of "InfoNCE loses accuracy with more epochs" (SogCLR Table 4, a saturation effect over 60
    epochs): CLIP's curve has stopped rising by ``epochs`` (the short budget), i.e. its per-epoch ``metric`` in the
    training logs (mean over seeds) gained at most ``max_gain`` points over the second half of the short budget."""
    curve = logs[logs.method == "clip"].groupby("epoch")[metric].mean()
    gain = float(curve.get(epochs, curve.iloc[-1]) - curve.get(max(1, epochs // 2), curve.iloc[0]))
    return saturated("CLIP", "the short budget", gain, max_gain,
                     f"of {metric} from epoch {max(1, epochs // 2)} to {epochs}")


def table4_verdicts(budgets: pd.DataFrame, cells: Sequence[tuple[str, str]], paper4: pd.DataFrame,
                    floors: Floors | None = None, logs: pd.DataFrame | None = None,
                    sources: Mapping[int, str] | None = None) -> list[Verdict]:
    """SogCLR Table 4 on each (dataset, metric) of ``cells`` (``budgets``: the long table with ``epochs``; both
    ``sogclr_bimodal`` and ``clip`` needed, else no verdict): two-way SogCLR > CLIP at the shortest budget, and
    "CLIP loses accuracy from the short to the long budget, SogCLR does not" (both parts paired by seed,
    :func:`~isogclr.analysis.verdicts.combine`). ``paper4``: the transcribed table (method, batch_size, epochs,
    top1); its batch-128 rows at 30 and 60 epochs are the paper's effects. ``logs`` (the central runs' training
    logs): the second claim requires :func:`clip_saturated` at the short budget. ``sources`` (epochs -> the runs
    of that budget): each row names the budgets it reads (``Verdict.runs``)."""
    if not {"sogclr_bimodal", "clip"} <= set(budgets.method):
        return []
    floors = floors or {}
    paper = paper4.query("batch_size == 128").set_index(["method", "epochs"])["top1"]
    short, long = int(budgets.epochs.min()), int(budgets.epochs.max())
    out = []
    for dataset, metric in cells:
        def at(method: str, epochs: int = short, dataset: str = dataset, metric: str = metric) -> dict[int, float]:
            return per_seed(budgets, "value", method=method, dataset=dataset, metric=metric, epochs=epochs)

        named = {e: f"{e} epochs: {sources[e]}" if sources and e in sources else f"{e} epochs" for e in (short, long)}
        out.append(replace(compare(
            f"SogCLR Table 4: two-way SogCLR > CLIP (InfoNCE) at a small batch [{dataset} {metric}]",
            ("sogclr_bimodal", at("sogclr_bimodal")), ("clip", at("clip")),
            paper_effect=paper["sogclr", 30] - paper["clip", 30], floor=floors.get((dataset, metric))),
            runs=named[short]))
        loses = combine(
            f"SogCLR Table 4: InfoNCE (CLIP) loses accuracy from {short} to {long} epochs, SogCLR does not "
            f"[{dataset} {metric}]",
            [compare(f"CLIP {short} ep > {long} ep", (f"clip {short} ep", at("clip")),
                     (f"clip {long} ep", at("clip", long)), paper_effect=paper["clip", 30] - paper["clip", 60]),
             compare(f"SogCLR {long} ep >= {short} ep", (f"sogclr {long} ep", at("sogclr_bimodal", long)),
                     (f"sogclr {short} ep", at("sogclr_bimodal")),
                     paper_effect=paper["sogclr", 60] - paper["sogclr", 30])])
        loses = replace(loses, runs=f"{named[short]}; {named[long]}")
        out.append(require(loses, clip_saturated(logs, short)) if logs is not None else loses)
    batches = sorted(int(b) for b in paper4.batch_size.unique())
    out.append(not_testable(f"SogCLR Table 4: two-way SogCLR's advantage over CLIP holds at batch {batches}",
                            "no runs: every image-text run uses one batch size (bimodal.batch_size); the Table 4 "
                            "budget runs at a second batch size would answer it"))
    return out


def convergence_verdict(logs: pd.DataFrame, metric: str = "retrieval_a_ir_r1") -> Verdict:
    """Figure 1 (right), "iSogCLR converges faster than CLIP": the per-epoch ``metric`` of the training logs
    (:func:`load_train_logs`) averaged over epochs per run (an area under the curve), paired by seed."""
    curve = logs.groupby(["method", "seed"], as_index=False)[metric].mean()
    return compare("Figure 1 (right): iSogCLR converges faster than CLIP [retrieval_a IR@1 averaged over epochs]",
                   ("isogclr_bimodal", per_seed(curve, metric, method="isogclr_bimodal")),
                   ("clip", per_seed(curve, metric, method="clip")))


def large_tau_verdict(runs: pd.DataFrame, tau: float | None) -> Verdict:
    """Figure 7 (right), "CLIP with a fixed large tau fails to converge": per seed, half of CLIP's retrieval_a IR@1
    minus ``clip_large_tau``'s (fails = below half of CLIP's); ``tau``: the large temperature, for the evidence."""
    large = per_seed(runs, "value", method="clip_large_tau", dataset="retrieval_a", metric="ir_r1")
    tuned = per_seed(runs, "value", method="clip", dataset="retrieval_a", metric="ir_r1")
    return effect("Figure 7 (right): CLIP with a fixed large tau fails to converge",
                  {s: 0.5 * tuned[s] - large[s] for s in set(large) & set(tuned)},
                  what="half of CLIP's retrieval_a IR@1 minus clip_large_tau's",
                  detail=f"clip_large_tau (tau {tau}) vs clip, fails = below half of CLIP's")


def autograd_tau_verdict(logs: pd.DataFrame, tau_init: float, method: str = "clip_individual_tau") -> Verdict:
    """Appendix C.3, "per-pair temperatures learned by autograd drift upward": per seed, the final epoch's mean
    tau_image minus ``tau_init``; the evidence says whether both means rise every epoch in every seed."""
    drift = logs[logs.method == method]
    last = drift[drift.epoch == drift.epoch.max()]
    rises = all(g.sort_values("epoch")[c].is_monotonic_increasing for _, g in drift.groupby("seed")
                for c in ("tau_image_mean", "tau_text_mean"))
    return effect("Appendix C.3: per-pair temperatures learned by autograd drift upward",
                  {s: v - tau_init for s, v in zip(last.seed, last.tau_image_mean, strict=True)},
                  what="final mean tau_image - tau_init", unit="",
                  detail=f"tau_init {tau_init}; the means rise every epoch in every seed: {rises}")


TAU_FREQUENCY_CLAIM = "Section 6.3 / Figures 6, 10, 11: pairs with frequent semantics learn larger tau"


def tau_frequency_verdict(taus: pd.DataFrame, method: str = "isogclr_bimodal", claim: str = TAU_FREQUENCY_CLAIM
                          ) -> Verdict | None:
    """Section 6.3 / Figures 6, 10, 11, "pairs with frequent semantics learn larger tau", judged over cluster x seed
    cells with the cluster's identity held fixed (:func:`.groups.frequency_verdict_over_groups`): where every seed
    gives a cluster the same frequency, identity and frequency are one thing and it is not testable; each seed's
    Spearman over clusters and the pair-level Spearman are in the evidence as description. None when ``taus``
    has no run of ``method``. Image temperatures mostly at one of
    the runs' bounds (:func:`.temperatures.frame_bounds`): not testable (at its bound), with the fraction."""
    mine = taus[taus.method == method]
    if not len(mine):
        return None
    pairs = {s: _spearman(g.tau_image, g.cluster_frequency) for s, g in mine.groupby("seed")}
    verdict = frequency_verdict_over_groups(
        claim, {s: group_table(g, "cluster", "cluster_frequency", "tau_image") for s, g in mine.groupby("seed")},
        value="tau_image", group="cluster", unit="tau",
        description="over pairs (description only, not the verdict): " + ", ".join(
            f"seed {s} {r:+.3f}" for s, r in pairs.items()))
    bounds = frame_bounds(mine)
    degenerate = at_bound_reason(mine.tau_image, bounds) if bounds else None
    if degenerate is None:
        return verdict
    return replace(verdict, status="not testable", p_rerun=None, evidence=f"{degenerate}; {verdict.evidence}")


def bimodal_verdicts(runs: pd.DataFrame, methods: Sequence[str], paper: pd.DataFrame, paper_rows: dict[str, str],
                     budgets: pd.DataFrame, cells: Sequence[tuple[str, str]], paper4: pd.DataFrame,
                     logs: pd.DataFrame, taus: pd.DataFrame, large_tau: float | None = None,
                     tau_init: float = 0.01, floors: Floors | None = None,
                     sources: Mapping[int, str] | None = None) -> list[Verdict]:
    """Every claim of the bimodal report that the ``methods`` run allow, in the report's order:
    :func:`ordering_verdicts`, :func:`table4_verdicts`, :func:`convergence_verdict` (iSogCLR and CLIP),
    :func:`large_tau_verdict` (``clip_large_tau`` and CLIP), :func:`autograd_tau_verdict` (``clip_individual_tau``)
    and :func:`tau_frequency_verdict`."""
    has = set(methods).issuperset
    out = ordering_verdicts(runs, methods, paper, paper_rows, floors)
    out += table4_verdicts(budgets, cells, paper4, floors, logs, sources) if has({"sogclr_bimodal", "clip"}) else []
    if has({"isogclr_bimodal", "clip"}):
        out.append(convergence_verdict(logs))
    if has({"clip_large_tau", "clip"}):
        out.append(large_tau_verdict(runs, large_tau))
    if "clip_individual_tau" in methods:
        out.append(autograd_tau_verdict(logs, tau_init))
    frequency = tau_frequency_verdict(taus)
    return out + ([frequency] if frequency is not None else [])
