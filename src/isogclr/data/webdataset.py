"""Image-text pairs in webdataset shards, read with the ``webdataset`` library, streaming.

A shard is a tar of samples ``KEY.jpg`` (or png / webp) + ``KEY.txt`` (+ ``KEY.index``); img2dataset
(``--output_format webdataset``) writes this layout, and :func:`write_shards` writes it with the dataset index
stored in every sample (``KEY.index``, an ASCII integer; without it the key itself must be the integer
index, as img2dataset's zero-padded keys are).

**The distinct-index scheme** (per-sample state needs every index at most once per epoch across processes):

1. the shard list is shuffled with a generator seeded by ``(seed, epoch)``, the same on every rank;
2. rank ``r`` of ``w`` takes shards ``r, r + w, r + 2w, ...`` of that order (``len(shards) mod w`` shards
   left out this epoch, different ones next epoch), and its DataLoader workers split those shards again
   (``webdataset.split_by_worker``): every shard is opened by one worker of one process;
3. each rank stops after ``steps`` local batches, the same number on every rank, computed from the sample
   count of every shard (``sizes.json`` beside the shards: ``{shard file name: samples}``, written by
   :func:`write_shards`; img2dataset's ``*_stats.json`` ``successes`` are read if it is absent) as
   ``min over ranks of (samples of its shards) // local batch``.

**Resuming mid-epoch** (``start_batch``): the first ``start_batch`` local batches are skipped without decoding.
The DataLoader hands out its workers' samples round-robin (an exhausted worker drops out), and worker ``k``
reads shards ``k, k + W, ...`` of the rank's list, whose sample counts ``sizes.json`` gives; so
:func:`worker_skips` knows how many samples each worker had yielded when the main process had received
``start_batch x local`` of them, and each worker drops that many from its shuffled stream *before* the decode
stage (the tar members are read, the images not decoded). The remaining samples come in the order of an
uninterrupted epoch (``tests/test_data_stream_resume.py``).

Shards are disjoint and each is read once, so indices are distinct by construction; the training step
still checks every gathered global batch (:func:`~isogclr.data.loaders.check_distinct`) because a wrong
``index`` field or a shard listed twice would otherwise corrupt the state silently.

:func:`load_webdataset_tar` keeps the in-memory reading for small sets (tests, retrieval sets).
"""

from __future__ import annotations

import io
import itertools
import json
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path

import torch
import webdataset as wds
from PIL import Image

from ..io import read_json
from .captions import CaptionBuilder, CaptionData
from .keyed import epoch_generator, epoch_seed, sample_rng
from .transforms import Transform

IMAGE_KEYS = "jpg;jpeg;png;webp"
SIZES_FILE = "sizes.json"


def write_shards(samples: Iterable[tuple[bytes, str]], out_dir: Path | str, per_shard: int = 1000,
                 image_ext: str = "jpg") -> list[Path]:
    """Write ``(encoded image bytes, caption)`` pairs as ``shard-000000.tar ...`` with ``per_shard`` samples each;
    sample ``i`` gets key ``%09d`` and ``index`` ``i``. Also writes ``sizes.json``. Returns the shard paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    with wds.ShardWriter(str(out_dir / "shard-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for i, (image, caption) in enumerate(samples):
            sink.write({"__key__": f"{i:09d}", image_ext: image, "txt": caption, "index": i})
            name = f"shard-{i // per_shard:06d}.tar"
            sizes[name] = sizes.get(name, 0) + 1
    (out_dir / SIZES_FILE).write_text(json.dumps(sizes, indent=0, sort_keys=True))
    return [out_dir / name for name in sorted(sizes)]


def shard_sizes(shards: Sequence[Path | str]) -> dict[str, int]:
    """Samples per shard (by file name) from ``sizes.json`` or img2dataset's ``<shard>_stats.json``."""
    sizes: dict[str, int] = {}
    for shard in map(Path, shards):
        manifest = shard.parent / SIZES_FILE
        if manifest.is_file():
            sizes.update(read_json(manifest))
        if shard.name not in sizes:
            stats = shard.with_name(shard.name.removesuffix(".tar") + "_stats.json")
            if not stats.is_file():
                raise FileNotFoundError(f"no sample count for {shard}: expected {manifest} (written by "
                                        f"isogclr.data.webdataset.write_shards) or {stats} (img2dataset)")
            sizes[shard.name] = int(read_json(stats)["successes"])
    return {Path(s).name: sizes[Path(s).name] for s in shards}


def rank_shards(shards: Sequence[str], epoch: int, seed: int, rank: int, world_size: int) -> list[str]:
    """Rank ``rank``'s shards of epoch ``epoch`` (steps 1-2 of the scheme in the module docstring)."""
    if len(shards) < world_size:
        raise ValueError(f"{len(shards)} shard(s) for {world_size} processes: need at least one shard per process")
    order = torch.randperm(len(shards), generator=epoch_generator(seed, epoch)).tolist()
    usable = len(shards) // world_size * world_size
    return [shards[i] for i in order[:usable][rank::world_size]]


def steps_per_epoch(sizes: dict[str, int], shards: Sequence[str], epoch: int, seed: int, world_size: int,
                    local_batch: int) -> int:
    """Local batches every rank yields in ``epoch``: the smallest rank's samples // ``local_batch``."""
    per_rank = [sum(sizes[Path(s).name] for s in rank_shards(shards, epoch, seed, r, world_size))
                for r in range(world_size)]
    return min(per_rank) // local_batch


def _sample_index(sample: dict) -> int:
    if "index" in sample:
        return int(sample["index"])
    key = sample["__key__"].rpartition("/")[2]
    if not key.isdigit():
        raise ValueError(f"{sample.get('__url__')}: sample {sample['__key__']!r} has no 'index' member and its key "
                         "is not an integer dataset index")
    return int(key)


def _where(sample: dict) -> str:
    """``<shard>:<key>``, how errors name a sample."""
    return f"{sample.get('__url__')}:{sample.get('__key__')}"


def _image_bytes(sample: dict) -> bytes:
    image = next((sample[k] for k in IMAGE_KEYS.split(";") if k in sample), None)
    if image is None:
        raise ValueError(f"{_where(sample)}: sample without an image member ({IMAGE_KEYS.replace(';', ', ')}; it "
                         f"has {sorted(k for k in sample if not k.startswith('__'))}): rewrite the shard")
    return image


def _caption(sample: dict) -> str:
    if "txt" not in sample:
        raise ValueError(f"{_where(sample)}: sample without a caption member (txt): rewrite the shard")
    try:
        caption = sample["txt"].decode("utf-8").strip()
    except UnicodeDecodeError as err:
        raise ValueError(f"{_where(sample)}: the caption (txt) is not UTF-8 (byte {err.start + 1}): rewrite it as "
                         "UTF-8") from None
    if not caption:
        raise ValueError(f"{_where(sample)}: empty caption (txt): write the caption, or remove the sample")
    return caption


def _decode_pair(transform: Transform, seed: int, epoch: int, sample: dict) -> tuple[torch.Tensor, str, int]:
    """A sample decoded and augmented, its draws keyed by ``(seed, epoch, index)`` (:mod:`isogclr.data.keyed`)."""
    caption = _caption(sample)
    try:
        with Image.open(io.BytesIO(_image_bytes(sample))) as img:
            image = img.convert("RGB")
    except (OSError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f"{_where(sample)}: cannot decode the image ({type(err).__name__}: {err}): replace "
                         "the sample, or rewrite the shard") from None
    index = _sample_index(sample)
    with sample_rng(seed, epoch, index):
        return transform(image), caption, index
def worker_skips(counts: Sequence[int], taken: int) -> list[int]:
    """Samples each DataLoader worker (``counts[k]`` samples in all) has yielded when the main process has received
    ``taken``: the loader takes one from each worker in turn, skipping exhausted workers."""
    skips, left = [0] * len(counts), taken
    while left:
        active = [k for k, c in enumerate(counts) if skips[k] < c]
        if not active:
            raise ValueError(f"cannot skip {taken} samples: the workers hold {sum(counts)}")
        most = min(counts[k] - skips[k] for k in active)  # full rounds before a worker runs out
        rounds = min(most, left // len(active))
        for k in active:
            skips[k] += rounds
        left -= rounds * len(active)
        if rounds < most:  # fewer than one round left: the first ``left`` active workers give one more
            for k in active[:left]:
                skips[k] += 1
            left = 0
    return skips


# pipeline stages are module-level functions (bound with functools.partial): DataLoader workers started by
# spawn or forkserver receive the pipeline pickled

def _seeded_shuffle(size: int, seed: int, src: Iterator) -> Iterator:
    """webdataset's buffer shuffle seeded by ``(seed, worker)`` (its default seed is the pid and the clock, which
    would make an epoch's order, and a resumed epoch, irreproducible)."""
    worker = wds.utils.pytorch_worker_info()[2]
    return wds.filters.shuffle(size, seed=seed * 1_000 + worker)(src)


def _skip_per_worker(skips: Sequence[int], src: Iterator) -> Iterator:
    """Worker ``k`` drops the first ``skips[k]`` samples of its stream (before decoding)."""
    return itertools.islice(src, skips[wds.utils.pytorch_worker_info()[2]], None)


def shard_pairs(shards: Sequence[Path | str], transform: Transform, epoch: int, seed: int, rank: int = 0,
                world_size: int = 1, shuffle_buffer: int = 1000, skip: Sequence[int] = ()) -> wds.WebDataset:
    """This rank's samples of one epoch as ``(image uint8 (3, S, S), caption, index)``, decoded in the workers.

    Shards are split by rank (:func:`rank_shards`) and by DataLoader worker; within a worker samples are
    shuffled in a buffer of ``shuffle_buffer`` (seeded by ``(seed, epoch, rank, worker)``: reproducible).
    ``skip``: per worker, samples dropped before decoding (a resumed epoch, :func:`worker_skips`). Each sample's
    crop and flip are keyed by ``(seed, epoch, index)``, whatever worker decodes it. Wrap in
    :func:`shard_loader` for batches.
    """
    mine = rank_shards([str(s) for s in shards], epoch, seed, rank, world_size)
    missing = [s for s in mine if not Path(s).is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]} not found: webdataset shards are written by e.g. img2dataset "
                                "with --output_format webdataset")
    dataset = wds.WebDataset(mine, shardshuffle=False, nodesplitter=None, workersplitter=wds.split_by_worker,
                             empty_check=False, seed=epoch_seed(seed, epoch) * 1_000 + rank)
    if shuffle_buffer > 1:
        dataset = dataset.compose(partial(_seeded_shuffle, shuffle_buffer, epoch_seed(seed, epoch) * 1_000 + rank))
    if any(skip):
        dataset = dataset.compose(partial(_skip_per_worker, list(skip)))
    return dataset.map(partial(_decode_pair, transform, seed, epoch))


def _stack(samples: list[tuple[torch.Tensor, str, int]]) -> tuple[torch.Tensor, list[str], torch.Tensor]:
    images, captions, index = zip(*samples, strict=True)
    return torch.stack(images), list(captions), torch.as_tensor(index, dtype=torch.int64)


def shard_loader(shards: Sequence[Path | str], transform: Transform, batch_size: int, epoch: int, seed: int,
                 rank: int = 0, world_size: int = 1, num_workers: int = 2, shuffle_buffer: int = 1000,
                 start_batch: int = 0) -> Iterator[tuple[torch.Tensor, list[str], torch.Tensor]]:
    """Exactly :func:`steps_per_epoch` local batches ``(images, captions, index)`` of ``batch_size / world_size``,
    from batch ``start_batch`` on (the skipped ones are not decoded; see the module docstring).

    Workers yield decoded samples; the main process re-batches them (webdataset's ``WebLoader`` idiom), so
    uneven shares between workers do not shorten the epoch.
    """
    if batch_size % world_size:
        raise ValueError(f"batch_size={batch_size} is not divisible by the {world_size} processes")
    local = batch_size // world_size
    names = [str(s) for s in shards]
    steps = steps_per_epoch(shard_sizes(names), names, epoch, seed, world_size, local)
    if steps == 0:
        raise ValueError(f"the shards hold fewer than one batch of {local} per process")
    skip = ()
    if start_batch:
        sizes, mine = shard_sizes(names), rank_shards(names, epoch, seed, rank, world_size)
        workers = max(num_workers, 1)
        counts = [sum(sizes[Path(s).name] for s in mine[k::workers]) for k in range(workers)]
        skip = worker_skips(counts, start_batch * local)
    dataset = shard_pairs(names, transform, epoch, seed, rank, world_size, shuffle_buffer, skip)
    # the workers' base seed (which no draw uses), given so the loader leaves the trainer's generator alone
    generator = epoch_generator(seed, epoch)
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=num_workers, generator=generator)
    return _batches(iter(loader), local, max(steps - start_batch, 0), names)


def _batches(samples: Iterator, local: int, steps: int, shards: Sequence[str]) -> Iterator:
    for step in range(steps):
        batch = list(itertools.islice(samples, local))
        if len(batch) < local:
            raise RuntimeError(f"the shards ran out at step {step} of {steps}: their sizes.json counts more samples "
                               f"than they hold (shards: {shards[0]} ...)")
        yield _stack(batch)


def load_webdataset_tar(shards: Path | str | Iterable[Path | str], size: int = 64,
                        max_unreadable: int = 0) -> CaptionData:
    """All samples of webdataset shards decoded into memory (small sets only): ``KEY.<jpg|jpeg|png|webp>`` +
    ``KEY.txt``, read with the ``webdataset`` library in shard and member order. A sample lacking an image or a
    caption, an undecodable image and the samples a truncated shard loses (against ``sizes.json`` where it
    exists) are errors naming the shard and key, after all are counted (up to ``max_unreadable`` are skipped
    with a warning instead, :class:`~isogclr.data.captions.CaptionBuilder`); an empty caption is an error."""

    paths = [Path(shards)] if isinstance(shards, str | Path) else [Path(s) for s in shards]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: webdataset shards are written by e.g. img2dataset "
                                    "with --output_format webdataset")
    builder = CaptionBuilder(size, ", ".join(str(p) for p in paths), max_unreadable)
    for path in paths:
        samples = iter(wds.WebDataset([str(path)], shardshuffle=False, nodesplitter=None, workersplitter=None,
                                      empty_check=False))
        read, last, truncated = 0, None, None
        while True:
            try:
                sample = next(samples)
            except StopIteration:
                break
            except (tarfile.TarError, OSError, EOFError) as err:
                truncated = (f"{path}: truncated or corrupt "
                             + (f"after sample {last!r}" if last is not None else "before its first sample")
                             + f" ({type(err).__name__}: {err}): re-download or rewrite the shard")
                break
            read, last = read + 1, sample["__key__"]
            where = _where({**sample, "__url__": path})
            try:
                image = _image_bytes(sample)
                if "txt" not in sample:
                    raise ValueError(f"{where}: sample without a caption member (txt): rewrite the shard")
            except ValueError as err:
                builder.lost(where, err)
                continue
            builder.add(f"{path.name}:{sample['__key__']}", lambda b=image: io.BytesIO(b), [_caption(sample)], where)
        expected = _expected_size(path)
        if truncated is not None and (expected is None or expected <= read):
            builder.lost(truncated, ValueError("samples after it are lost (their number is unknown)"))
        elif expected is not None and read < expected:  # every sample the shard lost, counted
            reason = ValueError(truncated or f"{path} holds {read} samples, its sizes.json says {expected}")
            for i in range(read, expected):
                builder.lost(f"{path}: sample {i + 1} of {expected}", reason)
    return builder.build()


def _expected_size(shard: Path) -> int | None:
    """The shard's sample count from its ``sizes.json`` or img2dataset stats, None when neither is there."""
    try:
        return shard_sizes([shard])[shard.name]
    except (FileNotFoundError, KeyError, ValueError):
        return None


__all__ = ["load_webdataset_tar", "rank_shards", "shard_loader", "shard_pairs", "shard_sizes", "steps_per_epoch",
           "worker_skips", "write_shards"]
