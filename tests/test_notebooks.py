"""Source notebooks are built by jupytext from notebooks/src/*.py, carry no outputs and have a parameters cell;
they run from any folder of the repository (JupyterLab starts a notebook's kernel in the notebook's folder)."""

from __future__ import annotations

import json
import os

import jupytext
import pytest

from isogclr.reports.notebook_build import build_notebooks
from isogclr.reports.notebook_run import project_root, setup_report, strip_execution_metadata, typed_parameters

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


def test_notebooks_are_jupytexts_reading_of_their_sources():
    """Cell for cell, a notebook is what jupytext reads from its percent-format source; only ids are ours."""
    for script in sorted((ROOT / "notebooks" / "src").glob("*.py")):
        theirs = jupytext.read(script, fmt="py:percent")
        ours = json.loads((ROOT / "notebooks" / f"{script.stem}.ipynb").read_text())
        assert [(c.cell_type, c.source, c.metadata.get("tags")) for c in theirs.cells] == \
            [(c["cell_type"], "".join(c["source"]), c["metadata"].get("tags")) for c in ours["cells"]], script.name
        assert [c["id"] for c in ours["cells"]] == [f"{script.stem}-{i:02d}" for i in range(len(ours["cells"]))]


def test_every_report_sets_itself_up_before_drawing():
    """The set-up cell finds the repository root and configures pandas and matplotlib before pyplot is used."""
    for script in sorted((ROOT / "notebooks" / "src").glob("*.py")):
        text = script.read_text()
        assert "setup_report()" in text and 'matplotlib.use("Agg")' not in text, script.name
        assert text.index("setup_report()") < text.index("import matplotlib.pyplot"), script.name
        assert "fig.tight_layout()" not in text, script.name  # constrained layout instead (set up by setup_report)


def test_the_root_is_found_from_a_notebooks_folder(tmp_path, monkeypatch):
    assert project_root(ROOT / "notebooks") == ROOT == project_root(ROOT / "notebooks" / "src")
    monkeypatch.chdir(ROOT / "notebooks")
    assert setup_report() == ROOT and os.getcwd() == str(ROOT)
    import pandas as pd

    assert pd.get_option("display.max_colwidth") is None
    with pytest.raises(FileNotFoundError, match="params.yaml and dvc.yaml"):
        project_root(tmp_path)


def test_execution_timestamps_are_stripped():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nb.metadata["papermill"] = {"start_time": "t0", "end_time": "t1", "duration": 1.5, "parameters": {"a": 1}}
    nb.cells[0].metadata.update(execution={"iopub.status.busy": "t"},
                                papermill={"start_time": "t", "end_time": "t", "duration": 0.1, "status": "completed"})
    strip_execution_metadata(nb)
    assert nb.metadata["papermill"] == {"parameters": {"a": 1}}
    assert nb.cells[0].metadata == {"papermill": {"status": "completed"}}


def test_papermill_injected_cell_gets_a_fixed_id(tmp_path):
    """Executing a report twice with the same results writes the same bytes: papermill gives its injected
    parameters cell a random id, which is replaced."""
    import nbformat

    from isogclr.reports.notebook_run import execute_report

    source = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                                             nbformat.v4.new_code_cell("print(x)")],
                                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                               "language": "python"}})
    nbformat.write(source, tmp_path / "in.ipynb")
    (tmp_path / "params.yaml").write_text("profile: smoke\n")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    texts = []
    for _ in range(2):
        execute_report(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {"x": 2}, cwd=tmp_path)
        texts.append((tmp_path / "out.ipynb").read_text())
    assert texts[0] == texts[1] and '"id": "injected-parameters"' in texts[0]


def test_report_parameters_are_typed_as_papermill_types_them():
    assert typed_parameters([("rho", "0.3"), ("seed", "0"), ("flag", "True"), ("none", "None"), ("dir", "runs")]) \
        == {"rho": 0.3, "seed": 0, "flag": True, "none": None, "dir": "runs"}
    assert isinstance(typed_parameters([("n", "10")])["n"], int)
