"""The measured numbers the docs quote are the generated tables' (reports/tables, reports/verdicts) and
params.yaml's: a rerun that moves one fails here, naming the doc to update."""

from __future__ import annotations

import re
import statistics

import pandas as pd
import pytest

from isogclr.config.profiles import load_params

from .conftest import ROOT


def _quoted(doc: str, pattern: str) -> tuple[str, ...]:
    text = " ".join((ROOT / doc).read_text().split())  # prose wraps anywhere
    found = re.search(pattern, text)
    assert found, f"{doc}: no sentence matches {pattern!r} (reworded? update this test with it)"
    return found.groups()


def test_reports_md_quotes_the_testbed_and_the_table1_verdicts():
    refs = pd.read_csv(ROOT / "reports" / "tables" / "testbed_references.csv").set_index("dataset")
    synth, lt = refs.loc["synth10"], refs.loc["synth10_lt"]
    quoted = _quoted("docs/reports.md", r"stands at ([\d.]+)% on synth10 and ([\d.]+)% on its long-tailed set, "
                                        r"(\d+) and (\d+) points above the better no-learning probe and (\d+) and "
                                        r"(\d+) below")
    assert quoted == (f"{synth.simclr:.2f}", f"{lt.simclr:.2f}", *(f"{v:.0f}" for v in (
        synth.simclr - synth.floor, lt.simclr - lt.floor, synth.supervised - synth.simclr,
        lt.supervised - lt.simclr))), "docs/reports.md: update the testbed's numbers"
    verdicts = pd.read_csv(ROOT / "reports" / "verdicts" / "table1_unimodal.csv")
    synthetic = verdicts[verdicts.claim.str.match(r"Table 1: \w+ > \w+ on synth")]
    assert len(synthetic) == 6
    quoted = _quoted("docs/reports.md", r"at (\d+) seeds the median minimum detectable effect of the six Table 1 "
                                        r"comparisons on the synthetic sets is ([\d.]+) points .* against paper "
                                        r"effects of ([\d.]+)-([\d.]+) points")
    assert quoted == (str(synthetic.n_seeds.max()), f"{statistics.median(synthetic.mde):.2f}",
                      f"{synthetic.paper_effect.min():.1f}", f"{synthetic.paper_effect.max():.1f}"), \
        "docs/reports.md: update the verdicts' numbers"


def test_pipeline_md_counts_table1_runs():
    table = load_params(ROOT / "params.yaml")["table1"]
    (runs,) = _quoted("docs/pipeline.md", r"Table 1's (\d+) runs")
    assert int(runs) == len(table["methods"]) * len(table["datasets"]) * len(table["seeds"])


@pytest.mark.parametrize("path", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").glob("*.md"))])
def test_the_docs_name_files_that_exist(path):
    """Every `src/...`, `notebooks/...`, `train/...`-style path a doc names in backquotes exists (a moved or
    removed module is not left behind in the prose)."""
    text = (ROOT / path).read_text()
    named = set(re.findall(r"`((?:src/isogclr|notebooks|tests|docs)/[\w/.-]+\.(?:py|md|ipynb))`", text))
    written = set(re.findall(r"<!-- tutorial: file (\S+) -->", text))  # the walk-throughs' new files
    missing = sorted(n for n in named - written if not (ROOT / n).exists() and "<" not in n)
    assert not missing, f"{path} names files that do not exist: {missing}"


def test_the_readme_lists_every_doc():
    layout = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"docs/ ((?:[\w]+\.md,? )+)", layout)
    assert listed, "README.md: no docs/ line in the layout"
    assert set(re.findall(r"\w+\.md", listed.group(1))) == {p.name for p in (ROOT / "docs").glob("*.md")}
