"""The package's layers import only downward, read from the code's own import statements."""

from __future__ import annotations

import pytest

from isogclr.code_deps import module_imports

from .conftest import ROOT

SRC = ROOT / "src"
# rank of each top-level part of the package: a module may import its own part and lower ranks only
RANKS = {"registry": 0, "io": 0, "dataset_specs": 0.5, "timing": 1, "losses": 1, "data": 1, "models": 1, "eval": 2,
         "config": 3, "train": 4, "analysis": 4, "code_deps": 4.5, "reports": 4.5, "pipeline_stages": 4.8,
         "pipeline": 5, "locks": 5.5, "repro": 6, "commands": 6.5, "cli": 7, "__main__": 8}


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def _modules():
    for path in sorted((SRC / "isogclr").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module != "isogclr":
            yield pytest.param(path, module, id=module)


@pytest.mark.parametrize(("path", "module"), list(_modules()))
def test_imports_only_downward(path, module):
    part = _part(module)
    for target in module_imports(path, module):
        base = SRC.joinpath(*target.split("."))
        if not (base.with_suffix(".py").is_file() or base.is_dir()):
            continue  # an attribute (`from . import __version__`), not a module
        other = _part(target)
        if other in ("__init__", part):
            continue
        assert RANKS[other] < RANKS[part], f"{module} (layer {part}) imports {target} (layer {other})"


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_reports_only_read_runs(notebook):
    """A report notebook never trains: it imports nothing from isogclr.train."""
    imported = module_imports(notebook, "__notebook__")
    assert not [m for m in imported if m.startswith("isogclr.train")], imported
