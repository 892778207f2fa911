"""Generated datasets as small manifests in git, their folders as local caches rebuilt on demand.

The tracked truth of a generated dataset ``<root>/<name>/`` is its manifest ``<root>/<name>.json``
(committed in git), written by the dataset's command (``python -m isogclr synthetic --out data/synthetic``
...)::

    {"dataset": "synthetic", "generator": "isogclr.data.synthetic:write_synthetic",
     "spec": {...the generator's parameters...}, "files": 18012, "sha256": "<tree_hash of the folder>"}

The folder itself is a deterministic cache, ignored by git and DVC: :func:`ensure` (called by every
loader of a generated set, and by ``python -m isogclr restore-data``) rebuilds it from the manifest's
``spec`` when it is missing (a fresh clone) or stale, and checks that the rebuilt bytes hash to the
manifest's ``sha256``. A stamp file :data:`STAMP` inside the folder holds the hash it was verified
against, the listing of its files when they were hashed (names, sizes, modification and change times, as a
sha256: :func:`file_listing`) and the sha256 of its spec, so the check of an up-to-date folder reads one small
file and lists the folder, hashing no bytes. Any write to a file after the hash (an edit of the same size, two
files swapped, a truncation, even with the modification time put back) changes its ``st_ctime``, which no
user call can set: the folder is hashed again, and other bytes than the manifest's are regenerated, naming the
files that differed (:func:`differing_files`). Only a change below the filesystem (a disk error) keeps the
listing; the full hash (:func:`verify_folder`) sees it: ``python -m isogclr restore-data --verify`` hashes
every folder, and a split's decoded cache (:mod:`isogclr.data.decoded`) is written from verified bytes only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..dataset_specs import GENERATED, Generator
from ..io import locked, save_json, save_text

STAMP = ".manifest-sha256"
DECODED = ".decoded"  # the folder's splits decoded by its loaders (isogclr.data.decoded): not one of its files
_CHUNK = 1 << 20


class ManifestError(RuntimeError):
    """A generated folder cannot be made to match its manifest (other bytes, unknown generator, ...)."""


# ----------------------------------------------------------------------------------------------- hashing


def _files(folder: Path) -> list[tuple[str, str]]:
    """(relative posix path, absolute path) of every file under ``folder`` but the stamp and the decoded
    cache :data:`DECODED`, sorted by path."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        if dirpath == str(folder):
            dirnames[:] = [d for d in dirnames if d != DECODED]
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, folder)
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            if rel != STAMP:
                out.append((rel, os.path.join(dirpath, name)))
    out.sort()
    return out


def tree_hash(folder: Path | str) -> tuple[str, int]:
    """Content hash of ``folder``: sha256 over every file's relative path, size and bytes, in sorted path
    order (the stamp file :data:`STAMP` excluded); returns (hex digest, number of files)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder")
    h = hashlib.sha256()
    files = _files(folder)
    for rel, path in files:
        with open(path, "rb") as f:
            data = f.read()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest(), len(files)


def file_listing(folder: Path | str) -> str:
    """sha256 over every file's relative path, size, modification and change time in nanoseconds (the stamp
    excluded): one ``stat`` per file, no file read. Any write, truncation or rename of a file changes it."""
    lines = []
    for rel, path in _files(Path(folder)):
        st = os.lstat(path)  # a link is listed as itself: a broken one or a loop is a change, not an error
        lines.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def differing_files(folder: Path | str, reference: Path | str, shown: int = 5) -> str:
    """``k file(s) differed from the manifest's: path (how), ...`` ("" for none): the files of ``folder`` that
    are not those of ``reference`` (a folder of the right bytes), the first ``shown`` named in path order.
    Reads both folders' bytes: for naming the damage when a folder is regenerated, not for the checks."""
    have, want = dict(_files(Path(folder))), dict(_files(Path(reference)))
    out = []
    for rel in sorted(have.keys() | want.keys()):
        if rel not in have or rel not in want:
            out.append(f"{rel} ({'missing' if rel not in have else 'not one of the generated files'})")
            continue
        right = Path(want[rel]).read_bytes()
        try:
            got = Path(have[rel]).read_bytes()
        except OSError as err:  # a broken link, a loop
            out.append(f"{rel} (unreadable: {err.strerror})")
            continue
        if len(got) != len(right):
            out.append(f"{rel} ({len(got)} bytes instead of {len(right)}: truncated or rewritten)")
        elif got != right:
            out.append(f"{rel} (other bytes of the same size: edited, swapped or corrupted)")
    more = f" and {len(out) - shown} more" if len(out) > shown else ""
    return f"{len(out)} file(s) differed from the manifest's: {', '.join(out[:shown])}{more}" if out else ""


def _right_bytes(folder: Path, digest: str) -> bool:
    """Whether the existing ``folder`` hashes to ``digest``; False when a file in it cannot be read (a loop)."""
    with contextlib.suppress(OSError):
        return tree_hash(folder)[0] == digest
    return False


def _spec_hash(spec: Any) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _stamp_lines(folder: Path) -> list[str]:
    try:
        return (Path(folder) / STAMP).read_text().split()
    except (FileNotFoundError, NotADirectoryError):
        return []


def read_stamp(folder: Path) -> str | None:
    """The tree hash the folder was verified against (the stamp's first line), None without a stamp."""
    lines = _stamp_lines(folder)
    return lines[0] if lines else None


def write_stamp(folder: Path | str, digest: str, spec: Any, listing: str | None = None) -> None:
    """The stamp of a folder whose bytes hash to ``digest``, built from ``spec``. ``listing``: its
    :func:`file_listing` taken before the hash (so a write during the hash is seen later), by default now."""
    listing = file_listing(folder) if listing is None else listing
    save_text(f"{digest}\n{listing}\n{_spec_hash(spec)}\n", Path(folder) / STAMP)


def stamp_problem(folder: Path | str, manifest: dict[str, Any]) -> str | None:
    """Why ``folder``'s stamp does not vouch for ``manifest`` (None: it does): no stamp, another hash, files
    changed since the stamp (names, sizes or times), or another spec than the one the folder was built from."""
    folder = Path(folder)
    lines = _stamp_lines(folder)
    if not lines:
        return "no stamp"
    if lines[0] != manifest["sha256"]:
        return "its stamp is of another manifest hash"
    if len(lines) < 3:
        return "a stamp without its file listing"
    if lines[2] != _spec_hash(manifest["spec"]):
        return (f"the spec in {manifest_path(folder)} is not the one the folder was built from, but its sha256 is "
                "the same (the spec was edited by hand?)")
    if lines[1] != file_listing(folder):
        return "files were written, truncated, added or removed after the folder was verified"
    return None


# ----------------------------------------------------------------------------------------------- generators


# the generators named in manifests, by target (the generated folders are declared in isogclr.dataset_specs.GENERATED)
GENERATORS = {g.target: g for g in GENERATED.values()}


def spec_dict(spec: Any) -> dict[str, Any]:
    """A spec dataclass as the JSON-safe dict stored in a manifest (int keys become strings, tuples lists)."""
    return json.loads(json.dumps(asdict(spec), sort_keys=True))


def _command(generator: Generator | None, name: str, root: Path) -> str:
    if generator is None:
        return "the data command that wrote it"
    return (f"`python -m isogclr {generator.command} --out {Path(root) / name}` "
            f"(the `{generator.stage}` stage: `dvc repro {generator.stage}`)")


# ----------------------------------------------------------------------------------------------- manifests


def manifest_path(folder: Path | str) -> Path:
    """The manifest of a generated folder: its sibling ``<folder>.json``."""
    folder = Path(folder)
    return folder.parent / f"{folder.name}.json"


def write_manifest(name: str, folder: Path | str, spec: dict[str, Any], path: Path | str,
                   generator: Generator | str | None = None) -> dict[str, Any]:
    """Hash ``folder``, write the manifest ``path`` (atomically) and the stamp inside ``folder``; return the
    manifest. ``generator`` (a :class:`Generator` or its target) defaults to the one of dataset ``name``."""
    if generator is None:
        if name not in GENERATED:
            raise ValueError(f"write_manifest: no default generator for dataset {name!r} ({sorted(GENERATED)}); "
                             "pass generator=")
        generator = GENERATED[name]
    target = generator.target if isinstance(generator, Generator) else str(generator)
    if target not in GENERATORS:
        raise ValueError(f"write_manifest: unknown generator {target!r} (known: {sorted(GENERATORS)})")
    folder = Path(folder)
    listing = file_listing(folder)
    digest, n = tree_hash(folder)
    manifest = {"dataset": name, "generator": target, "spec": spec, "files": n, "sha256": digest}
    save_json(manifest, Path(path))
    write_stamp(folder, digest, spec, listing)
    return manifest


def claim_manifest(out: Path | str, generator: Generator) -> Path:
    """The manifest path ``<out>.json`` of a data command's ``--out`` folder, checked before anything is written:
    a file there that is not a manifest of ``generator`` is refused (FileExistsError naming it)."""
    path, written_by = manifest_path(out), None
    if not path.exists() and not path.is_symlink():
        return path
    with contextlib.suppress(ManifestError, OSError, ValueError):
        written_by = read_manifest(path)["generator"]
    if written_by != generator.target:
        raise FileExistsError(
            f"{path} exists and is not a manifest written by `python -m isogclr {generator.command}` (its "
            f"generator: {written_by or 'none, not a dataset manifest'}): `--out {out}` writes its manifest there "
            "and would replace it. Choose another --out, or move the file aside yourself")
    return path


def read_manifest(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    try:
        manifest = json.loads(path.read_text())
    except ValueError as err:
        raise ManifestError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path}: not a dataset manifest (not a JSON object)")
    missing = [k for k in ("dataset", "generator", "spec", "sha256") if k not in manifest]
    if missing:
        raise ManifestError(f"{path}: not a dataset manifest (no {', '.join(missing)})")
    return manifest


# ----------------------------------------------------------------------------------------------- ensure


def _install(tmp: Path, folder: Path, manifest: dict[str, Any]) -> bool:
    """Move the verified ``tmp`` to ``folder``; False when another process installed a matching one first."""
    if folder.exists() and stamp_problem(folder, manifest) is not None:  # stale: move it aside, then swap
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.old-"))
        try:
            os.rename(folder, old / "x")
        except FileNotFoundError:
            pass  # another process moved it first
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.rename(tmp, folder)
        return True
    except OSError:
        if stamp_problem(folder, manifest) is None:
            return False
        raise


def ensure(name: str, root: Path | str = "data", *, quiet: bool = False) -> Path:
    """Make ``root/name`` exist and match its manifest ``root/name.json``; return the folder.

    Up to date (the stamp has the manifest's hash and spec, and the folder's listing is the stamped one:
    :func:`stamp_problem`): returns at once, hashing no file. Missing, or no stamp or another one, or files
    changed since the stamp: an existing folder is hashed first (the right bytes only get their stamp, unless the
    manifest's spec is not the stamped one); otherwise the folder is rebuilt from the manifest's spec in a
    temporary sibling folder, hashed, and renamed into place (under a lock; if another process renamed its copy
    first, that one is kept), printing one line that says why and names the files that differed from the
    rebuilt ones. Raises FileNotFoundError when there is no manifest (or a rebuild lacks its source files),
    :class:`ManifestError` when the rebuilt bytes differ from the manifest's hash, naming the likely cause.
    """
    return _ensure(name, Path(root), quiet)[0]


def _ensure(name: str, root: Path, quiet: bool, why: str = "") -> tuple[Path, str, str]:
    """:func:`ensure`, returning (folder, "up to date" | "verified" | "rebuilt", the files that differed from
    the rebuilt ones, named, or ""). ``why``: the reason shown for a rebuild instead of the stamp's problem."""
    folder, path = root / name, root / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the manifest of the generated dataset {folder} is written "
                                f"by {_command(GENERATED.get(name), name, root)}")
    manifest = read_manifest(path)
    digest = manifest["sha256"]
    if stamp_problem(folder, manifest) is None:
        return folder, "up to date", ""
    generator = GENERATORS.get(manifest["generator"])
    if generator is None:
        raise ManifestError(f"{path}: unknown generator {manifest['generator']!r} (known: {sorted(GENERATORS)})")
    # concurrent processes regenerate once (without fcntl, the atomic rename in _install keeps it correct)
    with locked(root / f".{name}.lock"):
        problem = stamp_problem(folder, manifest)
        if problem is None:  # another process rebuilt it while we waited
            return folder, "up to date", ""
        spec_edited = problem.startswith("the spec")
        listing = file_listing(folder) if folder.is_dir() and not spec_edited else None
        if listing is not None and _right_bytes(folder, digest):  # right bytes, no (right) stamp: stamped
            write_stamp(folder, digest, manifest["spec"], listing)
            return folder, "verified", ""
        t0 = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.regen-"))
        try:
            out = tmp / name
            try:
                generator.write(manifest["spec"], root, out)
            except FileNotFoundError as err:
                raise FileNotFoundError(f"cannot rebuild {folder} from {path}: {err}") from err
            got, n = tree_hash(out)
            if got != digest:
                cause = (f"{path}'s spec was edited without rerunning the data stage (the folder was built from "
                         f"another spec)" if spec_edited else
                         f"{path} was edited (its spec or sha256: see `git diff {path}`), or this machine's "
                         "libraries (numpy, Pillow) write other bytes than the machine that wrote it")
                raise ManifestError(
                    f"{folder} rebuilt from {path} hashes to {got} ({n} files), the manifest says {digest} "
                    f"({manifest.get('files')} files). Likely cause: {cause}. Rerun the data stage "
                    f"(`dvc repro {generator.stage}`, or {_command(generator, name, root)}) and commit the new "
                    "manifest")
            changed = "" if spec_edited or not folder.is_dir() else differing_files(folder, out)
            write_stamp(out, digest, manifest["spec"])
            _install(out, folder, manifest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not quiet:
        why = "; ".join(w for w in (why or ("" if problem == "no stamp" and listing is None else problem), changed)
                        if w)
        print(f"regenerated {folder} ({n} files) from {path} in {time.perf_counter() - t0:.1f}s"
              + (f" ({why})" if why else ""), file=sys.stderr, flush=True)
    return folder, "rebuilt", changed


def verify_folder(name: str, root: Path | str = "data", *, quiet: bool = False, hash_bytes: bool = True
                  ) -> tuple[str, str]:
    """:func:`ensure` ``root/name`` and (``hash_bytes``) hash its bytes even when its stamp vouches for them (a
    change below the filesystem keeps the listing): bytes other than the manifest's are regenerated, naming the
    files that differed. Returns (state, the files named): "up to date" (not hashed), "verified" (hashed: the
    manifest's bytes) or "rebuilt"."""
    root = Path(root)
    folder, state, changed = _ensure(name, root, quiet)
    if state != "up to date" or not hash_bytes:  # hashed just now (verified, or rebuilt), or not asked to
        return state, changed
    if _right_bytes(folder, read_manifest(root / f"{name}.json")["sha256"]):
        return "verified", ""
    (folder / STAMP).unlink(missing_ok=True)
    _, state, changed = _ensure(name, root, quiet, why="its files' bytes differ from the manifest although its "
                                                        "stamp vouched for them: corrupted after it was verified")
    return state, changed


def up_to_date(folder: Path | str) -> bool:
    """Whether ``folder`` has a manifest and matches it (:func:`stamp_problem` is None): a few small reads
    and a listing, no hashing. For checks such as ``validate`` that must not rebuild anything."""
    folder = Path(folder)
    try:
        return stamp_problem(folder, read_manifest(manifest_path(folder))) is None
    except (FileNotFoundError, ManifestError):
        return False


def ensure_tracked(folder: Path | str) -> bool:
    """For loaders: :func:`ensure` ``folder`` if it has a manifest (True); False when it has none (a folder
    written by hand or by a test, or real data): the caller reads it as it is or reports it missing."""
    folder = Path(folder)
    if not manifest_path(folder).is_file():
        return False
    ensure(folder.name, folder.parent)
    return True
