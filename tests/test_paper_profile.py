"""profiles/paper.yaml equals the papers' settings transcribed in profiles/paper_settings.yaml, for every table;
the deliberate differences listed there are what the profile holds."""

from __future__ import annotations

import copy

import pytest
import yaml

from isogclr.config.bimodal import bimodal_run_config, bimodal_study_run_config, bimodal_study_spec
from isogclr.config.core import run_config
from isogclr.config.profiles import load_params

from .conftest import ROOT

PAPER = load_params(ROOT / "profiles" / "paper.yaml")
SETTINGS = yaml.safe_load((ROOT / "profiles" / "paper_settings.yaml").read_text())
MISSING = object()


def resolve(cfg, path: str):
    """An attribute path of a resolved run config; ``method.<name>.<key>`` reads that method's arguments."""
    parts = path.split(".")
    if parts[0] == "method":
        assert cfg.method.name == parts[1], f"{path}: resolved for method {cfg.method.name}"
        return cfg.method.kwargs.get(parts[2], MISSING)
    node = cfg
    for part in parts:
        if node is None:  # e.g. stream.image_size of an in-memory run
            return None
        node = getattr(node, part, MISSING)
        if node is MISSING:
            return MISSING
    return list(node) if isinstance(node, tuple) else node


def runs(entry: dict) -> list:
    """The resolved run configs of one table entry, for the methods its settings name (else isogclr / clip)."""
    methods = sorted({k.split(".")[1] for k in {**entry["settings"], **entry.get("in_sets", {})}
                      if k.startswith("method.")})
    params = copy.deepcopy(PAPER)
    if "unimodal" in entry:
        return [run_config(params, m, d, 0) for d in entry["unimodal"] for m in methods or ["simclr"]]
    if "bimodal_study" in entry:
        spec = bimodal_study_spec(params, entry["bimodal_study"])
        return [bimodal_study_run_config(params, entry["bimodal_study"], m, v, 0) for m in spec.methods
                for v in spec.values]
    return [bimodal_run_config(params, m, 0) for m in methods or PAPER["bimodal"]["methods"][:1]]


@pytest.mark.parametrize("entry", SETTINGS["tables"], ids=[e["name"] for e in SETTINGS["tables"]])
def test_profile_matches_the_papers(entry):
    mismatches = []
    for cfg in runs(entry):
        where = getattr(cfg, "dataset", "bimodal")
        for path, expected in entry["settings"].items():
            if path.startswith("method.") and cfg.method.name != path.split(".")[1]:
                continue
            got = resolve(cfg, path)
            if got != expected:
                mismatches.append(f"{entry['name']} / {where} / {cfg.method.name}: {path} = {got!r}, paper "
                                  f"{expected!r}")
        for path, allowed in entry.get("in_sets", {}).items():
            if cfg.method.name == path.split(".")[1] and resolve(cfg, path) not in allowed:
                mismatches.append(f"{entry['name']}: {path} = {resolve(cfg, path)!r}, not in the paper's {allowed}")
    assert not mismatches, "\n".join(mismatches)


def test_every_table_dataset_has_the_papers_settings():
    covered = {d for e in SETTINGS["tables"] for d in e.get("unimodal", [])}
    for section in ("table1", "table3"):
        assert set(PAPER[section]["datasets"]) <= covered, section
    assert {"imagenet100", "inaturalist"} <= set(PAPER["table1"]["datasets"])  # the paper's six datasets


def _dotted(params: dict, key: str):
    node = params
    for part in key.split("."):
        node = node[part]
    return node


@pytest.mark.parametrize("diff", SETTINGS["differences"], ids=[d["key"] for d in SETTINGS["differences"]])
def test_listed_differences_are_what_the_profile_holds(diff):
    assert diff["reason"].strip() and diff["paper"] != diff["profile"]
    if diff["key"].startswith("studies."):
        for key in diff["key"].split(", "):
            assert str(_dotted(PAPER, key)) in str(diff["profile"]), key
        return
    entry = next(e for e in SETTINGS["tables"] if e["name"] == diff["table"])
    for cfg in runs(entry):
        assert resolve(cfg, diff["key"]) == diff["profile"], (cfg.dataset, diff["key"])


def test_imagenet_scale_runs_stream_at_224_with_resnet50():
    cfg = run_config(copy.deepcopy(PAPER), "isogclr", "imagenet100", 0)
    assert (cfg.stream.image_size, cfg.encoder.arch, cfg.train.batch_size, cfg.optimizer.lr) == (224, "resnet50",
                                                                                                 256, 1.2)
    cifar = run_config(copy.deepcopy(PAPER), "isogclr", "cifar10", 0)
    assert cifar.stream is None and cifar.encoder.arch == "resnet18" and cifar.train.batch_size == 128
