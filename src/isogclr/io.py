"""Atomic writes: a file is either its old version or its complete new version, never half written.

The bottom layer's I/O helpers, used by the trainers, the analysis and the pipeline alike.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _atomic(path: Path, write) -> None:  # noqa: ANN001
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_torch(obj: Any, path: Path) -> None:
    import torch  # the other writers need no torch (the CLI and the analysis import this module)

    _atomic(Path(path), lambda f: torch.save(obj, f))


def save_json(obj: Any, path: Path) -> None:
    _atomic(Path(path), lambda f: f.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()))


def save_text(text: str, path: Path) -> None:
    _atomic(Path(path), lambda f: f.write(text.encode()))


def csv_text(rows: list[dict]) -> str:
    """Rows as CSV text; the columns are the union of the rows' keys in first-seen order ("" for no rows)."""
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
