"""Notebooks are generated from percent-format scripts in ``notebooks/src/``.

A script is split into cells at ``# %%`` lines; ``# %% [markdown]`` starts a markdown
cell (its lines lose the leading ``# ``) and ``# %% tags=["parameters"]`` marks
papermill's parameters cell. Cell ids are derived from the notebook name and the
cell's position, and no outputs are stored, so building twice gives identical files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

_HEADER = re.compile(r"^# %%(?P<markdown> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def script_to_notebook(source: str, name: str) -> nbformat.NotebookNode:
    cells: list[nbformat.NotebookNode] = []
    kind, tags, lines = None, [], []

    def flush() -> None:
        if kind is None:
            return
        text = "\n".join(lines).strip("\n")
        if kind == "markdown":
            text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in text.splitlines())
            cell = nbformat.v4.new_markdown_cell(text)
        else:
            cell = nbformat.v4.new_code_cell(text)
        cell.id = f"{name}-{len(cells):02d}"
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in source.splitlines():
        match = _HEADER.match(line)
        if match:
            flush()
            kind = "markdown" if match["markdown"] else "code"
            tags, lines = (json.loads(match["tags"]) if match["tags"] else []), []
        elif kind is not None:
            lines.append(line)
    flush()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def build_notebooks(source_dir: Path, dest_dir: Path, check: bool = False) -> list[str]:
    """Write ``dest_dir/<name>.ipynb`` for every ``source_dir/<name>.py``; with ``check``, only list stale ones."""
    stale = []
    for script in sorted(Path(source_dir).glob("*.py")):
        target = Path(dest_dir) / f"{script.stem}.ipynb"
        text = nbformat.writes(script_to_notebook(script.read_text(), script.stem)) + "\n"
        if not target.exists() or target.read_text() != text:
            stale.append(str(target))
            if not check:
                target.write_text(text)
    return stale
