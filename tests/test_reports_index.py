"""Verdicts and the reports index."""

from __future__ import annotations

from dataclasses import replace

import nbformat
import pandas as pd
import pytest

from isogclr.analysis.verdicts import compare, not_testable, write_verdicts
from isogclr.reports.index import build_index


def test_index_lists_every_report_with_its_verdicts(tmp_path):
    for name, title in (("one", "First report"), ("two", "Second report")):
        text = "runs paired by seed" if name == "two" else "text"
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {title}\n\n{text}")])
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    write_verdicts([compare("claim A", ("a", {0: 3.0, 1: 4.0, 2: 5.0}), ("b", {0: 1.0, 1: 2.1, 2: 2.9}),
                            paper_effect=0.5)], tmp_path, "one")
    write_verdicts([compare("claim B", ("a", {0: 1.0, 1: 5.0}), ("b", {0: 2.0, 1: 3.0})),
                    not_testable("claim C", "z"), compare("claim D", ("a", {0: 2.0}), ("b", {0: 1.0}))],
                   tmp_path, "two")
    build_index(tmp_path, ["one", "two"], profile="mini")
    readme = (tmp_path / "README.md").read_text()
    assert readme.index("First report") < readme.index("Second report")
    assert "2 tested, 1 supported, 0 contradicted, 1 inconclusive; 2 not testable" in readme and "claim C" in readme
    # the effect, its interval, the paper's effect, the minimum detectable effect, the seeds the paper's would need
    # 3 seeds are never settled (tests/test_analysis_rerun.py); beside the status, what a reader can act on
    assert "supported; the paper's direction detected; not settled (p 0.53)" in readme
    assert "| +2.00 [+1.75, +2.25] (3 seeds; paper +0.5; MDE 0.33; paper's size needs 3 seeds) |" in readme
    assert "1 supported, 0 contradicted, 0 inconclusive, 0 not testable; 0 of 1 supported or contradicted settled " \
           "across machines; median minimum detectable effect 0.33 over 1 paired comparisons" in readme
    assert "inconclusive; neither detected nor excluded (more than 100 seeds at the observed effect); Holm: " \
           "inconclusive | +0.50 [-18.56, +19.56]" \
        in readme  # claim B
    assert "not settled (p 0.53); Holm: supported |" in readme  # 2 claims tested: claim A survives
    assert "4 claims, each counted once; 2 tested, 1 supported, 0 contradicted, 1 inconclusive; 2 not testable" \
        in readme and "Bottom line: For the paper, 1 row (each interval above 0; 0 settled): claim A +2.00 " \
        "[+1.75, +2.25]." in readme
    assert "the paper's direction detected in 1, its effect excluded in 0, neither in 1" in readme  # the totals
    assert readme.index("What the replication found") < readme.index("How to read a verdict") < \
        readme.index("## [First report]")  # the findings first, the method folded below them
    assert "0 supported, 0 contradicted, 1 inconclusive, 2 not testable" in readme  # per report
    assert "(1 seed)" in readme or "(1 seed;" in readme  # one seed, singular
    page = (tmp_path / "index.html").read_text()
    assert 'href="html/one.html"' in page and (tmp_path / "html" / "two.html").stat().st_size > 0
    statuses = pd.read_csv(tmp_path / "verdicts" / "two.csv")["status"].tolist()
    assert statuses == ["inconclusive", "not testable", "not testable"]
    assert "effect [95% CI]" in page
    assert " inconclusive; neither detected nor excluded (more than 100 seeds at the observed effect); Holm: " \
           "inconclusive</td>" in page
    # a project term is explained on the page that uses it, and only there
    two, one = (tmp_path / "html" / "two.html").read_text(), (tmp_path / "html" / "one.html").read_text()
    assert "paired by seed: two methods run with the same seed share the initial weights" in two
    assert "Terms." not in one
    before = page
    build_index(tmp_path, ["one", "two"], profile="mini")
    assert (tmp_path / "index.html").read_text() == before  # deterministic


def test_index_names_a_missing_report(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        build_index(tmp_path, ["nope"], profile="mini")


def test_the_index_counts_a_claim_another_page_repeats_once(tmp_path):
    """A row that repeats another page's claim on the same runs (``repeats``, or the very same numbers) is shown on
    its page but counted once in the index's totals, its statuses and Holm's."""
    for name in ("one", "two"):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")]),
                       tmp_path / f"{name}.ipynb")
    a, b = ("a", {0: 3.0, 1: 4.0, 2: 5.0}), ("b", {0: 1.0, 1: 2.1, 2: 2.9})
    write_verdicts([compare("claim A", a, b), not_testable("claim C", "z")], tmp_path, "one")
    again = compare("claim A on page two", a, b)
    write_verdicts([again, replace(compare("claim A, repeated", a, b), repeats="claim A")], tmp_path, "two")
    build_index(tmp_path, ["one", "two"], profile="mini")
    readme = (tmp_path / "README.md").read_text()
    assert "2 claims, each counted once (2 rows repeat another row's claim, on its runs or a subset of them); " \
           "1 tested, 1 supported, 0 contradicted, 0 inconclusive; 1 not testable" in readme
    assert "under Holm's adjustment: 1 supported, 0 contradicted, 0 inconclusive, 0 not testable of the tested" \
        in readme
    assert "1 tested, 1 supported, 0 contradicted, 0 inconclusive; 1 not testable" in readme  # the index's totals
    assert readme.count("1 supported, 0 contradicted, 0 inconclusive, 1 not testable") == 1  # page one
    assert "2 supported, 0 contradicted, 0 inconclusive, 0 not testable" in readme  # page two shows both its rows
