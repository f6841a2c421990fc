# Every target sets up .venv itself, so a fresh clone needs nothing but python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONTRACT_STAMP := $(VENV)/.installed-contract

.PHONY: install test lint bench clean serve contract demo

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(CONTRACT_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,contract]'
	touch $(CONTRACT_STAMP)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy siftlib

bench: install
	@for f in tests/bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# The gateway on 127.0.0.1:8787 with the embedded SQLite store; config from $$SIFT_CONFIG or the user config dir.
serve: install
	$(BIN)/sift serve

# Real-client contracts: the Firecrawl SDK and the Hermes agent against /v2/search.
contract: $(CONTRACT_STAMP)
	$(BIN)/python -m pytest -q -m contract tests/contract

# Loopback fakes serving testdata/'s recorded fixtures, a gateway on them, two searches.
demo: $(CONTRACT_STAMP)
	$(BIN)/python testdata/demo/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
