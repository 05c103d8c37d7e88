# driftline: `make demo` runs the whole stack, `make test` runs every test (what CI runs), `make test-fast`
# the inner loop (everything but the e2e, postgres, browser and slow tests).
# Both install what they need first (a .venv with pinned torch, the system packages the tests use).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pip prints a warning for every local index it finds empty; they are noise.
PIP_QUIET := grep -v -e "is ignored: it is neither a file nor a directory" || true

.PHONY: install demo test test-fast lint typecheck doctest bench bench-peers clean system-deps

install: $(STAMP)

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	@bash scripts/install-system-deps.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing driftline with every extra (worker, dashboard, reports, broker, spark, dask) into $(VENV) (torch 2.13.0 CPU, pandas 3.0) ..."
	@$(BIN)/python -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[all,test]" 2>&1 | ($(PIP_QUIET))
	@$(BIN)/python -c "import torch, evidently, driftline" || { echo "install failed: see the pip output above"; exit 1; }
	@touch $(STAMP)

demo: install
	$(BIN)/driftline up

# Test processes (pytest-xdist): most of the long tests wait on brokers, servers and `driftline up` windows
# rather than compute, so more processes than cores pay; tests that share a session fixture run in one
# process (`@pytest.mark.xdist_group`, --dist loadgroup). The 25 slowest tests are listed after every run.
TEST_WORKERS ?= 3
PYTEST_RUN := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25
FAST := not e2e and not postgres and not browser and not slow

test: lint typecheck doctest
	$(PYTEST_RUN)

test-fast: lint typecheck doctest
	$(PYTEST_RUN) -m "$(FAST)"

# ruff with the small rule set of pyproject.toml's [tool.ruff.lint]
lint: install
	$(BIN)/ruff check .

# mypy on the core and the detectors as they install (scripts/typecheck.py; settings in pyproject's [tool.mypy])
typecheck: install
	$(BIN)/python scripts/typecheck.py

# the examples in the core's and the detectors' docstrings
doctest: install
	$(BIN)/python -m pytest -q --doctest-modules driftline detectors

bench: install
	$(BIN)/python bench/events.py
	$(BIN)/python bench/detectors.py
	$(BIN)/python bench/worker.py
	$(BIN)/python bench/collector.py
	$(BIN)/python bench/window_state.py
	$(BIN)/python bench/dashboard.py
	$(BIN)/python bench/catchup.py

# The benchmarks against peers that are not driftline dependencies: each peer in its own venv under bench/.venvs/
# (bench/peer_envs/*.sh; long installs), then the embedding and detection-quality benchmarks with them.
bench-peers: install
	bash bench/peer_envs/alibi.sh bench/.venvs/alibi
	bash bench/peer_envs/nannyml.sh bench/.venvs/nannyml
	bash bench/peer_envs/river.sh bench/.venvs/river
	$(BIN)/python bench/embeddings.py --alibi bench/.venvs/alibi/bin/python
	$(BIN)/python bench/detection_quality.py --nannyml bench/.venvs/nannyml/bin/python
	$(BIN)/python bench/estimation_real.py --nannyml bench/.venvs/nannyml/bin/python
	$(BIN)/python bench/concept_drift.py --river bench/.venvs/river/bin/python

clean:
	rm -rf $(VENV) .driftline .pytest_cache
