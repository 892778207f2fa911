"""Atomic writes: a file is either its old version or its complete new version, never half written;
the one file lock, :func:`locked`, for read-modify-write cycles shared between processes, and
:func:`held_by_one`, the lock that refuses a second holder (two runs writing one run folder);
:func:`load_torch`, the one reader of ``.pt`` files (tensors and plain containers only: a pickle cannot
run code, and a broken file is named with what to do); :func:`generated_folder`, how a generator
replaces its output folder (never a folder it did not write, recognised by :func:`meta_keys`);
:func:`read_text`, :func:`read_json` and :func:`read_lines`, the readers of text files (UTF-8; an undecodable
or malformed file is a :class:`TextFileError` naming it, with the line).

The bottom layer's I/O helpers, used by the trainers, the analysis and the pipeline alike.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pickle
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_UMASK = os.umask(0o022)  # read the process umask (there is no other way) and put it straight back
os.umask(_UMASK)


@contextlib.contextmanager
def _flock(path: Path | str, wait: bool) -> Iterator[Any]:
    """The one ``fcntl.flock`` set-up: the lock file ``path`` (created if missing, its folder too) opened and
    locked exclusively for the ``with`` block, which gets the open file (``None`` where ``fcntl`` is unavailable,
    not POSIX: no lock). ``wait=False``: :class:`BlockingIOError` at once if another holder has it. The file is
    left in place: removing it would let two processes lock two different files."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover (not POSIX)
        yield None
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield f
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(path: Path | str) -> Iterator[None]:
    """An exclusive advisory lock on the lock file ``path``, held for the ``with`` block: a second holder, in
    this or another process, waits until the first one leaves the block (:func:`_flock`)."""
    with _flock(path, wait=True):
        yield


class BusyError(RuntimeError):
    """Another process holds the lock of :func:`held_by_one`."""


@contextlib.contextmanager
def held_by_one(path: Path | str, what: str) -> Iterator[None]:
    """An exclusive lock on the lock file ``path`` that does not wait: a second holder (in this or another
    process) gets :class:`BusyError` at once, naming ``what`` and the holder's pid and host (written into the
    file by the holder). The lock ends with the ``with`` block or the holder's process (a killed run leaves
    no stale lock: the kernel drops it); the file stays. A no-op where ``fcntl`` is unavailable."""
    with contextlib.ExitStack() as stack:
        try:
            f = stack.enter_context(_flock(path, wait=False))
        except BlockingIOError:
            try:
                holder = Path(path).read_text().strip() or "an unknown process"
            except OSError:
                holder = "an unknown process"
            raise BusyError(f"{what} is in use by {holder} (lock file {path}): wait for it to finish, or stop it; "
                            "two processes writing one run would overwrite each other's files") from None
        if f is not None:
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} on host {socket.gethostname()}\n")
            f.flush()
        yield


class UnreadableFileError(RuntimeError):
    """A file that cannot be read as what it should be (truncated, empty, not written by this project)."""


def load_torch(path: Path | str, what: str, fix: str, map_location: Any = "cpu",
               required: tuple[str, ...] = ()) -> Any:
    """Read the ``.pt`` file ``path`` with ``torch.load(weights_only=True)``: tensors, numbers, strings and
    plain containers only, so a planted pickle cannot run code. Any failure (an empty or truncated file, a
    pickle with other objects, or, given ``required``, anything but a mapping holding those keys: a file that
    is not a ``what`` of this project) is an :class:`UnreadableFileError` naming the file, ``what`` it is and
    ``fix``, what to do."""
    import torch

    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise UnreadableFileError(f"{path}: this {what} is an empty file (0 bytes; a write that never finished?): "
                                  f"{fix}")
    try:
        loaded = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UnreadableFileError(f"{path}: refused to load this {what}: it holds objects other than tensors and "
                                  f"plain containers ({first}); files written by isogclr hold none, so this one "
                                  f"was written by something else and could run code if loaded: {fix}") from None
    except (RuntimeError, OSError, EOFError, ValueError) as err:
        raise UnreadableFileError(f"{path}: cannot read this {what} ({type(err).__name__}: {err}; the file is "
                                  f"truncated or corrupt): {fix}") from None
    missing = [key for key in required if not isinstance(loaded, dict) or key not in loaded]
    if missing:
        held = f"a mapping without the key {missing[0]!r}" if isinstance(loaded, dict) else \
            f"a {type(loaded).__name__}, not a mapping with the key {missing[0]!r}"
        raise UnreadableFileError(f"{path}: not a {what} written by isogclr (it holds {held}): {fix}")
    return loaded


def meta_keys(folder: Path | str) -> set[str]:
    """The top-level keys of ``folder/meta.json`` (empty when it is missing, unreadable or not a JSON object):
    how a generator recognises its own output folder for :func:`generated_folder`."""
    try:
        meta = read_json(Path(folder) / "meta.json")
    except (OSError, ValueError):
        return set()
    return set(meta) if isinstance(meta, dict) else set()


@contextlib.contextmanager
def generated_folder(out_dir: Path | str, own: Callable[[Path], bool], command: str) -> Iterator[Path]:
    """How a generator writes its output folder ``out_dir``: the ``with`` block writes into a fresh temporary
    sibling folder (yielded), which then replaces ``out_dir`` (the old folder renamed aside first, then
    removed: ``out_dir`` is the old or the new folder); on an error the temporary folder is removed and
    ``out_dir`` is left as it was. Refused before anything is written (FileExistsError): an ``out_dir`` that
    is a file, or a non-empty folder that ``own`` does not recognise as this generator's output (``command``,
    for the message). A symbolic link is followed: the folder it points to is the one replaced."""
    out = Path(out_dir)
    if out.is_symlink():
        out = out.resolve()
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out_dir} is a file, not a folder: choose another --out for `{command}`")
    if out.is_dir() and any(out.iterdir()) and not own(out):
        raise FileExistsError(f"{out_dir} already exists, is not empty and was not written by `{command}` (its "
                              f"own files are missing): it would be replaced with everything in it. Choose another "
                              "--out, or move the folder aside yourself")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        yield tmp
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
            os.rename(out, old / "x")
        try:
            os.replace(tmp, out)
        except OSError:
            if old is not None:
                os.rename(old / "x", out)
            raise
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class TextFileError(ValueError):
    """A file read as text that is not UTF-8, or not the JSON it should be; the message names the file and line."""


def _not_utf8(path: Path, data: bytes, err: UnicodeDecodeError, lineno: int | None = None) -> TextFileError:
    """The error of ``data`` (``path``'s bytes, or its line ``lineno``) that does not decode as UTF-8."""
    line = lineno if lineno is not None else data.count(b"\n", 0, err.start) + 1
    column = err.start - (data.rfind(b"\n", 0, err.start) + 1)
    return TextFileError(f"{path}:{line}: not UTF-8 text (byte {column + 1} of the line: "
                         f"{data[err.start:err.start + 1]!r}): save the file as UTF-8")


def read_text(path: Path | str) -> str:
    """The text of ``path``, decoded as UTF-8 with universal newlines (as :meth:`Path.read_text`); a file that
    is not UTF-8 raises :class:`TextFileError` naming it and the line, an unreadable one (missing, a folder, a
    loop of symbolic links) the :class:`OSError`, which names it."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _not_utf8(path, data, err) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_json(path: Path | str) -> Any:
    """The JSON document ``path`` (:func:`read_text`); malformed JSON raises :class:`TextFileError` naming the
    file, line and column."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TextFileError(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None


def read_lines(path: Path | str) -> list[str]:
    """The UTF-8 text lines of ``path``; a line that is not UTF-8 raises ValueError naming the file and line."""
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for lineno, raw in enumerate(lines, start=1):
        try:
            out.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as err:
            raise _not_utf8(path, raw, err, lineno) from None
    return out


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
