"""Verdicts and the reports index."""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest

from isogclr.analysis.index import build_index
from isogclr.analysis.verdicts import Verdict, ordering, write_verdicts


def test_ordering_verdict_states_the_gap_against_the_noise():
    held = ordering("a > b", "a", 50.0, "b", 48.0, noise=3.0)
    assert held.status == "held" and "within the seed spread 3.00" in held.evidence
    clear = ordering("a > b", "a", 50.0, "b", 40.0, noise=1.0)
    assert clear.status == "held" and "> seed spread" in clear.evidence
    assert ordering("a > b", "a", 40.0, "b", 50.0).status == "not held"
    with pytest.raises(ValueError, match="status"):
        Verdict("c", "maybe", "e")


def test_index_lists_every_report_with_its_verdicts(tmp_path):
    for name, title in (("one", "First report"), ("two", "Second report")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {title}\n\ntext")])
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    write_verdicts([Verdict("claim A", "held", "x 1 vs 2")], tmp_path, "one")
    write_verdicts([Verdict("claim B", "not held", "y"), Verdict("claim C", "not testable", "z")], tmp_path, "two")
    build_index(tmp_path, ["one", "two"], profile="mini")
    readme = (tmp_path / "README.md").read_text()
    assert readme.index("First report") < readme.index("Second report")
    assert "1 held, 1 not held, 1 not testable" in readme and "claim C" in readme
    page = (tmp_path / "index.html").read_text()
    assert 'href="html/one.html"' in page and (tmp_path / "html" / "two.html").stat().st_size > 0
    assert pd.read_csv(tmp_path / "verdicts" / "two.csv")["status"].tolist() == ["not held", "not testable"]
    before = page
    build_index(tmp_path, ["one", "two"], profile="mini")
    assert (tmp_path / "index.html").read_text() == before  # deterministic


def test_index_names_a_missing_report(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        build_index(tmp_path, ["nope"], profile="mini")
