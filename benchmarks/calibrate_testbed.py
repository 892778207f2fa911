"""Calibration of the mini testbed: which setting buys the most signal per CPU-minute, on a validation split.

Each setting trains SimCLR (or the supervised reference, or nothing: the no-learning rows) on a generated
training split held in memory and scores its linear probe (the probe of params.yaml) on a *validation* split:
for the generated sets a split drawn with its own seed (split seed 3, 300 images a class, balanced), for
Fashion-MNIST the next 300 images a class of the official training split. The test splits are never read.
Everything not named by a setting is params.yaml's (the mini profile) as it stands.

The image-text settings were scored the same way by the selection command on held-out training pairs
(``python -m isogclr tune --method clip`` with one candidate, tau 0.03, and bimodal.epochs /
bimodal.image_encoder.init as listed in the table); see reports/benchmarks/calibration.md.

Usage: python benchmarks/calibrate_testbed.py [--only NAME ...] [--out reports/benchmarks]
Appends one row per setting to ``calibration.csv`` (train_s is the wall time of the training steps with one
torch thread: compare times measured side by side only).
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from isogclr.config.core import run_config
from isogclr.config.profiles import load_params
from isogclr.data.base import ImageData, long_tailed_positions
from isogclr.data.synthetic import SyntheticSpec, class_names, generate_split
from isogclr.models import ContrastiveModel
from isogclr.train import distributed
from isogclr.train.engine import fit
from isogclr.train.loop import UnimodalTask, evaluate_encoder
from isogclr.train.references import raw_pixel_probe

# the encoder, colour jitter and warm-up (epochs, steps) before the calibration, and after it
OLD = {"arch": "resnet18", "width": 8, "jitter": 0.4, "warmup": (2, 0)}
NEW = {"arch": "resnet10", "width": 16, "jitter": 1.0, "warmup": (2, 0)}
MINI = {**NEW, "warmup": (0, 30)}  # the mini profile as committed: warm-up of 30 steps
# name: (dataset, images a class in the pool, image size, epochs, method, encoder/jitter)
SETTINGS = {
    "before: synth10_lt (1,236), 20 epochs": ("synth10_lt", 500, 16, 20, "simclr", OLD),
    "before: supervised, synth10_lt (1,236)": ("synth10_lt", 500, 16, 20, "supervised", OLD),
    "long-tailed from 2,000 a class (4,958)": ("synth10_lt", 2000, 16, 20, "simclr", OLD),
    "supervised, long-tailed from 2,000 a class": ("synth10_lt", 2000, 16, 20, "supervised", OLD),
    "synth10_lt (1,236), 80 epochs": ("synth10_lt", 500, 16, 80, "simclr", OLD),
    "32 px": ("synth10_lt", 500, 32, 20, "simclr", OLD),
    "colour jitter 1.0, LT 4,958, 10 ep": ("synth10_lt", 2000, 16, 10, "simclr", {**OLD, "jitter": 1.0}),
    "ResNet-10 w16, jitter 1.0, LT 4,958, 10 ep": ("synth10_lt", 2000, 16, 10, "simclr", NEW),
    "ResNet-10 w16, LT 4,958, 15 ep": ("synth10_lt", 2000, 16, 15, "simclr", NEW),
    "ResNet-10 w16, LT 4,958, 20 ep": ("synth10_lt", 2000, 16, 20, "simclr", NEW),
    "ResNet-10 w32, LT 4,958, 10 ep": ("synth10_lt", 2000, 16, 10, "simclr", {**NEW, "width": 32}),
    "ResNet-10 w16, 24 px, LT 4,958, 10 ep": ("synth10_lt", 2000, 24, 10, "simclr", NEW),
    "ResNet-10 w16, 32 px, LT 4,958, 10 ep": ("synth10_lt", 2000, 32, 10, "simclr", NEW),
    "no learning: LT 4,958, 16 px": ("synth10_lt", 2000, 16, 0, "none", NEW),
    "ResNet-10 w16, synth10 20,000, 1 ep": ("synth10", 2000, 16, 1, "simclr", {**NEW, "warmup": (0, 30)}),
    "ResNet-10 w16, synth10 20,000, 2 ep": ("synth10", 2000, 16, 2, "simclr", NEW),
    "no learning: synth10 5,000, 32 px": ("synth10", 500, 32, 0, "none", NEW),
    "ResNet-10 w16, Fashion-MNIST 5,000, 5 ep": ("fm", 500, 16, 5, "simclr", NEW),
    "ResNet-10 w16, Fashion-MNIST 5,000, 10 ep": ("fm", 500, 16, 10, "simclr", NEW),
    "no learning: Fashion-MNIST 5,000": ("fm", 500, 16, 0, "none", NEW),
    "ResNet-10 w16, Fashion-MNIST-LT 1,236, 20 ep": ("fm_lt", 500, 16, 20, "simclr", NEW),
    "ResNet-10 w16, Fashion-MNIST-LT 1,236, 40 ep": ("fm_lt", 500, 16, 40, "simclr", NEW),
    "no learning: Fashion-MNIST-LT 1,236": ("fm_lt", 500, 16, 0, "none", NEW),
    # second pass: synth10 visited several times (the moving averages of SogCLR/iSogCLR need repeat visits), and the
    # supervised reference at the budgets where SimCLR stood within 5 points of it
    "synth10 10,000, 3 ep": ("synth10", 1000, 16, 3, "simclr", MINI),
    "synth10 10,000, 4 ep": ("synth10", 1000, 16, 4, "simclr", MINI),
    "supervised, synth10 10,000, 4 ep": ("synth10", 1000, 16, 4, "supervised", MINI),
    "supervised, Fashion-MNIST 5,000, 5 ep": ("fm", 500, 16, 5, "supervised", MINI),
    "supervised, Fashion-MNIST 5,000, 10 ep": ("fm", 500, 16, 10, "supervised", MINI),
    "Fashion-MNIST 5,000, 10 ep": ("fm", 500, 16, 10, "simclr", MINI),
    "supervised, Fashion-MNIST-LT 1,236, 20 ep": ("fm_lt", 500, 16, 20, "supervised", MINI),
    "supervised, Fashion-MNIST-LT 1,236, 40 ep": ("fm_lt", 500, 16, 40, "supervised", MINI),
    "synth10 20,000, 2 ep": ("synth10", 2000, 16, 2, "simclr", MINI),
    "synth10 20,000, 3 ep": ("synth10", 2000, 16, 3, "simclr", MINI),
    "supervised, synth10 20,000, 3 ep": ("synth10", 2000, 16, 3, "supervised", MINI),
    # third pass: Fashion-MNIST at its own 28 px, where the supervised reference may stand further above raw pixels
    "Fashion-MNIST 5,000 at 28 px, 5 ep": ("fm", 500, 28, 5, "simclr", MINI),
    "supervised, Fashion-MNIST 5,000 at 28 px, 5 ep": ("fm", 500, 28, 5, "supervised", MINI),
    "no learning: Fashion-MNIST 5,000 at 28 px": ("fm", 500, 28, 0, "none", MINI),
}
VALIDATION_PER_CLASS = 300


def synthetic_split(split_seed: int, per_class: int, size: int, long_tailed: bool) -> ImageData:
    arrays = generate_split(SyntheticSpec(seed=0, image_size=size, noise=0.05, per_class={10: (per_class, 1)}), 10,
                            per_class, split_seed)
    classes = sorted(set(arrays["fine_label"].tolist()))
    labels = torch.as_tensor([classes.index(int(f)) for f in arrays["fine_label"]])
    keep = long_tailed_positions(labels.numpy(), 100.0) if long_tailed else np.arange(len(labels))
    images = torch.from_numpy(arrays["images"]).permute(0, 3, 1, 2).contiguous()
    return ImageData(images[keep], labels[keep], class_names(10), torch.from_numpy(keep.astype(np.int64)))


def fashion_split(data_root: str, start: int, stop: int, size: int, long_tailed: bool) -> ImageData:
    from isogclr.data.fashion_mnist import load_fashion_mnist

    full = load_fashion_mnist(Path(data_root), "train")
    labels = full.labels.numpy()
    keep = np.sort(np.concatenate([np.flatnonzero(labels == c)[start:stop] for c in range(10)]))
    images = F.interpolate(full.images[keep].float(), size=(size, size), mode="bicubic", align_corners=False)
    images = images.clamp(0, 255).round().to(torch.uint8).expand(-1, 3, -1, -1).contiguous()
    data = ImageData(images, full.labels[keep], full.class_names, torch.from_numpy(keep.astype(np.int64)))
    return data.subset(long_tailed_positions(data.labels.numpy(), 100.0)) if long_tailed else data


def run_setting(params: dict, name: str) -> dict:
    dataset, per_class, size, epochs, method, model = SETTINGS[name]
    long_tailed = dataset.endswith("_lt")
    if dataset.startswith("fm"):
        train = fashion_split(params["data"]["root"], 0, per_class, size, long_tailed)
        val = fashion_split(params["data"]["root"], per_class, per_class + VALIDATION_PER_CLASS, size, False)
    else:
        train = synthetic_split(1, per_class, size, long_tailed)
        val = synthetic_split(3, VALIDATION_PER_CLASS, size, False)
    params = copy.deepcopy(params)
    params["model"]["encoder"].update(arch=model["arch"], width=model["width"])
    params["augment"]["jitter_strength"] = model["jitter"]
    params["train"]["optimizer"].update(warmup_epochs=model["warmup"][0], warmup_iters=model["warmup"][1])
    cfg = run_config(params, "supervised" if method == "supervised" else "simclr",
                     "synth10_lt" if long_tailed else "synth10", 0)
    row = {"setting": name, "method": method, "train_images": len(train), "image_size": size, "epochs": epochs,
           "arch": model["arch"], "width": model["width"], "jitter": model["jitter"],
           "warmup": f"{model['warmup'][0]} epochs" if model["warmup"][0] else f"{model['warmup'][1]} steps"}
    device = torch.device("cpu")
    if method == "none":
        row["raw_pixels_top1"] = round(raw_pixel_probe(train, val, cfg), 2)
        for seed in (0, 1):
            torch.manual_seed(seed)
            scores = evaluate_encoder(ContrastiveModel(cfg.encoder, cfg.head), train, val, cfg, device)
            row[f"random_init_s{seed}_top1"] = round(scores["top1"], 2)
        return row
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, epochs=epochs, eval_every=0))
    task = UnimodalTask(cfg, distributed.setup(device), train, val, train, False)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        fit(task, total_steps=task.steps_per_epoch * epochs,
            warmup_steps=cfg.optimizer.warmup_steps(task.steps_per_epoch),
            final_lr_fraction=cfg.optimizer.final_lr_fraction, ckpt_path=Path(tmp) / "checkpoint.pt",
            curves_dir=None, barrier=lambda: None, is_main=True)
    row["steps"] = task.steps_per_epoch * epochs
    row["train_s"] = round(time.perf_counter() - start, 1)
    metrics = evaluate_encoder(task.model, train, val, cfg, device)
    row.update(val_top1=round(metrics["top1"], 2), val_knn1=round(metrics["knn1_top1"], 2))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SETTINGS), help="settings to run (default: all)")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", default="reports/benchmarks")
    args = parser.parse_args()
    torch.set_num_threads(1)
    params = load_params(args.params)
    out = Path(args.out) / "calibration.csv"
    fields = ["setting", "method", "train_images", "image_size", "epochs", "arch", "width", "jitter", "warmup", "steps",
              "train_s", "val_top1", "val_knn1", "raw_pixels_top1", "random_init_s0_top1", "random_init_s1_top1"]
    for name in args.only or SETTINGS:
        row = run_setting(params, name)
        print(row, flush=True)
        new = not out.exists()
        with out.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            if new:
                writer.writeheader()
            writer.writerow(row)


if __name__ == "__main__":
    main()
