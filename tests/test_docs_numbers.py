"""The measured numbers the docs quote are the generated tables' (reports/tables, reports/verdicts) and
params.yaml's: a rerun that moves one fails here, naming the doc to update."""

from __future__ import annotations

import re
import statistics
from decimal import ROUND_HALF_UP, Decimal

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


# a duration a doc states: a number or a range and a unit of time ("90.1 min", "11-54 ms", "5-minute", "41 s"), or
# "an hour", "a minute"
_NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
DURATION = re.compile(rf"(?<![\w.,])(?P<number>{_NUMBER})(?:\s*(?:-|–|to)\s*(?P<upper>{_NUMBER}))?(?:\s*|-)"
                      r"(?:ms|s|secs?|seconds?|mins?|minutes?|h|hours?)(?![\w(])"
                      r"|\b(?:an?|one|half an?)\s+(?:hour|minute)s?\b", re.I)
# a generated record a paragraph can name: an output under reports/ (timing.md, benchmarks/, testbed/, the stage
# log, ...) or the timing record timing.csv
RECORD = re.compile(r"(?<![\w/])(?:reports/[\w./*-]*\w|timing\.csv)")


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs, list items and table rows: the scope in which a figure names the record it comes from."""
    return [p for p in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\|))", text) if p.strip()]


def _holds(numbers: set[str], quoted: str) -> bool:
    """Whether a record's ``numbers`` hold ``quoted`` as written or rounded to its decimals (0.255 quoted as 0.26)."""
    places = len(quoted.partition(".")[2])
    return any(n == quoted or (len(n.partition(".")[2]) > places and
                               Decimal(n).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP) == Decimal(quoted))
               for n in numbers)


def unsourced(text: str, root) -> list[str]:
    """The durations of ``text`` that no record named in their paragraph holds (the number, as written or rounded
    to its decimals, in one of the files the paragraph names, globs such as ``reports/benchmarks/noise*.md``
    included)."""
    bad = []
    for paragraph in paragraphs(text):
        records = [f for name in set(RECORD.findall(paragraph)) for f in sorted(root.glob(name)) if f.is_file()]
        numbers = {n for f in records for n in re.findall(r"\d+(?:\.\d+)?", f.read_text(errors="replace")
                                                           .replace(",", ""))}
        for found in DURATION.finditer(paragraph):
            quoted = [q.replace(",", "") for q in (found["number"], found["upper"]) if q]  # none: a duration in words
            if not quoted or not all(_holds(numbers, q) for q in quoted):
                named = ", ".join(sorted(r.relative_to(root).as_posix() for r in records)) or "no record"
                bad.append(f"{found[0]!r} (its paragraph names {named}): {' '.join(paragraph.split())[:160]}")
    return bad


def test_a_duration_is_checked_against_the_records_its_paragraph_names(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "timing.md").write_text("the schedule took **90.1 min**; 1,234 s in all; 0.255 53.93\n")
    assert unsourced("The last repro took 90.1 minutes (`reports/timing.md`), 1,234 s of stages.", tmp_path) == []
    assert unsourced("Rounded: 0.26 ms and 54 ms (reports/timing.md).", tmp_path) == []
    assert len(unsourced("The last repro took 56.8 minutes (`reports/timing.md`).", tmp_path)) == 1
    assert len(unsourced("The last repro took 90.1 minutes.\n\nIts record: `reports/timing.md`.", tmp_path)) == 1
    assert len(unsourced("58 to 90.1 minutes, 0.25 ms, 89 min (reports/timing.md).", tmp_path)) == 3
    assert len(unsourced("It takes about an hour, or a 5-minute wait (reports/timing.md).", tmp_path)) == 2
    assert unsourced("L = 25 s(Z, Z'); 3 seeds, 16 px, Tables 3/4's second budget, 12 epochs.", tmp_path) == []


@pytest.mark.parametrize("path", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").glob("*.md"))])
def test_every_duration_comes_from_a_record_its_paragraph_names(path):
    """A minutes or seconds figure is the generated record's (reports/timing.md, reports/benchmarks/*.md, the stage
    logs, timing.csv), named beside it, so that a rerun that moves it fails here; a duration no record holds is not
    stated (the prose points to the record instead)."""
    bad = unsourced((ROOT / path).read_text(), ROOT)
    assert not bad, f"{path}: durations not read from a record named in their paragraph:\n" + "\n".join(bad)
