"""Validation of a whole params.yaml (:func:`validate_params`), the first step of every command.

It checks every section and every run the tables ask for, and builds each method's loss once to check its
arguments, so a bad ablation fails in a second instead of after an hour of training. It can refuse a run but
not change its numbers: the pipeline (:mod:`isogclr.pipeline`) does not count it among a run's code.
"""

from __future__ import annotations

from typing import Any

from ..data import DATASETS
from .bimodal import bimodal_study_run_config, bimodal_study_spec, pair_spec, validate_bimodal
from .convergence import validate_convergence
from .core import (
    TABLE_SECTIONS,
    ConfigError,
    _by_dataset,
    _method,
    _shared_sections,
    check_finite,
    fashion_mnist_mini_spec,
    run_config,
    run_id,
    synthetic_spec,
)
from .studies import study_run_config, study_spec
from .tuning import validate_tuning


def validate_params(params: dict[str, Any]) -> None:
    """Check every section and every run the tables ask for; raise :class:`ConfigError` naming the key."""
    check_finite(params, "")  # NaN or an infinity anywhere, e.g. in a tuning grid
    synthetic_spec(params)
    pair_spec(params)
    fashion_mnist_mini_spec(params)
    for name in params.get("methods") or {}:
        _method(params, name)
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
            if not isinstance(s, int) or s < 0:
                raise ConfigError(f"{section}.seeds: seeds are non-negative integers, got {s!r}")
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
    _shared_sections(params)
    for name in (params.get("train") or {}).get("by_dataset") or {}:
        _shared_sections(_by_dataset(params, name))
    validate_bimodal(params)
    _check_pretrained_image_encoder(params)
    validate_tuning(params)
    validate_convergence(params)
    for name in params.get("studies") or {}:
        spec = study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                study_run_config(params, name, method, value, spec.seeds[0])
    shared = sorted(set(params.get("studies") or {}) & set(params.get("bimodal_studies") or {}))
    if shared:
        raise ConfigError(f"bimodal_studies: {shared} also defined under studies (both write studies/<name>/)")
    for name in params.get("bimodal_studies") or {}:
        spec = bimodal_study_spec(params, name)
        for method in spec.methods:
            for value in spec.values:
                bimodal_study_run_config(params, name, method, value, spec.seeds[0])


def _check_pretrained_image_encoder(params: dict[str, Any]) -> None:
    """``bimodal.image_encoder.init`` names the encoder a ``pretrain`` run exports
    (``runs/<method>-<dataset>-s<seed>/artifacts/encoder.pt``), and that run trains the same architecture."""
    image = ((params.get("bimodal") or {}).get("image_encoder") or {})
    init = image.get("init")
    if not init:
        return
    pretrain = params.get("pretrain") or {}
    runs = {f"runs/{run_id(m, d, s)}/artifacts/encoder.pt": (m, d, s) for m in pretrain.get("methods") or []
            for d in pretrain.get("datasets") or [] for s in (pretrain.get("seeds") or [])[:1]}
    if init not in runs:
        raise ConfigError(f"bimodal.image_encoder.init: {init!r} is not the encoder a pretrain run exports "
                          f"({sorted(runs) or 'no pretrain section'})")
    encoder = run_config(params, *runs[init]).encoder
    for key in ("arch", "width", "cifar_stem"):
        if image.get(key, getattr(encoder, key)) != getattr(encoder, key):
            raise ConfigError(f"bimodal.image_encoder.{key}: {image.get(key)!r}, but the pretrain run {init} trains "
                              f"{getattr(encoder, key)!r} (set it with train.by_dataset.<dataset>.model.encoder.{key})")
