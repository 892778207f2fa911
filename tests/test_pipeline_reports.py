"""A report's outputs, declared in its registry entry, are the notebook's own write_table / save_figure calls; the
params keys its notebook reads by name are covered by the params its stage declares. The notebooks' sources are
read here, by the tests, with :mod:`ast`: the product never parses its own source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from isogclr.reports.report_table import REPORTS

ROOT = Path(__file__).resolve().parents[1]


def _source(tmp_path: Path, text: str) -> Path:
    (tmp_path / "notebooks" / "src").mkdir(parents=True)
    (tmp_path / "notebooks" / "src" / "r.py").write_text(text)
    return tmp_path


def _literal_name(node: ast.expr) -> str | None:
    """The last string constant of a path expression (``Path(reports_dir) / "tables" / "x"`` -> ``"x"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _literal_name(node.right)
    return None


def written(name: str, root: Path = ROOT) -> tuple[list[str], list[str]]:
    """The stems the source ``notebooks/src/<name>.py`` writes: ``write_table(table, <path ending in "<stem>">)``
    and ``save_figure(fig, reports_dir, "<stem>")``, in source order; a computed name is an error naming the line."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    calls = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("write_table", "save_figure"):
            position = 1 if node.func.id == "write_table" else 2
            stem = _literal_name(node.args[position]) if len(node.args) > position else None
            if stem is None:
                raise ValueError(f"{path}:{node.lineno}: {node.func.id}(...) must name its output with a literal "
                                 "string (the registry lists it)")
            calls.append((node.lineno, node.func.id, stem))
    calls.sort()
    return ([s for _, f, s in calls if f == "write_table"], [s for _, f, s in calls if f == "save_figure"])


def test_the_source_scan_finds_every_call_in_order(tmp_path):
    root = _source(tmp_path, 'save_figure(fig, reports_dir, "late")\n'
                             'write_table(t, Path(reports_dir) / "tables" / "first", "caption")\n'
                             'if x:\n    write_table(t, tables / "second", caption=c)\n'
                             'save_figure(fig, reports_dir, "later")\n')
    assert written("r", root) == (["first", "second"], ["late", "later"])
    root = _source(tmp_path / "b", 'x = 1\nwrite_table(t, Path(reports_dir) / "tables" / name, "caption")\n')
    with pytest.raises(ValueError, match=r"r\.py:2: write_table\(\.\.\.\) must name its output with a literal"):
        written("r", root)


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_reports_declared_outputs_are_what_its_notebook_writes(name):
    tables, figures = written(name)
    assert (list(REPORTS[name].tables), list(REPORTS[name].figures)) == (tables, figures), (
        f"reports/report_table.py: {name}'s tables= and figures= must list what notebooks/src/{name}.py writes")


def test_every_committed_table_and_figure_belongs_to_exactly_one_report():
    owners: dict[str, str] = {}
    for name in REPORTS:
        tables, figures = REPORTS[name].outputs()
        assert tables or figures, name
        for out in tables + figures:
            assert out not in owners, f"{out} is written by {owners.get(out)} and {name}"
            owners[out] = name
            assert (ROOT / "reports" / out).is_file(), f"{name} writes reports/{out}, which is not committed"
    committed = {p.relative_to(ROOT / "reports").as_posix() for folder in ("tables", "figures")
                 for p in (ROOT / "reports" / folder).iterdir()}
    assert committed == set(owners)  # no table or figure that no report declares


_SECTION_HELPERS = {"table_spec": "{}", "study_spec": "studies.{}", "bimodal_study_spec": "bimodal_studies.{}"}


def notebook_params(name: str, root: Path = Path(".")) -> set[str]:
    """The params keys the report source ``notebooks/src/<name>.py`` reads by name: ``params["a"]["b"]`` (``a.b``),
    ``params.get("a")`` (``a``) and a section helper with a literal name (``table_spec(params, "table1")``:
    ``table1``; ``study_spec(params, "rho")``: ``studies.rho``). What a library function reads inside is not seen:
    this is the floor a report's declared ``params`` must cover (``tests/test_pipeline_reports.py``)."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    keys, inner = set(), set()  # inner: the subscripts inside a longer chain (params["a"] of params["a"]["b"])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Subscript) and id(node) not in inner:
            chain, current = [], node
            while isinstance(current, ast.Subscript) and isinstance(current.slice, ast.Constant) \
                    and isinstance(current.slice.value, str):
                chain.append(current.slice.value)
                inner.add(id(current))
                current = current.value
            if isinstance(current, ast.Name) and current.id == "params" and chain:
                keys.add(".".join(reversed(chain)))
        elif isinstance(node, ast.Call) and node.args:
            func, args = node.func, node.args
            if (isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Name)
                    and func.value.id == "params" and isinstance(args[0], ast.Constant)):
                keys.add(str(args[0].value))
            helper = func.id if isinstance(func, ast.Name) else None
            if (helper in _SECTION_HELPERS and len(args) >= 2 and isinstance(args[0], ast.Name)
                    and args[0].id == "params" and isinstance(args[1], ast.Constant)):
                keys.add(_SECTION_HELPERS[helper].format(args[1].value))
    return keys


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


def test_every_training_stage_of_the_record_is_quoted_by_a_report():
    """Every training family the forced repro timed (a stage that wrote runs) is some page's
    training, and every page's families are in the record, so no page's CPU minutes leave out or invent a stage."""
    import csv

    from isogclr.reports.stage_minutes import STAGE_RECORD

    with open(ROOT / STAGE_RECORD.path, newline="") as f:
        rows = list(csv.DictReader(f))
    trained = {row["family"] for row in rows if int(row["runs"]) > 0 or row["family"] == "emc2_convergence_runs"}
    quoted = {family for report in REPORTS.values() for family in report.trains}
    assert trained <= quoted, sorted(trained - quoted)
    assert quoted <= {row["family"] for row in rows}, sorted(quoted - {row["family"] for row in rows})


def test_training_minutes_sum_the_pages_stages_of_the_records_profile_only(tmp_path, monkeypatch):
    from isogclr.analysis.explain import minutes_clause, scale_sentence
    from isogclr.reports import report_table, stage_minutes

    record = tmp_path / "repro_stages_abc1234.csv"
    record.write_text("stage,start_s,end_s,seconds,ok,family,runs\n"
                      "pipelines/study_rho/dvc.yaml:study_rho,0,60,60.0,1,study_rho,12\n"
                      "pipelines/study_tau/dvc.yaml:study_tau@0,0,30,30.0,1,study_tau,6\n"
                      "pipelines/study_tau/dvc.yaml:study_tau@1,30,60,30.0,1,study_tau,6\n"
                      "ablations,60,90,30.0,1,ablations,0\n")
    monkeypatch.setattr(stage_minutes, "STAGE_RECORD", stage_minutes.StageRecord(str(record), "mini"))
    monkeypatch.setitem(report_table.REPORTS, "r", report_table.Report("r", {}, trains=("study_rho", "study_tau")))
    minutes = stage_minutes.training_minutes("r", {"profile": "mini"})
    assert minutes == pytest.approx(2.0)  # 60 + 30 + 30 s, not the report
    assert stage_minutes.training_minutes("r", {"profile": "smoke"}) is None  # not the runs the record timed
    assert stage_minutes.timed("r", {"profile": "smoke"}) == {"minutes": None, "commit": "abc1234"}
    monkeypatch.setitem(report_table.REPORTS, "q", report_table.Report("q", {}, trains=("study_gamma",)))
    with pytest.raises(ValueError, match="study_gamma"):
        stage_minutes.training_minutes("q", {"profile": "mini"})
    assert minutes_clause(None) == ""
    assert minutes_clause(2.0, "abc1234").startswith("; 2.0 CPU minutes of training (its training stages in the "
                                                     "forced repro of abc1234")
    assert "; 63 CPU minutes" in minutes_clause(63.385)
    params = {"model": {"encoder": {"arch": "resnet10", "width": 16}},
              "data": {"synthetic": {"per_class": {10: [100, 20]}, "image_size": 16}}}
    sentence = scale_sentence(params, {"synth10": 3}, 3, **stage_minutes.timed("r", {"profile": "mini"}))
    assert sentence.endswith("3 seeds; 2.0 CPU minutes of training (its training stages in the forced repro of "
                             "abc1234 that made these runs, two at a time on 2 cores).")
