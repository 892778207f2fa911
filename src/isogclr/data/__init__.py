"""Datasets by name (``load_dataset``), the generated synthetic family, and batched augmentations.

Importing the package imports no dataset module: :func:`load_dataset` imports the module that registers the
dataset it loads (:data:`~.base.REGISTRY`), so a run's code is its own dataset's.
"""

from .base import (
    DATASETS,
    REGISTRY,
    ImageData,
    IndexedImageDataset,
    dataset_module,
    load_dataset,
    long_tailed_positions,
    register_dataset,
)

__all__ = ["DATASETS", "REGISTRY", "ImageData", "IndexedImageDataset", "dataset_module", "load_dataset",
           "long_tailed_positions", "register_dataset"]
