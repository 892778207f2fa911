"""The generated datasets: deterministic, the hierarchy and counts they claim, the long-tailed profile."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from isogclr.data import load_dataset, long_tailed_order, long_tailed_positions
from isogclr.data.synthetic import (
    FINE_PER_SUPERCLASS,
    SyntheticSpec,
    class_folders,
    fine_classes,
    generate_split,
    write_synthetic,
)


def _digest(folder) -> str:
    """sha256 over every file's relative path and bytes."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    spec = SyntheticSpec(seed=3, image_size=12, per_class={10: (3, 1)})
    digests = []
    for folder, s in (("a", spec), ("b", spec), ("c", SyntheticSpec(seed=4, image_size=12, per_class={10: (3, 1)}))):
        write_synthetic(s, tmp_path / folder)
        digests.append(_digest(tmp_path / folder))
    assert digests[0] == digests[1] != digests[2]


def test_written_as_an_image_folder_read_back_exactly(tmp_path):
    """The files are the layout the ImageNet loader reads; loading gives the generator's pixels and attributes."""
    spec = SyntheticSpec(seed=1, image_size=12, per_class={10: (4, 2)})
    counts = write_synthetic(spec, tmp_path / "synthetic")
    assert counts == {"c10/train": 40, "c10/test": 20}
    train_dir = tmp_path / "synthetic" / "c10" / "train"
    assert sorted(p.name for p in train_dir.iterdir()) == sorted(class_folders(10))
    assert len(list(train_dir.rglob("*.png"))) == 40
    reference = generate_split(spec, 10, 4, split_seed=1)
    train = load_dataset("synth10", tmp_path, "train")
    assert np.array_equal(train.images.numpy().transpose(0, 2, 3, 1), reference["images"])
    assert np.array_equal(np.asarray(fine_classes(10))[train.labels.numpy()], reference["fine_label"])
    assert np.array_equal(train.extra["hue"], reference["hue"])  # attributes survive the CSV exactly
    assert torch.equal(train.source_index, torch.arange(40))
    # an image deleted behind the loader's back is reported, not silently dropped
    next(train_dir.rglob("*.png")).unlink()
    with pytest.raises(ValueError, match="do not match"):
        load_dataset("synth10", tmp_path, "train")


def test_counts_and_hierarchy(smoke_data, smoke_params):
    per_class = smoke_params["data"]["synthetic"]["per_class"]
    for classes in (10, 100):
        train, test = (load_dataset(f"synth{classes}", smoke_data, split) for split in ("train", "test"))
        assert train.num_classes == classes and len(train.class_names) == classes
        assert np.bincount(train.labels.numpy(), minlength=classes).tolist() == [per_class[classes][0]] * classes
        assert np.bincount(test.labels.numpy(), minlength=classes).tolist() == [per_class[classes][1]] * classes
        assert train.images.dtype == torch.uint8 and train.images.shape[1:] == (3, 16, 16)
    train = load_dataset("synth100", smoke_data, "train")
    # fine class c belongs to superclass c // 5: 20 superclasses of 5 fine classes
    assert torch.equal(train.superclass, train.labels // FINE_PER_SUPERCLASS)
    assert len(set(train.superclass.tolist())) == 20


def test_attributes_are_the_rendered_ones():
    spec = SyntheticSpec(image_size=32)
    split = generate_split(spec, 100, 20, split_seed=1)
    # a dark background has low mean brightness in the image corners, a light one high
    corners = split["images"][:, :3, :3].reshape(len(split["images"]), -1).mean(1)
    dark = split["bg"] < 0.5
    assert corners[dark].mean() < 90 < corners[~dark].mean()
    assert set(np.unique(split["style"])) == {0, 1, 2, 3}


@pytest.mark.parametrize(("n_max", "classes", "expected"), [(5000, 10, 12406), (500, 100, 10847)])
def test_long_tailed_profile_matches_cifar_lt(n_max, classes, expected):
    labels = np.repeat(np.arange(classes), n_max)
    positions = long_tailed_positions(labels, 100.0)
    counts = np.bincount(labels[positions])
    assert len(positions) == expected
    assert counts[0] == n_max and counts[-1] == n_max // 100
    assert np.all(np.diff(counts) <= 0)


def test_long_tailed_split_keeps_a_stable_index_mapping(smoke_data):
    full = load_dataset("synth10", smoke_data, "train")
    lt = load_dataset("synth10_lt", smoke_data, "train")
    assert len(lt) < len(full)
    assert torch.equal(full.images[lt.source_index], lt.images)
    assert torch.equal(full.labels[lt.source_index], lt.labels)
    assert len(load_dataset("synth10_lt", smoke_data, "test")) == len(load_dataset("synth10", smoke_data, "test"))


def test_a_class_order_ranks_the_classes_from_head_to_tail():
    labels = np.repeat(np.arange(4), 100)
    order = [2, 0, 3, 1]
    counts = np.bincount(labels[long_tailed_positions(labels, 10.0, order)], minlength=4)
    assert counts[order].tolist() == np.bincount(labels[long_tailed_positions(labels, 10.0)]).tolist()
    with pytest.raises(ValueError, match="each class"):
        long_tailed_positions(labels, 10.0, [0, 1, 2, 2])
    with pytest.raises(ValueError, match="each class"):
        long_tailed_positions(labels, 10.0, [2, 0, 3])
    few = labels[labels != 1]  # a split without class 1: its id in the order is skipped
    assert long_tailed_positions(few, 10.0, order).tolist() == long_tailed_positions(few, 10.0, [2, 0, 3]).tolist()


def test_the_class_order_by_seed_is_a_permutation_every_class_heads_and_tails():
    assert long_tailed_order(10, None).tolist() == list(range(10))
    orders = np.stack([long_tailed_order(10, seed) for seed in range(40)])
    assert all(sorted(o) == list(range(10)) for o in orders.tolist())
    assert np.array_equal(long_tailed_order(10, 3), long_tailed_order(10, 3))  # the runs of one seed share it
    assert set(orders[:, 0]) == set(range(10)) and set(orders[:, -1]) == set(range(10))


def test_a_long_tailed_set_by_seed_keeps_the_frequent_class_of_its_seed(smoke_data):
    fixed = load_dataset("synth10_lt", smoke_data, "train")
    assert np.argmax(np.bincount(fixed.labels.numpy())) == 0  # id order: class 0 is the head (Cao et al.)
    for seed in (1, 2):
        lt = load_dataset("synth10_lt", smoke_data, "train", order_seed=seed)
        counts = np.bincount(lt.labels.numpy(), minlength=10)
        order = long_tailed_order(10, seed)
        assert counts[order].tolist() == np.bincount(fixed.labels.numpy(), minlength=10).tolist()
        full = load_dataset("synth10", smoke_data, "train")
        assert torch.equal(full.images[lt.source_index], lt.images)


def test_a_set_without_a_validation_count_says_how_to_generate_its_validation_split(smoke_data):
    with pytest.raises(FileNotFoundError, match=r"data.synthetic.per_class.10 a third count, \[train, test, val\]"):
        load_dataset("synth10_lt", smoke_data, "val")
    with pytest.raises(ValueError, match=r"\[train, test\] or \[train, test, val\]"):
        SyntheticSpec(per_class={10: (5, 5, 5, 5)})


def test_missing_data_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="synthetic"):
        load_dataset("synth10", tmp_path, "train")
