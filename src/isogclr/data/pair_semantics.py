"""What the generated image-text pairs mean: the attribute vocabularies, the spec (:class:`PairSpec`), the
semantic clusters and the captions. :mod:`isogclr.data.synthetic_pairs` draws the images and writes the pairs.

A *semantic cluster* is a combination of ground-truth attributes: the object (a fine class of
:mod:`isogclr.data.synthetic`, named by :func:`~isogclr.data.synthetic.class_names`, which fixes its
texture, outline and style, hence its count: one shape, or two for the "pair" style), a colour
name, a dark or light background, a small or large size and a position (left, right, top, bottom,
center). ``num_clusters`` distinct combinations are sampled from the seed (:func:`sample_clusters`); cluster
rank ``r`` (0 = most frequent) gets weight ``(r + 1) ** -zipf`` and a share of the items in proportion
(:func:`cluster_counts`). In the object variant (:func:`sample_objects`) a cluster is an object alone, its
other attributes drawn per item (:func:`item_attributes`). A caption is made from the attributes with one of
several templates and synonyms (:func:`make_caption`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .synthetic import FINE_PER_SUPERCLASS, LOBES, STYLES, class_names

COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
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
POSITIONS = ("left", "right", "top", "bottom", "center")
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
NUM_COMBINATIONS = 100 * len(COLOURS) * len(BACKGROUNDS) * len(SIZES) * len(POSITIONS)  # 16,000
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
