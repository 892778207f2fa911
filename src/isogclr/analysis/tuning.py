"""The hyper-parameter selection on a validation split, read back from ``tuning/<method>/``.

Every tuned method (listed in ``tuning.methods`` of params.yaml; its search space is ``methods.<m>.search``: a
grid ``{knob: [values]}`` or a list of candidates ``[{knob: value}, ...]``) is given the same budget:
``tuning.candidates`` candidates from its space, each trained ``tuning.epochs`` epochs on ``tuning.dataset``
with ``tuning.validation_fraction`` of the training set held out, at ``tuning.seeds``; the test split is not
read. The image-text methods (``bimodal_tuning``) are selected the same way on held-out training pairs, scored
by the mean of IR and TR R@1/5/10 (``val_recall``; no ``dataset``). The tuning stage (:data:`TUNE_PIPELINE`) writes per
method

* ``candidates.csv``: ``candidate`` (int), one column per knob, ``seed``, the score (``val_top1`` or ``val_recall``;
  one row per candidate and seed);
* ``selected.json``: ``{"method", "dataset", "epochs", "validation_fraction", "seeds", "candidates", "space",
  "knobs": {knob: selected value}, <score>: mean over seeds}``.

Every function takes the selection ``section`` (``tuning``, the default, or ``bimodal_tuning``).

A missing file is an error naming it and the stage that writes it; a selection made with other settings than
params.yaml's ``tuning`` section (stale) is an error too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ..config.sections import method_settings
from ..config.selection import TUNING_DIR, selection_path
from ..config.tuning import CARVED, TUNING_SECTIONS, tuning_spec
from ..config.typed import ConfigError
from .stats import MAX_SEEDS, seeds_needed, t_interval
from .tables import MISSING

TUNE_PIPELINE = "pipelines/tune/dvc.yaml"  # pipelines/tune_bimodal/dvc.yaml for bimodal_tuning
CANDIDATES = "candidates.csv"
SETTINGS = ("dataset", "epochs", "validation_fraction", "seeds", "candidates", "validation")  # TuningSpec.record


def _missing(path: Path, method: str) -> FileNotFoundError:
    return FileNotFoundError(f"{path} is missing: it is written by the tuning stage tune@{method} of {TUNE_PIPELINE} "
                             f"(run `dvc repro {TUNE_PIPELINE}:tune@{method}`, or `python -m isogclr tune --method "
                             f"{method}`)")


def tuned_methods(params: dict[str, Any], section: str = "tuning") -> list[str]:
    """The tuned methods: the keys of ``<section>.methods`` (read by :func:`isogclr.config.tuning.tuning_spec`, the one
    reader of params.yaml's selection sections)."""
    spec = tuning_spec(params, section)
    if spec is None:
        raise ConfigError(f"{section}: not defined in params.yaml (no method was tuned)")
    return list(spec.methods)


def load_selected(params: dict[str, Any], method: str, tuning_dir: Path | str = TUNING_DIR,
                  section: str = "tuning") -> dict[str, Any]:
    """``tuning/<method>/selected.json``, checked against params.yaml's ``tuning`` section (same settings and
    search space: otherwise the selection is stale and an error says to rerun the tuning stage)."""
    path = selection_path(method, tuning_dir)  # the path the tuned runs read
    if not path.exists():
        raise _missing(path, method)
    selected = json.loads(path.read_text())
    spec = tuning_spec(params, section)
    expected = {} if spec is None else spec.record()
    if spec is not None and method in spec.methods:
        expected["space"] = spec.methods[method]
    stale = [f"{key}: {selected.get(key)!r} in {path}, {value!r} in params.yaml" for key, value in expected.items()
             if _plain(selected.get(key)) != _plain(value)]
    if stale:
        raise ValueError(f"{path} was made with other settings than params.yaml's {section} section ("
                         + "; ".join(stale) + f"): rerun `dvc repro {TUNE_PIPELINE}`")
    return selected


def _plain(value: Any) -> Any:
    """Lists and tuples alike, for comparing a JSON value with a YAML one."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def load_candidates(method: str, tuning_dir: Path | str = TUNING_DIR, section: str = "tuning") -> pd.DataFrame:
    """``tuning/<method>/candidates.csv`` (one row per candidate and seed); its required columns are checked."""
    path = Path(tuning_dir) / method / CANDIDATES
    if not path.exists():
        raise _missing(path, method)
    frame = pd.read_csv(path)
    missing = [c for c in ("candidate", "seed", TUNING_SECTIONS[section]) if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing} (columns: {list(frame.columns)})")
    return frame


def _knobs(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in ("candidate", "seed", *TUNING_SECTIONS.values())]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _per_candidate(frame: pd.DataFrame, score: str = "val_top1") -> pd.DataFrame:
    """One row per candidate: its knobs, the seeds it ran and its validation score (mean over seeds)."""
    knobs = _knobs(frame)
    grouped = frame.groupby("candidate", sort=True)
    out = grouped[knobs].first() if knobs else pd.DataFrame(index=grouped.size().index)
    out["seeds"] = grouped["seed"].nunique()
    out[score] = grouped[score].mean()
    return out.reset_index()


def selection_margin(frame: pd.DataFrame, score: str = "val_top1") -> dict[str, Any]:
    """The winner's margin over the runner-up, paired by seed, against the selection's own noise.

    ``frame``: a method's ``candidates.csv`` (one row per candidate and seed). The winner and the runner-up are
    the two best candidates by mean score; their per-seed differences d_s give the margin (mean of d_s) and its
    95% Student-t interval over the seeds both ran. ``selection`` says what that supports: ``resolved`` (the
    interval lies above 0: the winner's margin exceeds the selection's noise), ``within its noise`` (it contains
    0: another draw of the seeds could pick the runner-up; it then names the seeds a paired t test would need to
    detect a margin of this size at the spread of the d_s, :func:`~.stats.seeds_needed`), or ``noise not measured
    (one seed)``."""
    if frame["candidate"].nunique() < 2:
        return {"margin": math.nan, "low": math.nan, "high": math.nan, "selection": "one candidate"}
    means = frame.groupby("candidate")[score].mean().sort_values(ascending=False, kind="stable")
    winner, runner_up = means.index[:2]
    by_seed = frame.pivot_table(index="seed", columns="candidate", values=score)
    diffs = (by_seed[winner] - by_seed[runner_up]).dropna()
    if len(diffs) < 2:
        margin = float(diffs.mean()) if len(diffs) else math.nan
        return {"margin": margin, "low": math.nan, "high": math.nan, "selection": "noise not measured (one seed)"}
    interval = t_interval(diffs.tolist())
    if interval.low > 0:
        selection = "resolved"
    else:
        needed = seeds_needed(interval.estimate, float(diffs.std(ddof=1)))
        selection = (f"within its noise ({'more than ' + str(MAX_SEEDS) if needed is None else needed} seeds would "
                     "resolve a margin this size)")
    return {"margin": interval.estimate, "low": interval.low, "high": interval.high, "selection": selection}


def _margin_text(margin: dict[str, Any]) -> str:
    if math.isnan(margin["margin"]):
        return MISSING
    if math.isnan(margin["low"]):
        return f"{margin['margin']:+.2f}"
    return f"{margin['margin']:+.2f} [{margin['low']:+.2f}, {margin['high']:+.2f}]"


def params_value(params: dict[str, Any], method: str, knob: str) -> Any:
    """The value params.yaml gives ``knob`` of ``method`` in the runs that are not tuned: ``methods.<method>.<knob>``
    (a searched knob: its ``untuned`` candidate's), or the dotted key itself when ``knob`` has a dot
    (``train.optimizer.lr``); None when params.yaml does not set it (the default)."""
    node: Any = params if "." in knob else method_settings(params, method)
    for part in knob.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _order(value: Any) -> tuple[bool, Any]:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return (not number, value if number else str(value))


def space_text(space: dict[str, list] | list[dict[str, Any]]) -> str:
    """A search space in a table cell: ``tau ∈ {0.1, 0.2}; gamma ∈ {0.9}`` for a grid; for a list of candidates,
    ``4 listed over rho ∈ {0.3, 0.4}; eta ∈ {0.01, 0.03}`` (the values each knob takes among them)."""
    if isinstance(space, dict):
        return "; ".join(f"{k} ∈ {{{', '.join(_fmt(v) for v in vs)}}}" for k, vs in space.items())
    values: dict[str, list] = {}
    for candidate in space:
        for k, v in candidate.items():
            if not any(_same(v, u) for u in values.setdefault(k, [])):
                values[k].append(v)
    grid = "; ".join(f"{k} ∈ {{{', '.join(_fmt(v) for v in sorted(vs, key=_order))}}}" for k, vs in values.items())
    return f"{len(space)} listed over {grid}"


def candidates_table(params: dict[str, Any], tuning_dir: Path | str = TUNING_DIR,
                     section: str = "tuning") -> pd.DataFrame:
    """Every candidate of every tuned method, method by method: its knobs (a column per knob of any method;
    empty where the knob is not the method's), the seeds it ran, its validation top-1 (mean over seeds) and
    whether it was selected."""
    frames, score = [], TUNING_SECTIONS[section]
    for method in tuned_methods(params, section):
        selected = load_selected(params, method, tuning_dir, section)["knobs"]
        rows = _per_candidate(load_candidates(method, tuning_dir, section), score)
        rows["selected"] = [all(_same(r[k], v) for k, v in selected.items() if k in rows.columns)
                            for _, r in rows.iterrows()]
        frames.append(rows.assign(method=method))
    table = pd.concat(frames, ignore_index=True)
    first = ["method", "candidate"]
    last = ["seeds", score, "selected"]
    return table[first + [c for c in table.columns if c not in first + last] + last]


def selection_table(params: dict[str, Any], tuning_dir: Path | str = TUNING_DIR,
                    section: str = "tuning") -> pd.DataFrame:
    """One row per tuned method (index ``method``): its search space, the candidates tried, the seeds, the
    selected knobs, the validation top-1 of the selected (``selected.json``), best and worst candidate (mean over
    seeds, from ``candidates.csv``), the winner's margin over the runner-up with the selection's noise
    (:func:`selection_margin`), and the params.yaml value each selected knob replaced where it differs
    (``knob: params.yaml value → selected``; "default" where params.yaml does not set the knob)."""
    rows, score = [], TUNING_SECTIONS[section]
    label = {"val_top1": "val top-1", "val_recall": "val recall"}[score]
    for method in tuned_methods(params, section):
        selected = load_selected(params, method, tuning_dir, section)
        candidates = load_candidates(method, tuning_dir, section)
        per_candidate, margin = _per_candidate(candidates, score), selection_margin(candidates, score)
        space = selected.get("space") or {}
        replaced = []
        for knob, value in selected["knobs"].items():
            before = params_value(params, method, knob)
            if before is None or not _same(before, value):
                replaced.append(f"{knob}: {'default' if before is None else _fmt(before)} → {_fmt(value)}")
        rows.append({
            "method": method,
            "search space": space_text(space),
            "candidates": len(per_candidate),
            "seeds": ", ".join(str(s) for s in selected.get("seeds") or []),
            "selected": ", ".join(f"{k}={_fmt(v)}" for k, v in selected["knobs"].items()),
            f"{label} selected": round(float(selected[score]), 2),
            f"{label} best": round(float(per_candidate[score].max()), 2),
            f"{label} worst": round(float(per_candidate[score].min()), 2),
            "margin over runner-up": _margin_text(margin),
            "selection": margin["selection"],
            "replaces in params.yaml": "; ".join(replaced) or MISSING,
        })
    return pd.DataFrame(rows).set_index("method")


def validation_words(settings: dict[str, Any]) -> str:
    """How the candidates of :func:`selection_settings` were scored, in words for a caption."""
    if settings.get("validation", CARVED) == CARVED:
        return f"with {settings['validation_fraction']:.0%} of its training set held out for validation"
    return "on its whole training split, scored on its generated validation split (balanced, as the test split)"


def selection_settings(params: dict[str, Any], tuning_dir: Path | str = TUNING_DIR,
                       section: str = "tuning") -> dict[str, Any]:
    """The settings every method was selected with (dataset, epochs, validation fraction, seeds, candidates and
    ``validation``, "carved" where the record has none), read from the methods' ``selected.json``; an error when
    they differ between methods (not the same budget)."""
    settings = {m: {k: _plain(load_selected(params, m, tuning_dir, section).get(k, CARVED if k == "validation"
                                                                                else None)) for k in SETTINGS}
                for m in tuned_methods(params, section)}
    first = next(iter(settings.values()))
    differ = {m: s for m, s in settings.items() if s != first}
    if differ:
        raise ValueError(f"the tuned methods were not selected with the same settings: {settings}")
    return first
