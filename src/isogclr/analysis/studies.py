"""Read the one-knob studies (``studies`` in params.yaml) back from their run directories.

A study run lives in ``studies/<study>/<method>-<value>-s<seed>/`` (:func:`isogclr.config.studies.study_run_dir`)
with ``metrics.json`` and ``train_log.csv``; learned temperatures are in ``artifacts/tau.csv``.
A missing run is an error naming the command that produces it: a table must come from runs.
Nothing read here holds wall clock: the runs' times are in the timing record ``timing.csv``
(:mod:`isogclr.epoch_times`), which no report shows (a report's bytes must not depend on the machine that reran it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..config.studies import study_reports, study_run_dir, study_spec


def studies_read_by(params: Mapping[str, Any], report: str, knob: str | None = None,
                    section: str = "studies") -> list[str]:
    """The names of the studies (``section`` in params.yaml: ``studies`` or ``bimodal_studies``) whose ``report``
    names or lists ``report``, in params.yaml's order; with ``knob``, only those of that knob."""
    return [name for name, spec in (params.get(section) or {}).items()
            if isinstance(spec, dict) and report in study_reports(spec.get("report"))
            and (knob is None or spec.get("knob") == knob)]


def study_run_path(root: Path | str, study: str, method: str, value: Any, seed: int,
                   command: str = "train") -> Path:
    """The directory of one study run under ``root``; a missing run names the ``command`` that writes it."""
    path = Path(root) / study_run_dir(study, method, value, seed).removeprefix("studies/")
    if not (path / "metrics.json").exists():
        raise FileNotFoundError(f"{path / 'metrics.json'} is missing: run `dvc repro study_{study}` (or `python -m "
                                f"isogclr {command} --study {study} --method {method} --value {value} --seed {seed}`)")
    return path


Extra = dict[Any, tuple[str, Any]]


def _points(params: dict[str, Any], study: str, root: Path | str, extra: Extra | None):
    """(method, value, seed, run dir) of a study's runs, plus the ``extra`` points taken from other studies."""
    spec = study_spec(params, study)
    for method in spec.methods:
        points = [(value, study, value) for value in spec.values]
        points += [(value, other, other_value) for value, (other, other_value) in (extra or {}).items()]
        for value, source, source_value in sorted(points, key=lambda p: p[0]):
            for seed in spec.seeds:
                yield method, value, seed, study_run_path(root, source, method, source_value, seed)


def collect_study(params: dict[str, Any], study: str, root: Path | str = "studies",
                  extra: Extra | None = None) -> pd.DataFrame:
    """One row per (method, value, seed): the study's knob value and the run's final metrics.

    ``extra`` adds points taken from another study with identical settings, keyed by the value
    they stand for: the tau_init study's 0.3 point is the rho study's 0.3 run, ``{0.3: ("rho", 0.3)}``
    (for every method of the study; check with :func:`same_settings`).
    """
    rows = [{"method": method, "value": value, "seed": seed, "run": str(path),
             **json.loads((path / "metrics.json").read_text())}
            for method, value, seed, path in _points(params, study, root, extra)]
    return pd.DataFrame(rows)


def per_value(study: pd.DataFrame, method: str, metric: str = "top1") -> dict[Any, dict[int, float]]:
    """``{value: {seed: metric}}`` of one method's runs in a study table (:func:`collect_study`), the input of
    the paired-by-seed verdicts (:func:`isogclr.analysis.verdicts.knob_effect`)."""
    rows = study[study["method"] == method]
    if rows.empty:
        raise ValueError(f"no run of {method!r} in this study (methods: {sorted(study['method'].unique())})")
    return {value: {int(s): float(v) for s, v in zip(g["seed"], g[metric], strict=True)}
            for value, g in rows.groupby("value", sort=True)}


def study_curves(params: dict[str, Any], study: str, root: Path | str = "studies",
                 extra: Extra | None = None) -> pd.DataFrame:
    """Per-epoch logs of every run of a study, without wall clock (its costs: ``step`` and ``samples_seen``).

    Columns: method, value, seed, epoch, step, samples_seen, loss and, where the study sets ``train.eval_every``,
    knn1_top1 (1-NN test accuracy; NaN on epochs without evaluation). A log with a column of seconds or samples/s
    is refused (a run's files hold no wall clock: :mod:`isogclr.epoch_times`).
    """
    frames = []
    for method, value, seed, path in _points(params, study, root, extra):
        log = pd.read_csv(path / "train_log.csv")
        clock = [c for c in log.columns if "seconds" in c or "per_s" in c]
        if clock:
            raise ValueError(f"{path / 'train_log.csv'}: wall-clock column(s) {clock}; a run's files hold no wall "
                             f"clock (rerun the study: `dvc repro study_{study}`)")
        frames.append(log.assign(method=method, value=value, seed=seed))
    return pd.concat(frames, ignore_index=True)


def study_temperatures(params: dict[str, Any], study: str, root: Path | str = "studies",
                       extra: Extra | None = None) -> pd.DataFrame:
    """Learned per-sample temperatures (``artifacts/tau.csv``) of every run of a study, with its value."""
    frames = [pd.read_csv(path / "artifacts" / "tau.csv").assign(method=method, value=value, seed=seed)
              for method, value, seed, path in _points(params, study, root, extra)]
    return pd.concat(frames, ignore_index=True)


def same_settings(config_a: Path | str, config_b: Path | str, ignore: tuple[str, ...] = ("run_id",)) -> list[str]:
    """The keys (dotted) where two runs' ``artifacts/config.json`` differ, ``ignore`` excepted.

    Used where a report takes a point from another study: the list must hold only the knob.
    """
    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            return {k: v for key, child in node.items() for k, v in flat(child, f"{prefix}{key}.").items()}
        return {prefix.rstrip("."): node}

    a = flat(json.loads(Path(config_a).read_text()))
    b = flat(json.loads(Path(config_b).read_text()))
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k not in ignore)


def check_differs_only(pairs: Iterable[tuple[Path | str, Path | str]], key: str) -> None:
    """Raise ``ValueError`` unless each pair of run directories' saved configs differ in ``key`` at most.

    Used where a report puts a study's runs beside runs of another stage (a second epoch budget
    beside Table 1's runs): the comparison is fair only if nothing else changed.
    """
    for a, b in pairs:
        diff = same_settings(Path(a) / "artifacts" / "config.json", Path(b) / "artifacts" / "config.json")
        if set(diff) - {key}:
            raise ValueError(f"{a} and {b}: the saved configs differ in {diff}, not only in {key}")
