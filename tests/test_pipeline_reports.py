"""A report's outputs are declared once, by the notebook's own write_table / save_figure calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from isogclr.report_registry import REPORTS, report_outputs

ROOT = Path(__file__).resolve().parents[1]


def _source(tmp_path: Path, text: str) -> Path:
    (tmp_path / "notebooks" / "src").mkdir(parents=True)
    (tmp_path / "notebooks" / "src" / "r.py").write_text(text)
    return tmp_path


def test_outputs_are_read_from_the_calls_in_source_order(tmp_path):
    root = _source(tmp_path, 'save_figure(fig, reports_dir, "late")\n'
                             'write_table(t, Path(reports_dir) / "tables" / "first", "caption")\n'
                             'if x:\n    write_table(t, tables / "second", caption=c)\n'
                             'save_figure(fig, reports_dir, "later")\n')
    assert report_outputs("r", root) == (["tables/first.md", "tables/first.csv", "tables/second.md",
                                          "tables/second.csv"], ["figures/late.png", "figures/later.png"])


def test_a_computed_name_is_an_error_naming_the_line(tmp_path):
    root = _source(tmp_path, 'x = 1\nwrite_table(t, Path(reports_dir) / "tables" / name, "caption")\n')
    with pytest.raises(ValueError, match=r"r\.py:2: write_table\(\.\.\.\) must name its output with a literal"):
        report_outputs("r", root)


def test_every_committed_table_and_figure_belongs_to_exactly_one_report():
    owners: dict[str, str] = {}
    for name in REPORTS:
        tables, figures = report_outputs(name, ROOT)
        assert tables or figures, name
        for out in tables + figures:
            assert out not in owners, f"{out} is written by {owners.get(out)} and {name}"
            owners[out] = name
            assert (ROOT / "reports" / out).is_file(), f"{name} writes reports/{out}, which is not committed"
    committed = {p.relative_to(ROOT / "reports").as_posix() for folder in ("tables", "figures")
                 for p in (ROOT / "reports" / folder).iterdir()}
    assert committed == set(owners)  # no table or figure that no report declares
