"""Run the DVC pipeline with several stages at a time: ``python -m isogclr repro --jobs 2``.

``dvc repro`` runs one stage after another. A mini training run does not keep two CPU cores
busy (ResNet-18 width 8 on 16-px images: ~740 samples/s on one thread, 750-1,070 on two), so
two runs side by side, one thread each, finish about 1.6x sooner than the same two in a row
(measured: 37 s for the pair against 2 x 30 s).

How it works, using only what DVC provides:

* The stage graph and the stages that are out of date come from DVC's own index and status;
  every stage downstream of an out-of-date stage is scheduled too.
* A stage starts when the stages it depends on have finished, up to ``jobs`` at a time, each as
  ``dvc --wait-for-lock repro --single-item <stage>``. DVC releases its repository lock while a
  stage's command runs and takes it again to record the result, so ``dvc.lock`` is written by
  one process at a time; each stage's outputs carry DVC's own per-path read/write locks.
* A kill at any moment leaves the pipeline able to restart (:mod:`isogclr.locks`): DVC runs as
  ``python -m isogclr.locks``, which writes the lock files atomically, and before anything runs a lock file DVC
  cannot read (left by a kill of an older version, or of a plain ``dvc repro`` in mid-write) is put back as git's
  ``HEAD`` has it, with a message naming it. The stages a kill interrupted lost their outputs (DVC removes them
  before the command runs) and run again.
* A failed stage costs no committed file: DVC removes a stage's outputs before its command runs, so the outputs
  of a failed stage that git tracks are put back as ``HEAD`` has them (:func:`.locks.restore_committed`), and the error
  line says so.
* When the schedule is done, a plain ``dvc repro`` runs; it finds nothing to do unless a stage
  was missed, and it is the same check a researcher would run.
* With ``force`` (``--force``, ``make repro FORCE=1``) every stage runs, up to date or not, each as
  ``dvc repro --single-item --force <stage>``: the way to verify the replication from scratch.
* After a full repro (every stage ran), each stage's wall time goes to ``reports/repro_stages.csv`` and,
  grouped by claim, to ``reports/timing.md`` (:func:`isogclr.analysis.repro_timing.write_timing_report`), and the
  machine that ran them to ``reports/repro_machine.json`` (:func:`isogclr.machine.describe`: a forced repro on
  another CPU type is a new draw of training noise, so the record says which machine made the runs); after a
  successful repro the timing record ``timing.csv`` drops the rows of runs the pipeline no longer has
  (:func:`live_run`), and the run folders no stage declares any more are listed with the command that removes
  them (:func:`orphan_runs`; nothing is deleted).

Stages call ``python`` (and ``dvc`` runs them through a shell): each stage's ``PATH`` starts with the folder
of the interpreter that runs this command, so ``.venv/bin/python -m isogclr repro`` runs every stage with that
same environment even when ``.venv/bin`` is not first on the user's ``PATH`` (a bare ``python`` there would be
another interpreter, without isogclr, and fail after DVC had already removed the stage's outputs).

The results do not depend on ``jobs``: the number of torch threads of a run is a parameter
(``train.num_threads``, ``bimodal.num_threads``), not a property of how the pipeline was started.
Processes that do not set it (the report notebooks) get ``OMP_NUM_THREADS = cores // jobs``
unless the variable is already set, so that two of them do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

MACHINE_RECORD = "repro_machine.json"  # in reports/, beside the stage record: the machine of the repro


def stage_graph(root: Path, force: bool = False) -> tuple[dict[str, set[str]], set[str]]:
    """Each stage's direct upstream stages, and the stages to run (out of date, or downstream of one; every
    stage with ``force``)."""
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        graph = repo.index.graph  # an edge a -> b: stage a depends on an output of stage b
        upstream = {s.addressing: {d.addressing for d in graph.successors(s)} for s in graph.nodes}
        stale = set(upstream) if force else set(repo.status())
        by_name = {s.addressing: s for s in graph.nodes}
        to_run = set(stale)
        for name in stale:
            if name in by_name:
                to_run |= {a.addressing for a in nx.ancestors(graph, by_name[name])}
    return upstream, to_run & set(upstream)


def run_schedule(
    upstream: Mapping[str, set[str]],
    to_run: set[str],
    command: Callable[[str], Sequence[str]],
    jobs: int,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    log: Callable[[str], None] = print,
    times: list[dict] | None = None,
) -> list[str]:
    """Run ``command(stage)`` for every stage of ``to_run``, at most ``jobs`` at once, upstream first.

    A stage starts once none of its upstream stages in ``to_run`` is pending or running. After a
    failure no new stage starts; the running ones finish. Returns the stages that failed. ``times``, if
    given, receives one row per finished stage: ``stage``, ``start_s`` and ``end_s`` (seconds since the
    schedule started), ``seconds``, ``ok``.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    unknown = sorted(to_run - set(upstream))
    if unknown:
        raise ValueError(f"stages not in the graph: {unknown}")
    # keep DVC's listing order among the stages that are ready (data, then runs, then reports)
    pending = [s for s in upstream if s in to_run]
    running: dict[str, tuple[subprocess.Popen, float, threading.Thread]] = {}
    done: set[str] = set()
    failed: list[str] = []
    total = len(pending)
    origin = time.perf_counter()

    def ready(stage: str) -> bool:
        return not (upstream[stage] & (set(pending) | set(running)))

    while pending or running:
        while not failed and len(running) < jobs:
            stage = next((s for s in pending if ready(s)), None)
            if stage is None:
                break
            pending.remove(stage)
            proc = subprocess.Popen(list(command(stage)), cwd=cwd, env=None if env is None else dict(env),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
            pump = threading.Thread(target=_prefix_lines, args=(proc, stage, log), daemon=True)
            pump.start()
            running[stage] = (proc, time.perf_counter(), pump)
            log(f"started {stage} ({len(running)} running, {len(pending)} waiting)")
        if failed and not running:
            break
        if not running:  # nothing can start: a cycle or an upstream stage outside the graph
            raise RuntimeError(f"no stage can start; pending: {pending}")
        time.sleep(0.2)
        for stage, (proc, t0, pump) in list(running.items()):
            if proc.poll() is None:
                continue
            pump.join()
            del running[stage]
            seconds = time.perf_counter() - t0
            if times is not None:
                start = t0 - origin
                times.append({"stage": stage, "start_s": round(start, 1), "end_s": round(start + seconds, 1),
                              "seconds": round(seconds, 1), "ok": int(proc.returncode == 0)})
            if proc.returncode == 0:
                done.add(stage)
                log(f"[{len(done)}/{total}] finished {stage} in {seconds:.0f} s")
            else:
                failed.append(stage)
                log(f"FAILED {stage} (exit {proc.returncode}) after {seconds:.0f} s; no new stage starts")
    return failed


def _prefix_lines(proc: subprocess.Popen, stage: str, log: Callable[[str], None]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        log(f"  {stage} | {line.rstrip()}")


def worker_env(jobs: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of each stage: OMP_NUM_THREADS = cores // jobs unless already set, and ``PATH`` led by the
    folder of this interpreter (``sys.executable``, not resolved: a virtual environment's ``bin``), so the stages'
    ``python`` is the one running the pipeline."""
    env = dict(os.environ if base is None else base)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))
    here = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([here, *(p for p in env.get("PATH", "").split(os.pathsep) if p and p != here)])
    return env


def stage_outputs(root: Path) -> dict[str, list[str]]:
    """Each stage's declared outputs (metrics and plots included), as paths relative to ``root``."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {s.addressing: [Path(o.fs_path).resolve().relative_to(Path(root).resolve()).as_posix() for o in s.outs]
                for s in repo.index.stages}


def _candidates(csv_path: Path) -> set[tuple[int, int]]:
    """The (candidate, seed) pairs of a selection's ``candidates.csv`` (empty when it is missing)."""
    import csv

    if not csv_path.is_file():
        return set()
    with csv_path.open(newline="") as f:
        return {(int(r["candidate"]), int(r["seed"])) for r in csv.DictReader(f)}


def live_run(key: str, outputs: set[str], root: Path) -> bool:
    """Whether the run ``key`` of the timing record still belongs to the pipeline: an output of a stage is the
    run's folder, lies in it or holds it (``runs_convergence`` holds ``runs_convergence/emc2-A2``); a selection
    candidate ``<dir>/runs/c<i>-s<seed>`` (scratch, not an output) lives while ``<dir>/candidates.csv`` is an
    output listing candidate i with that seed."""
    if any(o == key or o.startswith(key + "/") or key.startswith(o + "/") for o in outputs):
        return True
    parts = key.rsplit("/", 2)
    if len(parts) == 3 and parts[1] == "runs" and parts[2].startswith("c") and "-s" in parts[2]:
        table = f"{parts[0]}/candidates.csv"
        candidate, _, seed = parts[2][1:].partition("-s")
        if table in outputs and candidate.isdigit() and seed.isdigit():
            return (int(candidate), int(seed)) in _candidates(Path(root) / table)
    return False


def _runs(outputs: list[str], root: Path) -> int:
    """Training runs of a stage: its ``metrics.json`` outputs, plus the candidates of a selection stage."""
    return (sum(o.endswith("/metrics.json") for o in outputs)
            + sum(len(_candidates(Path(root) / o)) for o in outputs if o.endswith("/candidates.csv")))


def write_stage_log(times: list[dict], outputs: Mapping[str, list[str]], root: Path, jobs: int,
                    force: bool, stages: int) -> Path:
    """``reports/repro_stages.csv`` (one row per stage run: its family, runs and times), ``reports/timing.md`` and,
    beside them, ``reports/repro_machine.json``, the machine that ran the stages (a sidecar: the CSV's columns and
    readers stay as they were)."""
    from . import machine
    from .analysis.repro_timing import write_timing_report
    from .io import csv_text, save_text

    rows = [{**t, "family": stage_family(t["stage"]), "runs": _runs(outputs.get(t["stage"], []), root)}
            for t in times]
    path = Path(root) / "reports" / "repro_stages.csv"
    save_text(csv_text(rows), path)
    write_timing_report(path, Path(root) / "reports" / "timing.md", jobs=jobs, force=force, stages=stages)
    machine.record(path.parent, MACHINE_RECORD)
    return path


def stage_family(stage: str) -> str:
    """A stage's family: the name of its ``foreach`` block (``pipelines/train/dvc.yaml:train@isogclr-synth10`` ->
    ``train``), else its own name."""
    return stage.rsplit(":", 1)[-1].split("@", 1)[0]


def repro(root: Path, jobs: int, force: bool = False) -> int:
    """Bring the pipeline of the DVC project at ``root`` up to date, ``jobs`` stages at a time; with ``force``,
    rerun every stage.

    ``dvc.yaml`` is first regenerated from ``params.yaml`` (:mod:`isogclr.pipeline`), so a profile copied
    over params.yaml or a new study block runs with its own stages.
    """
    from . import epoch_times
    from .locks import BrokenLockError, repair_locks, restore_committed
    from .pipeline import main as write_pipeline

    root = Path(root)
    if write_pipeline(str(root / "params.yaml"), str(root / "dvc.yaml")):
        return 1
    dvc = [sys.executable, "-m", "isogclr.locks"]  # DVC's command line, writing its files atomically
    try:
        repair_locks(root, log=lambda line: print(line, flush=True))
    except BrokenLockError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    upstream, to_run = stage_graph(root, force=force)
    print(f"{len(to_run)} of {len(upstream)} stages to run{' (--force: all of them)' if force else ''}, "
          f"{jobs} at a time (found in {time.perf_counter() - t0:.0f} s)", flush=True)
    times: list[dict] = []
    flag = ["--force"] if force else []
    env = worker_env(jobs)
    failed = run_schedule(upstream, to_run, lambda s: [*dvc, "--wait-for-lock", "repro", "--single-item", *flag, s],
                          jobs, env=env, cwd=root, log=lambda line: print(line, flush=True), times=times)
    outputs = stage_outputs(root)
    if times and len(to_run) == len(upstream):  # a full repro (forced, or of a fresh project): its timing table
        print(f"wrote {write_stage_log(times, outputs, root, jobs, force, len(upstream))}, reports/timing.md and "
              f"reports/{MACHINE_RECORD}", flush=True)
    if failed:
        restored = restore_committed(root, [o for stage in failed for o in outputs.get(stage, [])])
        kept = (f"; their committed outputs were restored from git's HEAD ({len(restored)} files), as they were "
                "before the run" if restored else "")
        print(f"failed: {', '.join(failed)}; their output is above{kept}", file=sys.stderr)
        return 1
    print(f"schedule done in {(time.perf_counter() - t0) / 60:.1f} min; checking with a plain `dvc repro`",
          flush=True)
    code = subprocess.run([*dvc, "repro"], cwd=root, env=env).returncode
    if code == 0:
        live = {o for outs in outputs.values() for o in outs}
        record = epoch_times.default_path() if os.environ.get(epoch_times.ENV) else root / epoch_times.FILENAME
        dropped = epoch_times.prune(lambda key: live_run(key, live, root), record)
        if dropped:
            print(f"{epoch_times.FILENAME}: dropped the rows of {len(dropped)} runs the pipeline no longer has",
                  flush=True)
        orphans = orphan_runs(root, live)
        if orphans:
            print(f"{len(orphans)} run folders are no stage's output any more (a run or study the params no longer "
                  f"have); kept, remove them with: git rm -r {' '.join(orphans)}", flush=True)
    return code


def orphan_runs(root: Path, outputs: set[str]) -> list[str]:
    """Run folders (a ``metrics.json`` inside) under the folders that hold stage outputs, which no stage declares
    (:func:`live_run`): left behind when a section or study of params.yaml changes. Selection candidates
    (``tuning/<m>/runs/``) are scratch and not listed; nothing is deleted."""
    root = Path(root)
    tops = {o.split("/")[0] for o in outputs if "/" in o}
    found = {p.parent.relative_to(root) for top in tops for p in (root / top).rglob("metrics.json")}
    return sorted(f.as_posix() for f in found
                  if "runs" not in f.parts[1:] and not live_run(f.as_posix(), outputs, root))
