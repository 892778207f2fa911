"""What a profile costs before it runs: each planned run's training work, and the schedule of a forced repro
projected from the stage times of the last one.

A run's **work** is its optimizer steps and the samples they process (``steps * batch``, ``steps = epochs *
floor(n / batch)``: the loaders drop the last partial batch), with ``n`` the training split as its run reads it
(a long-tailed subset, a selection's carved part). A stage's seconds are modelled, per **kind** of run
(``unimodal``: an image encoder; ``bimodal``: image and text encoders), as

    seconds = sum over its runs of  overhead + per_sample * samples + per_step * steps

(``overhead``: the process, the data and the evaluation of one run; ``per_step``: what a step costs whatever
its batch, so a small batch costs more per sample). The three rates of a kind are fit by least squares
(non-negative) to the stage families of a record (``reports/repro_stages.csv``: every stage of a forced repro,
on one machine, two at a time), their runs read from the plan of the same params. The other stages keep their
recorded seconds: those that train nothing of the plan (the data, the no-learning probes, the reports) and the EMC2
convergence study, whose planned runs are not priced (its seconds are mostly the exact evaluations of its objective,
not its steps).

:func:`project` prices a plan with those rates: per claim group (:func:`isogclr.analysis.repro_timing.claim_group`),
the runs, steps, stage-minutes and wall minutes at ``slots`` stages at a time. The projection is a model; the
schedule a forced repro prints (``reports/timing.md``) is the measurement. ``python -m isogclr plan --cost`` prints
it for a params file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ..config.bimodal import BimodalRunConfig
from ..config.plan import CONVERGENCE, PlannedRun, plan
from ..data.base import load_dataset
from ..data.splits import validation_positions
from .repro_timing import claim_group

KINDS = ("unimodal", "bimodal")
RATES = ("overhead", "per_sample", "per_step")  # seconds per run, per sample, per step
WORK_COLUMNS = ("run_dir", "family", "kind", "steps", "samples")
# the stages kept at their recorded seconds though they train: the no-learning probes (which no plan lists) and the
# EMC2 convergence runs (planned, not priced: :func:`params_work` leaves them out)
AS_RECORDED = frozenset({"references", "emc2_convergence_runs"})


@cache
def _train_labels(dataset: str, data_root: str, order_seed: int | None) -> np.ndarray:
    return load_dataset(dataset, data_root, "train", order_seed).labels.numpy()


@cache
def _pairs(folder: str) -> int:
    """The training pairs of a generated image-text folder, from its manifest's spec (``<folder>.json``)."""
    manifest = Path(folder).with_suffix(".json")
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: the manifest of the image-text folder {folder} is missing")
    return int(json.loads(manifest.read_text())["spec"]["num_pairs"])


def _kept(labels: np.ndarray, fraction: float | None) -> int:
    """The training part of a split with ``labels`` once a selection carves ``fraction`` of it (the stratified
    split of :func:`isogclr.data.splits.validation_split`)."""
    return len(validation_positions(labels, fraction)[0]) if fraction else len(labels)


def run_family(run: PlannedRun, side_methods: Iterable[str] = ()) -> str:
    """The stage family that trains ``run`` (as ``reports/repro_stages.csv`` names it)."""
    section, parts = run.section, run.run_dir.split("/")
    if section in ("studies", "bimodal_studies"):
        return f"study_{parts[1]}"
    if section == "bimodal":
        method = parts[-1].rsplit("-s", 1)[0]  # runs_bimodal/<method>-s<seed>
        return "train_bimodal_side" if method in set(side_methods) else "train_bimodal"
    return {"table1": "train", "table1_real": "train_real", "table3": "train_table3", "references":
            "train_references", "pretrain": "train_pretrain", "tuning": "tune",
            "bimodal_tuning": "tune_bimodal", CONVERGENCE: "emc2_convergence_runs"}.get(section, section)


def run_work(run: PlannedRun, side_methods: Iterable[str] = ()) -> dict[str, Any]:
    """``run``'s kind, steps and samples (the training data read as its run reads it: generated data must exist)."""
    cfg = run.config
    if isinstance(cfg, BimodalRunConfig):
        kind, batch, epochs = "bimodal", cfg.train.batch_size, cfg.train.epochs
        # held-out pairs are stratified by cluster (holdout_pairs): one class here, within a few pairs of it
        n = _kept(np.zeros(_pairs(cfg.train.data), dtype=int), cfg.validation_fraction)
    else:
        kind, batch, epochs = "unimodal", cfg.train.batch_size, cfg.train.epochs
        n = _kept(_train_labels(cfg.dataset, str(cfg.data_root), cfg.order_seed), cfg.validation_fraction)
    steps = epochs * (n // batch)
    return {"run_dir": run.run_dir, "family": run_family(run, side_methods), "kind": kind, "steps": steps,
            "samples": steps * batch}


def plan_work(runs: list[PlannedRun], side_methods: Iterable[str] = ()) -> pd.DataFrame:
    """One row per planned run: :data:`WORK_COLUMNS`."""
    return pd.DataFrame([run_work(r, side_methods) for r in runs], columns=list(WORK_COLUMNS))


def params_work(params: dict[str, Any], tuning_dir: Path | str = "tuning") -> pd.DataFrame:
    """:func:`plan_work` of every run ``params`` plans but the convergence runs (kept as recorded:
    :data:`AS_RECORDED`), its image-text side methods from ``bimodal``."""
    side = (params.get("bimodal") or {}).get("side_methods") or []
    return plan_work([r for r in plan(params, tuning_dir) if r.section != CONVERGENCE], side)


def rates_text(rates: pd.DataFrame) -> str:
    """The fitted rates in one line, for the projection's caption."""
    return ", ".join(f"{kind} {r.overhead:.1f} s + {r.per_sample * 1e3:.2f} ms per sample + {r.per_step * 1e3:.0f} ms "
                     "per step" for kind, r in rates.iterrows())


def _families(work: pd.DataFrame) -> pd.DataFrame:
    return work.groupby(["family", "kind"], sort=False).agg(runs=("run_dir", "size"), steps=("steps", "sum"),
                                                            samples=("samples", "sum")).reset_index()


def fit_rates(work: pd.DataFrame, stages: pd.DataFrame) -> pd.DataFrame:
    """The rates of each kind (rows :data:`KINDS`, columns :data:`RATES`), fit to the recorded seconds of the
    stage families that train planned runs (``stages``: ``reports/repro_stages.csv``). A kind needs at least as
    many families as rates."""
    fams = _recorded(work, stages)
    out = {}
    for kind in KINDS:
        mine = fams[fams["kind"] == kind]
        if len(mine) < len(RATES):
            raise ValueError(f"{kind}: {len(mine)} recorded stage families train such runs as planned; the fit "
                             f"needs {len(RATES)}")
        design = mine[["runs", "samples", "steps"]].to_numpy(float)
        scale = design.max(axis=0)  # nnls on columns of one size
        coef, _ = nnls(design / scale, mine["recorded_s"].to_numpy(float))
        out[kind] = dict(zip(RATES, coef / scale, strict=True))
    return pd.DataFrame(out).T.loc[list(KINDS)]


def fit_residuals(work: pd.DataFrame, stages: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Per recorded family that trains planned runs: recorded and modelled seconds (how well the rates fit)."""
    fams = _recorded(work, stages)
    fams["modelled_s"] = _seconds(fams, rates)
    return fams


def _recorded(work: pd.DataFrame, stages: pd.DataFrame) -> pd.DataFrame:
    """The families of ``work`` that the record ran with as many runs as planned (another count: the record is of
    other params there, and the family is left out of the fit), with their recorded seconds."""
    recorded = stages.groupby("family").agg(recorded_runs=("runs", "sum"), recorded_s=("seconds", "sum"))
    fams = _families(work).join(recorded, on="family", how="inner")
    return fams[fams["runs"] == fams["recorded_runs"]].drop(columns="recorded_runs").reset_index(drop=True)


def _seconds(fams: pd.DataFrame, rates: pd.DataFrame) -> np.ndarray:
    r = rates.loc[fams["kind"]]
    return (fams["runs"].to_numpy() * r["overhead"].to_numpy() + fams["samples"].to_numpy() * r["per_sample"].to_numpy()
            + fams["steps"].to_numpy() * r["per_step"].to_numpy())


def project(work: pd.DataFrame, stages: pd.DataFrame, rates: pd.DataFrame, slots: int = 2,
            families: Iterable[str] | None = None) -> pd.DataFrame:
    """Per claim group: runs, steps, stage-minutes and wall minutes (stage-minutes over ``slots``) of the planned
    runs (``work``, priced at ``rates``) and of the recorded stages it does not price (``stages``' families in
    :data:`AS_RECORDED` or training nothing: data, probes, the convergence study, reports: as recorded, those of
    ``families`` only when given: the stage families of the projected pipeline); a last row ``total``."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    fams = _families(work)
    fams["seconds"] = _seconds(fams, rates)
    fixed = stages[stages["family"].isin(AS_RECORDED) | stages["runs"].eq(0)]
    if families is not None:
        fixed = fixed[fixed["family"].isin(set(families))]
    both = pd.concat([pd.DataFrame({"group": [claim_group(f, 1) for f in fams["family"]], "runs": fams["runs"],
                                    "steps": fams["steps"], "seconds": fams["seconds"]}),
                      pd.DataFrame({"group": [claim_group(f, int(r)) for f, r in
                                              zip(fixed["family"], fixed["runs"], strict=True)],
                                    "runs": 0, "steps": 0, "seconds": fixed["seconds"].to_numpy()})],
                     ignore_index=True)
    table = both.groupby("group", sort=False).agg(runs=("runs", "sum"), steps=("steps", "sum"),
                                                  seconds=("seconds", "sum")).reset_index()
    table.loc[len(table)] = ["total", table["runs"].sum(), table["steps"].sum(), table["seconds"].sum()]
    return pd.DataFrame({"claim": table["group"], "runs": table["runs"].astype(int),
                         "steps": table["steps"].astype(int), "stage_min": (table["seconds"] / 60).round(1),
                         "wall_min": (table["seconds"] / slots / 60).round(1)})


def schedule_minutes(table: pd.DataFrame) -> float:
    """The projected schedule (wall minutes) of a :func:`project` table."""
    return float(table.loc[table["claim"] == "total", "wall_min"].iloc[0])
