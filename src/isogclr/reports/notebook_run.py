"""Report notebooks: their set-up (run from any folder) and their execution (papermill, without timestamps).

A report notebook starts with :func:`setup_report`, so it runs the same from the repository root (as
``dvc repro`` runs it), from ``notebooks/`` in JupyterLab, or from anywhere below the root.
:func:`execute_report` is the one place where reports are executed: papermill runs
``notebooks/<name>.ipynb`` into ``reports/<name>.ipynb``, and the execution timestamps and durations that
papermill and Jupyter write into the notebook are removed, so a rerun with the same results leaves the
file unchanged.

Light on purpose (no torch): the command line imports it for ``python -m isogclr report``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

ROOT_MARKERS = ("params.yaml", "dvc.yaml")


def project_root(start: Path | str | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) holding params.yaml and dvc.yaml."""
    start = Path(start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if all((folder / marker).is_file() for marker in ROOT_MARKERS):
            return folder
    raise FileNotFoundError(f"no folder at or above {start} holds {' and '.join(ROOT_MARKERS)}: "
                            "run the notebook inside the isogclr repository")


def setup_report(start: Path | str | None = None) -> Path:
    """Prepare a report's kernel; returns the repository root, which becomes the working directory.

    - the paths of the parameters cell (``params.yaml``, ``runs``, ``reports``) are relative to the root;
    - pandas shows whole cells (no "..." in verdicts and captions) and every column;
    - matplotlib draws off-screen with constrained layout (titles and labels are not cut or overlapped);
      :func:`isogclr.analysis.tables.save_figure` writes each figure and shows it inline;
    - tqdm's notebook front-end, which needs ipywidgets, is not tried (it would warn on import).
    """
    root = project_root(start)
    os.chdir(root)
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    matplotlib.rcParams["figure.constrained_layout.use"] = True
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.width", 250)
    with warnings.catch_warnings():  # tqdm.auto warns "IProgress not found" in a kernel without ipywidgets
        warnings.simplefilter("ignore")
        import tqdm.auto  # noqa: F401  (imported once here, quietly; later imports reuse it)
    return root


# Papermill's and Jupyter's per-run records: dropped after execution (the rest of the metadata stays)
_RUN_KEYS = ("start_time", "end_time", "duration")


def strip_execution_metadata(nb: Any) -> Any:
    """Remove execution timestamps and durations from an executed notebook, and give papermill's injected
    parameters cell (a random id per execution) a fixed id (in place; returns it)."""
    papermill = nb.metadata.get("papermill")
    if papermill is not None:
        for key in _RUN_KEYS:
            papermill.pop(key, None)
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
        cell.metadata.pop("execution", None)  # Jupyter's iopub/shell timestamps
        papermill = cell.metadata.get("papermill")
        if papermill is not None:
            for key in _RUN_KEYS:
                papermill.pop(key, None)
    return nb


def typed_parameters(pairs: list[tuple[str, str]] | None) -> dict[str, Any]:
    """``-p KEY VALUE`` pairs typed as papermill's own ``-p`` types them: True/False/None, int, float, else text."""
    named = {"True": True, "False": False, "None": None}

    def typed(text: str) -> Any:
        if text in named:
            return named[text]
        for cast in (int, float):
            try:
                return cast(text)
            except ValueError:
                pass
        return text

    return {key: typed(value) for key, value in pairs or []}


def execute_report(notebook: Path | str, output: Path | str, parameters: dict[str, Any] | None = None,
                   cwd: Path | str | None = None) -> Path:
    """Execute ``notebook`` with papermill into ``output`` (kernel ``python3``, from ``cwd``), without timestamps.

    A failing cell raises papermill's ``PapermillExecutionError`` after the partly executed notebook
    (with its traceback) is written to ``output``.
    """
    import nbformat
    import papermill

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters or {}, kernel_name="python3",
                                   progress_bar=False, cwd=None if cwd is None else str(cwd))
    finally:
        if output.exists():
            nb = nbformat.read(output, as_version=4)
            nbformat.write(strip_execution_metadata(nb), output)
    return output
