"""``reports/index.html`` and ``reports/README.md``: every report, rendered to HTML, with its verdicts.

Input per report ``name``: the executed notebook ``reports/<name>.ipynb`` (its title is the first
markdown heading) and its verdicts ``reports/verdicts/<name>.csv`` (:mod:`.verdicts`). Output:
``reports/html/<name>.html`` (nbconvert's ``basic`` template, wrapped in a small page that shares
``reports/html/style.css`` instead of embedding nbconvert's stylesheet in every file),
``reports/index.html`` and ``reports/README.md``.

A report page reads as a report: its claim (the notebook's first markdown cell), then its verdicts
(the table of the index), then the notebook's prose, tables and figures. Each code cell's input is
folded in a closed ``<details>`` ("code"; the notebook keeps it), and printed captions wrap instead of
scrolling sideways.
Deterministic: no timestamps, reports in the order given.
"""

from __future__ import annotations

import html
from pathlib import Path

import jinja2
import nbformat
import pandas as pd
from nbconvert import HTMLExporter

from ..analysis.explain import (MULTIPLICITY_NOTE, PRECONDITION_NOTE, SETTLED_NOTE, bottom_line, bottom_sentences,
                               effect_text, glossary, number_format)
from ..analysis.multiplicity import adjust, unique_rows
from ..analysis.tables import FIGURE_METADATA
from ..analysis.verdicts import COLUMNS, OUTCOMES, STATUSES, count_statuses
from ..io import save_text

_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:0 8px}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:4px;vertical-align:top;font-size:14px}"
          "pre{background:#f6f6f6;padding:6px;overflow-x:auto}img{max-width:100%}"
          "img.thumb{max-width:360px;border:1px solid #ccc}"
          # a printed caption is prose: it wraps at the page's edge instead of scrolling in a code box
          ".output_text pre{background:none;padding:0;white-space:pre-wrap;overflow-wrap:anywhere;"
          "font-family:sans-serif}"
          ".prompt{display:none}details.code{margin:4px 0}details.code summary{color:#777;font-size:12px;"
          "cursor:pointer}.verdicts{background:#f6f8fa;border-left:4px solid #888;padding:4px 12px}"
          ".verdicts td:nth-child(3){min-width:170px}\n")  # the effect and its interval on one or two lines
# nbconvert's basic template with each code cell's input folded in a closed <details>
_FOLDED = """{%- extends 'basic/index.html.j2' -%}
{% block input_group -%}
<details class="code"><summary>code</summary>
{{ super() }}
</details>
{%- endblock input_group %}
"""
_BACK = '<p><a href="../index.html">&larr; all reports</a></p>'  # on every report page, above and below
# glyphs in common text fonts (DejaVu, Liberation), not emoji: a page renders without an emoji font
_MARK = {"supported": "✓ supported", "contradicted": "✗ contradicted", "inconclusive": "? inconclusive",
         "not testable": "– not testable"}
assert tuple(_MARK) == STATUSES


_OUTCOME_WORDS = {"detected": "the paper's direction detected", "excluded": "the paper's effect excluded",
                  "neither": "neither detected nor excluded"}
assert tuple(_OUTCOME_WORDS) == OUTCOMES


def _verdict(r) -> str:  # noqa: ANN001
    """The status with its qualifier (the ``qualifier`` column, :func:`.verdicts.qualifier`): "✗ contradicted,
    settled", "✓ supported, not settled (p 0.61)", "? inconclusive (10 seeds would answer it at the paper's effect)",
    and the status under Holm's adjustment across all claims (``holm``, :mod:`.multiplicity`) when there is one."""
    text = _MARK[r.status] + (f"; {_OUTCOME_WORDS[r.outcome]}" if r.outcome else "")
    if r.qualifier:
        text += f"; {r.qualifier}" if r.status in ("supported", "contradicted") else f" ({r.qualifier})"
    holm = getattr(r, "holm", "")
    return text + (f"; Holm: {holm}" if holm else "")


def _settled_summary(verdicts: pd.DataFrame) -> str:
    """"; 9 of 14 supported or contradicted settled across machines" ("" when there is none)."""
    decided = verdicts[verdicts["status"].isin(("supported", "contradicted"))]
    settled = (decided["qualifier"] == "settled").sum()
    return f"; {settled} of {len(decided)} supported or contradicted settled across machines" if len(decided) else ""


def _effect(r) -> str:  # noqa: ANN001
    """A verdict row's effect with its interval, seeds and the paper's effect ("" where there is none)."""
    if r.effect == "":
        return ""
    text = effect_text(r.effect, r.ci_low, r.ci_high)
    spec = number_format(r.effect, r.ci_low, r.ci_high).lstrip("+")
    seeds = [f"{int(r.n_seeds)} seed{'s' * (int(r.n_seeds) != 1)}"] if r.n_seeds != "" else []
    notes = (seeds or (["exact"] if r.ci_low != "" else [])) + ([f"paper {r.paper_effect:+.3g}"]
                                                               if r.paper_effect != "" else [])
    if r.mde != "":
        notes.append(f"MDE {r.mde:{spec}}")
    if r.seeds_needed != "":
        notes.append(f"paper's size needs {r.seeds_needed} seeds")
    return text + (f" ({'; '.join(notes)})" if notes else "")


METHOD = ("A claim's effect is signed so that positive is the paper's direction (for a comparison: the mean over "
          "seeds of the paired difference of two methods run with the same seed), with its 95% interval (Student "
          "t over seeds; for tau against class or cluster frequency, a slope with a group effect, its interval "
          "from a bootstrap over seeds): supported or contradicted when the interval excludes 0, inconclusive "
          "when it contains 0, not testable with one seed, no counterpart at this scale, no runs, no learning, "
          "or a failed precondition. Beside the status, what a reader can act on: the paper's direction "
          "detected (supported), the paper's effect excluded (the interval lies below it), or neither (the "
          "interval holds both 0 and the paper's effect: the row says how many seeds would answer it). The "
          "machine matters: a forced rerun on another machine type is a new draw of the training noise "
          "(reports/benchmarks/cross_machine.md; each run's artifacts/machine.json names the machine that made "
          "it). " + SETTLED_NOTE + " " + PRECONDITION_NOTE + " " + MULTIPLICITY_NOTE + " At the mini scale the "
          "verdicts test the direction of the papers' claims on small generated data, not their numbers; every "
          "rule: docs/reports.md.")  # the index's "How to read a verdict", folded


def _headline(verdicts: pd.DataFrame) -> str:
    """The first sentence of a page's bottom line (:func:`.explain.bottom_sentences`): the index's line per page."""
    return (bottom_sentences(verdicts) or ["no claim."])[0]


def _claim(r) -> str:  # noqa: ANN001
    """The claim, and the runs it reads when they are not its page's main runs ("runs: studies/...: 8 epochs")."""
    return r.claim + (f" [runs: {r.runs}]" if r.runs else "")


def _outcome_summary(verdicts: pd.DataFrame) -> str:
    """"; the paper's direction detected in 3, its effect excluded in 6, neither in 40" over the tested rows."""
    counts = {o: int((verdicts["outcome"] == o).sum()) for o in OUTCOMES}
    if not sum(counts.values()):
        return ""
    return (f"; the paper's direction detected in {counts['detected']}, its effect excluded in {counts['excluded']}, "
            f"neither in {counts['neither']}")


def _power_summary(verdicts: pd.DataFrame) -> str:
    """", median minimum detectable effect 2.10 over 12 paired comparisons" ("" when none has one)."""
    mde = pd.to_numeric(verdicts["mde"], errors="coerce").dropna()
    return f"; median minimum detectable effect {mde.median():.2f} over {len(mde)} paired comparisons" \
        if len(mde) else ""


def _tested_summary(counts: dict[str, int]) -> str:
    """"12 supported, 7 contradicted, 39 inconclusive; 20 not testable": the tested, then the rest."""
    return ", ".join(f"{n} {s}" for s, n in counts.items() if s != "not testable") + \
        f"; {counts.get('not testable', 0)} not testable"


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def first_figure(notebook: Path, reports_dir: Path) -> str | None:
    """The first figure a report shows (``figures/<name>.png``, relative to ``reports_dir``), if its file exists.

    :func:`isogclr.analysis.tables.save_figure` names the file in the metadata of the inline image.
    """
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            figure = output.get("metadata", {}).get("image/png", {}).get(FIGURE_METADATA)
            if figure and (reports_dir / figure).is_file():
                return figure
    return None


def _figures_as_files(nb, reports_dir: Path):  # noqa: ANN001, ANN202
    """The page shows a saved figure from its file (``../figures/<name>.png``) instead of a copy in base64."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            figure = output.get("metadata", {}).get("image/png", {}).get(FIGURE_METADATA)
            if figure and (reports_dir / figure).is_file():
                output.metadata["filenames"] = {"image/png": f"../{figure}"}
    return nb


def notebook_title(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def _verdicts(reports_dir: Path, name: str) -> pd.DataFrame:
    path = reports_dir / "verdicts" / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the report notebook {name} must end with write_verdicts(...)")
    table = pd.read_csv(path, dtype={"seeds_needed": str})
    for column in COLUMNS:  # a table written before a column existed reads as if it had none
        if column not in table:
            table[column] = None
    return table.astype(object).fillna("")  # "" where a verdict has no number


def _evidence(text: str) -> str:
    """A verdict's evidence as one line, its first clause, the rest folded in a closed ``<details>``."""
    head, _, rest = text.partition("; ")
    return html.escape(head) + (f"<details><summary>more</summary>{html.escape(rest)}</details>" if rest else "")


def _verdict_rows_html(verdicts: pd.DataFrame) -> str:
    rows = "".join(f"<tr><td>{html.escape(_claim(r))}</td><td>{html.escape(_verdict(r))}</td>"
                   f"<td>{html.escape(_effect(r))}</td><td>{_evidence(r.evidence)}</td></tr>"
                   for r in verdicts.itertuples())
    return (f"<table><tr><th>claim</th><th>verdict</th><th>effect [95% CI]</th><th>evidence</th></tr>{rows}"
            "</table>")


def report_exporter() -> HTMLExporter:
    """nbconvert's ``basic`` HTML exporter, each code cell's input folded in a closed ``<details>``."""
    return HTMLExporter(template_name="basic", template_file="folded.html.j2",
                        extra_loaders=[jinja2.DictLoader({"folded.html.j2": _FOLDED})])


def _bottom(verdicts: pd.DataFrame) -> str:
    """The report's bottom line in words (:func:`.explain.bottom_line`) from its verdict table."""
    return bottom_line(verdicts)


def scale_of(notebook: Path) -> str:
    """The notebook's sentence of scale: the first printed line starting with "Scale: " ("" when none)."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            for line in str(output.get("text", "")).splitlines():
                if line.startswith("Scale: "):
                    return line
    return ""


def _verdicts_up_front(nb, verdicts: pd.DataFrame, scale: str = ""):  # noqa: ANN001, ANN202
    """The notebook with, after its first markdown cell (the claim), its bottom line, its scale, its verdicts and
    the shared notes on "settled", preconditions and multiplicity, and the meaning of each project term the page
    uses (:func:`isogclr.analysis.explain.glossary`)."""
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), -1)
    page = "\n".join([c.source for c in nb.cells]
                     + [str(o.get("text", "")) for c in nb.cells for o in c.get("outputs", [])])
    notes = " ".join(html.escape(n) for n in (SETTLED_NOTE, PRECONDITION_NOTE, MULTIPLICITY_NOTE, glossary(page)) if n)
    cell = nbformat.v4.new_markdown_cell(
        f'<div class="verdicts">\n\n**{html.escape(_bottom(verdicts))}** {html.escape(scale)}\n\n'
        f'**Verdicts** ({_summary(count_statuses(verdicts["status"]))}; computed at the '
        f"end of this report)\n\n{_verdict_rows_html(verdicts)}\n\n<small>{notes}</small>\n\n</div>")
    cell.id = "verdicts"  # a fixed id: the page's bytes depend only on the notebook
    nb.cells.insert(first + 1, cell)
    return nb


def build_index(reports_dir: Path | str, names: list[str], profile: str) -> None:
    reports_dir = Path(reports_dir)
    exporter = report_exporter()
    save_text(_STYLE, reports_dir / "html" / "style.css")
    sections_md, sections_html = [], []
    for name in names:
        if not (reports_dir / f"{name}.ipynb").exists():
            raise FileNotFoundError(f"{reports_dir / f'{name}.ipynb'} is missing: run `dvc repro` first")
    loaded = {name: _verdicts(reports_dir, name) for name in names}
    together = pd.concat([v.assign(report=n) for n, v in loaded.items()], ignore_index=True) if loaded else None
    holm, tested = adjust(together) if together is not None and len(together) else (pd.Series(dtype=str), 0)
    start = 0
    for name in names:
        loaded[name] = loaded[name].assign(holm=holm.iloc[start:start + len(loaded[name])].to_numpy())
        start += len(loaded[name])
    for name in names:
        notebook = reports_dir / f"{name}.ipynb"
        title, verdicts = notebook_title(notebook), loaded[name]
        scale = scale_of(notebook)
        nb = _verdicts_up_front(_figures_as_files(nbformat.read(notebook, as_version=4), reports_dir), verdicts, scale)
        body, _ = exporter.from_notebook_node(nb)
        save_text(f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                  f"<link rel='stylesheet' href='style.css'></head><body>\n{_BACK}\n{body}\n{_BACK}\n</body></html>\n",
                  reports_dir / "html" / f"{name}.html")
        mine = count_statuses(verdicts["status"])
        figure = first_figure(notebook, reports_dir)
        thumb_md = f"[![{title}]({figure})](html/{name}.html)\n\n" if figure else ""
        thumb_html = (f'<a href="html/{name}.html"><img class="thumb" src="{html.escape(figure)}" '
                      f'alt="{html.escape(title)}"></a>\n' if figure else "")
        sections_md.append(f"## [{title}]({name}.ipynb)\n\nHTML: [html/{name}.html](html/{name}.html)\n\n{thumb_md}"
                           f"**{_bottom(verdicts)}** {scale}\n\n"
                           f"{_summary(mine)}{_settled_summary(verdicts)}{_power_summary(verdicts)}\n\n"
                           "| claim | verdict | effect [95% CI] | evidence |\n|---|---|---|---|\n"
                           + "".join(f"| {_claim(r)} | {_verdict(r)} | {_effect(r)} | {_evidence(r.evidence)} |\n"
                                     for r in verdicts.itertuples()))
        sections_html.append(f'<h2><a href="html/{name}.html">{html.escape(title)}</a></h2>\n{thumb_html}'
                             f"<p><b>{html.escape(_bottom(verdicts))}</b> {html.escape(scale)}</p>\n"
                             f"<p>{_summary(mine)}{_settled_summary(verdicts)}{_power_summary(verdicts)}</p>\n"
                             f"{_verdict_rows_html(verdicts)}")
    # the totals count each claim once: a row that repeats another's claim on the same runs is shown on its page only
    once = together.loc[unique_rows(together).unique()] if together is not None and len(together) else None
    repeated = len(together) - len(once) if once is not None else 0
    summary = (f"{0 if once is None else len(once)} claims, each counted once"
               + (f" ({repeated} rows repeat another row's claim, on its runs or a subset of them)" if repeated else "")
               + f"; {tested} tested, " + _tested_summary(count_statuses([] if once is None else once["status"]))
               + (_settled_summary(once) if once is not None else "")
               + (f"; under Holm's adjustment: {_summary(count_statuses(s for s in holm.loc[once.index] if s))} of "
                  "the tested" if tested else ""))
    findings = [(name, notebook_title(reports_dir / f"{name}.ipynb"), _headline(loaded[name]))
                for name in names]
    outcomes = _outcome_summary(once) if once is not None else ""
    found = (f"What the replication found, profile `{profile}` ({summary}{outcomes}; each page's bottom line below, "
             "generated from its verdicts):")
    listing_md = "".join(f"- [{title}](html/{name}.html): {line}\n" for name, title, line in findings)
    listing_html = "".join(f'<li><a href="html/{name}.html">{html.escape(title)}</a>: {html.escape(line)}</li>'
                           for name, title, line in findings)
    save_text(f"# isogclr reports\n\n{found}\n\n{listing_md}\n<details><summary>How to read a verdict</summary>\n\n"
              f"{METHOD}\n\n</details>\n\n" + "\n".join(sections_md), reports_dir / "README.md")
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>isogclr reports</title>"
            f"<link rel='stylesheet' href='html/style.css'></head><body>\n<h1>isogclr reports</h1>\n"
            f"<p>{html.escape(found)}</p>\n<ul>{listing_html}</ul>\n"
            f"<details><summary>How to read a verdict</summary><p>{html.escape(METHOD)}</p></details>\n"
            + "\n".join(sections_html) + "\n</body></html>\n")
    save_text(page, reports_dir / "index.html")
