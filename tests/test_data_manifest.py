"""Generated datasets as manifests (git) and folders rebuilt on demand: the manifest round trip, a deleted
folder rebuilt with the same bytes, a tampered manifest named in the error, concurrent rebuilds, and the
generators' determinism, on tiny specs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from isogclr.cli import main
from isogclr.data import fashion_mnist, load_dataset, manifest
from isogclr.data.fashion_mnist import FashionMnistMiniSpec
from isogclr.data.manifest import STAMP, ManifestError, ensure, read_stamp, tree_hash
from isogclr.data.pair_semantics import PairSpec
from isogclr.data.pairs_folder import load_pairs_folder
from isogclr.data.synthetic import SyntheticSpec
from isogclr.dataset_specs import GENERATED

from .conftest import ROOT
from .test_data_fashion_mnist import _fixture

TINY = {
    "synthetic": {"seed": 0, "image_size": 12, "noise": 0.05, "per_class": {10: [3, 1]}},
    "synthetic_pairs": {"seed": 5, "image_size": 12, "num_pairs": 30, "num_clusters": 6, "retrieval_images": 5,
                        "zeroshot_per_class": 1},
    "fashion_mnist_mini": {"per_class": [2, 1], "image_size": 8},
}
COMMANDS = {"synthetic": "synthetic", "synthetic_pairs": "synthetic-pairs", "fashion_mnist_mini": "fashion-mnist-mini"}
SPECS = {"synthetic": SyntheticSpec(seed=0, image_size=12, noise=0.05, per_class={10: (3, 1)}),
         "synthetic_pairs": PairSpec(seed=5, image_size=12, num_pairs=30, num_clusters=6, retrieval_images=5,
                                     zeroshot_per_class=1),
         "fashion_mnist_mini": FashionMnistMiniSpec(per_class=(2, 1), image_size=8)}


@pytest.fixture
def fashion_source(tmp_path, monkeypatch) -> Path:
    """A tiny Fashion-MNIST in the Debian layout, standing in for /usr/share/datasets/fashion-mnist."""
    system = tmp_path / "system"
    _fixture(system, n_train=30, n_test=20)
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", system)
    return system


def _make(root: Path, name: str) -> dict:
    """Run the dataset's command on a tiny spec, as the DVC stage does; return the manifest written."""
    params = root.parent / f"params-{name}.yaml"
    params.write_text(yaml.safe_dump({"data": {"root": str(root), name: TINY[name]}}))
    assert main([COMMANDS[name], "--params", str(params), "--out", str(root / name)]) == 0
    return json.loads((root / f"{name}.json").read_text())


def _load(name: str, root: Path):
    if name == "synthetic":
        return load_dataset("synth10", root, "train")
    if name == "fashion_mnist_mini":
        return load_dataset("fashion_mnist_mini", root, "train")
    return load_pairs_folder(root / name, 12)


@pytest.mark.parametrize("name", list(TINY))
def test_manifest_round_trip(name, tmp_path, fashion_source, monkeypatch):
    root = tmp_path / "data"
    written = _make(root, name)
    digest, n = tree_hash(root / name)
    assert written == {"dataset": name, "generator": GENERATED[name].target,
                       "spec": manifest.spec_dict(SPECS[name]), "files": n, "sha256": digest}
    assert read_stamp(root / name) == digest and manifest.up_to_date(root / name)
    # the stored spec is the generator's spec again
    module = sys.modules[GENERATED[name].target.split(":")[0]]
    assert module.spec_from_dict(written["spec"]) == SPECS[name]
    _load(name, root)  # a first load decodes (and caches) the splits from bytes it hashes
    # up to date: ensure reads the stamp and hashes nothing, nor does a load of the cached splits
    monkeypatch.setattr(manifest, "tree_hash", lambda folder: pytest.fail("ensure hashed an up-to-date folder"))
    assert ensure(name, root) == root / name
    _load(name, root)


@pytest.mark.parametrize("name", list(TINY))
def test_deleted_folder_is_rebuilt_by_its_loader(name, tmp_path, fashion_source, capsys):
    root = tmp_path / "data"
    written = _make(root, name)
    shutil.rmtree(root / name)  # a fresh clone: the manifest only
    assert not manifest.up_to_date(root / name)
    capsys.readouterr()
    _load(name, root)
    assert tree_hash(root / name) == (written["sha256"], written["files"])
    assert read_stamp(root / name) == written["sha256"]
    err = capsys.readouterr().err
    assert f"regenerated {root / name}" in err and f"from {root / name}.json" in err
    assert {name, f"{name}.json"} <= {p.name for p in root.iterdir()}
    assert not list(root.glob(f".{name}.regen-*"))  # no temporary folder left behind


def test_stale_folder_is_rebuilt_and_right_bytes_only_restamped(tmp_path, capsys):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    (root / "synthetic" / STAMP).unlink()  # the right bytes without a stamp: hashed, stamped, not rebuilt
    capsys.readouterr()
    assert manifest._ensure("synthetic", root, quiet=False)[1] == "verified"
    assert read_stamp(root / "synthetic") == written["sha256"] and "regenerated" not in capsys.readouterr().err
    # other bytes (an edited file, a stray one) and another stamp: rebuilt
    (root / "synthetic" / STAMP).write_text("0" * 64)
    (root / "synthetic" / "meta.json").write_text("{}")
    (root / "synthetic" / "stray.txt").write_text("x")
    assert manifest._ensure("synthetic", root, quiet=True)[1] == "rebuilt"
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])
    assert not (root / "synthetic" / "stray.txt").exists()
    assert [p.name for p in root.iterdir() if p.name.startswith(".synthetic.") and p.name != ".synthetic.lock"] == []


def test_tampered_manifest_hash_names_the_manifest(tmp_path):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    path = root / "synthetic.json"
    path.write_text(json.dumps({**written, "sha256": "f" * 64}))
    shutil.rmtree(root / "synthetic")
    with pytest.raises(ManifestError) as err:
        ensure("synthetic", root)
    message = str(err.value)
    for part in (str(path), "f" * 64, written["sha256"], "dvc repro synthetic", "python -m isogclr synthetic"):
        assert part in message
    assert not (root / "synthetic").exists() and not list(root.glob(".synthetic.regen-*"))


def test_missing_manifest_names_the_file_and_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"synthetic\.json not found.*python -m isogclr synthetic --out"):
        ensure("synthetic", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"fashion_mnist_mini\.json not found.*fashion-mnist-mini"):
        ensure("fashion_mnist_mini", tmp_path)
    # a loader with neither the folder nor its manifest says what to run
    with pytest.raises(FileNotFoundError, match=r"synthetic\.json.*python -m isogclr synthetic"):
        load_dataset("synth10", tmp_path, "train")


def test_fashion_rebuild_without_its_source_says_what_to_install(tmp_path, fashion_source, monkeypatch):
    root = tmp_path / "data"
    _make(root, "fashion_mnist_mini")
    shutil.rmtree(root / "fashion_mnist_mini")
    shutil.rmtree(root / "fashion_mnist")  # the decompressed copy of the source files
    monkeypatch.setattr(fashion_mnist, "SYSTEM_DIR", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"fashion_mnist_mini\.json.*apt-get install -y dataset-fashion-mnist"):
        load_dataset("fashion_mnist_mini", root, "train")


def test_folder_without_manifest_is_read_as_it_is(tmp_path):
    """A folder written by hand (or by a test) without a manifest: loaders read it, ensure() refuses it."""
    from isogclr.data.synthetic import write_synthetic

    write_synthetic(SPECS["synthetic"], tmp_path / "synthetic")
    assert len(load_dataset("synth10", tmp_path, "train")) == 30
    with pytest.raises(FileNotFoundError, match="synthetic.json not found"):
        ensure("synthetic", tmp_path)


def test_two_processes_ensure_at_once(tmp_path):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    shutil.rmtree(root / "synthetic")
    code = "import sys; from isogclr.data.manifest import ensure; ensure('synthetic', sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert sum("regenerated" in e for e in errs) == 1  # the second waited and found the first's folder
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])
    assert sorted(p.name for p in root.iterdir()) == [".synthetic.lock", "synthetic", "synthetic.json"]


def test_install_race_keeps_the_first_folder(tmp_path):
    """Without the lock (another filesystem): the second rename fails, its copy is dropped, the first kept."""
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    for copy in ("a", "b"):
        shutil.copytree(root / "synthetic", tmp_path / copy)
        (tmp_path / copy / "marker").write_text(copy)
        manifest.write_stamp(tmp_path / copy, written["sha256"], written["spec"])  # as a verified rebuild has
    shutil.rmtree(root / "synthetic")
    assert manifest._install(tmp_path / "a", root / "synthetic", written)
    assert not manifest._install(tmp_path / "b", root / "synthetic", written)
    assert (root / "synthetic" / "marker").read_text() == "a"


@pytest.mark.parametrize("name", list(TINY))
def test_generators_are_deterministic(name, tmp_path, fashion_source):
    generator = GENERATED[name]
    spec = manifest.spec_dict(SPECS[name])
    hashes = []
    for copy in ("a", "b"):
        generator.write(spec, tmp_path, tmp_path / copy / name)
        hashes.append(tree_hash(tmp_path / copy / name))
    assert hashes[0] == hashes[1]
    other = {"synthetic": {"seed": 1}, "synthetic_pairs": {"seed": 6}, "fashion_mnist_mini": {"image_size": 9}}[name]
    generator.write({**spec, **other}, tmp_path, tmp_path / "c" / name)
    assert tree_hash(tmp_path / "c" / name)[0] != hashes[0][0]


def test_tree_hash_covers_names_and_bytes_not_the_stamp(tmp_path):
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("1")
    (folder / "b.txt").write_text("2")
    base = tree_hash(folder)
    assert base[1] == 2
    (folder / STAMP).write_text("anything")
    assert tree_hash(folder) == base
    (folder / "b.txt").write_text("3")
    assert tree_hash(folder)[0] != base[0]
    (folder / "b.txt").write_text("2")
    (folder / "b.txt").rename(folder / "c.txt")
    assert tree_hash(folder)[0] != base[0]


def test_restore_data_command(tmp_path, fashion_source, capsys):
    root = tmp_path / "data"
    for name in TINY:
        _make(root, name)
    (root / "notes.json").write_text('{"not": "a manifest"}')
    shutil.rmtree(root / "synthetic_pairs")
    capsys.readouterr()
    assert main(["restore-data", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{root / 'synthetic_pairs'}: rebuilt" in out and f"{root / 'synthetic'}: up to date" in out
    assert "notes" not in out and "restored 3 generated dataset(s)" in out
    assert main(["restore-data", "--root", str(tmp_path / "empty")]) == 0
    assert "nothing to restore" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(TINY))
def test_a_generator_refuses_a_folder_it_did_not_write(name, tmp_path, fashion_source):
    root = tmp_path / "data"
    mine = root / name
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("years of work")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"data": {"root": str(root), name: TINY[name]}}))
    with pytest.raises(FileExistsError, match=rf"{mine} already exists, is not empty and was not written by"):
        main([COMMANDS[name], "--params", str(params), "--out", str(mine)])
    assert (mine / "thesis.tex").read_text() == "years of work" and sorted(p.name for p in mine.iterdir()) == [
        "thesis.tex"]
    assert sorted(p.name for p in root.iterdir()) == [name]  # no temporary folder left behind
    # its own output is replaced (a rerun), with nothing of the former folder left
    shutil.rmtree(mine)
    _make(root, name)
    (root / name / "stray.txt").write_text("x")
    _make(root, name)
    assert not (root / name / "stray.txt").exists()


@pytest.mark.parametrize("name", list(TINY))
def test_a_generator_writes_through_a_symlink_and_leaves_no_temporary_folder(name, tmp_path, fashion_source):
    root, target = tmp_path / "data", tmp_path / "elsewhere" / name
    target.mkdir(parents=True)
    root.mkdir()
    (root / name).symlink_to(target)
    _make(root, name)
    assert (root / name).is_symlink() and (target / "meta.json").is_file()
    _make(root, name)  # a rerun replaces the target's content, the link stays
    assert (root / name).is_symlink() and manifest.up_to_date(root / name)
    leftovers = [p.name for p in [*root.iterdir(), *target.parent.iterdir()] if p.name.startswith(".")]
    assert leftovers == []


def test_a_truncated_file_after_the_stamp_is_seen_and_rebuilt(tmp_path, capsys):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    png = sorted((root / "synthetic").rglob("*.png"))[0]
    png.write_bytes(png.read_bytes()[:20])
    assert not manifest.up_to_date(root / "synthetic")
    capsys.readouterr()
    assert manifest._ensure("synthetic", root, quiet=False)[1] == "rebuilt"
    assert "truncated, added or removed" in capsys.readouterr().err
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])
    (root / "synthetic" / "extra.png").write_bytes(b"x")  # a file added: also seen
    assert manifest._ensure("synthetic", root, quiet=True)[1] == "rebuilt"


def test_an_edited_spec_with_the_hash_unchanged_is_refused_naming_the_cause(tmp_path):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    path = root / "synthetic.json"
    path.write_text(json.dumps({**written, "spec": {**written["spec"], "noise": 0.3}}))
    assert not manifest.up_to_date(root / "synthetic")
    with pytest.raises(ManifestError, match=r"Likely cause: .*synthetic\.json's spec was edited without rerunning"):
        ensure("synthetic", root)


def test_a_genuine_hash_mismatch_names_the_edited_manifest_first(tmp_path):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    (root / "synthetic.json").write_text(json.dumps({**written, "sha256": "e" * 64}))
    with pytest.raises(ManifestError) as err:
        ensure("synthetic", root)
    message = str(err.value)
    assert "Likely cause" in message and "git diff" in message and message.index("edited") < message.index(
        "libraries")


def test_restore_data_verify_hashes_and_rebuilds_a_same_size_edit(tmp_path, capsys):
    root = tmp_path / "data"
    written = _make(root, "synthetic")
    table = root / "synthetic" / "c10" / "train.csv"
    data = table.read_bytes()
    table.write_bytes(data[:-2] + (b"9" if data[-2:-1] != b"9" else b"8") + data[-1:])  # same size, other bytes
    assert not manifest.up_to_date(root / "synthetic")  # the listing sees the write (its change time)
    manifest.write_stamp(root / "synthetic", written["sha256"], written["spec"])  # as a disk error: no trace
    assert manifest.up_to_date(root / "synthetic")  # the cheap check cannot see it
    capsys.readouterr()
    assert main(["restore-data", "--root", str(root)]) == 0
    assert "synthetic: up to date" in capsys.readouterr().out
    assert main(["restore-data", "--root", str(root), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt (its files differed from the manifest: edited or corrupted" in out and "c10/train.csv" in out
    assert tree_hash(root / "synthetic") == (written["sha256"], written["files"])


@pytest.mark.parametrize(("name", "dataset"), [("synthetic", "synth10"), ("fashion_mnist_mini", "fashion_mnist_mini")])
def test_a_split_is_decoded_once_per_verified_folder(name, dataset, tmp_path, fashion_source, monkeypatch):
    """The loaders keep a generated split's decoded arrays (in the process and in <folder>/.decoded/): the same
    data as a fresh decode, no image decoded again until the folder changes, and the cache is no file of the
    folder (its stamp still vouches for it)."""
    from isogclr.data import decoded, folder

    root = tmp_path / "data"
    _make(root, name)
    fresh = load_dataset(dataset, root, "train")  # decoded, and written to the cache
    assert list((root / name / manifest.DECODED).glob("*.pt")) and manifest.up_to_date(root / name)
    calls = []
    monkeypatch.setattr(folder, "load_square_rgb", lambda *a: calls.append(a) or pytest.fail("decoded again"))
    for clear in (False, True):  # the process's memo, then the file alone (another process)
        if clear:
            decoded._MEMO.clear()
        again = load_dataset(dataset, root, "train")
        assert again is not fresh and torch.equal(again.images, fresh.images)
        assert torch.equal(again.labels, fresh.labels) and torch.equal(again.source_index, fresh.source_index)
        assert again.class_names == fresh.class_names
        assert again.extra.keys() == fresh.extra.keys()
        assert all(np.array_equal(again.extra[k], fresh.extra[k]) for k in fresh.extra)
        # the key is the bytes it was decoded from (the manifest hash), not the stamp: the folder hashed and
        # stamped again (a file touched) keeps its cache
        os.utime(next((root / name).rglob("*.png")))
        assert not manifest.up_to_date(root / name)
    # a cache of other bytes (another manifest hash) is decoded again and rewritten
    key = "c10-train" if name == "synthetic" else "train"
    cache = root / name / manifest.DECODED / f"{key}.pt"
    torch.save({**torch.load(cache), "source": "0" * 64}, cache)
    decoded._MEMO.clear()
    monkeypatch.undo()
    load_dataset(dataset, root, "train")
    assert torch.load(cache)["source"] == read_stamp(root / name) == manifest.read_manifest(
        root / f"{name}.json")["sha256"]
