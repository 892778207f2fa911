"""Every dataset in one place: one declaration per dataset (:class:`DatasetSpec`, the table :data:`SPECS`) and per
generated folder (:class:`Generator`, the table :data:`GENERATED`), written as data: import targets are strings
``"module:function"``, so reading the tables imports no dataset module (nor torch: the command line builds its data
commands from them at once).

Everything else is derived from them: the registries of loaders and stream loaders
(:data:`isogclr.data.base.DATASETS`, :data:`~isogclr.data.base.STREAMS`), the long-tailed rule of
:func:`isogclr.data.base.load_dataset`, the generators of the manifests (:mod:`isogclr.data.manifest`), the
pipeline's data stages and a run's data dependency (:mod:`isogclr.pipeline_stages`), the data commands of the
command line, the missing-data lines of ``python -m isogclr validate`` and the paper counterparts of the reports
(:data:`isogclr.analysis.tables.PAPER_COUNTERPART`, :data:`isogclr.analysis.bimodal.PAPER_COUNTERPART`).

Adding a dataset is its loader module and one line of :data:`SPECS` (a long-tailed variant: one more line naming
its balanced set); ``tests/test_dataset_specs.py`` imports every target and checks the derived tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .import_table import Registry


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset: the name ``params.yaml`` and ``--dataset`` say, and what it is made of.

    A long-tailed set names its ``balanced`` set and nothing of its own but its counterpart: its loader, hint and
    generator are the balanced set's (it does not stream), and :func:`~isogclr.data.base.load_dataset` keeps the
    :func:`~isogclr.data.base.long_tailed_positions` of the training split at ``imbalance_ratio`` (the test split
    is the balanced one).
    """

    name: str
    loader: str | None = None  # "module:function", (root, split) -> ImageData; its module is what a run imports
    stream: str | None = None  # "module:function", (root, split, transform, views) -> StreamingImages (train.stream)
    missing: str | None = None  # "module:function", root -> what is missing and how to get it, None when present
    # (no function: nothing to check, the pipeline generates it)
    generator: str | None = None  # the key of GENERATED that writes its folder: its runs depend on that stage
    counterpart: str | None = None  # the paper's dataset it stands in for (same role: balanced / long-tailed, C)
    balanced: str | None = None  # a long-tailed set: the balanced set whose training split it subsets
    imbalance_ratio: float | None = None  # and the ratio of its head class to its tail class
    classes: int | None = None  # its number of classes, where a section of params.yaml is keyed by it
    # its generator writes a validation split when its count in data.<generator>.per_class has a third entry
    validation_split: bool = False

    def __post_init__(self) -> None:
        if self.balanced is None and (self.loader is None or self.imbalance_ratio is not None):
            raise ValueError(f"dataset {self.name!r}: a balanced set needs a loader and has no imbalance_ratio")
        own = (self.loader, self.stream, self.missing, self.generator)
        if self.balanced is not None and (any(own) or not (self.imbalance_ratio or 0) > 1):
            raise ValueError(f"dataset {self.name!r}: a long-tailed set names its balanced set and an imbalance_ratio "
                             "> 1; its loader, stream, hint and generator are the balanced set's")


def long_tailed(name: str, balanced: str, counterpart: str | None = None, imbalance_ratio: float = 100.0
                ) -> DatasetSpec:
    """The long-tailed variant of ``balanced`` (Cao et al. 2019's exponential profile, ratio 100 by default)."""
    return DatasetSpec(name, counterpart=counterpart, balanced=balanced, imbalance_ratio=imbalance_ratio)


@dataclass(frozen=True)
class Generator:
    """A generated folder ``<root>/<name>/``, rebuilt from its manifest ``<root>/<name>.json`` (in git): ``target``
    writes it, ``function(spec, [data_root,] out_dir)``, the spec read by ``module.spec_from_dict`` from the
    params section ``data.<name>`` (or the manifest's copy of it). Its command, stage and section follow its name."""

    name: str
    target: str  # "module:function", the name stored in manifests; imported when a folder is (re)built
    # "module:function", params -> the spec of section data.<name>, checked by type with the key in every error
    # (python -m isogclr validate reads every generated section through it; the data command and a rebuild read
    # the spec through spec_from_dict, which a checked section gives the same)
    reader: str
    help: str  # the data command's help line
    needs_root: bool = False  # the function reads source files under the data root (Fashion-MNIST)
    counterparts: tuple[tuple[str, str], ...] = ()  # its evaluation sets -> the paper's datasets they stand in for
    shares: str = ""  # another generated folder whose params section it reads (a variant of the same spec)
    spec_type: str = ""  # "module:Class": the dataclass its own params section is read into (by validate)

    @property
    def command(self) -> str:
        """The CLI command that writes the folder and its manifest: ``python -m isogclr <command> --out ...``."""
        return self.name.replace("_", "-")

    @property
    def stage(self) -> str:
        """The dvc.yaml stage that runs the command."""
        return self.name

    @property
    def section(self) -> str:
        """The params.yaml section of what it generates: its own, or that of the folder it ``shares``."""
        return f"data.{self.shares or self.name}"

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def spec(self, raw: dict[str, Any] | None) -> Any:
        """The generator's spec dataclass from its section (or a manifest's ``spec``), via ``spec_from_dict``."""
        return Registry.load(f"{self.module}:spec_from_dict")(dict(raw or {}))

    def write(self, spec: dict[str, Any], root: Path, out_dir: Path) -> Any:
        args = (self.spec(spec), Path(root), Path(out_dir)) if self.needs_root else (self.spec(spec), Path(out_dir))
        return Registry.load(self.target)(*args)


def _by_name(*entries: Any) -> dict[str, Any]:
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"declared twice: {sorted({n for n in names if names.count(n) > 1})}")
    return {e.name: e for e in entries}


# the generated folders, in the order of their pipeline stages and data commands
GENERATED: dict[str, Generator] = _by_name(
    Generator("synthetic", "isogclr.data.synthetic:write_synthetic",
              "isogclr.config.datasets:synthetic_spec",
              "generate the synthetic image datasets (data.synthetic)",
              spec_type="isogclr.data.synthetic:SyntheticSpec"),
    Generator("synthetic_pairs", "isogclr.data.synthetic_pairs:write_synthetic_pairs",
              "isogclr.config.bimodal:pair_spec",
              "generate image-text pairs, retrieval and zero-shot sets (data.synthetic_pairs)",
              counterparts=(("retrieval_a", "MSCOCO"), ("retrieval_b", "Flickr30K"), ("synth10", "CIFAR10"),
                            ("synth100", "CIFAR100")), spec_type="isogclr.data.pair_semantics:PairSpec"),
    # the same spec with a cluster = an object (the other attributes free): frequency counts semantic neighbours
    Generator("synthetic_pairs_objects", "isogclr.data.synthetic_pairs:write_object_pairs",
              "isogclr.config.bimodal:pair_spec",
              "generate the object variant of the image-text pairs (data.synthetic_pairs)", shares="synthetic_pairs"),
    Generator("fashion_mnist_mini", "isogclr.data.fashion_mnist:write_fashion_mnist_mini",
              "isogclr.config.datasets:fashion_mnist_mini_spec",
              "write the mini Fashion-MNIST subset as an image folder (data.fashion_mnist_mini)", needs_root=True,
              spec_type="isogclr.data.fashion_mnist:FashionMnistMiniSpec"),
)

# the datasets, by name (the order of `sorted`)
SPECS: dict[str, DatasetSpec] = _by_name(
    DatasetSpec("cifar10", "isogclr.data.cifar:load_cifar10", missing="isogclr.data.cifar:missing_cifar10",
                counterpart="CIFAR10"),
    long_tailed("cifar10_lt", "cifar10", "CIFAR10-LT"),
    DatasetSpec("cifar100", "isogclr.data.cifar:load_cifar100", missing="isogclr.data.cifar:missing_cifar100",
                counterpart="CIFAR100"),
    long_tailed("cifar100_lt", "cifar100", "CIFAR100-LT"),
    DatasetSpec("imagenet100", "isogclr.data.folder:load_imagenet100", "isogclr.data.streaming:imagenet100_stream",
                "isogclr.data.folder:missing_imagenet100", counterpart="ImageNet100"),
    # Fashion-MNIST is not in the papers: compared by role with CIFAR10 / CIFAR10-LT (10 classes)
    DatasetSpec("fashion_mnist", "isogclr.data.fashion_mnist:load_fashion_mnist_balanced",
                missing="isogclr.data.fashion_mnist:missing_fashion_mnist", counterpart="CIFAR10"),
    long_tailed("fashion_mnist_lt", "fashion_mnist", "CIFAR10-LT"),
    DatasetSpec("fashion_mnist_mini", "isogclr.data.fashion_mnist:load_fashion_mnist_mini_balanced",
                missing="isogclr.data.fashion_mnist:missing_fashion_mnist_mini", generator="fashion_mnist_mini",
                counterpart="CIFAR10"),
    long_tailed("fashion_mnist_mini_lt", "fashion_mnist_mini", "CIFAR10-LT"),
    DatasetSpec("inaturalist", "isogclr.data.inaturalist:load_inaturalist_split",
                "isogclr.data.streaming:inaturalist_stream_split", "isogclr.data.inaturalist:missing_inaturalist",
                counterpart="iNaturalist"),
    DatasetSpec("stl10", "isogclr.data.stl10:load_stl10_unlabeled", missing="isogclr.data.stl10:missing_stl10"),
    DatasetSpec("stl10_labeled", "isogclr.data.stl10:load_stl10_labeled", missing="isogclr.data.stl10:missing_stl10"),
    DatasetSpec("synth10", "isogclr.data.synthetic:load_synth10", generator="synthetic", counterpart="CIFAR10",
                classes=10, validation_split=True),
    long_tailed("synth10_lt", "synth10", "CIFAR10-LT"),
    DatasetSpec("synth100", "isogclr.data.synthetic:load_synth100", generator="synthetic", counterpart="CIFAR100",
                classes=100, validation_split=True),
    long_tailed("synth100_lt", "synth100", "CIFAR100-LT"),
)


def source(name: str) -> DatasetSpec:
    """The spec that holds ``name``'s loader, hint and generator: its own, or a long-tailed set's balanced one.
    ``KeyError`` naming the known datasets."""
    if name not in SPECS:
        raise KeyError(f"unknown dataset {name!r}; known: {sorted(SPECS)}")
    spec = SPECS[name]
    return spec if spec.balanced is None else SPECS[spec.balanced]
