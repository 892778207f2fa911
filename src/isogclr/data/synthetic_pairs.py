"""Generated image-text pairs with known semantics, written in the formats of the real caption loaders.

A *semantic cluster* is a combination of ground-truth attributes: the object (a fine class of
:mod:`isogclr.data.synthetic`, named by :func:`~isogclr.data.synthetic.class_names`, which fixes its
texture, outline and style, hence its count: one shape, or two for the "pair" style), a colour
name, a dark or light background, a small or large size and a position (left, right, top, bottom,
center). ``num_clusters`` distinct combinations are sampled from the seed; cluster rank ``r``
(0 = most frequent) gets weight ``(r + 1) ** -zipf`` and the ``num_pairs`` train pairs are split
among the clusters in proportion to the weights (largest-remainder rounding, so the train
frequencies follow the long-tailed profile exactly), then shuffled. Each image is drawn by
:func:`~isogclr.data.synthetic.render` with the cluster's attributes forced through ``overrides``
(hue near the colour's hue, background value in its half, radius in its size range, centre at its
position, each with a little jitter); rotation, saturation, brightness, background hue and pixel
noise stay random. A caption is made from the cluster's attributes with one of several templates
and synonyms; a ``mismatch_fraction`` of train pairs get the caption of a random pair of another
cluster instead, as in web data.

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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..io import csv_text, generated_folder, meta_keys, save_bytes, save_text
from .synthetic import FINE_PER_SUPERCLASS, LOBES, STYLES, TEXTURES, class_names, fine_classes, render

COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
COLOUR_HUES = (0.0, 0.08, 0.16, 0.33, 0.5, 0.64, 0.76, 0.9)
COLOUR_SYNONYMS = {
    "red": ("red", "crimson", "scarlet"), "orange": ("orange", "amber", "tangerine"),
    "yellow": ("yellow", "golden", "lemon"), "green": ("green", "emerald", "leafy"),
    "cyan": ("cyan", "turquoise", "aqua"), "blue": ("blue", "azure", "cobalt"),
    "purple": ("purple", "violet", "lilac"), "pink": ("pink", "magenta", "fuchsia"),
}
BACKGROUNDS = ("dark", "light")
BACKGROUND_SYNONYMS = {"dark": ("dark", "black", "dim"), "light": ("light", "white", "bright")}
SIZES = ("small", "large")
SIZE_SYNONYMS = {"small": ("small", "little", "tiny"), "large": ("large", "big", "huge")}
SIZE_RADII = {"small": (0.22, 0.26), "large": (0.32, 0.36)}
POSITIONS = ("left", "right", "top", "bottom", "center")
POSITION_CENTRES = {"left": (0.37, 0.5), "right": (0.63, 0.5), "top": (0.5, 0.37), "bottom": (0.5, 0.63),
                    "center": (0.5, 0.5)}
POSITION_SYNONYMS = {
    "left": ("on the left", "at the left side", "towards the left edge"),
    "right": ("on the right", "at the right side", "towards the right edge"),
    "top": ("at the top", "near the top edge", "in the upper part"),
    "bottom": ("at the bottom", "near the bottom edge", "in the lower part"),
    "center": ("in the center", "in the middle", "at the centre"),
}
COUNTS = ("one", "two")
COUNT_SYNONYMS = {"one": ("one", "a single"), "two": ("two", "a couple of")}
CAPTION_TEMPLATES = (
    "a {size} {colour} {object} on a {bg} background",
    "{count} {colour} {objects} {where}",
    "a photo of {count} {size} {colour} {objects} {where}",
    "a {colour} {object} {where}, {bg} background",
    "{bg} background with a {size} {colour} {object} {where}",
    "an image of a {colour} {object}, {size}, {where}",
    "the {colour} {object} is {size} and sits {where}",
    "{count} {size} {colour} {objects} against a {bg} backdrop",
)
ZEROSHOT_TEMPLATES = (
    "a photo of a {}.", "an image of a {}.", "a picture of the {}.", "a rendering of a {}.",
    "a small {}.", "a large {}.", "a {} on a dark background.", "a {} on a light background.",
)
CAPTIONS_PER_RETRIEVAL_IMAGE = 5
NUM_COMBINATIONS = 100 * len(COLOURS) * len(BACKGROUNDS) * len(SIZES) * len(POSITIONS)  # 16,000
HUE_JITTER, CENTRE_JITTER = 0.02, 0.02
ATTRIBUTE_COLUMNS = ("fine", "object", "superclass", "texture", "lobes", "style", "count", "colour", "hue",
                     "sat", "val", "background", "bg", "bg_hue", "size", "radius", "position", "cx", "cy", "phase")
_CHUNK = 1024
ATTRIBUTE_KEYS = ("fine", "colour", "background", "size", "position")  # a cluster's (or an item's) index arrays


@dataclass(frozen=True)
class PairSpec:
    """What to generate; every field is a key under ``data.synthetic_pairs`` in params.yaml.

    - ``seed``: all randomness (clusters, images, captions, mismatches, retrieval and zero-shot sets);
    - ``image_size``: side of the square images in pixels;
    - ``num_pairs``: train image-caption pairs;
    - ``num_clusters``: semantic clusters (distinct attribute combinations, at most 16,000);
    - ``zipf``: exponent ``a`` of the cluster-frequency profile, rank ``r`` gets weight ``(r + 1) ** -a``
      (0 = uniform; larger = more long-tailed);
    - ``mismatch_fraction``: fraction of train pairs whose caption is another cluster's pair's caption;
    - ``retrieval_images``: images in each of the two retrieval sets (five captions each);
    - ``noise``: pixel noise of :func:`~isogclr.data.synthetic.render`;
    - ``zeroshot_per_class``: test images per class of the zero-shot sets ``synth10`` and ``synth100``.
    """

    seed: int = 0
    image_size: int = 32
    num_pairs: int = 4000
    num_clusters: int = 100
    zipf: float = 1.0
    mismatch_fraction: float = 0.03
    retrieval_images: int = 200
    noise: float = 0.08
    zeroshot_per_class: int = 10

    def __post_init__(self) -> None:
        def fail(key: str, rule: str, value) -> None:
            raise ValueError(f"data.synthetic_pairs.{key} must be {rule}, got {value!r}")

        for key in ("seed", "image_size", "num_pairs", "num_clusters", "retrieval_images", "zeroshot_per_class"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                fail(key, "an integer", value)
        if self.seed < 0:
            fail("seed", ">= 0", self.seed)
        if self.image_size < 8:
            fail("image_size", ">= 8", self.image_size)
        if self.num_pairs < 1:
            fail("num_pairs", ">= 1", self.num_pairs)
        if not 1 <= self.num_clusters <= NUM_COMBINATIONS:
            fail("num_clusters", f"in [1, {NUM_COMBINATIONS}] (the distinct attribute combinations)",
                 self.num_clusters)
        if not (np.isfinite(self.zipf) and self.zipf >= 0):
            fail("zipf", "a finite number >= 0", self.zipf)
        if not 0 <= self.mismatch_fraction < 1:
            fail("mismatch_fraction", "in [0, 1)", self.mismatch_fraction)
        if self.mismatch_fraction > 0 and self.num_pairs < 2:
            fail("num_pairs", ">= 2 when data.synthetic_pairs.mismatch_fraction > 0", self.num_pairs)
        if self.retrieval_images < 1:
            fail("retrieval_images", ">= 1", self.retrieval_images)
        if not (np.isfinite(self.noise) and self.noise >= 0):
            fail("noise", "a finite number >= 0", self.noise)
        if self.zeroshot_per_class < 1:
            fail("zeroshot_per_class", ">= 1", self.zeroshot_per_class)


def spec_from_dict(raw: dict) -> PairSpec:
    """The spec stored in a manifest back as a :class:`PairSpec`."""
    return PairSpec(**raw)


# ----------------------------------------------------------------------------------------------- clusters


def sample_clusters(spec: PairSpec) -> dict[str, np.ndarray]:
    """``num_clusters`` distinct attribute combinations in rank order (rank 0 = most frequent).

    Returns index arrays ``fine``, ``colour``, ``background``, ``size``, ``position`` (into the fine
    classes and COLOURS, BACKGROUNDS, SIZES, POSITIONS) and the Zipf ``weight`` (summing to 1).
    """
    rng = np.random.default_rng([spec.seed, 0])
    codes = rng.choice(NUM_COMBINATIONS, spec.num_clusters, replace=False)
    clusters = {}
    for key, radix in (("position", len(POSITIONS)), ("size", len(SIZES)), ("background", len(BACKGROUNDS)),
                       ("colour", len(COLOURS)), ("fine", 100)):
        codes, clusters[key] = np.divmod(codes, radix)
    clusters["weight"] = zipf_weights(spec)
    return clusters


def sample_objects(spec: PairSpec) -> dict[str, np.ndarray]:
    """The object variant's clusters: ``num_clusters`` distinct objects (``fine``) in rank order, with the Zipf
    ``weight``; the other attributes are drawn per pair (:func:`item_attributes`)."""
    if spec.num_clusters > 100:
        raise ValueError(f"data.synthetic_pairs.num_clusters must be <= 100 (the objects) for the object variant, "
                         f"got {spec.num_clusters}")
    rng = np.random.default_rng([spec.seed, 0])
    return {"fine": rng.choice(100, spec.num_clusters, replace=False), "weight": zipf_weights(spec)}


def zipf_weights(spec: PairSpec) -> np.ndarray:
    """Rank ``r`` (0 = most frequent) gets ``(r + 1) ** -zipf``, normalised to sum to 1."""
    weight = (np.arange(spec.num_clusters) + 1.0) ** -spec.zipf
    return weight / weight.sum()


def item_attributes(clusters: dict[str, np.ndarray], cluster_of: np.ndarray, free: np.random.Generator | None
                    ) -> dict[str, np.ndarray]:
    """The attribute indices of each item (a pair, or a retrieval image) of the clusters ``cluster_of``: its
    cluster's; with ``free`` (the object variant, whose clusters fix the object only), the colour, background,
    size and position drawn uniformly from ``free`` for every item."""
    items = {key: clusters[key][cluster_of] for key in ATTRIBUTE_KEYS if key in clusters}
    if free is not None:
        for key, values in (("colour", COLOURS), ("background", BACKGROUNDS), ("size", SIZES),
                            ("position", POSITIONS)):
            items[key] = free.integers(len(values), size=len(cluster_of))
    return items


def cluster_counts(weight: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` among clusters in proportion to ``weight``: floors, then the largest remainders
    (ties to the lower rank), so counts are non-increasing when the weights are."""
    exact = weight / weight.sum() * total
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:total - counts.sum()]] += 1
    return counts


def cluster_attributes(arrays: dict[str, np.ndarray], i: int) -> dict[str, str]:
    """The words of cluster (or item) ``i`` of ``arrays`` (:func:`sample_clusters`, :func:`item_attributes`):
    object, colour, background, size, position, count; an object variant's cluster has the object and count only."""
    fine = int(arrays["fine"][i])
    style = fine // FINE_PER_SUPERCLASS // len(LOBES)
    words = {"object": class_names(100)[fine]}
    for key, values in (("colour", COLOURS), ("background", BACKGROUNDS), ("size", SIZES), ("position", POSITIONS)):
        if key in arrays:
            words[key] = values[arrays[key][i]]
    return words | {"count": COUNTS[int(STYLES[style] == "pair")]}


# ----------------------------------------------------------------------------------------------- captions


def make_caption(words: dict[str, str], template: int, rng: np.random.Generator) -> str:
    """Fill ``CAPTION_TEMPLATES[template]`` with synonyms (drawn from ``rng``) of a cluster's words."""
    def pick(options: tuple[str, ...]) -> str:
        return options[rng.integers(len(options))]

    two = words["count"] == "two"
    text = CAPTION_TEMPLATES[template].format(
        size=pick(SIZE_SYNONYMS[words["size"]]), colour=pick(COLOUR_SYNONYMS[words["colour"]]),
        bg=pick(BACKGROUND_SYNONYMS[words["background"]]), where=pick(POSITION_SYNONYMS[words["position"]]),
        count=pick(COUNT_SYNONYMS[words["count"]]), object=words["object"],
        objects=words["object"] + ("s" if two else ""))
    return re.sub(r"\ba (?=[aeiou])", "an ", text)


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
