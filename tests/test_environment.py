"""environment.yml (conda) and the venv of `make setup` install from one list of pins and one Python version."""

from __future__ import annotations

import re

import yaml

from .conftest import ROOT


def test_conda_environment_reads_the_venvs_pins_and_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    makefile = (ROOT / "Makefile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    python = re.search(r"^PYTHON \?= python(\d+\.\d+)$", makefile, re.M).group(1)
    assert f'requires-python = ">={python},' in pyproject
    deps = env["dependencies"]
    assert f"python={python}" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    # the same constraints file and the same extras as the Makefile's install line
    assert pip == ["-c requirements/constraints.txt", "-e .[dev]"]
    assert "-c requirements/constraints.txt -e '.[dev]'" in makefile
    assert (ROOT / "requirements" / "constraints.txt").is_file()
    pins = dict(line.split("==") for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name, version in re.findall(r'"(torch|torchvision)==([^"]+)"', pyproject):
        assert pins[name] == version  # pyproject's hard pins are the constraints' versions


def test_the_readme_names_it_for_conda_users():
    assert "conda env create -f environment.yml" in (ROOT / "README.md").read_text()
