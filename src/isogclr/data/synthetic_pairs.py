"""Generated image-text pairs with known semantics, written in the formats of the real caption loaders.

The attributes, the spec, the clusters and the captions are :mod:`isogclr.data.pair_semantics`'s. The
``num_pairs`` train pairs are split among the clusters in proportion to their weights (largest-remainder
rounding, so the train frequencies follow the long-tailed profile exactly), then shuffled. Each image is drawn by
:func:`~isogclr.data.synthetic.render` with the item's attributes forced through ``overrides``
(hue near the colour's hue, background value in its half, radius in its size range, centre at its
position, each with a little jitter); rotation, saturation, brightness, background hue and pixel
noise stay random. A ``mismatch_fraction`` of train pairs get the caption of a random pair of another
cluster instead of their own, as in web data.

Layout written by :func:`write_synthetic_pairs` (deterministic in the spec, every file written
atomically by :mod:`isogclr.io`: into a temporary sibling folder that then replaces ``out_dir``)::

    out_dir/train/images/NNNNNN.png       one image per pair
    out_dir/train/captions.tsv            caption<TAB>images/NNNNNN.png  (load_caption_tsv)
    out_dir/train/meta.csv                pair, cluster, cluster_frequency, mismatched, caption_source, attributes
    out_dir/retrieval_{a,b}/images/NNNNNN.png
    out_dir/retrieval_{a,b}/dataset.json  Karpathy layout, split "test", five captions per image (load_karpathy)
    out_dir/retrieval_{a,b}/meta.csv      image, cluster, train cluster_frequency, attributes
    out_dir/zeroshot/{synth10,synth100}/{classnames.txt,templates.txt,images.npz}
    out_dir/clusters.csv                  cluster, weight, train frequency, attributes
    out_dir/meta.json                     the spec and vocabularies (written last)

Retrieval set ``a`` draws its clusters from the train (Zipf) distribution, set ``b`` uniformly over
the clusters, with different seeds; their five captions per image use five different templates.
The zero-shot sets hold images of every class of the 10- and 100-class variants with all nuisances
random (``images.npz``: ``images`` uint8 (N, size, size, 3), ``labels`` indices into
``classnames.txt``, ``fine`` and ``superclass``), with prompt templates containing ``{}``.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image

from ..io import csv_text, generated_folder, meta_keys, save_bytes, save_text
from .pair_semantics import (
    BACKGROUND_SYNONYMS,
    CAPTION_TEMPLATES,
    COLOUR_SYNONYMS,
    COLOURS,
    COUNT_SYNONYMS,
    POSITION_SYNONYMS,
    POSITIONS,
    SIZE_SYNONYMS,
    SIZES,
    ZEROSHOT_TEMPLATES,
    PairSpec,
    cluster_attributes,
    cluster_counts,
    item_attributes,
    make_caption,
    sample_clusters,
    sample_objects,
)
from .synthetic import STYLES, TEXTURES, class_names, fine_classes, render

# how the attributes are drawn (render_items): the hue of each of COLOURS, the radius range of each size, the
# centre of each position
COLOUR_HUES = (0.0, 0.08, 0.16, 0.33, 0.5, 0.64, 0.76, 0.9)
SIZE_RADII = {"small": (0.22, 0.26), "large": (0.32, 0.36)}
POSITION_CENTRES = {"left": (0.37, 0.5), "right": (0.63, 0.5), "top": (0.5, 0.37), "bottom": (0.5, 0.63),
                    "center": (0.5, 0.5)}
CAPTIONS_PER_RETRIEVAL_IMAGE = 5
HUE_JITTER, CENTRE_JITTER = 0.02, 0.02
ATTRIBUTE_COLUMNS = ("fine", "object", "superclass", "texture", "lobes", "style", "count", "colour", "hue",
                     "sat", "val", "background", "bg", "bg_hue", "size", "radius", "position", "cx", "cy", "phase")
_CHUNK = 1024


def spec_from_dict(raw: dict) -> PairSpec:
    """The spec stored in a manifest back as a :class:`PairSpec`."""
    return PairSpec(**raw)


# ----------------------------------------------------------------------------------------------- images


def render_items(spec: PairSpec, items: dict[str, np.ndarray], rng: np.random.Generator
                 ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Images of the items (:func:`item_attributes`) with their attributes forced, in chunks."""
    images, attrs = [], []
    for start in range(0, len(items["fine"]), _CHUNK):
        chunk = {key: values[start:start + _CHUNK] for key, values in items.items()}
        n = len(chunk["fine"])
        hue = np.asarray(COLOUR_HUES)[chunk["colour"]] + rng.uniform(-HUE_JITTER, HUE_JITTER, n)
        light = chunk["background"] == 1
        low_high = np.asarray([SIZE_RADII[s] for s in SIZES])[chunk["size"]]
        centre = np.asarray([POSITION_CENTRES[p] for p in POSITIONS])[chunk["position"]]
        overrides = {
            "hue": hue % 1.0, "sat": rng.uniform(0.7, 1.0, n), "val": rng.uniform(0.7, 1.0, n),
            "bg": np.where(light, rng.uniform(0.55, 0.95, n), rng.uniform(0.05, 0.45, n)),
            "radius": rng.uniform(low_high[:, 0], low_high[:, 1]),
            "cx": centre[:, 0] + rng.uniform(-CENTRE_JITTER, CENTRE_JITTER, n),
            "cy": centre[:, 1] + rng.uniform(-CENTRE_JITTER, CENTRE_JITTER, n),
        }
        img, att = render(chunk["fine"], spec.image_size, rng, spec.noise, overrides=overrides)
        images.append(img)
        attrs.append(att)
    return np.concatenate(images), {k: np.concatenate([a[k] for a in attrs]) for k in attrs[0]}


# ----------------------------------------------------------------------------------------------- writing


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def _write_images(folder: Path, images: np.ndarray) -> list[str]:
    """``folder/images/NNNNNN.png``, removing stale ones of an earlier, larger run; returns relative paths."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    names = [f"images/{i:06d}.png" for i in range(len(images))]
    for name, image in zip(names, images, strict=True):
        save_bytes(_png(image), folder / name)
    keep = {Path(n).name for n in names}
    for stale in (folder / "images").glob("*.png"):
        if stale.name not in keep:
            stale.unlink()
    return names


def _attribute_rows(items: dict[str, np.ndarray], attrs: dict[str, np.ndarray]) -> list[dict[str, object]]:
    rows = []
    for i in range(len(items["fine"])):
        words = cluster_attributes(items, i)
        row: dict[str, object] = {
            "fine": int(items["fine"][i]), "object": words["object"], "superclass": int(attrs["superclass"][i]),
            "texture": TEXTURES[attrs["texture"][i]], "lobes": int(attrs["lobes"][i]),
            "style": STYLES[attrs["style"][i]], "count": words["count"], "colour": words["colour"],
            "background": words["background"], "size": words["size"], "position": words["position"]}
        for key in ("hue", "sat", "val", "bg", "bg_hue", "radius", "cx", "cy", "phase"):
            row[key] = f"{attrs[key][i]:.6f}"
        rows.append({k: row[k] for k in ATTRIBUTE_COLUMNS})
    return rows


def _tokens(caption: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", caption.lower())


def _write_train(spec: PairSpec, clusters: dict[str, np.ndarray], counts: np.ndarray, folder: Path,
                 free: np.random.Generator | None) -> None:
    rng = np.random.default_rng([spec.seed, 1])
    cluster_of = rng.permutation(np.repeat(np.arange(spec.num_clusters), counts))
    items = item_attributes(clusters, cluster_of, free)
    images, attrs = render_items(spec, items, rng)
    n = spec.num_pairs
    own = [make_caption(cluster_attributes(items, i), int(rng.integers(len(CAPTION_TEMPLATES))), rng)
           for i in range(n)]
    source = np.arange(n)
    mismatched = np.zeros(n, dtype=bool)
    mismatched[rng.choice(n, int(round(spec.mismatch_fraction * n)), replace=False)] = True
    for i in np.flatnonzero(mismatched):
        candidates = np.flatnonzero(cluster_of != cluster_of[i])
        if len(candidates) == 0:  # a single cluster: another pair of it
            candidates = np.delete(np.arange(n), i)
        source[i] = candidates[rng.integers(len(candidates))]
    captions = [own[j] for j in source]
    names = _write_images(folder, images)
    save_text("".join(f"{c}\t{p}\n" for c, p in zip(captions, names, strict=True)), folder / "captions.tsv")
    rows = [{"pair": i, "image": names[i], "cluster": int(cluster_of[i]),
             "cluster_frequency": int(counts[cluster_of[i]]), "mismatched": int(mismatched[i]),
             "caption_source": int(source[i]), **attr}
            for i, attr in enumerate(_attribute_rows(items, attrs))]
    save_text(csv_text(rows), folder / "meta.csv")


def _write_retrieval(spec: PairSpec, clusters: dict[str, np.ndarray], counts: np.ndarray, folder: Path,
                     name: str, stream: int, uniform: bool, free: np.random.Generator | None) -> None:
    rng = np.random.default_rng([spec.seed, stream])
    p = np.full(spec.num_clusters, 1 / spec.num_clusters) if uniform else clusters["weight"]
    cluster_of = rng.choice(spec.num_clusters, spec.retrieval_images, p=p)
    items = item_attributes(clusters, cluster_of, free)
    images, attrs = render_items(spec, items, rng)
    names = _write_images(folder, images)
    entries, sentid = [], 0
    attr_rows = _attribute_rows(items, attrs)
    for i, c in enumerate(cluster_of):
        words = cluster_attributes(items, i)
        templates = rng.permutation(len(CAPTION_TEMPLATES))[:CAPTIONS_PER_RETRIEVAL_IMAGE]
        sentences = []
        for t in templates:
            raw = make_caption(words, int(t), rng)
            sentences.append({"raw": raw, "tokens": _tokens(raw), "imgid": i, "sentid": sentid})
            sentid += 1
        filepath, filename = names[i].split("/")
        entries.append({"filepath": filepath, "filename": filename, "imgid": i, "split": "test",
                        "sentids": [s["sentid"] for s in sentences], "sentences": sentences,
                        "cluster": int(c), "cluster_frequency": int(counts[c]), "attributes": words})
    save_text(json.dumps({"dataset": name, "images": entries}), folder / "dataset.json")
    rows = [{"image": i, "cluster": int(cluster_of[i]), "cluster_frequency": int(counts[cluster_of[i]]), **attr}
            for i, attr in enumerate(attr_rows)]
    save_text(csv_text(rows), folder / "meta.csv")


def _write_zeroshot(spec: PairSpec, variant: int, folder: Path) -> None:
    rng = np.random.default_rng([spec.seed, 4, variant])
    fine_ids = np.asarray(fine_classes(variant))
    labels = rng.permutation(np.repeat(np.arange(variant), spec.zeroshot_per_class))
    images, attrs = [], []
    for start in range(0, len(labels), _CHUNK):
        img, att = render(fine_ids[labels[start:start + _CHUNK]], spec.image_size, rng, spec.noise)
        images.append(img)
        attrs.append(att["superclass"])
    folder.mkdir(parents=True, exist_ok=True)
    save_text("".join(f"{c}\n" for c in class_names(variant)), folder / "classnames.txt")
    save_text("".join(f"{t}\n" for t in ZEROSHOT_TEMPLATES), folder / "templates.txt")
    buf = io.BytesIO()
    np.savez_compressed(buf, images=np.concatenate(images), labels=labels.astype(np.int64),
                        fine=fine_ids[labels].astype(np.int64), superclass=np.concatenate(attrs).astype(np.int64))
    save_bytes(buf.getvalue(), folder / "images.npz")


def write_synthetic_pairs(spec: PairSpec, out_dir: Path | str) -> None:
    """Write the train pairs, the two retrieval sets and the zero-shot sets into ``out_dir`` (see module doc),
    through a temporary sibling folder that then replaces it; a non-empty ``out_dir`` that is not this
    command's output is refused (:func:`isogclr.io.generated_folder`)."""
    with generated_folder(out_dir, _own_output, "python -m isogclr synthetic-pairs") as tmp:
        _write_all(spec, tmp, by_object=False)


def write_object_pairs(spec: PairSpec, out_dir: Path | str) -> None:
    """:func:`write_synthetic_pairs`'s layout for the object variant (see module doc): a cluster is an object, the
    other attributes free, so a cluster's frequency counts semantic neighbours."""
    with generated_folder(out_dir, _own_output, "python -m isogclr synthetic-pairs-objects") as tmp:
        _write_all(spec, tmp, by_object=True)


def _own_output(folder: Path) -> bool:
    """Whether ``folder`` looks like :func:`write_synthetic_pairs`'s output (its meta.json)."""
    return {"spec", "caption_templates", "zeroshot_templates"} <= meta_keys(folder)


def _write_all(spec: PairSpec, out_dir: Path, by_object: bool) -> None:
    clusters = sample_objects(spec) if by_object else sample_clusters(spec)
    counts = cluster_counts(clusters["weight"], spec.num_pairs)

    def free(stream: int) -> np.random.Generator | None:  # the object variant's per-item attributes
        return np.random.default_rng([spec.seed, 5, stream]) if by_object else None

    _write_train(spec, clusters, counts, out_dir / "train", free(1))
    _write_retrieval(spec, clusters, counts, out_dir / "retrieval_a", "synthetic_pairs_a", 2, uniform=False,
                     free=free(2))
    _write_retrieval(spec, clusters, counts, out_dir / "retrieval_b", "synthetic_pairs_b", 3, uniform=True,
                     free=free(3))
    for variant in (10, 100):
        _write_zeroshot(spec, variant, out_dir / "zeroshot" / f"synth{variant}")
    rows = []
    for c in range(spec.num_clusters):
        words = cluster_attributes(clusters, c)
        rows.append({"cluster": c, "weight": f"{clusters['weight'][c]:.8f}", "frequency": int(counts[c]),
                     "fine": int(clusters["fine"][c]), **words})
    save_text(csv_text(rows), out_dir / "clusters.csv")
    meta = {"spec": asdict(spec), **({"clusters": "objects"} if by_object else {}),
            "colours": dict(zip(COLOURS, COLOUR_HUES, strict=True)),
            "colour_synonyms": COLOUR_SYNONYMS, "background_synonyms": BACKGROUND_SYNONYMS,
            "size_synonyms": SIZE_SYNONYMS, "position_synonyms": POSITION_SYNONYMS, "count_synonyms": COUNT_SYNONYMS,
            "caption_templates": CAPTION_TEMPLATES, "zeroshot_templates": ZEROSHOT_TEMPLATES,
            "class_names": class_names(100)}
    save_text(json.dumps(meta, indent=1), out_dir / "meta.json")
