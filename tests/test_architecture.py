"""docs/architecture.md's walk from ``methods.isogclr.rho`` in params.yaml to the line of the loss that reads it,
followed through the imports: the params reader, the config that carries ``rho``, the loss table's line that names
``ISogCLRLoss``, and the loss's source."""

from __future__ import annotations

import copy
import importlib
import inspect

from isogclr.config.core import MethodConfig, method_config
from isogclr.config.profiles import load_params
from isogclr.losses import ISogCLRLoss
from isogclr.losses.loss_table import LOSSES, UNIMODAL, build_loss

from .conftest import ROOT

PAGE = ROOT / "docs" / "architecture.md"


def test_the_walk_from_rho_to_its_line_holds():
    params = load_params(ROOT / "params.yaml")  # hop 2
    assert "rho" in params["methods"]["isogclr"]  # hop 1
    pinned = copy.deepcopy(params)
    pinned["methods"]["isogclr"]["pin"] = {"rho": 0.25}
    cfg = method_config(pinned, "isogclr")  # hop 3
    assert isinstance(cfg, MethodConfig) and cfg.loss == "isogclr" and cfg.kwargs["rho"] == 0.25
    assert "build_loss(self.loss" in inspect.getsource(MethodConfig.build)  # hop 4
    target = UNIMODAL[cfg.loss]  # hop 5
    assert target == "isogclr.losses.isogclr:ISogCLRLoss" and LOSSES.module_of(cfg.loss) == "isogclr.losses.isogclr"
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert cls is ISogCLRLoss is LOSSES["isogclr"] and "LOSSES[name]" in inspect.getsource(build_loss)
    loss = cfg.build(8)  # hop 6
    assert type(loss) is ISogCLRLoss and loss.rho == 0.25
    assert "rho" in inspect.signature(ISogCLRLoss.__init__).parameters
    assert "self._init_temperatures(rho" in inspect.getsource(ISogCLRLoss.__init__)
    assert "self.rho" in inspect.getsource(ISogCLRLoss.forward)  # hop 7: the line that reads it
    source_file = inspect.getsourcefile(ISogCLRLoss)
    assert source_file is not None and source_file.endswith("src/isogclr/losses/isogclr.py")


def test_the_page_names_every_hop():
    page = PAGE.read_text()
    for hop in ("params.yaml", "methods.isogclr.rho", "src/isogclr/config/profiles.py", "load_params",
                "src/isogclr/config/core.py", "method_config", "MethodConfig.build", "src/isogclr/losses/loss_table.py",
                "build_loss", '"isogclr.losses.isogclr:ISogCLRLoss"', "src/isogclr/losses/isogclr.py",
                "ISogCLRLoss.__init__", "ISogCLRLoss.forward", "self.rho"):
        assert hop in page, hop
    forward = inspect.getsource(ISogCLRLoss.forward)
    assert "terms = tau * (log_g + self.rho)" in forward and "terms = tau * (log_g + self.rho)" in page
