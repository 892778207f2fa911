"""A stage's code, derived from the imports: :func:`module_closure` is the transitive closure of the ``isogclr``
modules that its entry modules import, from the import graph that grimp (import-linter's graph of a package) builds:
every ``import`` statement at any depth, including those inside functions, but not those under ``if TYPE_CHECKING:``,
which never run; a package's ``__init__.py`` whenever one of its modules is imported. :func:`run_modules` adds what a
run imports through a registry (its losses, its datasets' loaders and stream loaders: ``Registry.module_of``), and
:func:`notebook_modules` what a report script of ``notebooks/src`` imports (the scripts are read as the namespace
package ``src`` of ``notebooks/``). :mod:`isogclr.pipeline` writes them as each stage's ``deps``.

The graph is built in a process of its own, with ``<root>/src`` and ``<root>/notebooks`` as its only source folders:
the package this process imported is the installed one, and a copy of the repository (the tests', a walk-through's)
has its own code.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "isogclr"
SRC = Path("src")
REPORT_SCRIPTS = "src"  # notebooks/src, a namespace package when notebooks/ is on the path

_GRAPH = """
import json, sys, grimp
packages = [p for p in sys.argv[1:]]
graph = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
print(json.dumps({m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}))
"""


@functools.lru_cache(maxsize=8)
def import_graph(root: Path) -> dict[str, list[str]]:
    """``{module: the modules it imports}`` for the package under ``root/src`` and the report scripts under
    ``root/notebooks/src`` (named ``src.<script>``), imports under ``if TYPE_CHECKING:`` left out."""
    root = Path(root).resolve()
    packages = [PACKAGE] + ([REPORT_SCRIPTS] if (root / "notebooks" / REPORT_SCRIPTS).is_dir() else [])
    env = {"PYTHONPATH": f"{root / SRC}:{root / 'notebooks'}", "PATH": "", "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as cwd:  # not the root: its src/ would join the scripts' namespace
        out = subprocess.run([sys.executable, "-c", _GRAPH, *packages], cwd=cwd, env=env, capture_output=True,
                             text=True)
    if out.returncode:
        raise RuntimeError(f"the import graph of {root / SRC} could not be built:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def _source(module: str, root: Path) -> str:
    """The source file of ``module`` (``a.b`` -> src/a/b.py or src/a/b/__init__.py), relative to ``root``."""
    base = Path(root) / SRC / Path(*module.split("."))
    return (base / "__init__.py" if base.is_dir() else base.with_suffix(".py")).relative_to(root).as_posix()


def module_closure(entries: tuple[str, ...] | list[str], root: Path = Path(".")) -> list[str]:
    """The source files (relative to ``root``) of ``entries`` and of every ``isogclr`` module they import.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so those are included.
    """
    graph = import_graph(Path(root))
    todo, seen = list(entries), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the parent packages
        todo += [m for m in graph.get(module, ()) if m.partition(".")[0] == PACKAGE]
    unknown = sorted(m for m in seen if m not in graph)
    if unknown:
        raise KeyError(f"not modules of {Path(root) / SRC / PACKAGE}: {unknown}")
    return sorted(_source(m, Path(root)) for m in seen)


def run_modules(params: dict[str, Any], methods: list[str] | tuple[str, ...],
                datasets: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The modules that runs of ``methods`` on ``datasets`` import by name: each method's loss
    (``methods.<m>.loss``: :data:`isogclr.losses.LOSSES`), each dataset's loader (:data:`isogclr.data.DATASETS`)
    and, for a dataset that can stream, its stream loader's (:data:`isogclr.data.STREAMS`, which ``train/loop.py``
    reads for a run with ``train.stream``). The registries import them when a run uses them, which no import
    statement says; these are what a stage adds to its entry modules.

    Validation of the whole params.yaml (every command's first step) also builds each method's loss once to
    check its arguments; that can refuse a run but not change its numbers, so it adds no dependency."""
    from .data.base import DATASETS, STREAMS
    from .losses.loss_table import LOSSES

    losses = {((params.get("methods") or {}).get(m) or {}).get("loss", m) for m in methods}
    streams = {STREAMS.module_of(d) for d in datasets if d in STREAMS}
    return sorted({LOSSES.module_of(loss) for loss in losses} | {DATASETS.module_of(d) for d in datasets} | streams)


def notebook_modules(name: str, root: Path = Path(".")) -> list[str]:
    """The ``isogclr`` modules that the report script ``notebooks/src/<name>.py`` imports."""
    imported = import_graph(Path(root)).get(f"{REPORT_SCRIPTS}.{name}")
    if imported is None:
        raise KeyError(f"no report script {Path(root) / 'notebooks' / REPORT_SCRIPTS / name}.py")
    return sorted(m for m in imported if m.partition(".")[0] == PACKAGE)


def by_method(params: dict[str, Any], methods: list[str] | tuple[str, ...],
              closure_of: Callable[[list[str]], list[str]]) -> tuple[list[str], dict[str, str]] | None:
    """A stage family's code split by method: ``(shared, own)``, where ``own[m]`` is the source file of method
    ``m``'s loss (``methods.<m>.loss``) and ``shared`` every other file of the methods' closures
    (``closure_of([m])``), so that a run of ``m`` depends on ``shared + [own[m]]``: an edit of one method's loss
    module leaves the other methods' runs up to date. The helpers of several losses (``losses/gram.py``, ...) are
    shared. None when a method's loss module is in another method's closure (``isogclr_bimodal`` builds on
    ``sogclr_bimodal``): such a family keeps one list, the union of its methods' closures."""
    from .losses.loss_table import LOSSES

    own = {m: f"{SRC.as_posix()}/{LOSSES.module_of(((params.get('methods') or {}).get(m) or {}).get('loss', m))}"
              .replace(".", "/") + ".py" for m in methods}
    closures = {m: set(closure_of([m])) for m in methods}
    if any(own[m] in closures[other] for m in methods for other in methods if own[other] != own[m]):
        return None
    shared = set().union(*closures.values()) - set(own.values())
    return sorted(shared), own
