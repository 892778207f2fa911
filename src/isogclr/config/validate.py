"""Validation of a whole params.yaml (:func:`validate_params`), the first step of every command, and the
datasets a profile reads that are not on disk (:func:`missing_datasets`, ``python -m isogclr validate``).

It checks every section and the runs the profile asks for (the keys of its plan, :func:`.plan.plan_keys`; the configs
it checks are resolved untuned, so that it needs no selection), and builds each method's loss once to check its
arguments, so a bad ablation fails in a second instead of after an hour of training. It can refuse a run but
not change its numbers: the pipeline (:mod:`isogclr.pipeline`) does not count it among a run's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..data import DATASETS
from ..dataset_specs import GENERATED, source
from ..import_table import Registry
from .bimodal import bimodal_study_run_config, validate_bimodal
from .convergence import validate_convergence
from .core import TABLE_SECTIONS, method_config, run_config, shared_sections
from .keys import check_keys
from .overlay import check_loss
from .plan import STUDY_SECTIONS, RunKey, plan_axes, plan_keys
from .studies import study_run_config
from .tuning import validate_tuning
from .typed import ConfigError, check_finite, check_seed


def validate_params(params: dict[str, Any]) -> None:
    """Check every key (:func:`check_keys`), every section and the runs the profile asks for (its plan's keys:
    :func:`.plan.plan_keys`); raise :class:`ConfigError` naming the key."""
    check_keys(params)  # first: a misspelt key is named as such, with the nearest known one
    check_finite(params, "")  # NaN or an infinity anywhere, e.g. in a tuning grid
    for generator in GENERATED.values():  # the generated datasets' sections, each read by its typed reader
        Registry.load(generator.reader)(params)
    for name in params.get("methods") or {}:  # every method's loss is built here once, to check its arguments
        check_loss(method_config(params, name))
    for section in TABLE_SECTIONS:
        table = params.get(section)
        if table is None:
            continue
        for key in ("methods", "datasets", "seeds"):
            if not isinstance(table.get(key), list) or not table[key]:
                raise ConfigError(f"{section}.{key}: expected a non-empty list")
        for m in table["methods"]:
            if m not in (params.get("methods") or {}):
                raise ConfigError(f"{section}.methods: unknown method {m!r} (defined under methods: "
                                  f"{sorted(params.get('methods') or {})})")
        for d in table["datasets"]:
            if d not in DATASETS:
                raise ConfigError(f"{section}.datasets: unknown dataset {d!r} (registered: {sorted(DATASETS)})")
        for s in table["seeds"]:
            check_seed(f"{section}.seeds", s)
        for m in table.get("paper_rows") or {}:
            if m not in table["methods"]:
                raise ConfigError(f"{section}.paper_rows: {m!r} is not in {section}.methods")
    temperatures = params.get("temperatures")
    if temperatures is not None:  # reuses Table 1's runs: its methods and datasets must be among them
        table = params.get("table1") or {}
        for key in ("methods", "datasets"):
            for value in temperatures.get(key) or []:
                if value not in (table.get(key) or []):
                    raise ConfigError(f"temperatures.{key}: {value!r} is not in table1.{key} (its runs are reused)")
    _table3_rows(params)
    shared_sections(params)
    for name in (params.get("train") or {}).get("by_dataset") or {}:
        for method in params.get("methods") or {}:
            cfg = run_config(params, method, name, 0)
            if cfg.method != method_config(params, method):  # train.by_dataset.<name> sets one of its knobs
                check_loss(cfg.method, f"train.by_dataset.{name}: ")
    validate_bimodal(params)
    validate_tuning(params)
    validate_convergence(params)
    shared = sorted(set(params.get("studies") or {}) & set(params.get("bimodal_studies") or {}))
    if shared:
        raise ConfigError(f"bimodal_studies: {shared} also defined under studies (both write studies/<name>/)")
    keys = plan_keys(params)
    _check_pretrained_image_encoder(params, keys)
    _check_study_losses(params, keys)


def _first_seeds(keys: list[RunKey], sections: tuple[str, ...]) -> list[RunKey]:
    """The runs of ``sections`` among ``keys`` at their group's first seed, in order."""
    axes = plan_axes(keys)
    return [k for k in keys if k.section in sections and k.seed == axes[k.group].seeds[0]]


def _check_study_losses(params: dict[str, Any], keys: list[RunKey]) -> None:
    """Build the loss of each (method, value) of every study whose knob is one of the method's, once (at its
    first seed, untuned)."""
    resolve = {"studies": study_run_config, "bimodal_studies": bimodal_study_run_config}
    for key in _first_seeds(keys, STUDY_SECTIONS):
        cfg = resolve[key.section](params, key.study, key.method, key.value, key.seed)
        if cfg.method != method_config(params, key.method):  # the study's knob is one of the method's
            check_loss(cfg.method, f"{key.group} ({key.method}, value {key.value!r}): ")


def _table3_rows(params: dict[str, Any]) -> None:
    """Table 3 shows Table 1's methods beside its own, from the runs of the section that trains them on each of
    its datasets (table1 or table1_real): that section must run all of table1.methods at table3's seeds."""
    table3, table1 = params.get("table3"), params.get("table1")
    if table3 is None or table1 is None:
        return
    lacking = {}  # each section that may cover a dataset: the methods of table1 and the seeds of table3 it does not run
    for name in ("table1", "table1_real"):
        section = params.get(name) or {}
        lacking[name] = ([m for m in table1["methods"] if m not in section.get("methods", [])],
                         [s for s in table3["seeds"] if s not in section.get("seeds", [])])
    for d in table3["datasets"]:
        cover = next((name for name in lacking if d in ((params.get(name) or {}).get("datasets") or [])), None)
        missing, seeds = lacking.get(cover, ([], []))
        if cover is None or missing or seeds:
            gaps = ([f"methods {missing}"] if missing else []) + ([f"seeds {seeds}"] if seeds else [])
            why = ("neither table1 nor table1_real runs it" if cover is None else
                   f"{cover} does not run its {' or '.join(gaps)} there")
            raise ConfigError(f"table3.datasets: {d!r}: its Table 1 rows are the runs of table1.methods there, but "
                              f"{why}; add it there or choose another dataset")


def _check_pretrained_image_encoder(params: dict[str, Any], keys: list[RunKey]) -> None:
    """``bimodal.image_encoder.init`` names the encoder a ``pretrain`` run exports (at its first seed:
    ``runs/<method>-<dataset>-s<seed>/artifacts/encoder.pt``), and that run trains the same architecture."""
    image = ((params.get("bimodal") or {}).get("image_encoder") or {})
    init = image.get("init")
    if not init:
        return
    runs = {f"{k.run_dir}/artifacts/encoder.pt": k for k in _first_seeds(keys, ("pretrain",))}
    if init not in runs:
        raise ConfigError(f"bimodal.image_encoder.init: {init!r} is not the encoder a pretrain run exports "
                          f"({sorted(runs) or 'no pretrain section'})")
    encoder = run_config(params, runs[init].method, runs[init].dataset, runs[init].seed).encoder
    for key in ("arch", "width", "cifar_stem"):
        if image.get(key, getattr(encoder, key)) != getattr(encoder, key):
            raise ConfigError(f"bimodal.image_encoder.{key}: {image.get(key)!r}, but the pretrain run {init} trains "
                              f"{getattr(encoder, key)!r} (set it with train.by_dataset.<dataset>.model.encoder.{key})")


def missing_datasets(params: dict[str, Any]) -> list[str]:
    """The datasets the profile reads that are neither on disk nor generated by the pipeline.

    One line each: the key that asks for the dataset, the path that is missing and how to get it.
    The generated datasets (``synth*``, the Fashion-MNIST subset once its source is installed, the
    default image-text pairs) are written by the pipeline's data stages and are not checked.
    """
    root = Path((params.get("data") or {}).get("root", "data"))
    used: dict[str, str] = {}  # dataset -> the first key that asks for it
    for section in (*TABLE_SECTIONS, "temperatures"):
        for name in (params.get(section) or {}).get("datasets") or []:
            used.setdefault(name, f"{section}.datasets")
    for study, spec in (params.get("studies") or {}).items():
        if isinstance(spec, dict) and spec.get("dataset"):
            used.setdefault(spec["dataset"], f"studies.{study}.dataset")
    by_problem: dict[str, list[str]] = {}  # e.g. cifar10 and cifar10_lt both need data/cifar-10-batches-py
    for name, key in used.items():
        problem = _dataset_missing(name, root)
        if problem is not None:
            by_problem.setdefault(problem, []).append(f"{key} {name}")
    missing = [f"{', '.join(users)}: {problem}" for problem, users in by_problem.items()]
    bimodal = params.get("bimodal")
    if isinstance(bimodal, dict) and bimodal.get("methods"):
        pairs = Path(bimodal.get("data", "data/synthetic_pairs"))
        if pairs != root / "synthetic_pairs" and not pairs.is_dir() and not pairs.with_suffix(".json").is_file():
            missing.append(f"bimodal.data: {pairs} not found: arrange the image-text pairs as the generated folder is "
                           "(train/captions.tsv, retrieval_*/dataset.json, zeroshot/), e.g. CC3M for the paper profile")
    return missing


def _dataset_missing(name: str, root: Path) -> str | None:
    """What is missing for dataset ``name`` under ``root`` and how to get it (its declaration's ``missing``, which
    imports that dataset's module only); None when present or generated by the pipeline (no ``missing``)."""
    spec = source(name)
    return None if spec.missing is None else Registry.load(spec.missing)(root)
