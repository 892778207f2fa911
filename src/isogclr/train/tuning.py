"""Hyperparameter selection on a validation split, the same budget for every method.

``python -m isogclr tune --method <m>`` (one DVC stage per tuned method, ``pipelines/tune/dvc.yaml``)
trains each of the method's ``tuning.candidates`` candidates (:func:`isogclr.config.tuning_candidates`)
at every ``tuning.seeds`` seed, on ``tuning.dataset``'s training split minus a stratified validation part,
and scores it by linear-probe top-1 on that part (:func:`isogclr.config.tuning_run_config`). It writes

* ``tuning/<m>/candidates.csv``: ``candidate``, the candidate's knobs, ``seed``, ``val_top1``;
* ``tuning/<m>/selected.json``: the candidate with the best mean validation top-1 (ties: the first
  listed), with the search settings; the runs of a ``tuned: true`` section or study read it
  (:func:`isogclr.config.with_selection`).

The candidates' own run folders (``tuning/<m>/runs/c<k>-s<seed>``) are scratch, neither in git nor in DVC;
a candidate whose folder already holds its metrics for the same config is not trained again, so an
interrupted stage resumes where it stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import TUNING_DIR, RunConfig, tuning_candidates, tuning_run_config, tuning_spec
from ..io import csv_text, save_json, save_text
from .loop import train_run


def _finished(cfg: RunConfig, out: Path) -> dict | None:
    """The metrics of a candidate run already trained with the same method, data and schedule, else None."""
    metrics, config = out / "metrics.json", out / "artifacts" / "config.json"
    if not (metrics.is_file() and config.is_file()):
        return None
    done, wanted = json.loads(config.read_text()), cfg.to_dict()
    same = all(done.get(key) == wanted[key] for key in ("method", "dataset", "seed", "train", "optimizer",
                                                         "validation_fraction"))
    return json.loads(metrics.read_text()) if same else None


def tune_method(params: dict[str, Any], method: str, tuning_dir: Path | str = TUNING_DIR,
                checkpoints: Path | str = "checkpoints") -> dict[str, Any]:
    """Train and score every candidate of ``method``; write candidates.csv and selected.json; return the selection."""
    spec = tuning_spec(params)
    candidates = tuning_candidates(params, method)
    out = Path(tuning_dir) / method
    knob_names = list(dict.fromkeys(k for c in candidates for k in c))
    rows = []
    for i, knobs in enumerate(candidates):
        effective = {k: {**(params["methods"][method] or {}), **knobs}.get(k) for k in knob_names}
        for seed in spec.seeds:
            cfg = tuning_run_config(params, method, i, seed)
            run_dir = Path(tuning_dir) / cfg.run_id
            metrics = _finished(cfg, run_dir) or train_run(cfg, run_dir, Path(checkpoints) / "tuning" / cfg.run_id)
            rows.append({"candidate": i, **effective, "seed": seed, "val_top1": round(metrics["top1"], 4)})
    scores = [sum(r["val_top1"] for r in rows if r["candidate"] == i) / len(spec.seeds)
              for i in range(len(candidates))]
    best = max(range(len(candidates)), key=lambda i: (scores[i], -i))
    selection = {"method": method, "dataset": spec.dataset, "epochs": spec.epochs,
                 "validation_fraction": spec.validation_fraction, "seeds": list(spec.seeds),
                 "candidates": spec.candidates, "space": spec.methods[method], "knobs": candidates[best],
                 "val_top1": round(scores[best], 4)}
    save_text(csv_text(rows), out / "candidates.csv")
    save_json(selection, out / "selected.json")
    print(f"[tune {method}] selected candidate {best} {candidates[best]}: validation top-1 {scores[best]:.2f}% "
          f"(candidates: {', '.join(f'{s:.2f}' for s in scores)})", flush=True)
    return selection
