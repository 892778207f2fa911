"""methods.<m>.pin: a searched knob held at one value in every run of a tuned method (its selection's candidates,
its tuned and untuned runs), for an ablation; what would be ambiguous is refused with our message; the knobs a
run used are what it writes to knobs.json."""

from __future__ import annotations

import copy
import json

import pytest

from isogclr.config.core import run_config
from isogclr.config.profiles import load_params
from isogclr.config.selection import with_selection
from isogclr.config.tuning import tuning_candidates
from isogclr.config.typed import ConfigError
from isogclr.config.validate import validate_params

from .conftest import ROOT

PARAMS = load_params(ROOT / "params.yaml")


def pinned(**pin) -> dict:
    params = copy.deepcopy(PARAMS)
    params["methods"]["isogclr"]["pin"] = pin
    return params


def test_a_pin_holds_the_knob_in_every_candidate_and_every_run(tmp_path):
    params = pinned(rho=0.5)
    validate_params(params)
    candidates = tuning_candidates(params, "isogclr")
    assert [c["rho"] for c in candidates] == [0.5, 0.5, 0.5]  # the selection chooses the other knobs
    assert [c["tau_init"] for c in candidates] == [c["tau_init"] for c in tuning_candidates(PARAMS, "isogclr")]
    untuned = run_config(params, "isogclr", "synth10_lt", 0).method
    assert untuned.kwargs["rho"] == 0.5 and untuned.knobs()["rho"] == 0.5 and untuned.knobs()["loss"] == "isogclr"
    # a selection written before the pin (rho 0.3) is overridden by it; its other knobs are kept
    (tmp_path / "isogclr").mkdir()
    (tmp_path / "isogclr" / "selected.json").write_text(json.dumps(
        {"knobs": {"rho": 0.3, "tau_init": 0.2, "eta": 0.03, "beta0": 0.5, "beta1": 0.5}}))
    tuned = with_selection(params, run_config(params, "isogclr", "synth10_lt", 0), tmp_path).method
    assert tuned.kwargs["rho"] == 0.5 and tuned.kwargs["tau_init"] == 0.2
    unpinned = with_selection(PARAMS, run_config(PARAMS, "isogclr", "synth10_lt", 0), tmp_path).method
    assert unpinned.kwargs["rho"] == 0.3


def test_what_would_be_ambiguous_is_refused_with_our_message():
    with pytest.raises(ConfigError, match=r"methods.isogclr.pin.tau_min: not a searched knob of isogclr .*set it "
                                          r"directly, methods.isogclr.tau_min"):
        validate_params(pinned(tau_min=0.1))
    params = copy.deepcopy(PARAMS)
    params["methods"]["flatclr"]["pin"] = {"tau": 0.3}
    with pytest.raises(ConfigError, match=r"methods.flatclr.pin: flatclr has no search .*set its knobs directly"):
        validate_params(params)
    with pytest.raises(ConfigError, match=r"methods.isogclr.pin: expected a mapping"):
        validate_params(pinned())
    with pytest.raises(ConfigError, match=r"methods.isogclr.pin.rhoo: unknown key|not a searched knob"):
        validate_params(pinned(rhoo=0.5))


def test_a_searched_knob_set_directly_names_the_pin():
    """`dvc exp run -S methods.isogclr.rho=0.5` (params.yaml marks it `selected`) gives our message, which says
    how to pin it instead; a marker on a knob that is not searched is refused too."""
    params = copy.deepcopy(PARAMS)
    params["methods"]["isogclr"]["rho"] = 0.5
    with pytest.raises(ConfigError, match=r"methods.isogclr.rho: 0.5, but it is a knob of methods.isogclr.search.*"
                                          r"pin it: methods.isogclr.pin: \{rho: 0.5\}"):
        validate_params(params)
    params["methods"]["isogclr"]["rho"] = "selected"
    params["methods"]["isogclr"]["tau_max"] = "selected"
    with pytest.raises(ConfigError, match=r"methods.isogclr.tau_max: 'selected' marks a knob of "
                                          r"methods.isogclr.search, and tau_max is not one"):
        validate_params(params)
