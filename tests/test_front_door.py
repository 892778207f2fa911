"""What README.md and docs/*.md show a reader does what they say: the loss classes import from ``isogclr.losses``
(lazily, so that a run's pipeline stage still depends on its own loss module only), and every Python block runs."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import isogclr.losses
from isogclr.code_deps import import_graph
from isogclr.losses import LOSSES, build_loss

from .conftest import ROOT, printed_by
from .test_docs_extending import steps

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\n(?P<body>.*?)^```$", re.S | re.M)
PYTHON = {"python", "py", "python3"}
LOSS_MODULES = {LOSSES.module_of(name) for name in LOSSES}


def test_the_readme_names_are_the_classes_the_registry_builds():
    from isogclr.losses import ISogCLRLoss, SimCLRLoss, SogCLRLoss

    assert (SimCLRLoss, SogCLRLoss, ISogCLRLoss) == (LOSSES["simclr"], LOSSES["sogclr"], LOSSES["isogclr"])
    assert type(build_loss("isogclr", 10)) is ISogCLRLoss and ISogCLRLoss.__module__ == "isogclr.losses.isogclr"


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_registered_loss_class_is_exported(name):
    cls = LOSSES[name]
    assert getattr(isogclr.losses, cls.__name__) is cls
    assert cls.__name__ in isogclr.losses.__all__ and cls.__name__ in dir(isogclr.losses)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match=r"module 'isogclr.losses' has no attribute 'NoSuchLoss'"):
        isogclr.losses.NoSuchLoss  # noqa: B018
    with pytest.raises(ImportError, match="NoSuchLoss"):
        from isogclr.losses import NoSuchLoss  # noqa: F401
    assert not hasattr(isogclr.losses, "simclr_loss")


def test_the_package_imports_a_loss_module_on_first_access_only():
    """Importing isogclr.losses, and listing it, loads no loss module; a class loads its own module and no other's
    (what keeps a run's code, and its stage's dependencies, its own loss's)."""
    code = ("import json, sys\n"
            f"losses = {sorted(LOSS_MODULES)!r}\n"
            "loaded = lambda: [m for m in losses if m in sys.modules]\n"
            "import isogclr.losses\nsteps = [loaded()]\n"
            "dir(isogclr.losses); 'SimCLRLoss' in isogclr.losses.__all__; steps.append(loaded())\n"
            "from isogclr.losses import SimCLRLoss\nsteps.append(loaded())\n"
            "print(json.dumps(steps))")
    assert json.loads(printed_by(code)) == [[], [], ["isogclr.losses.simclr"]]


def _type_checking_imports() -> set[tuple[str, str, str | None]]:
    """(module, name, alias) of each import under ``if TYPE_CHECKING:`` of isogclr/losses/__init__.py."""
    tree = ast.parse((ROOT / "src" / "isogclr" / "losses" / "__init__.py").read_text())
    blocks = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    assert len(blocks) == 1, "isogclr/losses/__init__.py: one `if TYPE_CHECKING:` block"
    return {(f"isogclr.losses.{node.module}", alias.name, alias.asname)
            for node in blocks[0].body if isinstance(node, ast.ImportFrom) for alias in node.names}


def test_the_type_checking_imports_are_the_registry_tables():
    """IDEs and type checkers see the classes from the TYPE_CHECKING block: one re-export (``X as X``) per line of
    the tables, none stale."""
    targets = [target.partition(":") for target in LOSSES.targets.values()]
    assert _type_checking_imports() == {(module, cls, cls) for module, _, cls in targets}


def test_type_checking_imports_are_no_dependencies():
    """The import graph the pipeline derives stage dependencies from leaves the TYPE_CHECKING block out: the package
    imports no loss module (the committed pipeline's byte-identity is tests/test_pipeline_generated.py's check)."""
    assert not set(import_graph(ROOT)["isogclr.losses"]) & LOSS_MODULES


def python_blocks() -> list[tuple[Path, int, str, bool]]:
    """(page, line, body, run by the walk-through) of each ```python block of README.md and docs/*.md."""
    out = []
    for page in PAGES:
        text = page.read_text()
        tutorial = {body for _, _, body in steps(text)} if page.name == "extending.md" else set()
        out += [(page, text.count("\n", 0, m.start()) + 1, m["body"], m["body"] in tutorial)
                for m in FENCE.finditer(text) if m["lang"] in PYTHON]
    return out


def run_block(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter at the repository root, on CPU and offline, as a reader would run it."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


BLOCKS = python_blocks()


def test_the_blocks_are_found():
    pages = {page.name for page, *_ in BLOCKS}
    assert {"README.md", "conventions.md", "extending.md"} <= pages and len(BLOCKS) >= 10


@pytest.mark.parametrize(("page", "line", "body", "tutorial"), BLOCKS,
                         ids=[f"{page.name}:{line}" for page, line, *_ in BLOCKS])
def test_every_python_block_runs(page, line, body, tutorial):
    """A block runs as written; the walk-through's blocks of docs/extending.md (new files and lines inserted into
    the package, in order) are run by tests/test_docs_extending.py, in a copy of the repository."""
    if tutorial:
        pytest.skip("a step of the walk-through: tests/test_docs_extending.py runs it in a copy of the repository")
    done = run_block(body)
    assert done.returncode == 0, f"{page.name}:{line}: the block fails as written\n{done.stderr[-3000:]}"


def test_the_readme_library_block_does_what_its_comments_say():
    """The batch's temperatures moved and no other sample's, the features got a gradient, and tau has one entry
    per sample."""
    (body,) = [body for page, _, body, _ in BLOCKS if page.name == "README.md"]
    done = run_block(body + "\nimport json\nprint(json.dumps({'moved': (loss_fn.tau != 0.7).nonzero().flatten()"
                            ".tolist(), 'grad': float(views.grad.abs().sum()), 'n': len(loss_fn.tau)}))\n")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "torch.Size([1000])"
    checks = json.loads(lines[-1])
    assert checks["moved"] == list(range(8)) and checks["grad"] > 0 and checks["n"] == 1000
