"""``python -m isogclr restore-data``: every generated folder made to match its manifest, checked in full on demand.

Without ``verify``, each folder is :func:`~isogclr.data.manifest.ensure`-d: its stamp and listing checked (no
bytes read), a stale or missing folder rebuilt. With ``verify``, each folder's bytes are hashed as well
(:func:`~isogclr.data.manifest.verify_folder`: other bytes are regenerated and the files that differed named),
and its decoded splits are checked against the hash stored with them
(:func:`~isogclr.data.decoded.check_caches`: a bad one is removed, named, and decoded again at the next load).
"""

from __future__ import annotations

import time
from pathlib import Path

from .manifest import ManifestError, read_manifest, verify_folder


def restore(root: Path | str = "data", verify: bool = False) -> list[tuple[str, str, float]]:
    """Ensure (or with ``verify``, hash and check) every generated dataset ``root/<name>`` with a manifest
    ``root/<name>.json``; returns (name, what was done, seconds) for each: "up to date", "verified" (hashed: the
    manifest's bytes) or "rebuilt", followed by the files that differed and the decoded splits refused, named.
    JSON files that are no manifests are skipped."""
    done = []
    for path in sorted(Path(root).glob("*.json")):
        try:
            read_manifest(path)
        except ManifestError:
            continue
        t0 = time.perf_counter()
        state, changed = verify_folder(path.stem, root, quiet=True, hash_bytes=verify)
        notes = [f"its files differed from the manifest: edited or corrupted after it was verified; {changed}"
                 ] if changed else []
        if verify:
            from .decoded import check_caches  # imports torch: only here

            notes += check_caches(Path(root) / path.stem)
        done.append((path.stem, state + (f" ({'; '.join(notes)})" if notes else ""), time.perf_counter() - t0))
    return done
