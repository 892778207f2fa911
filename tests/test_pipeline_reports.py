"""A report's outputs are declared once, by the notebook's own write_table / save_figure calls; the params keys
its notebook reads by name are covered by the params its stage declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from isogclr.report_registry import REPORTS, notebook_params, report_outputs

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


def test_the_params_a_notebook_reads_by_name_are_found(tmp_path):
    root = _source(tmp_path, 'a = params["table1"]["seeds"]\nb = params.get("data")\nc = table_spec(params, "table3")\n'
                             'd = study_spec(params, "rho")\ne = bimodal_study_spec(params, "bimodal_epochs")\n'
                             'f = other["x"]\ng = params[name]\n')
    assert notebook_params("r", root) == {"table1.seeds", "data", "table3", "studies.rho",
                                          "bimodal_studies.bimodal_epochs"}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_reports_params_cover_what_its_notebook_reads(name):
    """Each section a notebook reads by name is declared (the key itself, a parent, or a key below it: a whole
    section read through ``.get`` is declared by the keys it uses); studies are declared by their ``report``."""
    declared = REPORTS[name].params
    missing = sorted(key for key in notebook_params(name, ROOT)
                     if not key.startswith(("studies.", "bimodal_studies."))
                     and not any(key == p or key.startswith(p + ".") or p.startswith(key + ".") for p in declared))
    assert not missing, f"report {name}: its notebook reads {missing}, which its params {declared} do not cover"
