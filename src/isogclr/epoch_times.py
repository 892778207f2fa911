"""The one timing record: wall-clock seconds of every run's epochs (or steps), out of the result files.

A run's results (``metrics.json``, ``train_log.csv``, ``dvclive/``, ``runs_convergence/*.csv``) hold no
wall clock, so a rerun that gives bit-identical results changes no tracked result file. The times go
into one CSV at the project root, ``timing.csv`` (tracked in git, but no DVC dependency: it shows the
times last measured on the machine that ran each run). Columns: ``run`` (the run's output folder
relative to the project root, e.g. ``runs/isogclr-synth10-s0``, ``studies/batch_size/simclr-32-s0``,
``runs_convergence/emc2-A2``), then ``epoch`` or ``step``, ``seconds`` and optionally ``samples_per_s``.

One writer per run, and the record goes where the run's outputs go (:func:`record_location`): only the main
process (rank 0) of a distributed run writes it (a call on another rank is refused); a run inside the working
directory (the project root in every stage) goes to the project's ``timing.csv``, a run written elsewhere
(``--out`` outside the project) to ``timing.csv`` in the folder that holds the run's folder, keyed by the run
folder's name, so that it never touches the project's record.

:func:`record` replaces every row of one run under :func:`isogclr.io.locked` on ``timing.csv.lock``
(two training processes may finish at once) and rewrites the file atomically, rows sorted by
(run, epoch, step), so the file's bytes depend only on its content. :func:`read` returns the rows
(a pandas DataFrame with ``as_frame=True``); a missing file is an empty record. :func:`prune` drops the rows
of runs that no longer exist (``python -m isogclr repro`` calls it after a successful repro).

The bottom layer: imports only the standard library and :mod:`isogclr.io`. The environment variable
``ISOGCLR_TIMING_CSV`` names one file for every run instead (the tests point it at a temporary file).
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

from .io import csv_text, locked, save_text

FILENAME = "timing.csv"
ENV = "ISOGCLR_TIMING_CSV"
COLUMNS = ("run", "epoch", "step", "seconds", "samples_per_s")  # the order of the file's columns
_INTS = ("epoch", "step")
_FLOATS = ("seconds", "samples_per_s")


def default_path() -> Path:
    """``$ISOGCLR_TIMING_CSV`` if set, else ``timing.csv`` in the current working directory."""
    return Path(os.environ.get(ENV) or FILENAME)


def run_key(out_dir: Path | str) -> str:
    """A run's key: its output folder relative to the working directory, or its absolute path if outside."""
    path = Path(out_dir).resolve()
    try:
        path = path.relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return path.as_posix()


def record_location(run: str) -> tuple[Path, str]:
    """Where the rows of ``run`` (a :func:`run_key`) go, and its key there: ``$ISOGCLR_TIMING_CSV`` with the key
    unchanged if set; else ``timing.csv`` in the working directory for a run inside it, and for a run outside it
    (an absolute key) ``timing.csv`` beside the run's folder, keyed by the folder's name."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]), run
    if Path(run).is_absolute():
        return Path(run).parent / FILENAME, Path(run).name
    return Path(FILENAME), run


def _check_main_process() -> None:
    rank = os.environ.get("RANK", "0")
    if rank != "0":
        raise RuntimeError(f"the timing record is written by rank 0 only, and this process is rank {rank} "
                           "(RANK in the environment): one writer per run")


def _parse(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"run": row["run"]}
    for name in _INTS:
        if row.get(name) not in (None, ""):
            out[name] = int(row[name])
    for name in _FLOATS:
        if row.get(name) not in (None, ""):
            out[name] = float(row[name])
    return out


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return [_parse(row) for row in csv.DictReader(f)]


def _sort_key(row: dict[str, Any]) -> tuple:
    return (row["run"], row.get("epoch", -1), row.get("step", -1))


def _clean(run: str, row: dict[str, Any]) -> dict[str, Any]:
    unknown = set(row) - set(COLUMNS)
    if unknown:
        raise ValueError(f"timing rows take the columns {COLUMNS[1:]}, got {sorted(unknown)}")
    out: dict[str, Any] = {"run": run}
    for name in _INTS:
        if row.get(name) is not None:
            out[name] = int(row[name])
    if "epoch" not in out and "step" not in out:
        raise ValueError(f"a timing row needs an epoch or a step: {row}")
    if row.get("seconds") is None or not math.isfinite(float(row["seconds"])):
        raise ValueError(f"a timing row needs finite seconds: {row}")
    out["seconds"] = round(float(row["seconds"]), 3)
    if row.get("samples_per_s") is not None:
        out["samples_per_s"] = round(float(row["samples_per_s"]), 1)
    return out


def record(run: str, rows: list[dict[str, Any]], path: Path | str | None = None) -> None:
    """Replace every row of ``run`` in the record by ``rows`` (each with ``epoch`` or ``step``, ``seconds``,
    optionally ``samples_per_s``), under an exclusive lock, written atomically and sorted.

    ``path``: the record (``run`` is then its key as given); default :func:`record_location` of ``run``. Refused
    on a process of rank > 0 (``RANK`` in the environment, as torchrun sets it): only the main process writes."""
    _check_main_process()
    path, run = (Path(path), run) if path is not None else record_location(run)
    new = [_clean(run, row) for row in rows]
    with locked(path.with_name(path.name + ".lock")):
        kept = [row for row in _read_rows(path) if row["run"] != run]
        merged = sorted(kept + new, key=_sort_key)
        present = {k for row in merged for k in row}
        columns = [c for c in COLUMNS if c in present]
        save_text(csv_text([{c: row.get(c, "") for c in columns} for row in merged]), path)


def prune(keep, path: Path | str | None = None) -> list[str]:  # noqa: ANN001 (a predicate on run keys)
    """Drop the rows of every run for which ``keep(run)`` is false (runs the pipeline no longer has), under the
    lock, written atomically; returns the dropped runs, sorted. The file is left untouched when nothing is dropped."""
    path = Path(path) if path is not None else default_path()
    with locked(path.with_name(path.name + ".lock")):
        rows = _read_rows(path)
        dropped = sorted({row["run"] for row in rows if not keep(row["run"])})
        if dropped:
            kept = [row for row in rows if row["run"] not in dropped]
            present = {k for row in kept for k in row}
            columns = [c for c in COLUMNS if c in present]
            save_text(csv_text([{c: row.get(c, "") for c in columns} for row in kept]), path)
    return dropped


def read(path: Path | str | None = None, as_frame: bool = False):  # noqa: ANN201 (list or DataFrame)
    """The record's rows as dicts (missing values left out), or a DataFrame with ``as_frame`` (an empty
    one with the columns ``run, epoch, step, seconds, samples_per_s`` when the file is missing)."""
    rows = _read_rows(Path(path) if path is not None else default_path())
    if not as_frame:
        return rows
    import pandas as pd  # analysis code only: the trainers import this module without pandas

    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for name in _INTS:
        frame[name] = frame[name].astype("Int64")
    for name in _FLOATS:
        frame[name] = frame[name].astype(float)
    return frame
