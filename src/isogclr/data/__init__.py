"""Datasets by name (``load_dataset``), the generated synthetic family, and batched augmentations."""

from . import (
    cifar,  # noqa: F401  (registers cifar10, cifar10_lt, cifar100, cifar100_lt)
    fashion_mnist,  # noqa: F401  (registers fashion_mnist, fashion_mnist_lt)
    folder,  # noqa: F401  (registers imagenet100)
    inaturalist,  # noqa: F401  (registers inaturalist)
    stl10,  # noqa: F401  (registers stl10, stl10_labeled)
    synthetic,  # noqa: F401  (registers synth10, synth10_lt, synth100, synth100_lt)
)
from .base import DATASETS, ImageData, IndexedImageDataset, load_dataset, long_tailed_positions, register_dataset

__all__ = ["DATASETS", "ImageData", "IndexedImageDataset", "load_dataset", "long_tailed_positions", "register_dataset"]
