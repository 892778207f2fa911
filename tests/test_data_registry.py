"""The dataset registry names each dataset's module and imports it when the dataset is loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from isogclr.data import DATASETS, REGISTRY, dataset_module, register_dataset


def test_importing_the_package_imports_no_dataset_and_loading_one_imports_its_module():
    code = ("import sys; import isogclr.data as D\n"
            "print(sorted(m for m in sys.modules if m.startswith('isogclr.data.')))\n"
            "D.DATASETS['synth10_lt']\n"
            "print(sorted(m for m in sys.modules if m.startswith('isogclr.data.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == str(["isogclr.data.base"])
    assert {"isogclr.data.synthetic"} <= set(eval(out[1])) and "isogclr.data.cifar" not in out[1]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_row_is_the_module_that_registers_the_dataset(name):
    loader = DATASETS[name]
    assert callable(loader) and loader.__module__ == dataset_module(name) == REGISTRY[name]


def test_a_dataset_outside_the_table_or_in_another_module_is_refused():
    with pytest.raises(ValueError, match=r"dataset 'new_set' .* is not registered as such .*REGISTRY"):
        register_dataset("new_set")(lambda root, split: None)
    DATASETS["cifar10"]  # registered by isogclr.data.cifar
    with pytest.raises(ValueError, match=r"dataset name 'cifar10' is registered twice"):
        register_dataset("cifar10")(lambda root, split: None)
    with pytest.raises(KeyError, match="unknown dataset 'nope'"):
        dataset_module("nope")
    assert "new_set" not in DATASETS
