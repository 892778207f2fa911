"""DVC's lock files survive a kill: they are written atomically, and a broken one is repaired before a repro.

DVC (3.67) writes a ``dvc.lock`` in place: it opens the file for writing, which empties it, then streams YAML into
it. For the largest family lock (``pipelines/train/dvc.lock``, 289 kB) that takes ~0.8 s, after ~1.4 s of parsing
it; a ``kill -9`` in that window leaves a truncated file, and the next ``dvc status`` or ``dvc repro`` stops with
DVC's ``YAMLSyntaxError`` or ``YAMLValidationError``. Two stages of one family never write their lock at the same
time (DVC writes it under its repository lock), so the only cause is a kill in mid-write, and DVC has no setting
that writes atomically. Hence:

* :func:`main` (``python -m isogclr.locks <dvc arguments>``) is DVC's own command line whose YAML writer writes a
  temporary file beside the target and renames it over the target (:func:`atomic_dump_data`): a kill leaves either
  the old lock or the new one. The runner (:mod:`isogclr.repro`) runs every stage through it.
* :func:`repair_locks`, run by the runner before anything else, finds the lock files DVC cannot read (truncated by
  an older version, or by a plain ``dvc repro`` killed in mid-write) and puts back git's ``HEAD`` version, naming
  the file: the stages whose results that version does not record then look stale and run again. A broken lock git
  does not track is refused with the command that removes it, as is DVC's record of held outputs
  (``.dvc/tmp/rwlock``, also written in place) when a kill tore it. Temporary files left by a kill are removed.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

TMP_TAG = ".isogclr-tmp-"  # a temporary file is ``<dir>/.<name>.isogclr-tmp-<pid>``


class BrokenLockError(RuntimeError):
    """A ``dvc.lock`` DVC cannot read and nothing can restore."""


def atomic_dump_data(original: Callable) -> Callable:
    """DVC's ``_dump_data(path, data, dumper, fs=None, **dumper_args)`` made atomic for files of the local disk:
    the data goes to ``.<name>.isogclr-tmp-<pid>`` in the same folder (with the target's permissions), which then
    replaces the target (``os.replace``). Other file systems are left to ``original``."""
    from dvc.fs import LocalFileSystem

    def dump(path, data, dumper, fs=None, **dumper_args):
        if fs is not None and not isinstance(fs, LocalFileSystem):
            return original(path, data, dumper=dumper, fs=fs, **dumper_args)
        target = Path(os.fspath(path))
        tmp = target.with_name(f".{target.name}{TMP_TAG}{os.getpid()}")
        try:
            with open(tmp, "w", encoding="utf-8") as fd:
                dumper(data, fd, **dumper_args)
            if target.exists():
                os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    return dump


def install_atomic_writes() -> None:
    """Make DVC's file writer (``dvc.utils.serialize._common._dump_data``, also bound in ``_yaml``) atomic; an
    error naming DVC's version when that function is not where this DVC version keeps it."""
    import dvc
    from dvc.utils.serialize import _common, _yaml

    for module in (_common, _yaml):
        if not callable(getattr(module, "_dump_data", None)):
            raise RuntimeError(f"DVC {dvc.__version__}: {module.__name__}._dump_data is missing; isogclr.locks "
                               "knows how DVC 3.x writes its files (requirements/constraints.txt pins the version)")
    atomic = atomic_dump_data(_common._dump_data)
    _common._dump_data = atomic
    _yaml._dump_data = atomic


def main(argv: list[str] | None = None) -> int:
    """``dvc <argv>`` with atomic file writes."""
    install_atomic_writes()
    from dvc.cli import main as dvc_main

    return dvc_main(sys.argv[1:] if argv is None else argv)


def lock_files(root: Path) -> list[Path]:
    """The lock files of the pipeline at ``root`` that exist: ``dvc.lock`` and ``pipelines/<family>/dvc.lock``,
    beside their ``dvc.yaml``."""
    from .pipeline import FAMILY_DIR

    root = Path(root)
    yamls = [root / "dvc.yaml", *sorted((root / FAMILY_DIR).glob("*/dvc.yaml"))]
    return [y.with_name("dvc.lock") for y in yamls if y.with_name("dvc.lock").is_file()]


def lock_problem(repo, path: Path) -> str | None:
    """Why DVC (the ``dvc.repo.Repo`` ``repo``) cannot use the lock file ``path`` (its own error), or None when it
    reads it. An empty file counts as truncated: DVC always writes at least its schema line."""
    from dvc.dvcfile import Lockfile
    from dvc.exceptions import DvcException

    if path.stat().st_size == 0:
        return "the file is empty"
    try:
        Lockfile(repo, str(path)).load()
    except DvcException as exc:
        return str(exc).splitlines()[0]
    return None


def remove_stale_temporaries(root: Path) -> list[str]:
    """Remove the temporary files of :func:`atomic_dump_data` whose process is gone (left by a kill) beside the
    pipeline files; returns them, relative to ``root``."""
    import psutil

    from .pipeline import FAMILY_DIR

    root = Path(root)
    removed = []
    for folder in [root, *sorted(p for p in (root / FAMILY_DIR).glob("*") if p.is_dir())]:
        for tmp in folder.glob(f".*{TMP_TAG}*"):
            pid = tmp.name.rsplit(TMP_TAG, 1)[1]
            if pid.isdigit() and not psutil.pid_exists(int(pid)):
                tmp.unlink()
                removed.append(tmp.relative_to(root).as_posix())
    return removed


def check_rwlock(root: Path) -> None:
    """Raise :class:`BrokenLockError` when DVC's record of the outputs its running processes hold
    (``.dvc/tmp/rwlock``, JSON, written in place) was torn by a kill: only the user knows that no DVC process runs,
    so the message says to remove it then. A readable record needs nothing: DVC drops the entries of killed
    processes itself."""
    import json

    path = Path(root) / ".dvc" / "tmp" / "rwlock"
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BrokenLockError(f".dvc/tmp/rwlock (DVC's record of the outputs its running processes hold) is not "
                              f"readable JSON ({exc}): a kill while DVC wrote it. When no DVC process runs, remove "
                              "it: rm .dvc/tmp/rwlock") from exc


def repair_locks(root: Path, log: Callable[[str], None] = print) -> list[str]:
    """Check every lock file of the pipeline at ``root`` (:func:`lock_files`) and put back git's ``HEAD`` version of
    each one DVC cannot read, saying so; returns the repaired files. A broken lock that ``HEAD`` lacks (or whose
    ``HEAD`` version is broken too) raises :class:`BrokenLockError` naming it and the command that removes it (its
    stages then all run again), as does a torn ``.dvc/tmp/rwlock`` (:func:`check_rwlock`). Stale temporary files of
    an atomic write are removed first."""
    from dvc.repo import Repo

    root = Path(root)
    check_rwlock(root)
    for name in remove_stale_temporaries(root):
        log(f"removed {name}, left by a kill while DVC wrote a file")
    repaired = []
    with Repo(str(root)) as repo:
        broken = [(path, problem) for path in lock_files(root) if (problem := lock_problem(repo, path))]
        for path, problem in broken:
            rel = path.relative_to(root).as_posix()
            if restore_committed(root, [rel]) == [rel] and lock_problem(repo, path) is None:
                log(f"{rel} was broken ({problem}; a kill while DVC wrote it); restored git's HEAD version: the "
                    "stages it does not record as done run again")
                repaired.append(rel)
                continue
            raise BrokenLockError(f"{rel} cannot be read by DVC ({problem}), and git's HEAD has no readable version "
                                  f"of it. Remove it and its stages run again: rm {rel}")
    return repaired


if __name__ == "__main__":
    sys.exit(main())


def restore_committed(root: Path, paths: Sequence[str]) -> list[str]:
    """Put back the files under ``paths`` (relative to ``root``) as git's ``HEAD`` has them: a failed stage's
    outputs, which DVC removed before running its command, so that a failure does not cost a committed file.
    Only files ``HEAD`` holds are touched (an output DVC caches and git ignores is left to ``dvc checkout``), the
    index is left alone. Returns the restored files; ``[]`` outside a git checkout or without git."""
    if not paths:
        return []
    try:
        listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths], cwd=root,
                                capture_output=True, check=True)
        files = [f for f in listed.stdout.decode().split("\0") if f]
        if files:
            subprocess.run(["git", "restore", "--source=HEAD", "--worktree", "--", *files], cwd=root,
                           capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return files
