"""Datasets by name (``load_dataset``), the generated synthetic family, and batched augmentations.

Importing the package imports no dataset module: :func:`load_dataset` imports the module of the dataset it loads
(:data:`~.base.DATASETS`, names to loaders, derived from the declarations :data:`isogclr.dataset_specs.SPECS`), so
a run's code is its own dataset's.
"""

from .base import (
    DATASETS,
    STREAMS,
    ImageData,
    IndexedImageDataset,
    load_dataset,
    long_tailed_order,
    long_tailed_positions,
)

__all__ = ["DATASETS", "STREAMS", "ImageData", "IndexedImageDataset", "load_dataset", "long_tailed_order",
           "long_tailed_positions"]
