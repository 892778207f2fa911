"""What a rule "one running stage per lock file" would cost the parallel runner's schedule.

Replays the last full repro's stage times (``reports/repro_stages.csv``) through the runner's rule (the stages in
DVC's listing order; up to ``--jobs`` at a time; a stage starts when no upstream stage is pending or running, the
first ready one first: :func:`isogclr.repro.run_schedule`), once as it is and once with the added rule that no two
running stages write the same ``dvc.lock`` (one per ``pipelines/<family>/dvc.yaml``; the stages of the root
``dvc.yaml`` share ``dvc.lock`` too, unless ``--families-only``). The first replay should give the recorded
schedule's minutes, which checks the replay.

Usage (from the repository root): python benchmarks/lock_writer_schedule.py [--jobs 2] [--families-only]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from isogclr.repro import stage_graph


def lock_of(stage: str, families_only: bool) -> str:
    """The ``dvc.yaml`` whose lock file the stage writes (the stage itself for root stages with ``families_only``)."""
    if ":" in stage:
        return stage.rsplit(":", 1)[0]
    return stage if families_only else "dvc.yaml"


def replay(upstream: dict[str, set[str]], seconds: dict[str, float], jobs: int, one_per_lock: bool,
           families_only: bool) -> float:
    """The schedule's length in seconds, each stage taking its recorded seconds."""
    pending = [s for s in upstream if s in seconds]
    running: dict[str, float] = {}
    now = 0.0
    while pending or running:
        while len(running) < jobs:
            busy = {lock_of(s, families_only) for s in running}
            stage = next((s for s in pending if not (upstream[s] & (set(pending) | set(running)))
                          and not (one_per_lock and lock_of(s, families_only) in busy)), None)
            if stage is None:
                break
            pending.remove(stage)
            running[stage] = now + seconds[stage]
        stage = min(running, key=running.__getitem__)
        now = running.pop(stage)
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--families-only", action="store_true")
    args = parser.parse_args()
    with open("reports/repro_stages.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    seconds = {r["stage"]: float(r["seconds"]) for r in rows}
    upstream, _ = stage_graph(Path("."), force=True)
    missing = sorted(set(seconds) ^ set(upstream))
    if missing:
        raise SystemExit(f"reports/repro_stages.csv and the pipeline differ in these stages: {missing}")
    print(f"recorded: {max(float(r['end_s']) for r in rows) / 60:.1f} min, {len(rows)} stages, "
          f"{sum(seconds.values()) / 60:.1f} stage-minutes")
    for rule in (False, True):
        minutes = replay(upstream, seconds, args.jobs, rule, args.families_only) / 60
        print(f"replayed, {args.jobs} at a time{', one stage per lock file' if rule else ''}: {minutes:.1f} min")


if __name__ == "__main__":
    main()
