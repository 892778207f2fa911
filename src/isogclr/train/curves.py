"""A run's training curves as a DVCLive folder (``<run>/dvclive``), for ``dvc plots show`` / ``dvc exp show``.

Both trainers keep one row per epoch in their checkpoint (``train_log.csv``); this module turns
those rows into DVCLive's files: ``dvclive/plots/metrics/<name>.tsv`` (columns ``step``, ``<name>``,
step = epoch) for every numeric column of the row except the bookkeeping ones (:data:`NOT_CURVES`),
and ``dvclive/metrics.json`` (the last value of each curve, the final step and, at the end of a run,
its final metrics). The folder is rebuilt from the checkpointed rows when a run starts or resumes and
when it ends, so a run killed between a DVCLive write and its next checkpoint cannot log an epoch twice.

No file here holds wall clock: the rows carry none (the times are in ``timing.csv``, :mod:`isogclr.epoch_times`),
wall-clock columns are skipped should a row have them (:data:`NOT_CURVES`), and DVCLive's own per-row
``timestamp`` column is off (``log_metric(..., timestamp=False)``, the default of DVCLive 3;
tests/test_engine_dvclive.py checks that no file of a run's folder has one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dvclive import Live

NOT_CURVES = ("epoch", "step", "samples_seen", "seconds", "samples_per_s")  # not curves (bookkeeping, wall clock)


class FilesOnlyLive(Live):
    """A :class:`dvclive.Live` that writes its files and nothing else.

    The stock constructor opens the enclosing DVC repository (running ``dvc init`` in a git
    repository that has none), draws an experiment name from the git refs and, when a Studio
    token is configured, announces a live experiment to DVC Studio. A run is a stage of the
    project's dvc.yaml, which declares these files, so none of that is wanted. Used with
    ``dvcyaml=False``, ``report=None`` and ``save_dvc_exp=False``, and never ``next_step``/``end``
    (which would signal the VS Code extension and save an experiment): steps are set explicitly.
    tests/test_engine_dvclive.py checks that these two hooks still exist in the installed DVCLive.
    """

    def _init_dvc(self) -> None:
        """Skip the repository lookup (see the class docstring)."""

    def _init_studio(self) -> None:
        """Send no DVC Studio events."""
        self._studio_events_to_skip.update(("start", "data", "done"))


def log_epoch(live: Live, row: dict) -> None:
    """Append one ``train_log.csv`` row's curves to the DVCLive plots, at step = epoch."""
    live.step = row["epoch"]
    for name, value in row.items():
        if name not in NOT_CURVES and isinstance(value, int | float):
            live.log_metric(name, value, timestamp=False)


def open_curves(path: Path, rows: list[dict]) -> Live:
    """Recreate the DVCLive folder ``path`` from ``rows`` (the checkpointed log) and return the open logger."""
    if path.exists():
        shutil.rmtree(path)
    live = FilesOnlyLive(str(path), resume=False, report=None, save_dvc_exp=False, dvcyaml=False)
    for row in rows:
        log_epoch(live, row)
    live.make_summary()
    return live


def write_curves(path: Path, rows: list[dict], metrics: dict[str, float]) -> None:
    """The finished run's folder: every row's curves and the final ``metrics`` (rounded as in metrics.json)."""
    live = open_curves(path, rows)
    for name, value in metrics.items():
        live.log_metric(name, round(value, 4), plot=False)
    live.make_summary()
