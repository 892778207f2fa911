"""A stage's code, derived from the imports: :func:`module_closure` is the transitive closure of the ``isogclr``
modules that its entry modules import, read from the source with :mod:`ast` (every ``import`` statement at any
depth, not those under ``if TYPE_CHECKING:``; a package's ``__init__.py`` whenever one of its modules is imported);
:func:`run_modules` adds what a run imports through a registry (its losses, its datasets' loaders and stream
loaders: ``Registry.module_of``). :mod:`isogclr.pipeline` writes them as each stage's ``deps``.

This is the one place that reads our source: what a stage's code is, for the build, not what a name means
(names are registered in explicit tables, :mod:`isogclr.registry`). It reads the report scripts
(``notebooks/src``) as well as the package, which an import-graph library of packages cannot; on the package,
``tests/test_pipeline_generated.py`` checks every module's closure against grimp's graph.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "isogclr"
SRC = Path("src")



def _module_file(module: str, root: Path) -> Path | None:
    """The source file of ``module`` (``a.b`` -> src/a/b.py or src/a/b/__init__.py), if it is ours."""
    base = root / SRC / Path(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations, never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def module_imports(path: Path, module: str) -> set[str]:
    """Every ``isogclr`` module that ``path`` (module ``module``) imports, anywhere in its body, except in an
    ``if TYPE_CHECKING:`` block (an import for annotations, which never runs)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            # `from .pkg import name`: name may be a submodule
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def module_closure(entries: tuple[str, ...] | list[str], root: Path = Path(".")) -> list[str]:
    """The source files (relative to ``root``) of ``entries`` and of every ``isogclr`` module they import.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so those are included.
    """
    root = Path(root)
    todo, seen, files = list(entries), set(), set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the parent packages
        path = _module_file(module, root)
        if path is None:  # an attribute imported with `from pkg import name`, not a module
            continue
        files.add(path.relative_to(root).as_posix())
        todo += sorted(module_imports(path, module) - seen)
    return sorted(files)


def run_modules(params: dict[str, Any], methods: list[str] | tuple[str, ...],
                datasets: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The modules that runs of ``methods`` on ``datasets`` import by name: each method's loss
    (``methods.<m>.loss``: :data:`isogclr.losses.LOSSES`), each dataset's loader (:data:`isogclr.data.DATASETS`)
    and, for a dataset that can stream, its stream loader's (:data:`isogclr.data.STREAMS`, which ``train/loop.py``
    reads for a run with ``train.stream``). The registries import them when a run uses them, which
    :func:`module_imports` cannot see; these are what a stage adds to its entry modules.

    Validation of the whole params.yaml (every command's first step) also builds each method's loss once to
    check its arguments; that can refuse a run but not change its numbers, so it adds no dependency."""
    from .data.base import DATASETS, STREAMS
    from .losses.registry import LOSSES

    losses = {((params.get("methods") or {}).get(m) or {}).get("loss", m) for m in methods}
    streams = {STREAMS.module_of(d) for d in datasets if d in STREAMS}
    return sorted({LOSSES.module_of(loss) for loss in losses} | {DATASETS.module_of(d) for d in datasets} | streams)


def notebook_modules(name: str, root: Path = Path(".")) -> list[str]:
    """The ``isogclr`` modules that the report source ``notebooks/src/<name>.py`` imports."""
    path = Path(root) / "notebooks" / "src" / f"{name}.py"
    found = module_imports(path, "__notebook__")
    return sorted(m for m in found if _module_file(m, Path(root)) or "." not in m)


def by_method(params: dict[str, Any], methods: list[str] | tuple[str, ...],
              closure_of: Callable[[list[str]], list[str]]) -> tuple[list[str], dict[str, str]] | None:
    """A stage family's code split by method: ``(shared, own)``, where ``own[m]`` is the source file of method
    ``m``'s loss (``methods.<m>.loss``) and ``shared`` every other file of the methods' closures
    (``closure_of([m])``), so that a run of ``m`` depends on ``shared + [own[m]]``: an edit of one method's loss
    module leaves the other methods' runs up to date. The helpers of several losses (``losses/gram.py``, ...) are
    shared. None when a method's loss module is in another method's closure (``isogclr_bimodal`` builds on
    ``sogclr_bimodal``): such a family keeps one list, the union of its methods' closures."""
    from .losses.registry import LOSSES

    own = {m: f"{SRC.as_posix()}/{LOSSES.module_of(((params.get('methods') or {}).get(m) or {}).get('loss', m))}"
              .replace(".", "/") + ".py" for m in methods}
    closures = {m: set(closure_of([m])) for m in methods}
    if any(own[m] in closures[other] for m in methods for other in methods if own[other] != own[m]):
        return None
    shared = set().union(*closures.values()) - set(own.values())
    return sorted(shared), own
