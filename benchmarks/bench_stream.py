"""Streaming input pipeline at the papers' resolution: memory against dataset size, decode throughput, data wait.

Simulation on generated data: n 224x224 JPEGs (1,000 distinct ones, a smooth random image plus noise,
quality 90, ~25 KB each, written n / 1,000 times over; 100 class folders) and the same images as webdataset
shards of 1,000 samples (:func:`isogclr.data.webdataset.write_shards`). For each dataset size n in
``--sizes`` (a prefix of the listing, or of the shard list) and each layout, one fresh process runs:

1. the input pipeline alone for ``--steps`` batches of ``--batch``: decode throughput per worker;
2. the same pipeline feeding training steps of the mini encoder (``model`` of params.yaml, one torch thread as
   the mini runs) for ``--steps`` batches: the share of each step spent waiting for the next batch;

while a sampler thread records the resident memory of the process and its DataLoader workers every second
(RSS summed over the processes, which counts shared pages once per process, and PSS, which splits them).

* folder: :class:`~isogclr.data.loaders.StreamingImages` + :func:`~isogclr.data.loaders.epoch_loader`,
  two SimCLR views at 224 (RandomResizedCrop 224, the unimodal ImageNet-scale setting, blur p = 0.5), iSogCLR
  loss on the two views;
* shards: :func:`~isogclr.data.webdataset.shard_loader`, one view at 256 (the bimodal setting's crop of the
  224-px source, upsampled), the image tower only: CLIP loss against a fixed random text embedding per
  dataset index mod 1,000 (stand-in for the text encoder).

Usage: python benchmarks/bench_stream.py [--sizes 10000 50000 200000] [--workers 2] [--batch 32] [--steps 12]
       [--work /tmp/isogclr_stream_bench] [--out reports/benchmarks]
Writes ``stream.csv`` and ``stream_table.md`` (the table of ``stream.md``, whose prose is written by hand).

``--eval`` measures the image-text evaluation instead (``stream_eval.csv``, ``stream_eval_table.md``): for each n,
a zero-shot set (``images.npz`` of n 224-px images, uncompressed, as CIFAR / ImageNet validation would be
arranged) and a Karpathy retrieval set (n JPEGs, five captions each) of the pairs-folder layout
(:mod:`isogclr.data.pairs_folder`), read streamed (``stream_eval=True``, 2 DataLoader workers for the
JPEGs) and in memory, each in a fresh process; the image features of both sets are computed with
:func:`~isogclr.eval.retrieval.encode_batches` (a stand-in encoder: 4x4 average pool + a linear map to 256) in
batches of ``--batch``, and the peak memory of the process and its workers recorded over the load and the
encoding; then the zero-shot top-1 against fixed random class embeddings and the features' sum, which agree
between the two modes. Recall@K is not computed (its n x 5n similarity matrix is a separate, quadratic cost:
5.1 GB at n = 16,000).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import threading
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

CLASSES, PER_SHARD = 100, 1000


def _image(i: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(i)
    small = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).resize((224, 224), Image.BICUBIC)
    array = np.asarray(small, dtype=np.int16) + rng.integers(-12, 13, (224, 224, 3))
    buf = io.BytesIO()
    Image.fromarray(array.clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _relpath(i: int) -> str:
    return f"c{i % CLASSES:03d}/{i:07d}.jpg"


UNIQUE = 1000  # distinct JPEGs; image i is a copy of image i mod UNIQUE (the decode cost is the same)


def generate(work: Path, n: int) -> float:
    """The folder (``work/folder``) and the shards (``work/shards``) of n images; returns seconds spent."""
    t0 = time.perf_counter()
    folder = work / "folder"
    for c in range(CLASSES):
        (folder / f"c{c:03d}").mkdir(parents=True, exist_ok=True)
    with Pool(2) as pool:
        blobs = pool.map(_image, range(UNIQUE), chunksize=50)
    for i in range(n):
        path = folder / _relpath(i)
        if not path.exists():
            path.write_bytes(blobs[i % UNIQUE])
    shards = work / "shards"
    if not (shards / "sizes.json").is_file() or sum(json.loads((shards / "sizes.json").read_text()).values()) < n:
        from isogclr.data.webdataset import write_shards

        write_shards(((blobs[i % UNIQUE], f"generated image {i}") for i in range(n)), shards, per_shard=PER_SHARD)
    return time.perf_counter() - t0


class MemorySampler(threading.Thread):
    """Peak RSS (summed over the process and its children) and peak PSS, sampled every ``period`` seconds."""

    def __init__(self, period: float = 1.0) -> None:
        super().__init__(daemon=True)
        import psutil

        self.proc, self.period, self.stop = psutil.Process(), period, threading.Event()
        self.peak_rss = self.peak_pss = 0
        self.peak_children = 0

    def run(self) -> None:
        import psutil

        while not self.stop.is_set():
            procs = [self.proc] + self.proc.children(recursive=True)
            rss = pss = 0
            for p in procs:
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                rss, pss = rss + info.rss, pss + info.pss
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.peak_children = max(self.peak_children, len(procs) - 1)
            time.sleep(self.period)


def one(kind: str, n: int, work: Path, workers: int, batch: int, steps: int) -> dict:
    """Measure one (layout, size) in this process."""
    import torch
    import yaml

    from isogclr.data.augment import AugmentConfig
    from isogclr.data.loaders import LoaderSpec, StreamingImages, epoch_loader
    from isogclr.data.transforms import pair_transform, simclr_transform, to_normalized
    from isogclr.data.webdataset import shard_loader
    from isogclr.losses import build_loss
    from isogclr.models import ContrastiveModel, EncoderConfig, HeadConfig

    torch.set_num_threads(1)
    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    sampler = MemorySampler()
    sampler.start()
    if kind == "folder":
        size = 224
        dataset = StreamingImages(work / "folder", [_relpath(i) for i in range(n)], [i % CLASSES for i in range(n)],
                                  [f"c{c:03d}" for c in range(CLASSES)],
                                  simclr_transform(AugmentConfig(jitter_strength=0.8, blur_p=0.5), size))
        listing = dataset.paths.nbytes + dataset.labels.numel() * 8

        def batches(epoch: int):
            for views, _, index in epoch_loader(dataset, LoaderSpec(batch, workers, 4), epoch, seed=0):
                yield views.transpose(0, 1).flatten(0, 1), index
    else:
        size = 256
        shards = [str(work / "shards" / f"shard-{k:06d}.tar") for k in range(n // PER_SHARD)]
        listing = sum(len(s) for s in shards)

        def batches(epoch: int):
            yield from ((images, index) for images, _, index in
                        shard_loader(shards, pair_transform(size, 0.5, 0.5), batch, epoch, seed=0,
                                     num_workers=workers, shuffle_buffer=1000))

    # 1. the pipeline alone (after its first batch: worker start-up excluded)
    it = batches(0)
    next(it)
    t0, images = time.perf_counter(), 0
    for _ in range(steps):
        x, _ = next(it)
        images += len(x) // (2 if kind == "folder" else 1)
    decode_s = time.perf_counter() - t0
    del it

    # 2. the pipeline feeding training steps of the mini encoder
    enc = params["model"]["encoder"]
    model = ContrastiveModel(EncoderConfig(**enc), HeadConfig(**params["model"]["head"]))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if kind == "folder":
        loss_fn = build_loss("isogclr", n, rho=0.3, tau_init=0.7)
    else:
        loss_fn = build_loss("clip", n, tau=0.01)
        # a fixed table of 1,000 text embeddings, row index mod 1,000 (an n-row table would grow with n)
        text = torch.nn.functional.normalize(torch.randn(1000, params["model"]["head"]["out_dim"]), dim=1)
    it = batches(1)
    wait = compute = 0.0
    for step in range(steps + 2):
        t0 = time.perf_counter()
        x, index = next(it)
        t1 = time.perf_counter()
        _, proj = model(to_normalized(x))
        z = torch.nn.functional.normalize(proj, dim=1)
        if kind == "folder":
            z1, z2 = z.chunk(2)
            loss = loss_fn(z1, z2, index)
        else:
            loss = loss_fn(z, text[index % 1000], index)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if step >= 2:  # the first two steps (worker start-up, allocator warm-up) are not counted
            wait, compute = wait + t1 - t0, compute + t2 - t1
    del it
    sampler.stop.set()
    sampler.join()
    return {"layout": kind, "images": n, "size": size, "workers": workers, "batch": batch, "steps": steps,
            "listing_mb": round(listing / 2**20, 2),
            "decode_images_per_s_per_worker": round(images / decode_s / max(workers, 1), 1),
            "step_s": round((wait + compute) / steps, 3), "wait_share": round(wait / (wait + compute), 3),
            "peak_rss_mb": round(sampler.peak_rss / 2**20), "peak_pss_mb": round(sampler.peak_pss / 2**20),
            "processes": 1 + sampler.peak_children}


def generate_eval(work: Path, n: int) -> float:
    """``work/eval_<n>``: a pairs folder with ``zeroshot/gen/`` (n images, uncompressed npz written member by
    member, never whole in memory) and ``retrieval_gen/`` (n JPEGs + dataset.json); returns seconds spent."""
    import zipfile

    t0 = time.perf_counter()
    root = work / f"eval_{n}"
    zs, ret = root / "zeroshot" / "gen", root / "retrieval_gen"
    if (ret / "dataset.json").is_file():
        return 0.0
    from PIL import Image

    zs.mkdir(parents=True, exist_ok=True)
    (ret / "images").mkdir(parents=True, exist_ok=True)
    with Pool(2) as pool:
        blobs = pool.map(_image, range(UNIQUE), chunksize=50)
    pixels = [np.asarray(Image.open(io.BytesIO(b)).convert("RGB")) for b in blobs]
    header = {"descr": "|u1", "fortran_order": False, "shape": (n, 224, 224, 3)}
    with zipfile.ZipFile(zs / "images.npz", "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        with archive.open("images.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_2_0(f, header)
            for i in range(n):
                f.write(pixels[i % UNIQUE].tobytes())
        with archive.open("labels.npy", "w") as f:
            np.lib.format.write_array(f, np.arange(n, dtype=np.int64) % CLASSES)
    (zs / "classnames.txt").write_text("".join(f"class {c}\n" for c in range(CLASSES)))
    (zs / "templates.txt").write_text("a photo of a {}.\n")
    entries = []
    for i in range(n):
        (ret / "images" / f"{i:07d}.jpg").write_bytes(blobs[i % UNIQUE])
        entries.append({"split": "test", "filepath": "images", "filename": f"{i:07d}.jpg",
                        "sentences": [{"raw": f"generated image {i}, caption {k}"} for k in range(5)]})
    (ret / "dataset.json").write_text(json.dumps({"images": entries}))
    return time.perf_counter() - t0


def one_eval(mode: str, n: int, work: Path, workers: int, batch: int) -> dict:
    """The evaluation sets of ``work/eval_<n>`` read ``streamed`` or ``memory``, their image features computed."""
    import torch

    from isogclr.data.pairs_folder import load_pairs_folder
    from isogclr.eval.retrieval import encode_batches, zero_shot_accuracy

    torch.set_num_threads(1)
    weight = torch.randn(256, 3 * 16, generator=torch.Generator().manual_seed(0))

    def encode(images: torch.Tensor) -> torch.Tensor:  # a stand-in for the image encoder: (b, 3, S, S) -> (b, 256)
        return torch.nn.functional.adaptive_avg_pool2d(images.float() / 255.0, 4).flatten(1) @ weight.T

    sampler = MemorySampler(period=0.2)
    sampler.start()
    t0 = time.perf_counter()
    data = load_pairs_folder(work / f"eval_{n}", 224, train=False, stream_eval=mode == "streamed",
                             num_workers=workers)
    zs, ret = data.zeroshot["gen"], data.retrieval["retrieval_gen"]
    zs_x, ret_x = encode_batches(encode, zs.batches(batch)), encode_batches(encode, ret.batches(batch))
    seconds = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    g = torch.Generator().manual_seed(1)  # the same stand-in class embeddings in both modes
    top1 = zero_shot_accuracy(zs_x, zs.labels, torch.randn(CLASSES, 256, generator=g))["top1"]
    return {"mode": mode, "images": n, "size": 224, "workers": workers if mode == "streamed" else 0, "batch": batch,
            "set_mb": round(2 * n * 3 * 224 * 224 / 2**20),
            "features_mb": round((zs_x.nbytes + ret_x.nbytes) / 2**20, 1),
            "seconds": round(seconds, 1), "images_per_s": round(2 * n / seconds, 1),
            "peak_rss_mb": round(sampler.peak_rss / 2**20), "peak_pss_mb": round(sampler.peak_pss / 2**20),
            "processes": 1 + sampler.peak_children, "top1": top1,
            "features_sum": float(zs_x.double().sum() + ret_x.double().sum())}  # equal in both modes


def _measure(argvs: list[list[str]], csv_path: Path) -> list[dict]:
    """Each measurement in a fresh process of this script (its peak memory is its own), one row each (the
    process's last printed line, JSON), written to ``csv_path``."""
    rows = []
    for argv in argvs:
        out = subprocess.run([sys.executable, __file__, *argv], check=True, capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main_eval(args) -> None:
    for n in args.sizes:
        print(f"generated the evaluation sets of {n} images in {generate_eval(args.work, n):.0f} s", flush=True)
    rows = _measure([["--eval", "--one", mode, str(n), "--work", str(args.work), "--workers", str(args.workers),
                      "--batch", str(args.batch)] for n in sorted(args.sizes) for mode in ("streamed", "memory")],
                    args.out / "stream_eval.csv")
    lines = ["| evaluation sets | images per set | px | set MB (both, uint8) | features MB | seconds | images/s | "
             "peak RSS MB (all processes) | peak PSS MB | processes |", "|" + "---|" * 10]
    lines += [f"| {r['mode']} | {r['images']:,} | {r['size']} | {r['set_mb']:,} | {r['features_mb']} | "
              f"{r['seconds']} | {r['images_per_s']} | {r['peak_rss_mb']:,} | {r['peak_pss_mb']:,} | "
              f"{r['processes']} |" for r in rows]
    (args.out / "stream_eval_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--work", type=Path, default=Path("/tmp/isogclr_stream_bench"))
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    parser.add_argument("--layouts", nargs="+", default=["folder", "shards"], choices=["folder", "shards"])
    parser.add_argument("--eval", action="store_true", help="measure the streamed image-text evaluation instead")
    parser.add_argument("--one", nargs=2, metavar=("LAYOUT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.eval and args.one:
        print(json.dumps(one_eval(args.one[0], int(args.one[1]), args.work, args.workers, args.batch)))
        return
    if args.eval:
        main_eval(args)
        return
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.work, args.workers, args.batch, args.steps)))
        return
    seconds = generate(args.work, max(args.sizes))
    print(f"generated {max(args.sizes)} images + shards in {seconds:.0f} s", flush=True)
    rows = _measure([["--one", kind, str(n), "--work", str(args.work), "--workers", str(args.workers), "--batch",
                      str(args.batch), "--steps", str(args.steps)]
                     for n in sorted(args.sizes) for kind in args.layouts], args.out / "stream.csv")
    header = ("| layout | images | px | listing MB | decode img/s/worker | step s | data wait share | "
              "peak RSS MB (all processes) | peak PSS MB | processes |")
    lines = [header, "|" + "---|" * 10]
    lines += [f"| {r['layout']} | {r['images']:,} | {r['size']} | {r['listing_mb']} | "
              f"{r['decode_images_per_s_per_worker']} | {r['step_s']} | {r['wait_share']:.1%} | {r['peak_rss_mb']} | "
              f"{r['peak_pss_mb']} | {r['processes']} |" for r in rows]
    (args.out / "stream_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
