"""Hostile input and broken files: checkpoints, `.pt` files, run locks, generators' output folders.

Each test is one case of the reliability review (a planted pickle, a truncated file, two runs at once, a
generator pointed at a folder it did not write).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from isogclr import io as iso_io
from isogclr.train.engine import fit

from .engine_helpers import TinyTask


def _fit(ckpt: Path, **kwargs) -> list[dict]:
    task = TinyTask()
    return fit(task, total_steps=task.epochs * task.steps_per_epoch, warmup_steps=0, final_lr_fraction=1.0,
               ckpt_path=ckpt, **{"curves_dir": None, **kwargs})


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204 (what a hostile pickle does: call a function on load)
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_checkpoint_pickle_is_refused_and_runs_nothing(tmp_path):
    ckpt, marker = tmp_path / "ckpt" / "checkpoint.pt", tmp_path / "ran"
    ckpt.parent.mkdir()
    torch.save({"model": _Planted(marker), "step": 0}, ckpt)
    with pytest.raises(iso_io.UnreadableFileError) as err:
        _fit(ckpt)
    assert not marker.exists(), "the checkpoint's pickle ran code"
    assert str(ckpt) in str(err.value) and "refused" in str(err.value) and "move it aside" in str(err.value)


def test_a_checkpoint_resumes_with_weights_only(tmp_path):
    """The engine's own checkpoint holds only types weights_only=True accepts, and the resume is exact."""
    ckpt = tmp_path / "checkpoint.pt"
    whole = _fit(tmp_path / "whole.pt")

    def stop(epoch: int) -> None:
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fit(ckpt, on_epoch_end=stop)
    torch.load(ckpt, weights_only=True)  # raises if any other type is in it
    assert _fit(ckpt) == whole


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_broken_checkpoint_names_the_file_and_says_to_move_it_aside(tmp_path, damage):
    ckpt = tmp_path / "checkpoint.pt"

    def stop(epoch: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fit(ckpt, on_epoch_end=stop)
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    with pytest.raises(iso_io.UnreadableFileError) as err:
        _fit(ckpt)
    message = str(err.value)
    assert str(ckpt) in message and f"mv {ckpt} {ckpt}.bad" in message and "start the run over" in message


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_broken_features_file_names_the_file_and_the_run(tmp_path, damage):
    from isogclr.analysis.embeddings import load_features

    path = tmp_path / "run-s0" / "artifacts" / "features.pt"
    path.parent.mkdir(parents=True)
    torch.save({"test": torch.zeros(50, 8), "test_labels": torch.zeros(50, dtype=torch.long)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    with pytest.raises(iso_io.UnreadableFileError) as err:
        load_features(tmp_path, "run-s0")
    assert str(path) in str(err.value) and "rerun the training run run-s0" in str(err.value)


def test_every_torch_load_goes_through_the_one_loader():
    src = Path(iso_io.__file__).parent
    users = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if "torch.load(" in p.read_text())
    assert users == ["io.py"]


@contextlib.contextmanager
def _held_elsewhere(lock: Path) -> Iterator[subprocess.Popen]:
    """Another process holding ``lock`` (:func:`isogclr.io.held_by_one`, as ``run tiny``) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from isogclr.io import held_by_one
        with held_by_one({str(lock)!r}, "run tiny"):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(iso_io.__file__).parents[1])})
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_second_run_on_the_same_checkpoint_is_refused_naming_the_holder(tmp_path):
    ckpt = tmp_path / "checkpoint.pt"
    with _held_elsewhere(Path(str(ckpt) + ".lock")) as holder:
        with pytest.raises(iso_io.BusyError) as err:
            _fit(ckpt)
        assert f"pid {holder.pid}" in str(err.value) and "run tiny" in str(err.value)
        assert not ckpt.exists()
    assert len(_fit(ckpt)) == 2  # the holder is gone: its lock went with it


def test_a_second_run_on_the_same_run_folder_is_refused_even_with_another_checkpoint(tmp_path):
    """Two runs writing one run folder (the trainers pass it as run_dir, their curves go to <run folder>/dvclive)
    with different checkpoint folders: the second is refused, naming the holder, before it writes anything."""
    run_dir = tmp_path / "runs" / "tiny-s0"
    with _held_elsewhere(run_dir / "local" / "run.lock") as holder:
        with pytest.raises(iso_io.BusyError) as err:
            _fit(tmp_path / "other_checkpoints" / "checkpoint.pt", curves_dir=run_dir / "dvclive", run_dir=run_dir)
        assert f"pid {holder.pid}" in str(err.value) and str(run_dir) in str(err.value)
        assert not (run_dir / "dvclive").exists() and not (tmp_path / "other_checkpoints" / "checkpoint.pt").exists()


def test_a_run_holds_its_run_folder_lock_while_it_trains(tmp_path):
    run_dir = tmp_path / "runs" / "tiny-s0"
    seen = []

    def probe(epoch: int) -> None:  # a second writer of the same run folder, another checkpoint folder
        with pytest.raises(iso_io.BusyError, match="run folder"):
            _fit(tmp_path / "b" / "checkpoint.pt", run_dir=run_dir)
        seen.append(epoch)

    _fit(tmp_path / "a" / "checkpoint.pt", run_dir=run_dir, on_epoch_end=probe)
    assert seen == [1, 2]
    assert len(_fit(tmp_path / "b" / "checkpoint.pt", run_dir=run_dir)) == 2  # released when the run ends


def test_held_by_one_is_released_after_the_block(tmp_path):
    with iso_io.held_by_one(tmp_path / "x.lock", "x"):
        with pytest.raises(iso_io.BusyError):
            with iso_io.held_by_one(tmp_path / "x.lock", "x"):
                pass
    with iso_io.held_by_one(tmp_path / "x.lock", "x"):
        pass


def test_read_lines_names_the_line_that_is_not_utf8(tmp_path):
    path = tmp_path / "captions.tsv"
    path.write_bytes(b"a dog\timages/1.png\nbad \xff caption\timages/2.png\n")
    (tmp_path / "ok.tsv").write_text("x\r\ny\n")
    assert iso_io.read_lines(tmp_path / "ok.tsv") == ["x", "y"]
    with pytest.raises(ValueError, match=r"captions.tsv:2: not UTF-8"):
        iso_io.read_lines(path)


def _import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or inside a function), from the source."""
    import ast

    def name_of(path: Path) -> str:
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here.split(".")[: len(here.split(".")) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (base, node.module or "") if p)
                targets = [module] + [f"{module}.{a.name}" for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def test_the_package_has_no_import_circle():
    graph = _import_graph(Path(iso_io.__file__).parent)
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circle = path[path.index(target):] + [target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert "isogclr.data.webdataset" in graph["isogclr.data.pairs_folder"]  # the walk sees lazy imports too


def test_a_tracked_table_refuses_a_wall_clock_column(tmp_path):
    import pandas as pd

    from isogclr.analysis.tables import write_table

    table = pd.DataFrame({"method": ["emc2"], "objective": [-0.24], "train_seconds": [9.0]}).set_index("method")
    with pytest.raises(ValueError, match=r"emc2_augmentations: the table has wall-clock column\(s\) \['train_seconds"):
        write_table(table, tmp_path / "emc2_augmentations", "caption")
    assert not list(tmp_path.iterdir())
    write_table(table.drop(columns="train_seconds"), tmp_path / "emc2_augmentations", "caption")
    assert (tmp_path / "emc2_augmentations.csv").read_text() == "method,objective\nemc2,-0.24\n"


def test_the_emc2_report_writes_its_tables_without_wall_clock():
    """The notebook writes no wall clock into its tables (nor shows any: tests/test_reports_no_clock.py)."""
    import ast

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "emc2_convergence.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "write_table":
            assert "seconds" not in ast.unparse(node.args[0])
    assert 'study.convergence["train_seconds"]' not in source and 'study.augmentations["train_seconds"]' not in source


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_broken_encoder_init_names_the_file_and_the_stage_to_rerun(tmp_path, damage):
    """model.encoder.init / bimodal.image_encoder.init: a truncated or empty encoder.pt is named, with the fix."""
    from isogclr.models.encoders import EncoderConfig, build_encoder

    cfg = EncoderConfig(arch="resnet10", width=4)
    path = tmp_path / "runs" / "pretrain-s0" / "artifacts" / "encoder.pt"
    path.parent.mkdir(parents=True)
    iso_io.save_torch(build_encoder(cfg).state_dict(), path)
    build_encoder(EncoderConfig(arch="resnet10", width=4, init=str(path)))  # the intact file loads
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    with pytest.raises(iso_io.UnreadableFileError) as err:
        build_encoder(EncoderConfig(arch="resnet10", width=4, init=str(path)))
    message = str(err.value)
    assert str(path) in message and "model.encoder.init" in message and "rerun the stage that writes it" in message


def test_the_unimodal_trainer_locks_its_run_folder(tmp_path, smoke_params, smoke_data):
    """train_run passes its output folder to fit as run_dir: a second writer of that folder is refused."""
    from isogclr.config.core import run_config
    from isogclr.train.loop import train_run

    params = {**smoke_params, "data": {**smoke_params["data"], "root": str(smoke_data)}}
    out = tmp_path / "runs" / "simclr-synth10-s0"
    with _held_elsewhere(out / "local" / "run.lock") as holder:
        with pytest.raises(iso_io.BusyError, match=f"pid {holder.pid}"):
            train_run(run_config(params, "simclr", "synth10", 0), out, tmp_path / "ckpt")
    assert not (out / "metrics.json").exists()


def test_check_settings_names_what_differs_and_ignores_where_a_run_runs(tmp_path):
    from isogclr.train.engine import check_settings

    ckpt = tmp_path / "checkpoint.pt"
    saved = {"method": {"kwargs": {"tau": 0.2}}, "train": {"epochs": 3, "num_threads": 1, "device": "cpu"}}
    check_settings(saved, {"method": {"kwargs": {"tau": 0.2}}, "train": {"epochs": 3, "num_threads": 2,
                                                                        "device": "cuda"}}, "r", ckpt)
    check_settings(None, saved, "r", ckpt)  # a checkpoint written before settings were kept: not checked
    with pytest.raises(ValueError) as err:
        check_settings(saved, {"method": {"kwargs": {"tau": 0.2, "gamma": 0.9}}, "train": {"epochs": 4}}, "r", ckpt)
    message = str(err.value)
    assert "method.kwargs.gamma: '(absent)' in the checkpoint, 0.9 now" in message
    assert "train.epochs: 3 in the checkpoint, 4 now" in message and str(ckpt) in message
    assert "num_threads" not in message and "device" not in message


def test_an_engine_checkpoint_keeps_the_settings_and_a_resume_under_others_is_refused(tmp_path):
    ckpt = tmp_path / "checkpoint.pt"

    def stop(epoch: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fit(ckpt, on_epoch_end=stop, settings={"lr": 0.1})
    assert torch.load(ckpt, weights_only=True)["settings"] == {"lr": 0.1}
    with pytest.raises(ValueError, match=r"lr: 0\.1 in the checkpoint, 0\.2 now"):
        _fit(ckpt, settings={"lr": 0.2})
    assert _fit(ckpt, settings={"lr": 0.1}) == _fit(tmp_path / "whole.pt", settings={"lr": 0.1})
