# Two commands: `make repro` (set-up, then the pipeline) and `make test` (set-up, then the tests).
# Everything runs from .venv, created here when missing; nothing relies on what the machine has installed.

PYTHON ?= python3.11
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PROFILE ?=
# pipeline stages at a time (python -m isogclr repro); JOBS=1 on a machine with one GPU
JOBS ?= 2
# FORCE=1: rerun every stage, up to date or not (python -m isogclr repro --force): verifies the replication from scratch
FORCE ?=
export PATH := $(BIN):$(PATH)
export HF_HUB_OFFLINE := 1
export PYTHONHASHSEED := 0

.PHONY: setup data-packages repro test lint notebooks benchmarks clean-venv

# torch's CUDA build brings ~4 GB of nvidia/triton libraries: .venv takes ~6.4 GB with its bytecode.
# pip keeps no cache copy, and a disk too small is reported before anything is installed.
# The install byte-compiles: where PYTHONDONTWRITEBYTECODE is set, nothing else would, and every
# stage's process would compile torch, timm and DVC again (~18 s each before a run's first step).
# uv installs the same versions as pip (the same `pip freeze`) in 41 s instead of 85 s on 2 cores; where it
# cannot reach an index (it does not read pip's configuration), pip installs instead, as it says.
VENV_GB ?= 6.5

$(VENV)/.installed: pyproject.toml requirements/constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (set PYTHON=/path/to/python3.11)"; exit 1; }
	@free_kb=$$(df -Pk . | awk 'NR==2 {print $$4}'); need_kb=$$(awk 'BEGIN {printf "%.0f", $(VENV_GB) * 1048576}'); \
	if [ -z "$$free_kb" ] || [ -x $(BIN)/python ]; then :; \
	elif [ "$$free_kb" -lt "$$need_kb" ]; then \
		echo "error: $(CURDIR) has $$((free_kb / 1048576)) GB free; the environment (.venv: torch with its CUDA libraries) needs about $(VENV_GB) GB"; exit 1; fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-cache-dir --upgrade pip
	$(BIN)/python -m pip install --quiet --no-cache-dir -c requirements/constraints.txt uv
	UV_NO_CACHE=1 $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode \
		-c requirements/constraints.txt -e '.[dev]' || { \
		echo "uv could not install the environment (it reads UV_INDEX_URL, not pip's configuration); installing with pip"; \
		$(BIN)/python -m pip install --quiet --no-cache-dir -c requirements/constraints.txt -e '.[dev]'; }
	touch $@

setup: $(VENV)/.installed data-packages

# Debian packages, installed where apt-get is available (as root): dataset-fashion-mnist (the one small real
# dataset: every profile and the tests read it) and chromium (the browser test of the HTML reports, skipped
# without it). apt waits up to 5 minutes for a lock held by another apt process. Set-up stops here, before
# any test, when Fashion-MNIST is still missing; a missing chromium is only a note.
APT := apt-get -o DPkg::Lock::Timeout=300 -qq
FASHION_MNIST := /usr/share/datasets/fashion-mnist

data-packages:
	@want=""; [ -d $(FASHION_MNIST) ] || [ -d data/fashion_mnist ] || want="dataset-fashion-mnist"; \
	command -v chromium >/dev/null || want="$$want chromium"; \
	if [ -n "$$want" ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		$(APT) update || echo "warning: apt-get update failed"; \
		for pkg in $$want; do $(APT) install -y $$pkg >/dev/null || echo "warning: apt-get install $$pkg failed"; done; \
	fi; \
	command -v chromium >/dev/null || \
		echo "note: chromium is missing, so the browser test of reports/ will be skipped (sudo apt-get install -y chromium)"; \
	if [ ! -d $(FASHION_MNIST) ] && [ ! -d data/fashion_mnist ]; then \
		echo "error: Fashion-MNIST is missing ($(FASHION_MNIST)); the tests and the pipeline read it." \
			"Install it with: sudo apt-get install -y dataset-fashion-mnist (or put its four idx files in data/fashion_mnist/)"; \
		exit 1; fi

repro: setup
	@if [ -n "$(PROFILE)" ]; then $(BIN)/python -m isogclr profile $(PROFILE); fi
	$(BIN)/python -m isogclr validate --params params.yaml
	$(BIN)/python -m isogclr repro --jobs $(JOBS)$(if $(filter-out 0,$(FORCE)), --force)

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests benchmarks

notebooks: setup
	$(BIN)/python -m isogclr notebooks

benchmarks: setup
	$(BIN)/python benchmarks/bench_losses.py
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/bench_augment.py

clean-venv:
	rm -rf $(VENV)
