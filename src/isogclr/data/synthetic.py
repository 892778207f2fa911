"""Procedurally generated images with a known semantic hierarchy (no download).

Like CIFAR-100: 20 superclasses of 5 fine classes. A superclass fixes the object's
outline (3 to 7 lobes) and style (filled, ring, donut, pair); its 5 fine classes share
that outline and differ by the texture drawn inside it (plain, vertical stripes,
horizontal stripes, checker, concentric rings). Colour, size, position, rotation and
background are nuisances drawn at random for every image, so a linear probe on
colour-sensitive random features does poorly while an encoder trained with colour
augmentation can do well. Every image's attributes are kept for captions and analyses.

The 10-class variant takes the plain-texture class of 10 superclasses chosen to stay distinct at
16x16 pixels (3-, 4- and 5-lobed blobs and pairs, 3- and 4-lobed rings and donuts).
Generation is deterministic in ``seed`` (numpy PCG64), vectorised, and chunked.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..io import generated_folder, meta_keys
from .base import ImageData
from .folder import image_folder

LOBES = ["trefoil", "quatrefoil", "cinquefoil", "sexfoil", "septfoil"]
STYLES = ["blob", "ring", "donut", "pair"]
TEXTURES = ["plain", "vstriped", "hstriped", "checkered", "ringed"]
NUM_SUPERCLASSES = len(LOBES) * len(STYLES)  # 20
FINE_PER_SUPERCLASS = len(TEXTURES)  # 5
TEN_CLASS_SUPERCLASSES = (0, 1, 2, 5, 6, 10, 11, 15, 16, 17)
# the splits of a variant, in the order of its per_class counts (val: when it has a third), with their split seeds
SPLITS = (("train", 1), ("test", 2), ("val", 3))


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate; every field is a key under ``data.synthetic`` in params.yaml.

    ``per_class`` maps a variant (10 or 100 classes) to its (train, test) images per class, or (train, test,
    val): a third count writes a balanced validation split ``val`` too (split seed 3, as train's is 1 and test's 2),
    which a selection may score on (``tuning.validation: split``) instead of carving it from the training split;
    each variant is written to its own folder ``c10/`` or ``c100/``.
    """

    seed: int = 0
    image_size: int = 32
    noise: float = 0.08
    per_class: dict[int, tuple[int, ...]] = field(default_factory=lambda: {10: (500, 100), 100: (100, 20)})

    def __post_init__(self) -> None:
        if self.image_size < 8:
            raise ValueError(f"data.synthetic.image_size must be >= 8, got {self.image_size}")
        for variant, counts in self.per_class.items():
            if variant not in (10, 100):
                raise ValueError(f"data.synthetic.per_class: variants are 10 and 100, got {variant}")
            if len(counts) not in (2, 3) or min(counts) < 1:
                raise ValueError(f"data.synthetic.per_class.{variant}: [train, test] or [train, test, val] images per "
                                 f"class, each >= 1, got {list(counts)}")


def spec_from_dict(raw: dict) -> SyntheticSpec:
    """The spec stored in a manifest (JSON: string variant keys, lists) back as a :class:`SyntheticSpec`."""
    raw = dict(raw)
    if "per_class" in raw:
        raw["per_class"] = {int(k): tuple(v) for k, v in raw["per_class"].items()}
    return SyntheticSpec(**raw)


def class_names(num_classes: int) -> list[str]:
    names = []
    for c in fine_classes(num_classes):
        s, k = divmod(c, FINE_PER_SUPERCLASS)
        names.append(f"{TEXTURES[k]} {LOBES[s % len(LOBES)]} {STYLES[s // len(LOBES)]}")
    return names


def superclass_names() -> list[str]:
    return [f"{LOBES[s % len(LOBES)]} {STYLES[s // len(LOBES)]}" for s in range(NUM_SUPERCLASSES)]


def fine_classes(num_classes: int) -> list[int]:
    """Fine-class ids (0..99) used by a variant: all 100, or the plain class of 10 superclasses."""
    if num_classes == 100:
        return list(range(100))
    if num_classes == 10:
        return [s * FINE_PER_SUPERCLASS for s in TEN_CLASS_SUPERCLASSES]
    raise ValueError(f"synthetic variants have 10 or 100 classes, got {num_classes}")


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    k = (np.stack([5.0, 3.0, 1.0], -1) + h[..., None] * 6.0) % 6.0
    return v[..., None] - v[..., None] * s[..., None] * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)


def render(fine: np.ndarray, size: int, rng: np.random.Generator, noise: float,
           overrides: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, dict]:
    """Render images of fine classes ``fine`` (N,) -> uint8 (N, size, size, 3) and their attributes.

    ``overrides`` maps drawn attributes (hue, sat, val, radius, cx, cy, phase, bg, bg_hue) to values
    (a scalar or (N,) array; NaN entries keep the random draw) that replace the random draws before
    drawing. The random draws are made either way, so the generator's stream is the same with or without.
    """
    n = len(fine)
    sup, tex = np.divmod(fine, FINE_PER_SUPERCLASS)
    lobes, style = 3 + sup % len(LOBES), sup // len(LOBES)
    attrs = {
        "hue": rng.random(n), "sat": rng.uniform(0.55, 1.0, n), "val": rng.uniform(0.6, 1.0, n),
        "radius": rng.uniform(0.22, 0.36, n), "cx": rng.uniform(0.35, 0.65, n), "cy": rng.uniform(0.35, 0.65, n),
        "phase": rng.uniform(0, 2 * np.pi, n), "bg": rng.uniform(0.0, 1.0, n), "bg_hue": rng.random(n),
    }
    for key, value in (overrides or {}).items():
        if key not in attrs:
            raise ValueError(f"render: cannot override {key!r}; drawn attributes are {sorted(attrs)}")
        value = np.broadcast_to(np.asarray(value, dtype=float), (n,))
        attrs[key] = np.where(np.isnan(value), attrs[key], value)
    grid = (np.arange(size) + 0.5) / size
    yy, xx = np.meshgrid(grid, grid, indexing="ij")
    pair = (style == 3)[:, None, None]
    scale = np.where(style == 3, 0.6, 1.0)[:, None, None] * attrs["radius"][:, None, None]
    offset = np.where(style == 3, 0.2, 0.0)[:, None, None]
    px = 1.0 / size  # soft edges of one pixel

    def lobed(cx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dx, dy = xx[None] - cx, yy[None] - attrs["cy"][:, None, None]
        rho, theta = np.hypot(dx, dy), np.arctan2(dy, dx)
        edge = scale * (1 + 0.4 * np.cos(lobes[:, None, None] * theta - attrs["phase"][:, None, None]))
        return rho, edge

    cx = attrs["cx"][:, None, None]
    rho_a, edge_a = lobed(np.clip(cx - offset, 0.2, 0.8))
    rho_b, edge_b = lobed(np.clip(cx + offset, 0.2, 0.8))
    inside = 1 / (1 + np.exp(-(edge_a - rho_a) / (0.5 * px)))
    inside = np.where(pair, np.maximum(inside, 1 / (1 + np.exp(-(edge_b - rho_b) / (0.5 * px)))), inside)
    hole = np.where((style == 1)[:, None, None], 0.55 * edge_a, np.where((style == 2)[:, None, None], 0.35 * scale, 0))
    inside = inside * (1 - 1 / (1 + np.exp(-(hole - rho_a) / (0.5 * px))) * (style[:, None, None] != 3))

    period = max(3.0, size / 6) / size
    stripes = {
        1: np.sin(2 * np.pi * xx / period)[None], 2: np.sin(2 * np.pi * yy / period)[None],
        3: (np.sin(2 * np.pi * xx / period) * np.sin(2 * np.pi * yy / period))[None],
        4: np.sin(2 * np.pi * rho_a / period),
    }
    dark = np.zeros_like(inside)
    for k, pattern in stripes.items():
        dark = np.where((tex == k)[:, None, None], (np.broadcast_to(pattern, inside.shape) > 0).astype(float), dark)

    obj = _hsv_to_rgb(attrs["hue"], attrs["sat"], attrs["val"])[:, None, None, :]
    obj = obj * (1 - 0.55 * dark[..., None])
    bg_v = np.where(attrs["bg"] < 0.5, 0.15, 0.85)
    bg = _hsv_to_rgb(attrs["bg_hue"], np.full(n, 0.25), bg_v)[:, None, None, :]
    ramp = (xx[None] - 0.5)[..., None] * rng.uniform(-0.2, 0.2, (n, 1, 1, 1))
    img = inside[..., None] * obj + (1 - inside[..., None]) * (bg + ramp)
    img = img + noise * rng.standard_normal(img.shape)
    attrs.update(superclass=sup, texture=tex, lobes=lobes, style=style)
    return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8), attrs


def generate_split(spec: SyntheticSpec, variant: int, per_class: int, split_seed: int,
                   chunk: int = 2048) -> dict[str, np.ndarray]:
    """The variant's fine classes, ``per_class`` images each, in a deterministic shuffled order."""
    rng = np.random.default_rng([spec.seed, variant, split_seed])
    fine = rng.permutation(np.repeat(np.asarray(fine_classes(variant)), per_class))
    images, attrs = [], []
    for start in range(0, len(fine), chunk):
        img, att = render(fine[start:start + chunk], spec.image_size, rng, spec.noise)
        images.append(img)
        attrs.append(att)
    out = {k: np.concatenate([a[k] for a in attrs]) for k in attrs[0]}
    out.update(images=np.concatenate(images), fine_label=fine)
    return out


def class_folders(num_classes: int) -> list[str]:
    """Folder names of a variant's classes, in label order (``plain_trefoil_blob``, ...)."""
    return [name.replace(" ", "_") for name in class_names(num_classes)]


def write_synthetic(spec: SyntheticSpec, out_dir: Path) -> dict[str, int]:
    """Write every variant as an image folder into ``out_dir`` (replaced atomically); return images per split.
    A non-empty ``out_dir`` that is not this command's output is refused (:func:`isogclr.io.generated_folder`).

    Layout, the one :func:`~isogclr.data.folder.image_folder` reads for ImageNet::

        out_dir/meta.json                               the spec, class and superclass names
        out_dir/c<variant>/<split>/<class>/<index>.png  <index>: position in the split's generation order
        out_dir/c<variant>/<split>.csv                  every image's attributes (fine_label, superclass,
                                                        texture, colour, size, position, ...) by index
    """
    with generated_folder(out_dir, _own_output, "python -m isogclr synthetic") as tmp:
        return _write_variants(spec, tmp)


def _own_output(folder: Path) -> bool:
    """Whether ``folder`` looks like :func:`write_synthetic`'s output (its meta.json), so it may be replaced."""
    return {"spec", "class_names", "superclass_names"} <= meta_keys(folder)


def _write_variants(spec: SyntheticSpec, tmp: Path) -> dict[str, int]:
    from PIL import Image

    counts = {}
    for variant, sizes in sorted(spec.per_class.items()):
        folders = dict(zip(fine_classes(variant), class_folders(variant), strict=True))
        for (name, split_seed), per_class in zip(SPLITS[:len(sizes)], sizes, strict=True):
            arrays = generate_split(spec, variant, per_class, split_seed)
            split_dir = tmp / f"c{variant}" / name
            for folder in folders.values():
                (split_dir / folder).mkdir(parents=True)
            for i, (image, fine) in enumerate(zip(arrays["images"], arrays["fine_label"], strict=True)):
                Image.fromarray(image, mode="RGB").save(split_dir / folders[int(fine)] / f"{i:06d}.png")
            attributes = pd.DataFrame({k: v for k, v in arrays.items() if k != "images"})
            attributes.index.name = "index"
            attributes.to_csv(tmp / f"c{variant}" / f"{name}.csv", float_format="%.17g")
            counts[f"c{variant}/{name}"] = len(arrays["images"])
    meta = {"spec": asdict(spec), "class_names": class_names(100), "superclass_names": superclass_names()}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    return counts


def _load_split(root: Path, num_classes: int, split: str) -> tuple[ImageData, pd.DataFrame]:
    """The variant's split through the image-folder loader, in generation order, and its attribute table."""
    from .decoded import decoded_split
    from .manifest import ensure_tracked

    ensure_tracked(Path(root) / "synthetic")  # rebuilt from data/synthetic.json when missing or stale
    folder = Path(root) / "synthetic" / f"c{num_classes}"
    table = folder / f"{split}.csv"
    if split == "val" and (folder / "train.csv").is_file() and not table.is_file():
        raise FileNotFoundError(f"{table} not found: the generated set has no validation split; give "
                                f"data.synthetic.per_class.{num_classes} a third count, [train, test, val], and "
                                "regenerate it (the `synthetic` stage of dvc.yaml)")
    if not table.is_file():
        raise FileNotFoundError(f"{table} not found (nor the manifest {Path(root) / 'synthetic.json'} to rebuild "
                                f"it from): generate it with `python -m isogclr synthetic --out "
                                f"{Path(root) / 'synthetic'}` (the `synthetic` stage of dvc.yaml)")
    size = json.loads((Path(root) / "synthetic" / "meta.json").read_text())["spec"]["image_size"]
    data = decoded_split(Path(root) / "synthetic", f"c{num_classes}-{split}", lambda: image_folder(
        folder, split, size=size, classes=class_folders(num_classes), source="the `synthetic` stage of dvc.yaml"))
    order = np.argsort([int(Path(p).stem) for p in data.extra["path"]], kind="stable")
    data = data.subset(order)
    attributes = pd.read_csv(table, index_col="index")
    index = np.asarray([int(Path(p).stem) for p in data.extra["path"]])
    if len(index) != len(attributes) or not np.array_equal(index, attributes.index.to_numpy()):
        raise ValueError(f"{folder / split}: the images ({len(index)}) do not match the rows of {table} "
                         f"({len(attributes)}); regenerate with the `synthetic` stage")
    return data, attributes


def load_synthetic(root: Path, split: str, num_classes: int) -> ImageData:
    data, attributes = _load_split(root, num_classes, split)
    return ImageData(
        images=data.images,
        labels=data.labels,
        class_names=class_names(num_classes),
        source_index=torch.arange(len(data), dtype=torch.int64),
        superclass=torch.from_numpy(attributes["superclass"].to_numpy().astype(np.int64)),
        superclass_names=superclass_names(),
        extra={k: attributes[k].to_numpy() for k in attributes.columns if k != "fine_label"},
    )


# the loaders declared in isogclr.dataset_specs.SPECS (synth10_lt, synth100_lt: their training splits' subsets)
def load_synth10(root: Path, split: str) -> ImageData:
    return load_synthetic(root, split, 10)


def load_synth100(root: Path, split: str) -> ImageData:
    return load_synthetic(root, split, 100)
