"""Atomic writes: a file is either its old version or its complete new version, never half written;
and the one file lock, :func:`locked`, for read-modify-write cycles shared between processes.

The bottom layer's I/O helpers, used by the trainers, the analysis and the pipeline alike.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_UMASK = os.umask(0o022)  # read the process umask (there is no other way) and put it straight back
os.umask(_UMASK)


@contextlib.contextmanager
def locked(path: Path | str) -> Iterator[None]:
    """An exclusive advisory lock (``fcntl.flock``) on the lock file ``path``, created if missing (its
    folder too), held for the ``with`` block: a second holder, in this or another process, waits until
    the first one leaves the block. The file is left in place (removing it would let two processes lock
    two different files); a no-op where ``fcntl`` is unavailable (not POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (not POSIX)
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _atomic(path: Path, write) -> None:  # noqa: ANN001
    """Write ``path`` through ``write(binary file)`` into a temporary file beside it, flushed to disk, then
    renamed over ``path``; the new file gets the usual permissions (``0o666`` less the umask), not the
    ``0o600`` of :func:`tempfile.mkstemp`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):  # POSIX
            os.fchmod(fd, 0o666 & ~_UMASK)
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


def save_bytes(data: bytes, path: Path) -> None:
    _atomic(Path(path), lambda f: f.write(data))


def csv_text(rows: list[dict]) -> str:
    """Rows as CSV text; the columns are the union of the rows' keys in first-seen order ("" for no rows)."""
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
