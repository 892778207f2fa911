"""A generated folder's splits decoded once: kept in the process and in ``<folder>/.decoded/<key>.pt``.

Decoding a split's PNG files is the largest fixed cost of a mini run (synth10's 30,000 images: about 2.5 s of
a 50 s run, every run). A generated folder is a deterministic cache verified against its manifest
(:mod:`isogclr.data.manifest`), so its decoded arrays can be cached too: :func:`decoded_split` returns the
split built by ``build`` (an :class:`ImageData` from the image-folder loader), keyed by the folder's stamp (the
manifest hash, the file listing and the spec it was verified against). A folder rebuilt or changed gets a new
stamp, and the cache is rebuilt; ``.decoded/`` is not one of the folder's files (:func:`manifest.tree_hash`).
Bytes are the same as a fresh decode: the cache holds the decoded uint8 arrays themselves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..io import UnreadableFileError, load_torch, save_torch
from .base import ImageData
from .manifest import DECODED, STAMP

_MEMO: dict[tuple[str, str], tuple[str, ImageData]] = {}


def _stamp(folder: Path) -> str | None:
    try:
        return (folder / STAMP).read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _to_file(data: ImageData, stamp: str) -> dict:
    fields = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
    fields["extra"] = {k: np.asarray(v).tolist() for k, v in data.extra.items()}
    return {"stamp": stamp, "data": fields}


def _from_file(fields: dict) -> ImageData:
    return ImageData(**{**fields, "extra": {k: np.asarray(v) for k, v in fields["extra"].items()}})


def decoded_split(folder: Path | str, key: str, build: Callable[[], ImageData]) -> ImageData:
    """``build()`` (a split of generated folder ``folder``), decoded once per verified state of the folder.

    Without a stamp (a folder with no manifest, e.g. written by a test) nothing is cached. Each call returns a
    new :class:`ImageData` whose tensors are shared with the cache: callers index (``subset``), never write.
    """
    folder = Path(folder)
    stamp = _stamp(folder)
    if stamp is None:
        return build()
    memo_key = (str(folder.resolve()), key)
    hit = _MEMO.get(memo_key)
    if hit is None or hit[0] != stamp:
        path = folder / DECODED / f"{key}.pt"
        data = None
        if path.is_file():
            try:
                stored = load_torch(path, "decoded split", "it is rebuilt")
                data = _from_file(stored["data"]) if stored.get("stamp") == stamp else None
            except (UnreadableFileError, KeyError, TypeError, ValueError):
                data = None
        if data is None:
            data = build()
            save_torch(_to_file(data, stamp), path)
        hit = _MEMO[memo_key] = (stamp, data)
    return dataclasses.replace(hit[1])
