"""Generated image-text pairs: deterministic, readable by the real caption loaders, captions that agree
with the ground-truth attributes, a long-tailed cluster profile, and images that show their attributes."""

from __future__ import annotations

import colorsys
import csv
import hashlib
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from isogclr.data.captions import load_caption_tsv, load_karpathy
from isogclr.data.pair_semantics import (
    CAPTION_TEMPLATES,
    COLOUR_SYNONYMS,
    COLOURS,
    POSITIONS,
    PairSpec,
    cluster_counts,
    item_attributes,
    sample_clusters,
)
from isogclr.data.synthetic import class_names, render
from isogclr.data.synthetic_pairs import COLOUR_HUES, render_items, write_object_pairs, write_synthetic_pairs

SPEC = PairSpec(seed=5, image_size=16, num_pairs=80, num_clusters=12, mismatch_fraction=0.1, retrieval_images=10,
                zeroshot_per_class=2)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pairs")
    write_synthetic_pairs(SPEC, out)
    return out


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_same_seed_same_bytes_other_seed_other_bytes(pairs, tmp_path):
    write_synthetic_pairs(SPEC, tmp_path / "again")
    write_synthetic_pairs(replace(SPEC, seed=6), tmp_path / "other")
    first, again, other = _digest(pairs), _digest(tmp_path / "again"), _digest(tmp_path / "other")
    assert first == again
    assert not any(name.startswith(".") or "/." in name for name in first)  # no temporary files left
    for name in ("train/captions.tsv", "train/meta.csv", "train/images/000000.png", "retrieval_a/dataset.json",
                 "zeroshot/synth100/images.npz"):
        assert first[name] != other[name], name
    # regenerating with fewer pairs removes the images of the larger run
    write_synthetic_pairs(replace(SPEC, num_pairs=20), tmp_path / "again")
    assert len(list((tmp_path / "again" / "train" / "images").glob("*.png"))) == 20


def test_real_loaders_read_what_was_written(pairs):
    train = load_caption_tsv(pairs / "train" / "captions.tsv", size=SPEC.image_size)
    assert len(train) == len(train.captions) == SPEC.num_pairs and train.skipped == 0
    first = np.asarray(Image.open(pairs / "train" / "images" / "000000.png"))
    assert np.array_equal(train.images[0].permute(1, 2, 0).numpy(), first)
    for name in ("retrieval_a", "retrieval_b"):
        data = load_karpathy(pairs / name / "dataset.json", pairs / name, "test", size=SPEC.image_size)
        assert len(data) == SPEC.retrieval_images and data.skipped == 0
        assert len(data.captions) == 5 * SPEC.retrieval_images
        per_image = Counter(data.image_index.tolist())
        assert set(per_image.values()) == {5}
        for i in range(len(data)):
            assert len({c for c, j in zip(data.captions, data.image_index.tolist(), strict=True) if j == i}) == 5
    a, b = (json.loads((pairs / n / "dataset.json").read_text())["images"] for n in ("retrieval_a", "retrieval_b"))
    assert [e["cluster"] for e in a] != [e["cluster"] for e in b]


def test_captions_agree_with_attributes(pairs):
    meta = _rows(pairs / "train" / "meta.csv")
    captions = [line.split("\t")[0] for line in (pairs / "train" / "captions.tsv").read_text().splitlines()]
    assert len(meta) == len(captions) == SPEC.num_pairs
    mismatched = [int(r["mismatched"]) for r in meta]
    assert sum(mismatched) == round(SPEC.mismatch_fraction * SPEC.num_pairs)
    assert len(set(captions)) > SPEC.num_clusters  # templates and synonyms vary within a cluster
    for row, caption in zip(meta, captions, strict=True):
        about = meta[int(row["caption_source"])]  # the pair whose attributes the caption describes
        assert (row["caption_source"] != row["pair"]) == (row["mismatched"] == "1")
        if row["mismatched"] == "1":
            assert about["cluster"] != row["cluster"]
        words = _words(caption)
        assert words & set(COLOUR_SYNONYMS[about["colour"]]), caption
        others = set().union(*(set(s) for c, s in COLOUR_SYNONYMS.items() if c != about["colour"]))
        assert not words & others, caption
        assert about["object"] in caption and about["object"] == class_names(100)[int(about["fine"])]
    for entry in json.loads((pairs / "retrieval_a" / "dataset.json").read_text())["images"]:
        for sentence in entry["sentences"]:
            assert entry["attributes"]["object"] in sentence["raw"]
            assert _words(sentence["raw"]) & set(COLOUR_SYNONYMS[entry["attributes"]["colour"]])


def test_cluster_frequencies_are_the_counts_and_long_tailed(pairs):
    meta = _rows(pairs / "train" / "meta.csv")
    counts = Counter(r["cluster"] for r in meta)
    assert all(int(r["cluster_frequency"]) == counts[r["cluster"]] for r in meta)
    clusters = _rows(pairs / "clusters.csv")
    frequency = [int(r["frequency"]) for r in clusters]
    assert frequency == [counts[str(c)] for c in range(SPEC.num_clusters)]
    assert sum(frequency) == SPEC.num_pairs and frequency == sorted(frequency, reverse=True)
    assert frequency[0] >= 8 * max(frequency[-1], 1)
    default = PairSpec()
    default_counts = cluster_counts(sample_clusters(default)["weight"], default.num_pairs)
    assert default_counts.sum() == default.num_pairs and default_counts[0] > 50 * default_counts[-1] > 0
    assert set(cluster_counts(np.ones(7), 70).tolist()) == {10}  # zipf 0: uniform
    # clusters are distinct attribute combinations
    c = sample_clusters(default)
    combos = set(zip(*(c[k].tolist() for k in ("fine", "colour", "background", "size", "position")), strict=True))
    assert len(combos) == default.num_clusters


def test_zeroshot_sets(pairs):
    for variant in (10, 100):
        folder = pairs / "zeroshot" / f"synth{variant}"
        assert (folder / "classnames.txt").read_text().splitlines() == class_names(variant)
        templates = (folder / "templates.txt").read_text().splitlines()
        assert len(templates) >= 5 and all("{}" in t for t in templates)
        with np.load(folder / "images.npz") as f:
            images, labels = f["images"], f["labels"]
        assert images.dtype == np.uint8 and images.shape == (variant * 2, 16, 16, 3)
        assert np.bincount(labels, minlength=variant).tolist() == [SPEC.zeroshot_per_class] * variant


def test_render_without_overrides_is_unchanged():
    # digest of render's output before the ``overrides`` argument was added
    expected = "9e18de224dc1a17566f77f9bc70fef065846432ef80da354550eece64c4a0fcc"
    fine = np.array([0, 17, 38, 64, 99])
    outputs = []
    for overrides in (None, {}, {"hue": np.full(5, np.nan)}):
        img, attrs = render(fine, 16, np.random.default_rng(11), 0.08, overrides=overrides)
        h = hashlib.sha256(img.tobytes())
        for k in sorted(attrs):
            h.update(np.asarray(attrs[k], dtype=np.float64).tobytes())
        outputs.append(h.hexdigest())
    assert outputs == [expected] * 3
    _, attrs = render(fine, 16, np.random.default_rng(0), 0.0, overrides={"cx": 0.4, "bg": [0.1, np.nan, 0, 0, 0]})
    assert np.all(attrs["cx"] == 0.4) and attrs["bg"][0] == 0.1 and attrs["bg"][1] != 0.1
    with pytest.raises(ValueError, match="style"):
        render(fine, 16, np.random.default_rng(0), 0.0, overrides={"style": np.zeros(5)})


def test_images_show_their_attributes():
    """Every colour x background x size x position on two objects: corners, hue, centroid and area agree."""
    grid = np.array(np.meshgrid([13, 66], range(8), range(2), range(2), range(5), indexing="ij")).reshape(5, -1)
    clusters = dict(zip(("fine", "colour", "background", "size", "position"), grid, strict=True))
    images, attrs = render_items(PairSpec(image_size=32), item_attributes(clusters, np.arange(grid.shape[1]), None),
                                 np.random.default_rng(0))
    x = images.astype(float) / 255
    corners = np.concatenate([x[:, :3, :3], x[:, :3, -3:], x[:, -3:, :3], x[:, -3:, -3:]], 1).reshape(len(x), -1, 3)
    brightness = corners.mean((1, 2)) * 255
    dark = clusters["background"] == 0
    assert np.all(brightness[dark] < 90) and np.all(brightness[~dark] > 150)
    assert np.array_equal(attrs["bg"] < 0.5, dark)
    mask = np.abs(x - np.median(corners, 1)[:, None, None]).max(-1) > 0.3  # the object's pixels
    grid01 = (np.arange(32) + 0.5) / 32
    cx = (mask * grid01[None, None]).sum((1, 2)) / mask.sum((1, 2))
    cy = (mask * grid01[None, :, None]).sum((1, 2)) / mask.sum((1, 2))
    pos = np.asarray(POSITIONS)[clusters["position"]]
    assert np.all(cx[pos == "left"] < 0.47) and np.all(cx[pos == "right"] > 0.53)
    assert np.all(cy[pos == "top"] < 0.47) and np.all(cy[pos == "bottom"] > 0.53)
    area = mask.mean((1, 2))
    assert area[clusters["size"] == 1].mean() > 1.5 * area[clusters["size"] == 0].mean()
    hues = []
    for img, m in zip(x, mask, strict=True):
        px = img[m]
        px = px[px.max(1) >= np.median(px.max(1))]  # the bright (unshaded) part of the texture
        hues.append(colorsys.rgb_to_hsv(*px.mean(0))[0])
    nearest = np.abs((np.asarray(hues)[:, None] - np.asarray(COLOUR_HUES) + 0.5) % 1 - 0.5).argmin(1)
    assert (nearest == clusters["colour"]).mean() >= 0.95, [COLOURS[c] for c in nearest]


@pytest.mark.parametrize(("key", "value"), [("num_clusters", 0), ("num_clusters", 16001), ("zipf", -1.0),
                                            ("mismatch_fraction", 1.0), ("image_size", 4), ("retrieval_images", 0),
                                            ("num_pairs", 0), ("seed", -1), ("noise", float("nan"))])
def test_spec_validation_names_the_key(key, value):
    with pytest.raises(ValueError, match=f"data.synthetic_pairs.{key}"):
        PairSpec(**{key: value})


def test_templates_are_distinct_enough_for_five_captions():
    assert len(set(CAPTION_TEMPLATES)) >= 5
    assert all("{colour}" in t and ("{object}" in t or "{objects}" in t) for t in CAPTION_TEMPLATES)


def test_the_object_variant_clusters_objects_with_the_other_attributes_free(tmp_path):
    """A cluster is one object: its frequency counts the pairs of that object, whose colour, background, size and
    position vary; the captions name each pair's own attributes; the Zipf profile is the combination variant's."""
    spec = replace(SPEC, num_pairs=400, num_clusters=10)
    write_object_pairs(spec, tmp_path / "objects")
    write_synthetic_pairs(spec, tmp_path / "combinations")
    rows = _rows(tmp_path / "objects" / "train" / "meta.csv")
    by_cluster: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_cluster.setdefault(row["cluster"], []).append(row)
    assert len(by_cluster) == 10
    for members in by_cluster.values():
        assert len({m["object"] for m in members}) == 1 and int(members[0]["cluster_frequency"]) == len(members)
    head = max(by_cluster.values(), key=len)
    for key in ("colour", "background", "size", "position"):
        assert len({m[key] for m in head}) > 1, key
    clusters = _rows(tmp_path / "objects" / "clusters.csv")
    assert set(clusters[0]) == {"cluster", "weight", "frequency", "fine", "object", "count"}
    assert [c["frequency"] for c in clusters] == [c["frequency"]
                                                  for c in _rows(tmp_path / "combinations" / "clusters.csv")]
    captions = (tmp_path / "objects" / "train" / "captions.tsv").read_text().splitlines()
    for row, line in zip(rows, captions, strict=True):
        if row["mismatched"] == "0":
            assert row["object"].split()[-1] in line
    assert json.loads((tmp_path / "objects" / "meta.json").read_text())["clusters"] == "objects"
    assert "clusters" not in json.loads((tmp_path / "combinations" / "meta.json").read_text())
    with pytest.raises(ValueError, match="num_clusters"):
        write_object_pairs(replace(spec, num_clusters=101), tmp_path / "too_many")
