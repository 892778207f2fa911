"""Notebooks are built from jupytext percent-format scripts in ``notebooks/src/`` by jupytext.

``notebooks/src/<name>.py`` is read by jupytext (``# %%`` starts a code cell, ``# %% [markdown]`` a
markdown cell, ``# %% tags=["parameters"]`` papermill's parameters cell) and written as
``notebooks/<name>.ipynb`` without outputs. The one thing added to jupytext: cell ids. jupytext, like
nbformat, gives new cells random ids, so every build would change every notebook; here a cell's id is
the notebook's name and the cell's position (``<name>-03``), and building twice gives identical files.
"""

from __future__ import annotations

from pathlib import Path

import jupytext

FORMAT = "py:percent"
# jupytext's notes for writing the script back (blank lines between cells...): not kept in the notebook
LAYOUT_HINTS = ("cell_marker", "lines_to_next_cell", "lines_to_end_of_cell_marker")
METADATA = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}


def script_to_notebook(script: Path | str):
    """The notebook of one percent-format script: jupytext's reading, deterministic ids, the python3 kernel."""
    script = Path(script)
    nb = jupytext.read(script, fmt=FORMAT)
    for i, cell in enumerate(nb.cells):
        cell.id = f"{script.stem}-{i:02d}"
        for key in LAYOUT_HINTS:
            cell.metadata.pop(key, None)
    nb.metadata = dict(METADATA)
    return nb


def notebook_text(script: Path | str) -> str:
    return jupytext.writes(script_to_notebook(script), fmt="ipynb") + "\n"


def build_notebooks(source_dir: Path | str, dest_dir: Path | str, check: bool = False) -> list[str]:
    """Write ``dest_dir/<name>.ipynb`` for every ``source_dir/<name>.py``; with ``check``, only list stale ones."""
    stale = []
    for script in sorted(Path(source_dir).glob("*.py")):
        target = Path(dest_dir) / f"{script.stem}.ipynb"
        text = notebook_text(script)
        if not target.exists() or target.read_text() != text:
            stale.append(str(target))
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    return stale
