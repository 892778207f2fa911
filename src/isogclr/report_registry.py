"""The report notebooks the pipeline runs (:data:`REPORTS`): what each is given (papermill ``-p``), reads and
writes; its tables and figures are read from the notebook's own calls (:func:`report_outputs`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Report:
    """A report notebook: what it is given (papermill ``-p``), what it reads and what it writes.

    Code dependencies are not listed: they are the ``isogclr`` imports of ``notebooks/src/<name>.py``.
    Studies are not listed either: a study names its report (``studies.<name>.report``). Nor are its tables and
    figures: they are read from the notebook's own ``write_table`` / ``save_figure`` calls (:func:`report_outputs`).
    """

    comment: str
    papermill: dict[str, str]
    reads: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    paper: tuple[str, ...] = ()  # transcribed paper tables (src/isogclr/analysis/paper/<name>.csv)
    selection: str | None = None  # the selection section it shows (tuning/<m>/ of its methods), if params has it


_RUNS = {"params_path": "params.yaml", "runs_dir": "runs", "reports_dir": "reports"}
REPORTS: dict[str, Report] = {
    "table1_unimodal": Report(
        "iSogCLR Tables 1, 3/4, 10; Table 1 on Fashion-MNIST",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),
        params=("profile", "table1", "table1_real", "table3", "references", "train.epochs", "train.epochs_by_dataset",
                "data.fashion_mnist_mini"),
        paper=("isogclr_table1", "isogclr_table34")),
    "temperature_vs_frequency": Report(
        "iSogCLR Sec. 6.3, Figure 5: learned tau vs semantic frequency", _RUNS, reads=("runs",),
        params=("profile", "temperatures", "table1.seeds")),
    "feature_tsne": Report(
        "iSogCLR Figures 4-5: t-SNE of frozen features (first three Table 1 seeds)", _RUNS, reads=("runs",),
        params=("profile", "table1.datasets", "table1.seeds", "temperatures.datasets")),
    "rgcl_analysis": Report(
        "iSogCLR Figures 2-3, computed exactly (no training)",
        {"reports_dir": "reports", "params_path": "params.yaml"},  # rho and tau of the untuned runs
        params=("methods.isogclr", "methods.simclr")),
    "ablations": Report(
        "iSogCLR Tables 8/9, Figures 7-9; SogCLR Table 8",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),  # Table 1's seed spread is the noise yardstick
        params=("profile", "table1", "methods.isogclr", "methods.sogclr"),
        paper=("isogclr_table8", "isogclr_table9", "sogclr_table8")),
    "small_batch": Report(
        "SogCLR Tables 2/3/6; EMC2 curves and burn-in",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),  # runs: the no-learning floor (references)
        params=("profile", "references"), paper=("sogclr_batch",)),
    "emc2_convergence": Report(
        "EMC2 Fig. 7 (exact gradient norm) and Fig. 3 (pre-computed views): reads emc2_convergence_runs",
        {"params_path": "params.yaml", "runs_dir": "runs_convergence", "reports_dir": "reports"},
        reads=("runs_convergence",), params=("profile", "emc2_convergence")),
    "budget_ladder": Report(
        "iSogCLR Table 1 and Sec. 6.3 against the budget: the ladders (studies with report: budget_ladder), "
        "and the selection on the validation split",
        {**_RUNS, "studies_dir": "studies", "tuning_dir": "tuning"}, reads=("runs",), selection="tuning",
        params=("profile", "table1", "table1_real", "references", "methods", "train.epochs",
                "train.epochs_by_dataset"),
        paper=("isogclr_table1",)),
    "bimodal": Report(
        "iSogCLR Tables 2/5-7, Figures 1 (right), 6/10/11, appendix C.3; SogCLR Table 4",
        {"params_path": "params.yaml", "runs_dir": "runs_bimodal", "studies_dir": "studies", "reports_dir": "reports",
         "tuning_dir": "tuning"},
        reads=("runs_bimodal", "data/synthetic_pairs.json"),  # the images of the tau-extremes figure
        selection="bimodal_tuning",
        params=("profile", "bimodal", "methods.clip_individual_tau", "methods.clip_large_tau"),
        paper=("isogclr_table2", "sogclr_table4")),
    "testbed": Report(
        "How much the mini runs learn (reference rows, the calibration's thresholds) and the central verdicts "
        "before and after the calibration, SogCLR/iSogCLR at SimCLR's gradient scale, the seeds allocated by power, "
        "keyed draws and what pairing by seed buys, and this repro against the last",
        {**_RUNS, "studies_dir": "studies"},
        reads=("runs", "studies", "reports/benchmarks/calibration.csv", "reports/testbed/verdicts_de3cb0e.csv",
               "reports/testbed/verdicts_0a8d8bf.csv", "reports/testbed/verdicts_fdc1988.csv",
               "reports/testbed/verdicts_ef22ab9.csv", "reports/testbed/verdicts_022cafd.csv",
               "reports/testbed/verdicts_621e4fa.csv",
               "reports/testbed/verdicts_ec849f6.csv", "reports/testbed/verdicts_173e730.csv",
               "reports/testbed/verdicts_31bed6e.csv", "reports/testbed/repro_stages_e934723.csv",
               "reports/testbed/verdicts_d775366.csv", "reports/testbed/verdicts_7b57a8e.csv",
               *(f"reports/verdicts/{name}.csv" for name in ("table1_unimodal", "temperature_vs_frequency",
                                                              "budget_ladder", "bimodal", "ablations", "small_batch",
                                                              "emc2_convergence", "feature_tsne", "rgcl_analysis"))),
        params=("profile", "references", "table1", "table1_real", "studies")),
}


def _literal_name(node: ast.expr) -> str | None:
    """The last string constant of a path expression (``Path(reports_dir) / "tables" / "x"`` -> ``"x"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _literal_name(node.right)
    return None


def report_outputs(name: str, root: Path = Path(".")) -> tuple[list[str], list[str]]:
    """``(tables, figures)`` that the report source ``notebooks/src/<name>.py`` writes, relative to ``reports/``:
    ``tables/<stem>.md`` and ``tables/<stem>.csv`` per ``write_table(table, <path ending in "<stem>">, ...)``
    (:func:`isogclr.analysis.tables.write_table` writes both) and ``figures/<stem>.png`` per
    ``save_figure(fig, reports_dir, "<stem>")``, in the order of the source. The notebook is the one
    declaration of a report's outputs; a name that is not a literal string is an error naming the line."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    tables, figures = [], []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("write_table", "save_figure")):
            continue
        position = 1 if node.func.id == "write_table" else 2
        stem = _literal_name(node.args[position]) if len(node.args) > position else None
        if stem is None:
            raise ValueError(f"{path}:{node.lineno}: {node.func.id}(...) must name its output with a literal string "
                             "(the pipeline reads a report's outputs from its source)")
        if node.func.id == "write_table":
            tables += [(node.lineno, f"tables/{stem}.md"), (node.lineno, f"tables/{stem}.csv")]
        else:
            figures.append((node.lineno, f"figures/{stem}.png"))
    return ([out for _, out in sorted(tables, key=lambda p: p[0])],
            [out for _, out in sorted(figures, key=lambda p: p[0])])


# the config helpers a notebook calls with a literal section name: ``table_spec(params, "table1")`` reads table1
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
