"""The dataset registries name each dataset's loader and import its module only when the dataset is loaded."""

from __future__ import annotations

import pytest

from isogclr.data import DATASETS, STREAMS, load_dataset

from .conftest import printed_by


def test_importing_the_package_imports_no_dataset_and_loading_one_imports_its_module():
    code = ("import sys; import isogclr.data as D\n"
            "print(sorted(m for m in sys.modules if m.startswith('isogclr.data.')))\n"
            "D.DATASETS['synth10_lt']\n"
            "print(sorted(m for m in sys.modules if m.startswith('isogclr.data.')))")
    out = printed_by(code).split("\n")
    assert out[0] == str(["isogclr.data.base"])
    assert {"isogclr.data.synthetic"} <= set(eval(out[1])) and "isogclr.data.cifar" not in out[1]


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_row_names_the_loader_of_its_module(name):
    loader = DATASETS[name]
    assert callable(loader) and loader.__module__ == DATASETS.module_of(name)
    assert loader.__name__ == DATASETS.target(name).partition(":")[2]


def test_an_unknown_dataset_names_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown dataset 'nope'; known: \[.*'synth10_lt'"):
        load_dataset("nope", "data", "train")
    with pytest.raises(KeyError, match=r"unknown dataset 'nope'"):
        DATASETS.module_of("nope")
    assert "nope" not in DATASETS and "synth10" in DATASETS


def test_streams_are_datasets_with_a_stream_loader():
    assert set(STREAMS) <= set(DATASETS) and set(STREAMS) == {"imagenet100", "inaturalist"}
    with pytest.raises(KeyError, match=r"unknown stream 'synth10'; known: \['imagenet100', 'inaturalist'\]"):
        STREAMS.module_of("synth10")
