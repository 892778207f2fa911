"""How much the testbed learns, and what its verdicts can say: the reference rows of a dataset, the calibration
thresholds, and the central verdicts before and after the calibration.

The reference rows come from the ``references`` stages (:mod:`isogclr.train.references`): per dataset,
``runs/references/<dataset>/metrics.json`` (chance, the raw-pixel probe, the random-init encoders' probes and their
floor) and the supervised reference's runs ``runs/supervised-<dataset>-s<seed>``. A method's *position* on a
dataset is where its top-1 stands between the floor (0: learned nothing a probe could not find without learning)
and the supervised reference (1: as good as training with the labels at the same budget).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

REFERENCE_ROWS = ("chance", "raw pixels", "random init", "supervised")
# the calibration's thresholds (iSogCLR replication, testbed issue): SimCLR learns (>= floor + 15) without
# saturating (<= supervised - 5); on Fashion-MNIST, where raw pixels are strong, it at least matches them
MIN_ABOVE_FLOOR, MIN_BELOW_SUPERVISED = 15.0, 5.0
VERDICT_COLUMNS = ("status", "effect", "ci_low", "ci_high", "mde")
# the reports whose verdicts are the central claims (Table 1, temperature vs frequency, ladders, image-text)
CENTRAL_REPORTS = ("table1_unimodal", "temperature_vs_frequency", "budget_ladder", "bimodal")


def _read(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run its stage (dvc repro) first")
    return json.loads(path.read_text())


def reference_rows(runs_dir: Path | str, datasets: Iterable[str], seeds: Iterable[int],
                   supervised: str = "supervised") -> pd.DataFrame:
    """One row per dataset: chance, raw pixels, random init (mean of the inits), floor and supervised (mean of
    ``seeds``) top-1 (%), with the supervised seeds found."""
    runs_dir, rows = Path(runs_dir), []
    for dataset in datasets:
        rows_ = _read(runs_dir / "references" / dataset / "metrics.json")
        inits = [value for key, value in rows_.items() if key.startswith("random_init_s")]
        sup = [_read(runs_dir / f"{supervised}-{dataset}-s{seed}" / "metrics.json")["top1"] for seed in seeds]
        rows.append({"dataset": dataset, "chance": rows_["chance"], "raw pixels": rows_["raw_pixels_top1"],
                     "random init": sum(inits) / len(inits), "floor": rows_["floor_top1"],
                     "supervised": sum(sup) / len(sup), "supervised seeds": len(sup)})
    return pd.DataFrame(rows).set_index("dataset")


def position(score: float, floor: float, supervised: float) -> float:
    """Where ``score`` stands between the no-learning ``floor`` (0) and the ``supervised`` reference (1); NaN when
    the supervised reference is not above the floor (nothing was learned even with the labels: no scale)."""
    if supervised <= floor:
        return float("nan")
    return (score - floor) / (supervised - floor)


def thresholds(method_top1: Mapping[str, float], references: pd.DataFrame,
               raw_pixels_only: Iterable[str] = ()) -> pd.DataFrame:
    """The calibration's thresholds for one method's mean top-1 per dataset (``method_top1``).

    Every dataset: at least :data:`MIN_ABOVE_FLOOR` points above the floor and :data:`MIN_BELOW_SUPERVISED` below
    the supervised reference; a dataset of ``raw_pixels_only`` (Fashion-MNIST, whose raw pixels a probe reads well)
    asks only that the method reach the raw-pixel probe, and that it stay below the supervised reference.
    ``window``: the width of the allowed range (``needs at most - needs at least``); below 0 no score can meet
    both (the supervised reference is too close to the floor at this budget: the testbed, not the method, fails).
    """
    rows, lenient = [], set(raw_pixels_only)
    for dataset, score in method_top1.items():
        ref = references.loc[dataset]
        need = ref["raw pixels"] if dataset in lenient else ref["floor"] + MIN_ABOVE_FLOOR
        ceiling = ref["supervised"] - MIN_BELOW_SUPERVISED
        rows.append({"dataset": dataset, "top1": score, "floor": ref["floor"], "supervised": ref["supervised"],
                     "needs at least": need, "needs at most": ceiling, "window": ceiling - need,
                     "position": position(score, ref["floor"], ref["supervised"]),
                     "holds": bool(need <= score <= ceiling)})
    return pd.DataFrame(rows).set_index("dataset")


def before_after(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """The central verdicts before and after, joined on (report, claim): status, effect, interval and minimum
    detectable effect of each side (a claim that one side does not have, such as a budget of the ladder that
    changed, is kept with the other side empty)."""
    keys = ["report", "claim"]

    def side(frame: pd.DataFrame, suffix: str) -> pd.DataFrame:
        frame = frame.copy()
        for column in VERDICT_COLUMNS:
            if column not in frame:
                frame[column] = float("nan")
        return frame[[*keys, *VERDICT_COLUMNS]].rename(columns={c: f"{c} {suffix}" for c in VERDICT_COLUMNS})

    joined = side(before, "before").merge(side(after, "after"), on=keys, how="outer")
    # the order of the new verdicts, then the claims only the old ones had
    rank = {key: i for i, key in enumerate(dict.fromkeys([*zip(after["report"], after["claim"], strict=True),
                                                          *zip(before["report"], before["claim"], strict=True)]))}
    joined["_rank"] = [rank[key] for key in zip(joined["report"], joined["claim"], strict=True)]
    return joined.sort_values("_rank").drop(columns="_rank").reset_index(drop=True)


def moved(before: pd.DataFrame, after: pd.DataFrame, tolerance: float = 0.005) -> pd.DataFrame:
    """The rows of :func:`before_after` whose status changed or whose effect moved by more than ``tolerance``
    points (a claim of one side only counts as moved)."""
    table = before_after(before, after)
    return table[table["status before"].ne(table["status after"])
                 | (table["effect before"] - table["effect after"]).abs().gt(tolerance)]


def _half_width(row: Mapping, side: str) -> float:
    return (row[f"ci_high {side}"] - row[f"ci_low {side}"]) / 2


def _why(row: Mapping) -> str:
    """Why one verdict's status moved, from what the two verdicts measured (see :func:`status_moves`)."""
    before, after = row["status before"], row["status after"]
    if pd.isna(before):
        return "a new claim: the earlier repro did not test it"
    if pd.isna(after):
        return "no longer tested: its runs left the profile"
    if after == "not testable":
        return f"a precondition failed: {row['qualifier after']}"
    if before == "not testable":
        return f"its precondition now holds (before: {row['qualifier before']})"
    shift, width = row["effect after"] - row["effect before"], _half_width(row, "before")
    seeds = ("" if row["n_seeds before"] == row["n_seeds after"] or pd.isna(row["n_seeds before"])
             else f" ({row['n_seeds before']:.0f} seeds, now {row['n_seeds after']:.0f})")
    widths = f"interval half-width {width:.2f} -> {_half_width(row, 'after'):.2f}{seeds}"
    if np.sign(row["effect before"]) != np.sign(row["effect after"]) and abs(shift) > width:
        return (f"the effect changed sign beyond its earlier interval ({row['effect before']:+.2f} -> "
                f"{row['effect after']:+.2f}); {widths}")
    kind = "beyond" if abs(shift) > width else "within"
    return f"the effect moved {shift:+.2f}, {kind} its earlier interval; {widths}"


def status_moves(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Every claim whose status moved between two sets of verdicts (or that one side lacks), with ``why``: a new
    or a dropped claim; a precondition that failed or now holds (its qualifier); else how far the effect moved
    against the earlier interval's half-width and how the interval's width changed (fewer or more seeds, a
    quieter or noisier testbed). Between two repros under the same verdict rules, an effect that moves beyond its
    earlier interval is another draw of the runs (a new rate, class order or machine), not a re-measurement of the
    same ones."""
    extra = ["qualifier", "n_seeds"]
    table = before_after(before, after)
    for frame, suffix in ((before, "before"), (after, "after")):
        cols = frame.reindex(columns=["report", "claim", *extra])
        table = table.merge(cols.rename(columns={c: f"{c} {suffix}" for c in extra}), on=["report", "claim"],
                            how="left")
    table = table[table["status before"].ne(table["status after"])].reset_index(drop=True)
    table["why"] = [_why(row) for row in table.to_dict("records")]
    return table[["report", "claim", "status before", "status after", "effect before", "effect after", "why"]]


def status_counts(frame: pd.DataFrame, column: str = "status") -> dict[str, int]:
    """How many verdicts have each status."""
    return {str(k): int(v) for k, v in frame[column].value_counts().items()}


def read_verdicts(reports_dir: Path | str, reports: Iterable[str]) -> pd.DataFrame:
    """The verdicts of ``reports`` (``reports/verdicts/<report>.csv``) in one frame with a ``report`` column."""
    frames = []
    for report in reports:
        frame = pd.read_csv(Path(reports_dir) / "verdicts" / f"{report}.csv")
        frame.insert(0, "report", report)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def method_scores(params: dict, method: str, datasets: Iterable[str], runs_dir: Path | str = "runs",
                  studies_dir: Path | str = "studies") -> pd.DataFrame:
    """``method``'s mean linear-probe top-1 on each dataset, from the runs that report it: a table section's grid
    (``table1``, ``table1_real``: its seeds), else a budget ladder on the dataset (its largest budget); with where
    it comes from. A dataset with no such run is left out."""
    from ..config.core import run_id
    from ..config.studies import study_run_dir

    rows = []
    for dataset in datasets:
        paths, source = [], ""
        for section in ("table1", "table1_real"):
            spec = params.get(section) or {}
            if method in spec.get("methods", []) and dataset in spec.get("datasets", []):
                paths = [Path(runs_dir) / run_id(method, dataset, s) for s in spec["seeds"]]
                source = f"{section}, {len(paths)} seed(s)"
                break
        if not paths:
            for name, spec in (params.get("studies") or {}).items():
                if spec.get("knob") == "train.epochs" and spec.get("dataset") == dataset and method in spec["methods"]:
                    value = max(spec["values"])
                    paths = [Path(studies_dir).parent / study_run_dir(name, method, value, s) for s in spec["seeds"]]
                    source = f"{name} at {value} epochs, {len(paths)} seed(s)"
                    break
        if paths:
            scores = [_read(path / "metrics.json")["top1"] for path in paths]
            rows.append({"dataset": dataset, "top1": sum(scores) / len(scores), "runs": source})
    return pd.DataFrame(rows, columns=["dataset", "top1", "runs"]).set_index("dataset")


def pairing(scores: pd.DataFrame, pairs: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """What pairing by seed buys each comparison of ``pairs`` (a, b) of ``scores`` (columns method, seed, top1 and
    any grouping columns, e.g. dataset, one row per run): over the seeds both ran, the Pearson correlation of the
    two methods' scores, the sd of the paired differences a - b, the sd an unpaired design would have
    (sqrt(var a + var b)) and their ratio (below 1: the shared initial weights, data order and augmentation draws
    of a seed cancel in the difference). Comparisons with fewer than 3 seeds are left out (the table may be
    empty, with its columns)."""
    groups = [c for c in scores.columns if c not in ("method", "seed", "top1")]
    rows = []
    for key, frame in scores.groupby(groups, sort=False) if groups else [((), scores)]:
        wide = frame.pivot_table(index="seed", columns="method", values="top1")
        for a, b in pairs:
            if a not in wide or b not in wide:
                continue
            both = wide[[a, b]].dropna()
            if len(both) < 3:
                continue
            unpaired = float(np.sqrt(both[a].var() + both[b].var()))
            paired = float((both[a] - both[b]).std())
            rows.append({**dict(zip(groups, key if isinstance(key, tuple) else (key,), strict=True)),
                         "comparison": f"{a} - {b}", "seeds": len(both),
                         "correlation": float(np.corrcoef(both[a], both[b])[0, 1]), "sd paired": paired,
                         "sd unpaired": unpaired, "ratio": paired / unpaired if unpaired > 0 else float("nan")})
    return pd.DataFrame(rows, columns=[*groups, "comparison", "seeds", "correlation", "sd paired", "sd unpaired",
                                       "ratio"])


def reference_runs(runs_dir: Path | str, datasets: Iterable[str], seeds: Iterable[int],
                   supervised: str = "supervised") -> pd.DataFrame:
    """The reference rows as runs (columns method, dataset, seed, top1) for the tables' builders
    (:func:`isogclr.analysis.table1.with_references`): ``chance`` and ``raw_pixels`` (seed 0), ``random_init`` per
    initialization seed, ``supervised`` per seed. A dataset without its references stage's output is left out."""
    runs_dir, rows = Path(runs_dir), []
    for dataset in datasets:
        path = runs_dir / "references" / dataset / "metrics.json"
        if not path.is_file():
            continue
        metrics = _read(path)
        rows += [{"method": "chance", "dataset": dataset, "seed": 0, "top1": metrics["chance"]},
                 {"method": "raw_pixels", "dataset": dataset, "seed": 0, "top1": metrics["raw_pixels_top1"]}]
        rows += [{"method": "random_init", "dataset": dataset, "seed": int(key[len("random_init_s"):-len("_top1")]),
                  "top1": value} for key, value in metrics.items() if key.startswith("random_init_s")]
        rows += [{"method": "supervised", "dataset": dataset, "seed": seed,
                  "top1": _read(runs_dir / f"{supervised}-{dataset}-s{seed}" / "metrics.json")["top1"]}
                 for seed in seeds]
    return pd.DataFrame(rows, columns=["method", "dataset", "seed", "top1"])
