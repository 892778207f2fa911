"""The handlers of the command line's commands (:mod:`isogclr.cli` parses the arguments and calls them): each
reads ``--params`` through :func:`read_params` and imports what it needs (torch, DVC, papermill) when it runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def read_params(args: argparse.Namespace) -> dict:
    """``--params`` loaded and validated (every key, name and seed included): how every command reads it."""
    from .config.profiles import load_params
    from .config.validate import validate_params

    params = load_params(args.params)
    validate_params(params)
    return params


def seed_arg(text: str) -> int:
    """A ``--seed`` on the command line: a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text!r}")
    return int(text)


def name_arg(text: str) -> str:
    """A method, dataset or study name on the command line: a plain name (it names output folders)."""
    from .config.keys import check_name

    try:
        return check_name("name", text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("name: ")) from None


def cmd_validate(args: argparse.Namespace) -> int:
    from .config.validate import missing_datasets

    params = read_params(args)
    missing = [] if args.skip_data else missing_datasets(params)
    for line in missing:
        print(f"error in {args.params}: {line}", file=sys.stderr)
    for line in device_warnings(params):
        print(f"warning: {args.params}: {line}", file=sys.stderr)
    if missing:
        return 1
    print(f"{args.params}: valid" + ("" if args.skip_data else "; its datasets are on disk or made by the pipeline"))
    return 0


def device_warnings(params: dict) -> list[str]:
    """The paper profile on a machine without a GPU, where ``device: auto`` would quietly train on the CPU."""
    devices = {s: (params.get(s) or {}).get("device", "auto") for s in ("train", "bimodal") if s in params}
    if params.get("profile") != "paper" or "cpu" in devices.values():
        return []
    import torch

    if torch.cuda.is_available():
        return []
    return [f"{s}.device is {d!r} and no GPU is visible: the paper profile would "
            + ("train on the CPU (weeks of compute)" if d == "auto" else "fail") + "; run it on a GPU machine"
            for s, d in devices.items()]


def cmd_profile(args: argparse.Namespace) -> int:
    from .config.profiles import check_profiles, differences, load_params, profile_text
    from .config.validate import validate_params
    from .io import save_text

    if args.check:  # every profile merges, validates and changes only what its overlay names; params.yaml vs mini
        print("\n".join(check_profiles(args.profiles, validate_params)))
        changed = differences(load_params(args.out), load_params(Path(args.profiles) / "mini.yaml"))
        print(f"{args.out}: " + (f"the mini profile but {len(changed)} keys: {', '.join(changed[:8])}"
                                 + (" ..." if len(changed) > 8 else "") if changed else "the mini profile"))
        return 0
    if args.name is None:
        raise SystemExit("profile: name a profile (mini, smoke, paper) or give --check")
    source = Path(args.profiles) / f"{args.name}.yaml"
    validate_params(load_params(source))
    save_text(profile_text(source), Path(args.out))
    print(f"{args.out} <- {source}" + ("" if args.name == "mini" else " (merged onto its base profile)"))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """A data command, one per generated folder (:data:`isogclr.dataset_specs.GENERATED`): refuse an ``--out`` whose
    manifest is another command's, write the folder from the params section ``data.<name>`` (by the generator's
    path from a manifest's spec, as a rebuild does), then its manifest, and say so."""
    from .data.manifest import claim_manifest, manifest_path, spec_dict, write_manifest
    from .dataset_specs import GENERATED

    generator = GENERATED[args.generator]
    data = read_params(args).get("data") or {}
    spec = generator.spec(data.get(generator.section.removeprefix("data.")))
    claim_manifest(args.out, generator)
    t0 = time.perf_counter()
    generator.write(spec_dict(spec), Path(data.get("root", "data")), Path(args.out))
    manifest = write_manifest(Path(args.out).name, args.out, spec_dict(spec), manifest_path(args.out), generator)
    print(f"wrote {args.out} and its manifest {manifest_path(args.out)} ({manifest['files']} files) in "
          f"{time.perf_counter() - t0:.1f}s ({spec})")
    return 0


def cmd_restore_data(args: argparse.Namespace) -> int:
    from .data.restore import restore

    t0 = time.perf_counter()
    done = restore(args.root, verify=args.verify)
    if not done:
        print(f"no dataset manifest {Path(args.root)}/*.json: nothing to restore (the data stages write them)")
        return 0
    _print_restored(args.root, done)
    print(f"restored {len(done)} generated dataset(s) from their manifests in {time.perf_counter() - t0:.1f}s")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """One run, or several in one process (a grid run at several seeds; a study's values x seeds)."""
    import yaml

    from .config.selection import grid_run_config
    from .config.studies import study_run_config, study_spec
    from .config.typed import ConfigError
    from .train.loop import train_run

    params = read_params(args)  # --tuned: at the method's knobs selected on the validation split (tuning/<method>)
    if args.study is None:
        if args.dataset is None or args.value is not None or not args.seed:
            raise ConfigError("train: give --dataset and --seed (a grid run), or --study (a study's runs)")
        configs = [grid_run_config(params, args.method, args.dataset, seed, args.tuned) for seed in args.seed]
        out = Path(args.out)
    else:
        if args.dataset is not None:
            raise ConfigError(f"studies.{args.study}: the study sets its own dataset (no --dataset)")
        spec = study_spec(params, args.study)
        if spec.tuned and not args.tuned:
            raise ConfigError(f"studies.{args.study}.tuned: its runs use the selection; add --tuned")
        values = spec.values if args.value is None else [yaml.safe_load(args.value)]
        configs = [study_run_config(params, args.study, args.method, value, seed, args.tuned)
                   for value in values for seed in (args.seed or spec.seeds)]
        out = Path("studies")
    for cfg in configs:
        train_run(cfg, out / cfg.run_id, Path(args.checkpoints) / cfg.run_id,
                  random_init_baseline=args.random_init_baseline, export=cfg.seed in args.export_seed)
    return 0


def cmd_references(args: argparse.Namespace) -> int:
    """The no-learning rows of a dataset (chance, raw pixels, random-init encoders): <out>/<dataset>/metrics.json."""
    from .config.core import run_config
    from .config.sections import references_spec
    from .train.references import no_learning

    params = read_params(args)
    spec = references_spec(params)
    cfg = run_config(params, spec.methods[0], args.dataset, spec.seeds[0])
    metrics = no_learning(cfg, spec.random_inits, Path(args.out) / args.dataset)
    print(f"[{args.dataset}] " + ", ".join(f"{key} {value:.2f}" for key, value in metrics.items()))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from .config.tuning import tuning_section
    from .train.tuning import tune_method

    params = read_params(args)
    if tuning_section(params, args.method) == "bimodal_tuning":
        from .train.bimodal import train_bimodal_run as train
    else:
        from .train.loop import train_run as train
    tune_method(params, args.method, train, Path(args.out), Path(args.checkpoints))
    return 0


def cmd_train_bimodal(args: argparse.Namespace) -> int:
    """Image-text runs: a method at several seeds one after the other in one process, or one study run."""
    import yaml

    from .config.bimodal import bimodal_run_config, bimodal_study_run_config, bimodal_study_spec
    from .config.typed import ConfigError
    from .train.bimodal import train_bimodal_run

    params = read_params(args)  # --tuned: at the method's knobs selected on held-out training pairs (tuning/<method>)
    if (args.study is None) != (args.value is None):
        raise ConfigError("train-bimodal: give both --study and --value (a study run) or neither")
    if args.study is None:
        configs = [bimodal_run_config(params, args.method, seed, args.tuned) for seed in args.seed]
        out = Path(args.out)
    else:
        if bimodal_study_spec(params, args.study).tuned and not args.tuned:
            raise ConfigError(f"bimodal_studies.{args.study}.tuned: its runs use the selection; add --tuned")
        configs = [bimodal_study_run_config(params, args.study, args.method, yaml.safe_load(args.value), seed,
                                            args.tuned) for seed in args.seed]
        out = Path("studies")
    for cfg in configs:
        train_bimodal_run(cfg, out / cfg.run_id, Path(args.checkpoints) / f"bimodal-{cfg.run_id}",
                          untrained_baseline=args.untrained_baseline)
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from .reports.notebook_build import build_notebooks

    stale = build_notebooks(Path(args.source), Path(args.dest), check=args.check)
    if args.check and stale:
        print("out of sync with their sources (run `python -m isogclr notebooks`):", *stale, sep="\n  ")
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .io import read_text
    from .reports.notebook_build import notebook_text
    from .reports.notebook_run import execute_report, typed_parameters
    from .reports.runfiles import RunFileError, check_report

    notebook, source = Path(args.notebooks) / f"{args.name}.ipynb", Path(args.notebooks) / "src" / f"{args.name}.py"
    if not source.exists():
        print(f"error: {source} not found (a report is built from notebooks/src/<name>.py)", file=sys.stderr)
        return 2
    if not notebook.exists() or read_text(notebook) != notebook_text(source):
        print(f"error: {notebook} is out of sync with {source}: run `python -m isogclr notebooks`", file=sys.stderr)
        return 1
    parameters = typed_parameters(args.parameter)
    try:  # a truncated or malformed run file is named here, not as a pandas error inside the notebook
        check_report(args.name, parameters)
    except RunFileError as err:
        print(f"error: report {args.name} not run: {err}", file=sys.stderr)
        return 1
    for folder in ("tables", "figures", "verdicts"):
        (Path(args.reports) / folder).mkdir(parents=True, exist_ok=True)
    from papermill.exceptions import PapermillExecutionError

    output = Path(args.reports) / f"{args.name}.ipynb"
    _restore_generated_data(parameters.get("params_path"))
    try:
        execute_report(notebook, output, parameters)
    except PapermillExecutionError as err:
        print(f"error: {output}: cell {err.exec_count} raised {err.ename}: {err.evalue} (the traceback is in the "
              f"notebook)", file=sys.stderr)
        return 1
    print(f"wrote {output}")
    return 0


def _restore_generated_data(params_path: str | None) -> None:
    """Rebuild the generated folders a report may read (a fresh clone has only their manifests) before the notebook
    runs: rebuilt inside it, the folder's message, with its seconds, would become an output of the report."""
    from .config.profiles import load_params
    from .data.restore import restore

    root = (load_params(params_path).get("data") or {}).get("root", "data") if params_path else "data"
    _print_restored(root, [item for item in restore(root) if item[1] != "up to date"])


def _print_restored(root: str | Path, done: list[tuple[str, str, float]]) -> None:
    """One line per generated folder :func:`isogclr.data.restore.restore` checked: its path, state and seconds."""
    for name, state, seconds in done:
        print(f"{Path(root) / name}: {state} ({seconds:.1f}s)")


def cmd_report_index(args: argparse.Namespace) -> int:
    from .reports.index import build_index

    build_index(Path(args.reports), args.names, profile=str(read_params(args).get("profile", "?")))
    print(f"wrote {args.reports}/index.html and {args.reports}/README.md ({len(args.names)} reports)")
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    from .pipeline import main as write_pipeline

    return write_pipeline(args.params, args.out, check=args.check)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan (:func:`isogclr.config.plan.plan`): one line a run, its folder and resolved settings."""
    from .config.convergence import ConvergenceRun
    from .config.plan import plan

    params = read_params(args)
    if args.cost:
        return _print_cost(params, args)
    runs = [r for r in plan(params, args.tuning_dir) if args.section in (None, r.section)]
    for run in runs:
        cfg = run.config  # an image-text run has no dataset of its own: it reads bimodal.data
        if isinstance(cfg, ConvergenceRun):  # a convergence run: the study's settings, its loss's
            dataset, epochs, knobs = cfg.config.dataset, cfg.config.epochs, cfg.knobs()
        else:
            dataset, epochs, knobs = getattr(cfg, "dataset", "image-text"), cfg.train.epochs, cfg.method.knobs()
        print(f"{run.section:<16} {run.run_dir:<44} {dataset:<14} epochs {epochs:<3} {knobs}")
    print(f"{len(runs)} runs")
    return 0


def _print_cost(params: dict, args: argparse.Namespace) -> int:
    """``plan --cost``: the projection of :mod:`isogclr.analysis.cost`, fit on ``--record`` (the stage log of a
    forced repro of ``--record-params``) and applied to every run of ``--params``."""
    import pandas as pd

    from .analysis import cost
    from .config.profiles import load_params
    from .pipeline import build_pipeline

    record = Path(args.record)
    if not record.is_file():
        raise SystemExit(f"{record}: no stage log (a forced repro writes it: make repro FORCE=1)")
    if args.section:
        raise SystemExit("plan --cost projects every run of --params; --section does not apply")
    stages = pd.read_csv(record)
    rates = cost.fit_rates(cost.params_work(load_params(args.record_params), args.tuning_dir), stages)
    table = cost.project(cost.params_work(params, args.tuning_dir), stages, rates, args.slots,
                         families=build_pipeline(params)["stages"])
    print(table.to_markdown(index=False))
    print(f"\nprojected schedule: {cost.schedule_minutes(table):.1f} min at {args.slots} stages at a time, on the "
          f"machine of {record} (a run costs, fit to its stages: {cost.rates_text(rates)})")
    return 0


def cmd_convergence(args: argparse.Namespace) -> int:
    from .train.convergence import write_study

    study = write_study(read_params(args), Path(args.out), Path(args.checkpoints) / "convergence")
    print(f"wrote {args.out} in {study.seconds:.0f}s")
    return 0


def cmd_repro(args: argparse.Namespace) -> int:
    from .repro import repro

    return repro(Path(args.root), args.jobs, force=args.force)
