"""The package's layers import only downward, read from the import graph the pipeline derives its code
dependencies from (isogclr.code_deps.import_graph)."""

from __future__ import annotations

import pytest

from isogclr.code_deps import import_graph

from .conftest import ROOT

SRC = ROOT / "src"
# rank of each top-level part of the package: a module may import its own part and lower ranks only
RANKS = {"import_table": 0, "io": 0, "dataset_specs": 0.5, "machine": 0.5, "epoch_times": 1, "losses": 1, "data": 1,
         "models": 1, "eval": 2, "config": 3, "train": 4, "analysis": 4, "code_deps": 4.5, "reports": 4.5,
         "pipeline_stages": 4.8, "pipeline": 5, "locks": 5.5, "repro": 6, "commands": 6.5, "cli": 7, "__main__": 8}


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


GRAPH = import_graph(ROOT)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("isogclr.")))
def test_imports_only_downward(module):
    part = _part(module)
    for target in GRAPH[module]:
        other = _part(target)
        if not target.startswith("isogclr") or other in ("__init__", part):
            continue
        assert RANKS[other] < RANKS[part], f"{module} (layer {part}) imports {target} (layer {other})"


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks" / "src").glob("*.py")), ids=lambda p: p.stem)
def test_reports_only_read_runs(notebook):
    """A report notebook never trains: it imports nothing from isogclr.train."""
    imported = GRAPH[f"src.{notebook.stem}"]
    assert not [m for m in imported if m.startswith("isogclr.train")], imported
