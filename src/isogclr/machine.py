"""The machine on record: what made a run, as far as it can move the run's numbers.

Training is not bitwise reproducible across CPU types: ATen picks its AVX-512, AVX2 or default kernels by CPU
(``ATEN_CPU_CAPABILITY`` forces a lower one), oneDNN and MKL dispatch by CPU too, and OpenBLAS (numpy's BLAS)
picks its kernel by CPU model (``OPENBLAS_CORETYPE`` forces one). A rerun on another machine type is a new draw of
training noise, so every run writes :func:`describe` as ``artifacts/machine.json`` beside its ``config.json`` (the
machine that wrote its outputs: a run resumed elsewhere records the last), and a repro that ran every stage writes
it beside its stage record (``reports/repro_machine.json``).

:func:`describe` is deterministic for one machine and software stack (no clock, no host name, no load), so a rerun
on the same machine type writes the same bytes. :func:`cpu_flags` reads the CPU's flags; :func:`isa_level` and
:func:`openblas_coretypes` turn flags into the ISA level and into the OpenBLAS kernels this CPU can run (a kernel
built for instructions it lacks dies with SIGILL).
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

from .io import save_json

FILENAME = "machine.json"
CPUINFO = Path("/proc/cpuinfo")
# OpenBLAS core types (``OPENBLAS_CORETYPE``), widest first, and the CPU flags (as /proc/cpuinfo spells them: SSE3
# is ``pni``) their kernels execute
OPENBLAS_KERNELS: dict[str, frozenset[str]] = {
    "SkylakeX": frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma"}),
    "Zen": frozenset({"avx2", "fma"}),
    "Haswell": frozenset({"avx2", "fma"}),
    "Sandybridge": frozenset({"avx"}),
    "Nehalem": frozenset({"sse4_2", "sse4_1", "ssse3"}),
    "Prescott": frozenset({"pni"}),
}


def _cpuinfo(path: Path = CPUINFO) -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (empty where there is no such file)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags(path: Path = CPUINFO) -> frozenset[str] | None:
    """The CPU's flags from ``/proc/cpuinfo`` (``flags``; ``Features`` on ARM), ``None`` where it cannot be read."""
    info = _cpuinfo(path)
    line = info.get("flags", info.get("Features"))
    return None if line is None else frozenset(line.split())


def isa_level(flags: frozenset[str] | set[str] | None) -> str:
    """The widest x86 vector ISA of ``flags``: ``avx512`` (avx512f), ``avx2``, ``avx`` or ``default``;
    ``unknown`` without flags."""
    if flags is None:
        return "unknown"
    return next((level for flag, level in (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx")) if flag in flags),
                "default")


ATEN_LEVELS = ("default", "avx2", "avx512")  # ATEN_CPU_CAPABILITY values on x86, narrowest first


def runs_aten_capability(capability: str, flags: frozenset[str] | set[str] | None) -> bool:
    """Whether a CPU with ``flags`` can run ATen's ``capability`` kernels (``ATEN_CPU_CAPABILITY``): ``default``
    everywhere, ``avx2`` and ``avx512`` only where :func:`isa_level` reaches them;
    unknown flags run ``default`` only."""
    level = isa_level(flags)
    if capability not in ATEN_LEVELS:
        raise ValueError(f"ATEN_CPU_CAPABILITY: one of {ATEN_LEVELS}, got {capability!r}")
    have = ATEN_LEVELS.index(level) if level in ATEN_LEVELS else 0
    return ATEN_LEVELS.index(capability) <= have


def openblas_coretypes(flags: frozenset[str] | set[str]) -> list[str]:
    """The OpenBLAS core types a CPU with ``flags`` can run (:data:`OPENBLAS_KERNELS`), widest first."""
    return [name for name, needs in OPENBLAS_KERNELS.items() if needs <= set(flags)]


def numpy_blas() -> dict[str, Any]:
    """numpy's BLAS as threadpoolctl (a dependency of scikit-learn) sees it: library, version and the kernel (core
    type) it picked. Only numpy's copy (a path through ``numpy*``), whatever else the process has loaded (scipy's),
    so the record does not depend on imports; the one BLAS loaded where numpy links a shared one."""
    import numpy  # noqa: F401 (loads numpy's BLAS)
    from threadpoolctl import threadpool_info
    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    mine = [lib for lib in blas if any(part.startswith("numpy") for part in Path(lib["filepath"]).parts[-3:])]
    lib = (mine or blas or [None])[0]
    return {} if lib is None else {"blas": lib.get("internal_api"), "blas_version": lib.get("version"),
                                   "blas_coretype": lib.get("architecture")}


def _torch_build() -> dict[str, str]:
    """The versions of the CPU libraries torch was built with, from ``torch.__config__.show()``: oneDNN
    (``MKL-DNN vX``) and MKL (torch's BLAS on x86), where it names them."""
    import torch
    text = torch.__config__.show()
    found = {key: re.search(pattern, text) for key, pattern in
             (("onednn_version", r"MKL-DNN v([\w.]+)"), ("mkl_version", r"Math Kernel Library Version ([\w.]+)"),
              ("torch_blas", r"BLAS_INFO=(\w+)"))}
    return {key: match.group(1) for key, match in found.items() if match}


def describe() -> dict[str, Any]:
    """This machine as a run records it: CPU model and ISA level, the ATen kernels torch actually uses
    (``torch.backends.cpu.get_cpu_capability()``, which honours ``ATEN_CPU_CAPABILITY``), torch's threads and build
    libraries, numpy and its BLAS (version, core type: honours ``OPENBLAS_CORETYPE``), and the CUDA device if any."""
    import numpy
    import torch
    info = _cpuinfo()
    flags = cpu_flags()
    return {
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "machine": platform.machine(),
        "isa": isa_level(flags),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        **_torch_build(),
        "torch_threads": torch.get_num_threads(),
        "numpy": numpy.__version__,
        **numpy_blas(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def record(folder: Path | str, name: str = FILENAME) -> Path:
    """Write :func:`describe` to ``folder/name`` (atomically) and return its path: ``machine.json`` beside a run's
    ``config.json``, ``repro_machine.json`` beside a repro's stage record."""
    path = Path(folder) / name
    save_json(describe(), path)
    return path
