"""The one registry kind (isogclr.import_table): every entry of every registry imports, and names are checked."""

from __future__ import annotations

import pytest

from isogclr.data.base import DATASETS, STREAMS
from isogclr.data.manifest import GENERATORS
from isogclr.import_table import Registry
from isogclr.losses.loss_table import LOSSES

from .conftest import printed_by

REGISTRIES = {"loss": LOSSES, "dataset": DATASETS, "stream": STREAMS}


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, reg in REGISTRIES.items() for n in reg])
def test_every_entry_imports(kind, name):
    """A wrong target (a typo in the module or the attribute) fails here, not in the middle of a run."""
    registry = REGISTRIES[kind]
    obj = registry[name]
    assert callable(obj) and obj.__module__ == registry.module_of(name)


@pytest.mark.parametrize("target", sorted(GENERATORS))
def test_every_generator_and_its_spec_reader_import(target):
    module = target.partition(":")[0]
    assert callable(Registry.load(target)) and callable(Registry.load(f"{module}:spec_from_dict"))


def test_names_and_targets_are_checked():
    reg = Registry("widget", {"a": "isogclr.io:save_json", "b": "isogclr.io:no_such_thing"})
    with pytest.raises(KeyError, match=r"unknown widget 'c'; known: \['a', 'b'\]"):
        reg["c"]
    with pytest.raises(ImportError, match=r"isogclr.io:no_such_thing: module isogclr.io has no attribute"):
        reg["b"]
    with pytest.raises(ValueError, match=r"widget registry: targets must read 'package.module:attribute', got "
                                         r"\{'x': 'isogclr.io.save_json'\}"):
        Registry("widget", {"x": "isogclr.io.save_json"})
    assert reg.module_of("a") == "isogclr.io" and "a" in reg and "c" not in reg and list(reg) == ["a", "b"]


def test_membership_and_module_of_import_nothing():
    code = ("import sys; from isogclr.losses import LOSSES\n"
            "'isogclr' in LOSSES; sorted(LOSSES); LOSSES.module_of('isogclr')\n"
            "print('isogclr.losses.isogclr' in sys.modules)")
    out = printed_by(code)
    assert out.strip() == "False"


def test_no_module_but_the_registry_imports_by_name():
    """importlib (import by a name computed at run time) is the registry's alone: everything else is a plain
    import statement that the pipeline's dependency reader (isogclr.code_deps) can follow."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "isogclr"
    users = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.py")
                   if "import_module(" in p.read_text() or "__import__(" in p.read_text())
    assert users == ["import_table.py"], users
