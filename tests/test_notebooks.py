"""Source notebooks are generated from notebooks/src/*.py, carry no outputs and have a parameters cell."""

from __future__ import annotations

import json

from isogclr.analysis.notebooks import build_notebooks

from .conftest import ROOT


def test_notebooks_in_sync_with_sources():
    assert build_notebooks(ROOT / "notebooks" / "src", ROOT / "notebooks", check=True) == []


def test_notebooks_have_no_outputs_and_a_parameters_cell():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert all(not c["outputs"] and c["execution_count"] is None for c in code), path
        assert sum("parameters" in c["metadata"].get("tags", []) for c in code) == 1, path
        assert len({c["id"] for c in cells}) == len(cells)


def test_build_is_deterministic(tmp_path):
    build_notebooks(ROOT / "notebooks" / "src", tmp_path)
    first = {p.name: p.read_text() for p in tmp_path.glob("*.ipynb")}
    build_notebooks(ROOT / "notebooks" / "src", tmp_path)
    assert first == {p.name: p.read_text() for p in tmp_path.glob("*.ipynb")}
