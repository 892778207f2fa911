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
against, the list of its files' names and sizes (as a sha256: :func:`file_sizes`) and the sha256 of the spec
it was built from, so the check of an up-to-date folder reads one small file and lists the folder (the
sizes: a file truncated, added or removed after the stamp is seen at once) but hashes no file's bytes.
A file edited in place to another content of the same size is only seen by the full hash:
``python -m isogclr restore-data --verify`` (:func:`restore` with ``verify``) hashes every folder.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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


def file_sizes(folder: Path | str) -> str:
    """sha256 over every file's relative path and size (the stamp excluded): a listing, no file read."""
    h = hashlib.sha256()
    for rel, path in _files(Path(folder)):
        h.update(f"{rel}\0{os.path.getsize(path)}\n".encode())
    return h.hexdigest()


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


def write_stamp(folder: Path | str, digest: str, spec: Any) -> None:
    """The stamp of a folder whose bytes hash to ``digest`` and were built from ``spec``."""
    save_text(f"{digest}\n{file_sizes(folder)}\n{_spec_hash(spec)}\n", Path(folder) / STAMP)


def stamp_problem(folder: Path | str, manifest: dict[str, Any]) -> str | None:
    """Why ``folder``'s stamp does not vouch for ``manifest`` (None: it does): no stamp, another hash, files
    changed since the stamp (names or sizes), or another spec than the one the folder was built from."""
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
    if lines[1] != file_sizes(folder):
        return "files were truncated, added or removed after the folder was verified"
    return None


# ----------------------------------------------------------------------------------------------- generators


@dataclass(frozen=True)
class Generator:
    """A generator named in manifests: ``target`` "module:function" writes ``function(spec, [data_root,]
    out_dir)``, with the spec rebuilt from the manifest by ``module.spec_from_dict``. Imported by name when
    a folder is rebuilt, so a loader's module does not import the other datasets' generators."""

    target: str  # "module:function", the name stored in manifests
    command: str  # the CLI command that writes the folder and its manifest
    stage: str  # the dvc.yaml stage that runs it
    needs_root: bool = False  # the function reads source files under the data root (Fashion-MNIST)

    def write(self, spec: dict[str, Any], root: Path, out_dir: Path) -> Any:
        module_name, function = self.target.split(":")
        module = importlib.import_module(module_name)
        spec_obj = module.spec_from_dict(spec)
        args = (spec_obj, Path(root), Path(out_dir)) if self.needs_root else (spec_obj, Path(out_dir))
        return getattr(module, function)(*args)


SYNTHETIC = Generator("isogclr.data.synthetic:write_synthetic", "synthetic", "synthetic")
SYNTHETIC_PAIRS = Generator("isogclr.data.synthetic_pairs:write_synthetic_pairs", "synthetic-pairs",
                            "synthetic_pairs")
FASHION_MNIST_MINI = Generator("isogclr.data.fashion_mnist:write_fashion_mnist_mini", "fashion-mnist-mini",
                               "fashion_mnist_mini", needs_root=True)
GENERATORS = {g.target: g for g in (SYNTHETIC, SYNTHETIC_PAIRS, FASHION_MNIST_MINI)}
BY_DATASET = {"synthetic": SYNTHETIC, "synthetic_pairs": SYNTHETIC_PAIRS, "fashion_mnist_mini": FASHION_MNIST_MINI}


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
        if name not in BY_DATASET:
            raise ValueError(f"write_manifest: no default generator for dataset {name!r} ({sorted(BY_DATASET)}); "
                             "pass generator=")
        generator = BY_DATASET[name]
    target = generator.target if isinstance(generator, Generator) else str(generator)
    if target not in GENERATORS:
        raise ValueError(f"write_manifest: unknown generator {target!r} (known: {sorted(GENERATORS)})")
    folder = Path(folder)
    digest, n = tree_hash(folder)
    manifest = {"dataset": name, "generator": target, "spec": spec, "files": n, "sha256": digest}
    save_json(manifest, Path(path))
    write_stamp(folder, digest, spec)
    return manifest


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

    Up to date (the stamp inside the folder has the manifest's hash and spec, and the folder's file names and
    sizes are the stamped ones: :func:`stamp_problem`): returns at once, hashing no file. Missing, or no stamp
    or another one, or files changed since the stamp: an existing folder is hashed first (the right bytes only
    get their stamp, unless the manifest's spec is not the stamped one); otherwise the folder is rebuilt from
    the manifest's spec in a temporary sibling folder, hashed, and renamed into place (under a lock; if another
    process renamed its copy first, that one is kept), printing one line that says why. Raises
    FileNotFoundError when there is no manifest (or a rebuild lacks its source files), :class:`ManifestError`
    when the rebuilt bytes differ from the manifest's hash, naming the likely cause.
    """
    return _ensure(name, Path(root), quiet)[0]


def _ensure(name: str, root: Path, quiet: bool) -> tuple[Path, str]:
    folder, path = root / name, root / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the manifest of the generated dataset {folder} is written "
                                f"by {_command(BY_DATASET.get(name), name, root)}")
    manifest = read_manifest(path)
    digest = manifest["sha256"]
    if stamp_problem(folder, manifest) is None:
        return folder, "up to date"
    generator = GENERATORS.get(manifest["generator"])
    if generator is None:
        raise ManifestError(f"{path}: unknown generator {manifest['generator']!r} (known: {sorted(GENERATORS)})")
    # concurrent processes regenerate once (without fcntl, the atomic rename in _install keeps it correct)
    with locked(root / f".{name}.lock"):
        problem = stamp_problem(folder, manifest)
        if problem is None:  # another process rebuilt it while we waited
            return folder, "up to date"
        spec_edited = problem.startswith("the spec")
        if folder.is_dir() and not spec_edited and tree_hash(folder)[0] == digest:  # right bytes, no (right) stamp
            write_stamp(folder, digest, manifest["spec"])
            return folder, "verified"
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
            write_stamp(out, digest, manifest["spec"])
            _install(out, folder, manifest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not quiet:
        why = "" if problem == "no stamp" and not folder.exists() else f" ({problem})"
        print(f"regenerated {folder} ({n} files) from {path} in {time.perf_counter() - t0:.1f}s{why}",
              file=sys.stderr, flush=True)
    return folder, "rebuilt"


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


def restore(root: Path | str = "data", verify: bool = False) -> list[tuple[str, str, float]]:
    """:func:`ensure` every manifest ``root/*.json``; returns (name, what was done, seconds) for each:
    "up to date", "verified" (hashed, stamp written) or "rebuilt". JSON files that are no manifests are
    skipped. ``verify``: hash every up-to-date folder too (a file edited in place keeps its size, which the
    stamp's listing cannot see); one whose bytes differ from the manifest is rebuilt, reported as
    "rebuilt (its files differed from the manifest: edited or corrupted after it was verified)"."""
    done = []
    for path in sorted(Path(root).glob("*.json")):
        try:
            manifest = read_manifest(path)
        except ManifestError:
            continue
        t0 = time.perf_counter()
        folder, note = Path(root) / path.stem, ""
        if verify and stamp_problem(folder, manifest) is None and tree_hash(folder)[0] != manifest["sha256"]:
            (folder / STAMP).unlink()
            note = " (its files differed from the manifest: edited or corrupted after it was verified)"
        _, state = _ensure(path.stem, Path(root), quiet=True)
        done.append((path.stem, state + note, time.perf_counter() - t0))
    return done
