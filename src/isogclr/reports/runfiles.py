"""The run files a report reads, their schemas, and the check that each can be read, run before a report's notebook.

A report reads run folders (:mod:`isogclr.train.loop` writes them: ``metrics.json``, ``knobs.json``,
``train_log.csv``, ``artifacts/config.json``, ``artifacts/tau.csv``), the convergence study's tables and a few
other CSV and JSON files. A truncated file, a renamed column or a NaN would otherwise surface deep inside the
notebook as pandas' "Expected 5 fields in line 632, saw 8", naming neither the file nor the run.
:func:`check_report` reads every such file under what the report reads (:func:`report_paths`: its ``reads`` and its
studies, at the folders its papermill parameters give) against its schema (:data:`SCHEMAS`) and raises one
:class:`RunFileError` listing every bad file, each problem as ``<path>:<line>: expected ..., found ...`` (lines
1-based, as an editor counts them). A CSV or JSON file without a schema is still checked for shape: every CSV row
has its header's number of fields and ends with a line end, every JSON file parses.

Reports do not read DVCLive's curves (``dvclive/``) nor a run's untracked ``local/`` folder: neither is checked.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io import TextFileError, read_text

SKIPPED_FOLDERS = ("dvclive", "local")
PER_FILE = 3  # problems listed per file; the rest are counted
FILES_LISTED = 20  # files listed in the error; the rest are counted


class RunFileError(ValueError):
    """Run files that cannot be read: ``problems`` holds one line per problem, each naming file, line and
    expectation."""

    def __init__(self, problems: list[str], files: int) -> None:
        self.problems, self.files = problems, files
        super().__init__(f"{files} run file{'s' * (files != 1)} cannot be read:\n" + "\n".join(
            f"  {p}" for p in problems))


@dataclass(frozen=True)
class CsvSchema:
    """A CSV run file: its ``columns`` (exactly these, in this order, when ``exact``; else at least these), the
    ``integers`` and ``positive`` numbers among them, whether every cell is a finite number (``all_numbers``; else
    only ``integers`` and ``positive`` are), and ``counted``, a column that numbers the rows 0, 1, 2, ... (a missing
    row in the middle shows there)."""

    what: str
    columns: tuple[str, ...]
    integers: tuple[str, ...] = ()
    positive: tuple[str, ...] = ()
    all_numbers: bool = False
    exact: bool = True
    counted: str | None = None


@dataclass(frozen=True)
class JsonSchema:
    """A JSON run file: an object with the ``keys`` (a dotted key is nested: ``method.kwargs``); ``numbers``: every
    value is a finite number (metrics); ``finite``: any number in it is finite (NaN and Infinity are not JSON)."""

    what: str
    keys: tuple[str, ...]
    numbers: bool = False
    finite: bool = True


_TAU_IMAGE = CsvSchema("an image run's per-sample temperatures",
                       ("index", "source_index", "label", "superclass", "tau"),
                       integers=("index", "source_index", "label", "superclass"), positive=("tau",), counted="index")
_TAU_PAIRS = CsvSchema("an image-text run's per-pair temperatures",
                       ("index", "image", "cluster", "cluster_frequency", "mismatched", "caption", "tau_image",
                        "tau_text"),
                       integers=("index", "cluster", "cluster_frequency", "mismatched"),
                       positive=("tau_image", "tau_text"), counted="index")
_TRAIN_LOG = CsvSchema("a run's per-epoch log", ("epoch", "step", "samples_seen", "loss", "lr", "grad_norm"),
                       integers=("epoch", "step", "samples_seen"), all_numbers=True, exact=False)
_CONVERGENCE = CsvSchema("the convergence study's curves",
                         ("seed", "method", "num_augmentations", "epoch", "step", "samples_seen", "objective",
                          "grad_norm_sq"),
                         integers=("seed", "num_augmentations", "epoch", "step", "samples_seen"),
                         positive=("grad_norm_sq",))
_AUGMENTATIONS = CsvSchema("the convergence study's pre-computed views",
                           ("seed", "method", "num_augmentations", "epochs", "samples_seen", "objective",
                            "grad_norm_sq", "knn1_top1"),
                           integers=("seed", "num_augmentations", "epochs", "samples_seen"),
                           positive=("grad_norm_sq",))
_METRICS = (JsonSchema("an image run's metrics", ("top1",), numbers=True),
            JsonSchema("a dataset's no-learning references", ("chance", "floor_top1"), numbers=True),
            JsonSchema("an image-text run's metrics", ("retrieval_a_ir_r1", "retrieval_a_tr_r1"), numbers=True),
            # an image-text selection candidate (tuning/<method>/runs/): recall on the held-out training pairs
            JsonSchema("an image-text candidate's validation metrics", ("validation_ir_r1", "validation_tr_r1"),
                       numbers=True))
_CONFIG = (JsonSchema("a run's resolved config", ("run_id", "seed", "method.name", "method.kwargs", "train"),
                      finite=False),)
_KNOBS = (JsonSchema("a run's knobs", ("loss",)),)

# a run file's schema(s) by the end of its path; where there are several, the one its columns or keys share most
SCHEMAS: dict[tuple[str, ...], tuple[CsvSchema, ...] | tuple[JsonSchema, ...]] = {
    ("artifacts", "tau.csv"): (_TAU_IMAGE, _TAU_PAIRS),
    ("artifacts", "config.json"): _CONFIG,
    ("train_log.csv",): (_TRAIN_LOG,),
    ("metrics.json",): _METRICS,
    ("knobs.json",): _KNOBS,
    ("convergence.csv",): (_CONVERGENCE,),
    ("augmentations.csv",): (_AUGMENTATIONS,),
}


def schemas_of(path: Path) -> tuple:
    """The schemas a file may follow, by the end of its path (none: only its shape is checked)."""
    for tail in sorted(SCHEMAS, key=len, reverse=True):
        if path.parts[-len(tail):] == tail:
            return SCHEMAS[tail]
    return ()


def _closest(schemas: tuple, names: Iterable[str]) -> Any:
    """The schema whose columns (or top-level keys) share the most with ``names``; the first on a tie."""
    names = set(names)
    return max(schemas, key=lambda s: len(names & {c.split(".")[0] for c in getattr(s, "columns", None)
                                                   or s.keys})) if schemas else None


def _capped(path: Path, problems: list[str]) -> list[str]:
    """A file's problems, the first :data:`PER_FILE` listed and the rest counted."""
    extra = len(problems) - PER_FILE
    return problems[:PER_FILE] + ([f"{path}: ... and {extra} more problem{'s' * (extra != 1)}"] if extra > 0 else [])


def check_csv(path: Path, schemas: tuple[CsvSchema, ...] = ()) -> list[str]:
    """The problems of a CSV file: its header against the closest of ``schemas`` (if any), every row's number of
    fields, the integers, finite and positive numbers the schema asks for, the counted column, and the final line
    end (a file cut short mid-line has none)."""
    try:
        text = read_text(path)
    except (TextFileError, OSError) as err:
        return [str(err)]
    if not text.strip():
        expected = f"the header {','.join(schemas[0].columns)}" if schemas else "a header line"
        return [f"{path}:1: expected {expected}, found an empty file"]
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    schema = _closest(schemas, header)
    problems: list[str] = []
    if schema is not None:
        missing = [c for c in schema.columns if c not in header]
        if missing or (schema.exact and tuple(header) != schema.columns):
            extra = [c for c in header if c not in schema.columns] if schema.exact else []
            problems.append(f"{path}:1: expected the columns {','.join(schema.columns)}"
                            f"{'' if schema.exact else ' (and maybe more)'} of {schema.what}, found "
                            f"{','.join(header)}" + (f" (missing {', '.join(missing)})" if missing else "")
                            + (f" (unexpected {', '.join(extra)})" if extra else ""))
            return problems  # the rows cannot be read against a header that is not the schema's
    width, fields = len(header), ",".join(header)
    ints, pos, counted, numbers = _indices(header, schema)
    for number, row in enumerate(reader):  # reader.line_num: the row's last line (a quoted field may span lines)
        line = reader.line_num
        if len(row) != width:
            problems.append(f"{path}:{line}: expected {width} fields ({fields}), found {len(row)}")
            continue
        problem = _row_problem(row, header, ints, pos, numbers, counted, number)
        if problem:
            problems.append(f"{path}:{line}: {problem}")
    if not text.endswith("\n"):
        problems.append(f"{path}:{text.count(chr(10)) + 1}: expected a line end at the end of the file, found none "
                        "(the file is cut short)")
    return _capped(path, problems)


def _indices(header: list[str], schema: CsvSchema | None) -> tuple[list[int], list[int], int | None, list[int]]:
    """The positions in ``header`` of the schema's integer, positive, counted and other numeric columns."""
    if schema is None:
        return [], [], None, []
    ints = [header.index(c) for c in schema.integers]
    pos = [header.index(c) for c in schema.positive]
    numbers = [i for i, c in enumerate(header) if i not in ints and i not in pos] if schema.all_numbers else []
    return ints, pos, None if schema.counted is None else header.index(schema.counted), numbers


def _row_problem(row: list[str], header: list[str], ints: list[int], pos: list[int], numbers: list[int],
                 counted: int | None, number: int) -> str | None:
    """What is wrong with one data row (``number``: its 0-based position), or None."""
    for i in ints:
        try:
            int(row[i])
        except ValueError:
            return f"column {header[i]}: expected an integer, found {row[i]!r}"
    for i in pos:
        value = _float(row[i])
        if value is None or not math.isfinite(value) or value <= 0:
            return f"column {header[i]}: expected a finite positive number, found {row[i]!r}"
    for i in numbers:
        value = _float(row[i])
        if value is None or not math.isfinite(value):
            return f"column {header[i]}: expected a finite number, found {row[i]!r}"
    if counted is not None and int(row[counted]) != number:
        return f"column {header[counted]}: expected {number} (the rows are numbered 0, 1, 2, ...), found {row[counted]}"
    return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def check_json(path: Path, schemas: tuple[JsonSchema, ...] = ()) -> list[str]:
    """The problems of a JSON file: it parses, and against the closest of ``schemas`` (if any) it is an object with
    the schema's keys, its values finite numbers where the schema says so."""
    try:
        text = read_text(path)
        data = json.loads(text)
    except (TextFileError, OSError) as err:
        return [str(err)]
    except json.JSONDecodeError as err:
        return [f"{path}:{err.lineno}: expected JSON, found invalid JSON at column {err.colno}: {err.msg}"
                + (" (the file is cut short)" if err.pos >= len(text.rstrip()) or not text.endswith("\n") else "")]
    if not schemas:
        return []
    if not isinstance(data, dict):
        return [f"{path}:1: expected a JSON object ({schemas[0].what}), found {type(data).__name__}"]
    schema = _closest(schemas, data)
    problems = [f"{path}:1: expected the key {key!r} of {schema.what}, found keys {', '.join(sorted(data))}"
                for key in schema.keys if not _has(data, key)]
    for key, value in _leaves(data):
        bad_number = not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
        if (schema.numbers and bad_number) or (schema.finite and isinstance(value, float) and not math.isfinite(value)):
            expected = "a finite number" + (f" ({schema.what} are numbers)" if schema.numbers else "")
            problems.append(f"{path}:{_line_of(text, key)}: key {key!r}: expected {expected}, found "
                            f"{json.dumps(value)}")
    return _capped(path, problems)


def _has(data: dict, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _leaves(data: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Every non-container value of ``data`` with its dotted key (a list item's key is its list's)."""
    items = data.items() if isinstance(data, dict) else ((None, v) for v in data) if isinstance(data, list) else None
    if items is None:
        yield prefix, data
        return
    for key, value in items:
        yield from _leaves(value, prefix if key is None else f"{prefix}.{key}" if prefix else str(key))


def _line_of(text: str, dotted: str) -> int:
    """The 1-based line of the key ``dotted``'s last part in a JSON text (the first such key; 1 if not found)."""
    needle = json.dumps(dotted.split(".")[-1]) + ":"
    at = text.find(needle)
    return 1 if at < 0 else text.count("\n", 0, at) + 1


def check_file(path: Path | str) -> list[str]:
    """The problems of one CSV or JSON file against its schema (:func:`schemas_of`); other files have none."""
    path = Path(path)
    if path.suffix == ".csv":
        return check_csv(path, schemas_of(path))
    if path.suffix == ".json":
        return check_json(path, schemas_of(path))
    return []


def run_files(paths: Iterable[Path | str]) -> list[Path]:
    """The CSV and JSON files at or under ``paths`` (sorted; hidden files, ``dvclive/`` and ``local/`` skipped; a
    missing path has none: the notebook names what it misses)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            found.append(path)
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not d.startswith("."))
            found.extend(Path(folder, f) for f in sorted(files)
                         if f.endswith((".csv", ".json")) and not f.startswith("."))
    return found


def check_paths(paths: Iterable[Path | str]) -> int:
    """Check every run file at or under ``paths``; returns how many were checked, or raises :class:`RunFileError`
    listing the first :data:`FILES_LISTED` bad files' problems (and how many more files are bad)."""
    files = run_files(paths)
    bad = [problems for problems in map(check_file, files) if problems]
    if bad:
        listed = [p for problems in bad[:FILES_LISTED] for p in problems]
        more = len(bad) - FILES_LISTED
        raise RunFileError(listed + ([f"... and {more} more bad files"] if more > 0 else []), len(bad))
    return len(files)


def report_paths(name: str, parameters: dict[str, Any]) -> list[Path]:
    """What report ``name`` reads, as its stage's deps do: its ``reads`` (a folder that is a papermill parameter's
    default where the parameter gives it: ``-p runs_dir /tmp/runs`` for ``runs``), the stage record if it quotes
    training minutes, the studies naming it in the params file (``-p params_path``) under ``studies_dir``, and its
    selection's ``tuning/<method>/`` folders. An unknown report reads nothing."""
    from .report_table import REPORTS
    from .stage_minutes import STAGE_RECORD

    report = REPORTS.get(name)
    if report is None:
        return []
    given = {**report.papermill, **parameters}

    folders = {default: key for key, default in report.papermill.items()}  # "runs" -> "runs_dir"
    record = (STAGE_RECORD.path,) if report.trains and STAGE_RECORD.path not in report.reads else ()
    paths = [Path(str(given[folders[read]])) if read in folders else Path(read) for read in (*report.reads, *record)]
    params_path = given.get("params_path")
    if params_path and Path(params_path).is_file():
        from ..config.profiles import load_params  # not config.studies: it imports torch, seconds before a report

        params = load_params(params_path)
        studies_dir = Path(str(given.get("studies_dir", "studies")))
        paths += [studies_dir / study for section in ("studies", "bimodal_studies")
                  for study, spec in (params.get(section) or {}).items()
                  if name in _names((spec or {}).get("report"))]
        if report.selection and report.selection in params:
            tuning = Path(str(given.get("tuning_dir", "tuning")))
            paths += [tuning / method for method in (params[report.selection] or {}).get("methods") or {}]
    return paths


def _names(report: str | list[str] | None) -> tuple[str, ...]:
    """A study's ``report``, one name or a list, as a tuple (as :func:`isogclr.config.studies.study_reports`)."""
    return () if not report else (report,) if isinstance(report, str) else tuple(report)


def check_report(name: str, parameters: dict[str, Any]) -> int:
    """Check every run file report ``name`` reads (:func:`report_paths`) before its notebook runs; returns how many
    were checked, or raises :class:`RunFileError`."""
    return check_paths(report_paths(name, parameters))
