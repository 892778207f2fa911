"""Report tables: our runs' metrics, aggregated over seeds, beside the paper's numbers."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pandas as pd

from ..dataset_specs import SPECS
from ..io import save_text

MISSING = "—"  # a table's missing value in reports/tables/*.md
FIGURE_METADATA = "isogclr_figure"  # key of an inline figure's output metadata: its file, relative to reports/

# Our dataset -> the paper's dataset it stands in for (same role: balanced / long-tailed, 10 / 100 classes), as its
# declaration says (isogclr.dataset_specs.SPECS)
PAPER_COUNTERPART = {name: spec.counterpart for name, spec in SPECS.items() if spec.counterpart}


def paper_numbers(name: str) -> pd.DataFrame:
    """A table transcribed from a paper, shipped as ``isogclr/analysis/paper/<name>.csv``."""
    with resources.files("isogclr.analysis").joinpath("paper", f"{name}.csv").open() as f:
        return pd.read_csv(f, comment="#")


def collect_runs(runs_dir: Path | str, methods: list[str], datasets: list[str], seeds: list[int],
                 metric: str = "top1") -> pd.DataFrame:
    """One row per (method, dataset, seed) with ``metric`` from ``runs/<run-id>/metrics.json``.

    A missing run is an error, not a blank cell: a table must come from runs.
    """
    from ..config.core import run_id

    rows = []
    for m in methods:
        for d in datasets:
            for s in seeds:
                path = Path(runs_dir) / run_id(m, d, s) / "metrics.json"
                if not path.exists():
                    raise FileNotFoundError(f"{path} is missing: run `dvc repro` (or `python -m isogclr train "
                                            f"--method {m} --dataset {d} --seed {s}`)")
                rows.append({"method": m, "dataset": d, "seed": s, metric: json.loads(path.read_text())[metric]})
    return pd.DataFrame(rows)


def cell(mean: float, std: float | None = None, n: int | None = None) -> str:
    """A table cell to two decimals: ``mean ± std`` over ``n`` seeds.

    One convention for a spread that does not exist: ``mean (n=1)`` for one seed (never ``± 0.00`` or
    NaN); the mean alone where the source gives no spread (a paper's number without std: None or NaN).
    """
    if n is not None and n == 1:
        return f"{mean:.2f} (n=1)"
    return f"{mean:.2f}" if std is None or pd.isna(std) else f"{mean:.2f} ± {std:.2f}"


def mean_std(runs: pd.DataFrame, metric: str = "top1", by: tuple[str, ...] = ("method", "dataset")) -> pd.DataFrame:
    """Mean and (sample) std over seeds per group ``by``; std is 0 for a single seed."""
    grouped = runs.groupby(list(by), sort=False)[metric]
    out = grouped.agg(mean="mean", std="std", seeds="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


def side_by_side(ours: pd.DataFrame, paper: pd.DataFrame, paper_rows: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows: methods. Per dataset: our mean +- std and the paper's number on its counterpart dataset.

    ``paper_rows`` maps a method to the paper's row it is compared with (default: the same name).
    """
    paper_rows = paper_rows or {}
    table = pd.DataFrame(index=pd.Index(ours["method"].unique(), name="method"))
    for dataset in ours["dataset"].unique():
        counterpart = PAPER_COUNTERPART.get(dataset)
        mine = ours[ours["dataset"] == dataset].set_index("method")
        table[f"ours {dataset}"] = [cell(r["mean"], r["std"], r.get("seeds"))
                                    for _, r in mine.loc[table.index].iterrows()]
        if counterpart is not None:
            theirs = paper[paper["dataset"] == counterpart].set_index("method")
            rows = [paper_rows.get(m, m) for m in table.index]
            table[f"paper {counterpart}"] = [_paper_cell(theirs, r) for r in rows]
    return table


def _paper_cell(paper: pd.DataFrame, row: str) -> str:
    if row not in paper.index:
        return "n/a"
    return cell(paper.loc[row, "mean"], paper.loc[row, "std"])


def write_table(table: pd.DataFrame, stem: Path | str, caption: str) -> None:
    """``<stem>.md`` (caption + markdown table, a missing value shown as ``—``) and ``<stem>.csv``, atomically.

    A tracked table holds no wall clock (a rerun with the same results must write the same bytes): a column
    of seconds or samples/s is refused; show times from the timing record (:mod:`isogclr.epoch_times`)
    in the notebook instead."""
    clock = [c for c in [*table.columns, *table.index.names] if c and ("seconds" in str(c) or "per_s" in str(c))]
    if clock:
        raise ValueError(f"{stem}: the table has wall-clock column(s) {clock}: tracked tables hold no wall clock; "
                         "show the times from the timing record (isogclr.epoch_times.read) in the notebook, outside "
                         "the table")
    stem = Path(stem)
    save_text(f"{caption}\n\n{table.to_markdown(missingval=MISSING)}\n", stem.with_suffix(".md"))
    save_text(table.to_csv(), stem.with_suffix(".csv"))


def save_figure(fig, reports_dir: Path | str, name: str) -> None:
    """Write ``<reports_dir>/figures/<name>.png`` and show it inline when run in a notebook.

    100 dpi, without a software/timestamp tag (reruns are byte-stable). The notebook shows the very bytes
    of the file (an ``image/png`` output whose metadata names the file, ``figures/<name>.png``, which the
    reports index uses as the report's thumbnail); the figure is then closed, so no backend shows it again.
    """
    import matplotlib.pyplot as plt

    path = Path(reports_dir) / "figures" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is not None:
        from IPython.display import Image, display

        display(Image(data=path.read_bytes(), format="png",
                      metadata={FIGURE_METADATA: path.relative_to(Path(reports_dir)).as_posix()}))
