"""Hyperparameter selection on a validation split, the same budget for every method.

``python -m isogclr tune --method <m>`` (one DVC stage per tuned method, ``pipelines/tune/dvc.yaml``)
trains each of the method's candidates (:func:`isogclr.config.tuning.tuning_candidates`) at every seed of its
selection section (:func:`isogclr.config.tuning.candidate_run_configs`, each resolved once):

* ``tuning`` (unimodal methods): on ``tuning.dataset``'s training split minus a stratified validation part,
  scored by linear-probe top-1 on that part (``val_top1``);
* ``bimodal_tuning`` (image-text methods): on ``bimodal.data``'s training pairs minus held-out images and
  their captions, scored by the mean of image and text retrieval R@1, R@5 and R@10 among the held-out pairs
  (``val_recall``: R@1 alone counts a handful of pairs at the mini scale, too few to tell candidates apart).

It writes

* ``tuning/<m>/candidates.csv``: ``candidate``, the candidate's knobs, ``seed``, the score (``nan``: the run
  diverged, e.g. at too large a learning rate; it cannot be selected);
* ``tuning/<m>/selected.json``: the candidate with the best mean score (ties: the first listed), with the
  search settings; the runs of a ``tuned: true`` section or study read it
  (:func:`isogclr.config.selection.with_selection`).

Under torchrun every process trains every candidate with the others, and only rank 0 scores them and writes
the two files (and the candidates' run folders, as every run); every rank returns rank 0's selection.

The candidates' own run folders (``tuning/<m>/runs/c<k>-s<seed>``) are scratch, neither in git nor in DVC;
a candidate whose folder already holds its metrics for the same config is not trained again, so an
interrupted stage resumes where it stopped. The trainer (``train_run`` or ``train_bimodal_run``) is given
by the caller, so that a selection stage depends on its own modality's code only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.selection import TUNING_DIR
from ..config.tuning import (
    TUNING_SECTIONS,
    TuningSpec,
    candidate_run_configs,
    tuning_candidates,
    tuning_section,
    tuning_spec,
)
from ..io import csv_text, save_json, save_text
from ..losses.numerics import TrainingDiverged
from . import distributed

# a candidate run's metrics -> its validation score (%), by selection section
SCORES: dict[str, Callable[[dict], float]] = {
    "tuning": lambda metrics: metrics["top1"],
    "bimodal_tuning": lambda metrics: sum(metrics[f"validation_{side}_r{k}"]
                                          for side in ("ir", "tr") for k in (1, 5, 10)) / 6,
}


def _finished(cfg, out: Path) -> dict | None:
    """The metrics of a candidate run already trained with the same config, else None."""
    metrics, config = out / "metrics.json", out / "artifacts" / "config.json"
    if not (metrics.is_file() and config.is_file()):
        return None
    done, wanted = json.loads(config.read_text()), json.loads(json.dumps(cfg.to_dict()))
    same = {k: v for k, v in done.items() if k != "run_id"} == {k: v for k, v in wanted.items() if k != "run_id"}
    return json.loads(metrics.read_text()) if same else None


def tune_method(params: dict[str, Any], method: str, train: Callable[..., dict],
                tuning_dir: Path | str = TUNING_DIR, checkpoints: Path | str = "checkpoints") -> dict[str, Any]:
    """Train (``train(cfg, run_dir, ckpt_dir) -> metrics``) and score every candidate of ``method``; write
    candidates.csv and selected.json; return the selection.

    In a distributed run the other ranks train alongside rank 0 and write nothing; they return rank 0's selection
    (None when no candidate needed training: no process group was joined to hear it)."""
    main = distributed.process_rank() == 0
    section = tuning_section(params, method)
    spec, score, column = tuning_spec(params, section), SCORES[section], TUNING_SECTIONS[section]
    candidates = tuning_candidates(params, method)
    out = Path(tuning_dir) / method
    knob_names = list(dict.fromkeys(k for c in candidates for k in c))
    rows = []
    runs = iter(candidate_run_configs(params, method))  # candidate by candidate, each at every seed
    for i, knobs in enumerate(candidates):
        effective = {k: {**(params["methods"][method] or {}), **knobs}.get(k) for k in knob_names}
        for seed in spec.seeds:
            cfg = next(runs)
            run_dir = Path(tuning_dir) / cfg.run_id
            try:
                metrics = _finished(cfg, run_dir) or train(cfg, run_dir, Path(checkpoints) / "tuning" / cfg.run_id)
                value = round(score(metrics), 4) if main else math.nan  # rank 0 holds the evaluated metrics
            except TrainingDiverged as err:  # e.g. a learning rate too large: the candidate loses, the search goes on
                print(f"[tune {method}] candidate {i} {knobs} diverged at seed {seed}: {err}", flush=True)
                value = float("nan")
            rows.append({"candidate": i, **effective, "seed": seed, column: value})
    outcome = _select(rows, method, spec, candidates, column, out) if main else None
    kind, result = distributed.broadcast_object(outcome) or ("selection", None)
    if kind == "diverged":
        raise TrainingDiverged(result)
    return result


def _select(rows: list[dict], method: str, spec: TuningSpec, candidates: list[dict], column: str,
            out: Path) -> tuple[str, Any]:
    """Rank 0's part: the best candidate, written to ``out`` (candidates.csv, selected.json), as ("selection",
    selection); ("diverged", message) when every candidate diverged (nothing written)."""
    scores = [sum(r[column] for r in rows if r["candidate"] == i) / len(spec.seeds) for i in range(len(candidates))]
    if all(math.isnan(s) for s in scores):
        return "diverged", f"tuning {method}: every candidate diverged (tuning/{method}/runs); see the log"
    best = max(range(len(candidates)), key=lambda i: (-math.inf if math.isnan(scores[i]) else scores[i], -i))
    selection = {"method": method, **spec.record(), "space": spec.methods[method], "knobs": candidates[best],
                 column: round(scores[best], 4)}
    save_text(csv_text(rows), out / "candidates.csv")
    save_json(selection, out / "selected.json")
    print(f"[tune {method}] selected candidate {best} {candidates[best]}: validation {column} {scores[best]:.2f}% "
          f"(candidates: {', '.join(f'{s:.2f}' for s in scores)})", flush=True)
    return "selection", selection
