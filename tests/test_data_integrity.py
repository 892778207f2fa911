"""Generated data verified, its decoded cache bound to it: a poisoned decoded cache is refused naming it, files
swapped or truncated inside a generated folder are seen (even with their times put back) and named when the
folder is regenerated, a corrupt generated image says how to regenerate (real data keeps its re-download
advice), and a data command's --out never replaces a file it did not write."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image

from isogclr.cli import main
from isogclr.data import decoded, load_dataset, manifest
from isogclr.data.folder import image_folder
from isogclr.data.manifest import DECODED, claim_manifest, tree_hash
from isogclr.dataset_specs import GENERATED

from .conftest import ROOT

SPEC = {"seed": 0, "image_size": 12, "noise": 0.05, "per_class": {10: [20, 2]}}


def _make(tmp_path: Path) -> tuple[Path, dict]:
    """A small synthetic set with its manifest, as the `synthetic` stage writes it; (data root, manifest)."""
    root = tmp_path / "data"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"data": {"root": str(root), "synthetic": SPEC}}))
    assert main(["synthetic", "--params", str(params), "--out", str(root / "synthetic")]) == 0
    return root, json.loads((root / "synthetic.json").read_text())


def _another_process() -> None:
    """Forget what this process decoded and verified, as a new process starts."""
    decoded._MEMO.clear()
    decoded._VERIFIED.clear()


def _same(a, b) -> bool:
    return torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)


def _same_size_pair(folder: Path) -> tuple[Path, Path]:
    """Two PNGs of the same size in different class folders of ``folder`` whose bytes differ."""
    by_size = defaultdict(list)
    for png in sorted(folder.rglob("*.png")):
        by_size[png.stat().st_size].append(png)
    for group in by_size.values():
        for a in group:
            for b in group:
                if a.parent != b.parent and a.read_bytes() != b.read_bytes():
                    return a, b
    raise AssertionError(f"no two same-size PNGs in different classes under {folder}")


def _swap(a: Path, b: Path) -> None:
    """Swap two files' bytes in place and put their modification times back (their change times move)."""
    times = {p: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in (a, b)}
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    for p, ns in times.items():
        os.utime(p, ns=ns)


def test_a_poisoned_decoded_cache_is_refused_naming_it_and_decoded_again(tmp_path, capsys):
    root, written = _make(tmp_path)
    fresh = load_dataset("synth10", root, "train")
    cache = root / "synthetic" / DECODED / "c10-train.pt"
    stored = torch.load(cache)
    assert stored["source"] == written["sha256"]  # keyed by the bytes it was decoded from
    poisoned = {**stored["data"], "images": torch.zeros_like(stored["data"]["images"]),
                "labels": torch.full_like(stored["data"]["labels"], 3)}
    torch.save({**stored, "data": poisoned}, cache)  # the right key and the old hash: refused
    _another_process()
    capsys.readouterr()
    again = load_dataset("synth10", root, "train")
    assert _same(again, fresh) and again.labels.unique().numel() == 10
    err = capsys.readouterr().err
    assert f"refused the decoded split {cache}" in err and "its arrays hash to" in err
    assert torch.load(cache)["sha256"] == decoded.arrays_hash(torch.load(cache)["data"])  # written again, sound
    # the former layout, keyed by the stamp's text: not a key of this one, decoded again
    torch.save({"stamp": (root / "synthetic" / manifest.STAMP).read_text(), "data": poisoned}, cache)
    _another_process()
    assert _same(load_dataset("synth10", root, "train"), fresh)
    # restore-data --verify checks every decoded split: a poisoned one is named and removed
    torch.save({**torch.load(cache), "data": poisoned}, cache)
    assert main(["restore-data", "--root", str(root), "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"{root / 'synthetic'}: verified (decoded split c10-train.pt removed: its arrays hash to" in out
    assert not cache.exists()
    assert main(["restore-data", "--root", str(root), "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"{root / 'synthetic'}: verified (" in out and "removed" not in out  # nothing left to name


def test_the_cache_hash_is_checked_on_every_load_from_file(tmp_path, monkeypatch):
    root, _ = _make(tmp_path)
    load_dataset("synth10", root, "train")
    calls = []
    real = decoded.arrays_hash
    monkeypatch.setattr(decoded, "arrays_hash", lambda fields: calls.append(1) or real(fields))
    _another_process()
    load_dataset("synth10", root, "train")
    assert len(calls) == 1  # read from the file: checked; then kept in the process
    load_dataset("synth10", root, "train")
    assert len(calls) == 1


def test_two_same_size_pngs_swapped_between_classes_are_seen_and_named(tmp_path, capsys):
    root, written = _make(tmp_path)
    fresh = load_dataset("synth10", root, "train")
    a, b = _same_size_pair(root / "synthetic" / "c10" / "train")
    _swap(a, b)  # same names, same sizes, same modification times: only the change times tell
    assert not manifest.up_to_date(root / "synthetic")
    _another_process()
    capsys.readouterr()
    again = load_dataset("synth10", root, "train")
    err = capsys.readouterr().err
    assert f"regenerated {root / 'synthetic'}" in err and "2 file(s) differed from the manifest's" in err
    for png in (a, b):
        assert f"{png.relative_to(root / 'synthetic').as_posix()} (other bytes of the same size" in err
    assert _same(again, fresh) and tree_hash(root / "synthetic") == (written["sha256"], written["files"])


def test_a_swap_the_listing_cannot_see_is_caught_before_a_split_is_decoded(tmp_path, capsys, monkeypatch):
    """A change below the filesystem (here: the stamp written again over a swap) keeps the listing; a split is
    decoded only from bytes hashed in that process, once per folder: the swap is named and regenerated."""
    root, written = _make(tmp_path)
    a, b = _same_size_pair(root / "synthetic" / "c10" / "train")
    reference = load_dataset("synth10", root, "train")
    _swap(a, b)
    manifest.write_stamp(root / "synthetic", written["sha256"], written["spec"])
    assert manifest.up_to_date(root / "synthetic")
    _another_process()
    assert _same(load_dataset("synth10", root, "train"), reference)  # the cache holds the verified decode
    for path in (root / "synthetic" / DECODED).iterdir():
        path.unlink()  # no cache: the split is decoded, from bytes hashed first
    _another_process()
    hashes = []
    monkeypatch.setattr(manifest, "tree_hash", lambda folder, real=manifest.tree_hash: hashes.append(folder)
                        or real(folder))
    capsys.readouterr()
    train, _ = load_dataset("synth10", root, "train"), load_dataset("synth10", root, "test")
    err = capsys.readouterr().err
    assert "its files' bytes differ from the manifest although its stamp vouched for them" in err
    assert f"{a.relative_to(root / 'synthetic').as_posix()} (other bytes" in err
    assert _same(train, reference)
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])
    hashes.clear()
    _another_process()
    for path in (root / "synthetic" / DECODED).iterdir():
        path.unlink()
    load_dataset("synth10", root, "train")
    load_dataset("synth10", root, "test")
    assert hashes == [root / "synthetic"]  # two splits decoded, the folder hashed once


def test_a_truncated_png_is_named_when_its_folder_is_regenerated(tmp_path, capsys):
    root, written = _make(tmp_path)
    png = sorted((root / "synthetic" / "c10" / "test").rglob("*.png"))[3]
    size = png.stat().st_size
    png.write_bytes(png.read_bytes()[:20])
    capsys.readouterr()
    load_dataset("synth10", root, "test")
    err = capsys.readouterr().err
    rel = png.relative_to(root / "synthetic").as_posix()
    assert f"regenerated {root / 'synthetic'}" in err and "truncated, added or removed" in err
    assert f"1 file(s) differed from the manifest's: {rel} (20 bytes instead of {size}" in err
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])


def test_a_corrupt_generated_image_says_regenerate_and_real_data_says_redownload(tmp_path, capsys):
    root, written = _make(tmp_path)
    png = sorted((root / "synthetic" / "c10" / "train").rglob("*.png"))[0]
    png.write_bytes(b"\x89PNG" + b"\0" * (png.stat().st_size - 4))
    with pytest.raises(ValueError) as err:  # read behind the loader's back: the advice is to regenerate
        image_folder(root / "synthetic" / "c10", "train", size=12)
    message = str(err.value)
    assert str(png) in message and "re-download" not in message
    assert f"{root / 'synthetic'} is generated from its manifest {root / 'synthetic.json'}" in message
    assert f"python -m isogclr restore-data --verify --root {root}" in message and "dvc repro synthetic" in message
    # through the loader, even when the stamp vouches for the damage: named, regenerated, read
    manifest.write_stamp(root / "synthetic", written["sha256"], written["spec"])
    _another_process()
    capsys.readouterr()
    assert len(load_dataset("synth10", root, "train")) == 200
    assert f"{png.relative_to(root / 'synthetic').as_posix()} (other bytes" in capsys.readouterr().err
    # a real dataset (no manifest) keeps the re-download advice
    real = tmp_path / "real" / "train" / "n01"
    real.mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(real / "ok.png")
    (real / "broken.png").write_bytes(b"\x89PNG not an image")
    with pytest.raises(ValueError, match=r"broken\.png.*re-download or re-extract"):
        image_folder(tmp_path / "real", "train", size=8)


def test_out_never_replaces_a_json_it_did_not_write(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"data": {"root": str(tmp_path), "synthetic": SPEC}}))
    out = tmp_path / "results"
    unrelated = tmp_path / "results.json"
    for text in ('{"accuracy": 0.93}', "not json at all"):
        unrelated.write_text(text)
        with pytest.raises(FileExistsError, match=rf"{unrelated} exists and is not a manifest written by `python -m "
                                                  r"isogclr synthetic`"):
            main(["synthetic", "--params", str(params), "--out", str(out)])
        assert unrelated.read_text() == text and not out.exists()
    # another data command's manifest is not this one's either
    unrelated.write_text(json.dumps({"dataset": "results", "generator": GENERATED["synthetic_pairs"].target, "spec": {},
                                     "sha256": "0" * 64}))
    with pytest.raises(FileExistsError, match="generator: isogclr.data.synthetic_pairs"):
        main(["synthetic", "--params", str(params), "--out", str(out)])
    # its own manifest is rewritten (a rerun); the committed manifest of the pipeline's path is its own
    unrelated.unlink()
    assert main(["synthetic", "--params", str(params), "--out", str(out)]) == 0
    assert main(["synthetic", "--params", str(params), "--out", str(out)]) == 0
    assert json.loads(unrelated.read_text())["generator"] == GENERATED["synthetic"].target
    assert {p.name for p in tmp_path.iterdir()} - {"timing.csv"} == {"params.yaml", "results", "results.json"}
    assert claim_manifest(ROOT / "data" / "synthetic", GENERATED["synthetic"]) == ROOT / "data" / "synthetic.json"


def test_a_symlink_loop_inside_a_generated_folder_is_named_and_regenerated(tmp_path, capsys):
    root, written = _make(tmp_path)
    png = sorted((root / "synthetic" / "c10" / "train").rglob("*.png"))[1]
    png.unlink()
    png.symlink_to(png)  # a loop in place of an image
    assert not manifest.up_to_date(root / "synthetic")  # a change, not an error
    capsys.readouterr()
    assert len(load_dataset("synth10", root, "train")) == 200
    err = capsys.readouterr().err
    assert f"{png.relative_to(root / 'synthetic').as_posix()} (unreadable: Too many levels of symbolic links)" in err
    assert not png.is_symlink() and tree_hash(root / "synthetic") == (written["sha256"], written["files"])
