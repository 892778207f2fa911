"""The machine on record (isogclr.machine): its keys, that it follows the kernels actually used, and the flag rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from isogclr import machine

from .conftest import ROOT

KEYS = {"cpu", "machine", "isa", "aten_cpu_capability", "torch", "torch_threads", "numpy", "cuda_device"}
AVX512 = {"pni", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq",
          "avx512vl"}
AVX2 = {"pni", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma"}


def _describe_in(env: dict[str, str]) -> dict:
    code = "import json; from isogclr import machine; print(json.dumps(machine.describe()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    return json.loads(out)


def test_the_record_names_the_cpu_the_kernels_and_the_versions():
    import numpy
    import torch

    record = machine.describe()
    assert KEYS <= set(record)
    assert record["torch"] == torch.__version__ and record["numpy"] == numpy.__version__
    assert record["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["torch_threads"] == torch.get_num_threads()
    assert record["isa"] in {"avx512", "avx2", "avx", "default", "unknown"}
    assert record["isa"] == machine.isa_level(machine.cpu_flags())
    assert record["cpu"]
    assert machine.describe() == record  # deterministic: no clock, no host name
    assert not {"hostname", "host", "time", "date"} & set(record)


def test_the_record_is_written_atomically_as_json(tmp_path):
    path = machine.record(tmp_path / "artifacts")
    assert path == tmp_path / "artifacts" / "machine.json"
    assert json.loads(path.read_text()) == machine.describe()


@pytest.mark.skipif(machine.isa_level(machine.cpu_flags()) not in {"avx512", "avx2"}, reason="needs an AVX2 CPU")
def test_a_forced_aten_capability_is_what_gets_recorded():
    """ATEN_CPU_CAPABILITY=avx2 makes torch use its AVX2 kernels (another draw of noise on an AVX-512 CPU): the record
    follows the kernels used, not only the CPU; OPENBLAS_CORETYPE likewise for numpy's BLAS."""
    forced = _describe_in({"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Sandybridge"})
    default = _describe_in({"ATEN_CPU_CAPABILITY": "default"})
    assert forced["aten_cpu_capability"] == "AVX2" and default["aten_cpu_capability"] == "DEFAULT"
    assert forced["isa"] == default["isa"] == machine.describe()["isa"]  # the CPU itself is the same
    if "blas_coretype" in forced:
        assert forced["blas_coretype"] == "Sandybridge"


def test_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu pni avx avx2 fma\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    assert machine.cpu_flags(cpuinfo) == {"fpu", "pni", "avx", "avx2", "fma"}  # the first processor's
    assert machine.cpu_flags(tmp_path / "missing") is None


@pytest.mark.parametrize(("flags", "level"), [(AVX512, "avx512"), (AVX2, "avx2"), ({"pni", "avx"}, "avx"),
                                              ({"pni", "sse4_2"}, "default"), (None, "unknown")])
def test_isa_level(flags, level):
    assert machine.isa_level(flags) == level


def test_openblas_kernels_follow_the_cpu_flags():
    assert machine.openblas_coretypes(AVX512) == ["SkylakeX", "Zen", "Haswell", "Sandybridge", "Nehalem", "Prescott"]
    avx2 = machine.openblas_coretypes(AVX2)
    assert "SkylakeX" not in avx2 and {"Haswell", "Zen", "Sandybridge", "Prescott"} <= set(avx2)
    # AVX-512 foundation alone is not enough for the SkylakeX kernels (they use BW/DQ/VL)
    assert "SkylakeX" not in machine.openblas_coretypes(AVX2 | {"avx512f"})
    assert machine.openblas_coretypes({"pni", "avx"}) == ["Sandybridge", "Prescott"]
    assert machine.openblas_coretypes({"fpu", "sse", "sse2"}) == []  # not even SSE3: no kernel of the list


def test_every_committed_run_records_its_machine():
    """Beside every committed run's config.json a machine.json; those written after the run say so (``recorded``)."""
    configs = [*ROOT.glob("runs/*/artifacts/config.json"), *ROOT.glob("studies/*/*/artifacts/config.json"),
               *ROOT.glob("runs_bimodal/*/artifacts/config.json"), *ROOT.glob("runs_convergence/config.json")]
    if not configs:
        pytest.skip("no committed runs in this checkout")
    missing = [str(p.parent.relative_to(ROOT)) for p in configs if not (p.parent / machine.FILENAME).exists()]
    assert not missing, f"no machine.json beside config.json in {missing[:5]}"
    for path in configs:
        record = json.loads((path.parent / machine.FILENAME).read_text())
        assert KEYS <= set(record), path
        config = json.loads(path.read_text())
        threads = (config["train"] if "train" in config else config)["num_threads"]
        assert record["torch_threads"] == threads or not threads, path  # 0: torch's default, the machine's cores
        assert "recorded" not in record or "byte for byte" in record["recorded"], path  # written afterwards: how known


@pytest.mark.parametrize(("flags", "runs"), [(AVX512, {"default", "avx2", "avx512"}), (AVX2, {"default", "avx2"}),
                                             ({"pni", "avx"}, {"default"}), (None, {"default"})])
def test_an_aten_capability_runs_only_where_the_flags_reach_it(flags, runs):
    assert {c for c in machine.ATEN_LEVELS if machine.runs_aten_capability(c, flags)} == runs
    with pytest.raises(ValueError, match="'avx9'"):
        machine.runs_aten_capability("avx9", flags)
