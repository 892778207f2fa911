"""Random numbers keyed by sample: every draw that belongs to a sample comes from ``(seed, epoch, index, view)``.

A sample's augmentation is a function of the run's seed, the epoch, the sample's dataset index and the view
number, and of nothing else: not of the process that happens to hold the sample under ``torchrun``, not of the
DataLoader worker that decodes it, not of the samples drawn before it (so a run resumed mid-epoch draws what
the uninterrupted one drew). The convention, stated once here and used by every trainer:

* in-memory sets (augmented in batches on the device): :func:`uniforms` gives each image of a batch its own
  row of ``n`` uniform numbers in ``[0, 1)``, which :mod:`isogclr.data.augment` turns into the crop box, the
  flip and the colour draws;
* streamed sets (decoded and augmented one sample at a time by torchvision in DataLoader workers):
  :func:`sample_rng` seeds torch's generator from the sample's key for the duration of its transform.

The draws of an epoch that belong to no sample (the order of the samples or of the shards, a loader's base seed)
come from :func:`epoch_generator`, seeded by :func:`epoch_seed` ``= seed * 100003 + epoch``: the same on every
process, so the ranks agree on the order and each takes its part.

The key is SplitMix64 (Steele, Lea and Flood, 2014) applied to each component in turn; the ``n`` numbers of a
row are SplitMix64 of the key plus ``k`` times its odd increment (a counter-based generator), their top 24
bits scaled by ``2**-24`` (exact in float32, never 1.0). Integer arithmetic only, modulo ``2**64``: the same
bits on every machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function of ``z + gamma`` (uint64 arrays, arithmetic modulo 2**64)."""
    with np.errstate(over="ignore"):
        z = z + _GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def keys(seed: int, epoch: int, index, view: int = 0) -> np.ndarray:
    """The uint64 key of each sample ``index`` (an int or a sequence / tensor of ints) in view ``view``."""
    for name, value in (("seed", seed), ("epoch", epoch), ("view", view)):
        if int(value) < 0:
            raise ValueError(f"keyed randomness: {name} must be >= 0, got {value}")
    index = np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index, dtype=np.int64)
    if index.size and index.min() < 0:
        raise ValueError(f"keyed randomness: sample indices must be >= 0, got {int(index.min())}")
    z = _mix(np.full(index.shape, seed, dtype=np.uint64))
    z = _mix(z ^ np.uint64(epoch))
    z = _mix(z ^ index.astype(np.uint64))
    return _mix(z ^ np.uint64(view))


def uniforms(seed: int, epoch: int, index, view: int, n: int) -> torch.Tensor:
    """float32 ``(len(index), n)`` on the CPU, uniform in ``[0, 1)``: row ``i`` depends on ``index[i]`` only."""
    key = keys(seed, epoch, index, view).reshape(-1, 1)
    with np.errstate(over="ignore"):
        counters = key + np.arange(n, dtype=np.uint64) * _GAMMA
    bits = _mix(counters) >> np.uint64(40)
    return torch.from_numpy((bits.astype(np.float64) * 2.0 ** -24).astype(np.float32))


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of an epoch's draws that belong to no sample: ``seed * 100003 + epoch`` (distinct for every
    epoch below 100003, the same on every process)."""
    return seed * 100_003 + epoch


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A CPU generator seeded by :func:`epoch_seed`: the data order of an epoch, the shards' order."""
    return torch.Generator().manual_seed(epoch_seed(seed, epoch))


@contextlib.contextmanager
def sample_rng(seed: int, epoch: int, index: int) -> Iterator[None]:
    """Within the block, torch's CPU generator is seeded from the sample's key; the caller's state is restored
    after it (so a transform run in the main process does not disturb the trainer's generator)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(keys(seed, epoch, int(index))) & (2 ** 63 - 1))
        yield


__all__ = ["epoch_generator", "epoch_seed", "keys", "sample_rng", "uniforms"]
