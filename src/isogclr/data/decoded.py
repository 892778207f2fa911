"""A generated folder's splits decoded once: kept in the process and in ``<folder>/.decoded/<key>.pt``.

Decoding a split's PNG files is the largest fixed cost of a mini run (synth10's 30,000 images: about 2.5 s of
a 50 s run, every run). A generated folder is a deterministic cache verified against its manifest
(:mod:`isogclr.data.manifest`), so its decoded arrays can be cached too: :func:`decoded_split` returns the
split built by ``build`` (an :class:`ImageData` from the image-folder loader), keyed by the bytes it was decoded
from, the manifest hash the folder was verified against (its stamp's first line). A split is decoded and its
cache written only after the folder's bytes were hashed to that manifest hash in this process
(:func:`~isogclr.data.manifest.verify_folder`, once per folder per process: bytes that differ are regenerated
first, naming the files), so a cache never holds the decode of damaged files. Each cache file stores the
sha256 of its own arrays (:func:`arrays_hash`), checked on every load: a cache whose arrays do not hash to it
(written over, damaged) or that cannot be read is refused with a message naming it, and decoded again.
``.decoded/`` is not one of the folder's files (:func:`manifest.tree_hash`). Bytes are the same as a fresh
decode: the cache holds the decoded uint8 arrays themselves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..io import UnreadableFileError, load_torch, save_torch
from .base import ImageData
from .manifest import DECODED, manifest_path, read_stamp, verify_folder

FORMAT = 2  # the layout of a cache file: {"format", "source", "sha256", "data"}
_MEMO: dict[tuple[str, str], tuple[str, ImageData]] = {}
_VERIFIED: set[tuple[str, str]] = set()  # (folder, manifest hash) whose bytes this process hashed


def arrays_hash(fields: dict[str, Any]) -> str:
    """sha256 over a cached split's fields in name order: each tensor's dtype, shape and bytes, every other
    value (names, lists, the ``extra`` columns) as canonical JSON."""
    h = hashlib.sha256()
    for name in sorted(fields):
        value = fields[name]
        h.update(f"{name}\0".encode())
        if isinstance(value, torch.Tensor):
            array = np.ascontiguousarray(value.numpy())
            h.update(f"{array.dtype}{array.shape}\0".encode())
            h.update(array.reshape(-1).view(np.uint8))
        else:
            h.update(json.dumps(value, sort_keys=True).encode())
    return h.hexdigest()


def _to_file(data: ImageData, source: str) -> dict:
    fields = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    fields["extra"] = {k: np.asarray(v).tolist() for k, v in data.extra.items()}
    return {"format": FORMAT, "source": source, "sha256": arrays_hash(fields), "data": fields}


def _from_file(fields: dict) -> ImageData:
    return ImageData(**{**fields, "extra": {k: np.asarray(v) for k, v in fields["extra"].items()}})


def _problem(stored: Any, source: str | None) -> tuple[bool, str | None]:
    """(whether ``stored``, a cache file's content, is of ``source``'s key, why it is refused or None)."""
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return False, "not a decoded split of this version"
    if stored.get("source") != source:
        return False, f"decoded from other bytes (manifest hash {stored.get('source')}, the folder's: {source})"
    if not isinstance(stored.get("data"), dict):
        return True, "no arrays"
    got = arrays_hash(stored["data"])
    if got != stored.get("sha256"):
        return True, (f"its arrays hash to {got}, the hash stored with them is {stored.get('sha256')}: the file "
                      "was changed after it was written")
    return True, None


def _read(path: Path, source: str) -> ImageData | None:
    """The split cached at ``path`` for ``source``; None when missing or of another key, or refused (printed)."""
    if not path.is_file():
        return None
    try:
        stored = load_torch(path, "decoded split", "it is decoded again")
        keyed, problem = _problem(stored, source)
        if problem is None:
            return _from_file(stored["data"])
        if not keyed:
            return None
    except UnreadableFileError as err:
        problem = str(err)
    except (KeyError, TypeError, ValueError) as err:  # arrays that make no ImageData
        problem = f"{type(err).__name__}: {err}"
    print(f"refused the decoded split {path} ({problem}): decoding it again", file=sys.stderr, flush=True)
    return None


def _decode(folder: Path, source: str, build: Callable[[], ImageData]) -> ImageData:
    """``build()`` after the folder's bytes were hashed to ``source`` in this process (regenerated if not)."""
    mark = (str(folder.resolve()), source)
    if mark not in _VERIFIED:
        verify_folder(folder.name, folder.parent)
        _VERIFIED.add(mark)
    return build()


def decoded_split(folder: Path | str, key: str, build: Callable[[], ImageData]) -> ImageData:
    """``build()`` (a split of generated folder ``folder``), decoded once per manifest hash of the folder.

    Without a stamp or a manifest (a folder written by a test, say) nothing is cached. Each call returns a
    new :class:`ImageData` whose tensors are shared with the cache: callers index (``subset``), never write.
    """
    folder = Path(folder)
    source = read_stamp(folder)
    if source is None or not manifest_path(folder).is_file():
        return build()
    memo_key = (str(folder.resolve()), key)
    hit = _MEMO.get(memo_key)
    if hit is None or hit[0] != source:
        path = folder / DECODED / f"{key}.pt"
        data = _read(path, source)
        if data is None:
            data = _decode(folder, source, build)
            save_torch(_to_file(data, source), path)
        hit = _MEMO[memo_key] = (source, data)
    return dataclasses.replace(hit[1])


def check_caches(folder: Path | str) -> list[str]:
    """Check every decoded split of ``folder`` against its key (the folder's manifest hash) and its own hash;
    remove the ones refused, returning a note naming each (they are decoded again at the next load)."""
    folder = Path(folder)
    source, notes = read_stamp(folder), []
    for path in sorted((folder / DECODED).glob("*.pt")):
        try:
            problem = _problem(load_torch(path, "decoded split", "it is removed"), source)[1]
        except UnreadableFileError as err:
            problem = str(err)
        except (KeyError, TypeError, ValueError) as err:  # fields that cannot be hashed
            problem = f"{type(err).__name__}: {err}"
        if problem is not None:
            path.unlink()
            notes.append(f"decoded split {path.name} removed: {problem}")
    return notes
