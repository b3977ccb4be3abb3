# oncely: build, lint, test.  `make demo` and `make test` do all set-up on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Stamp file: the venv is (re)installed only when pyproject.toml is newer than it.
STAMP  := $(VENV)/.installed

# `make test` runs the Hypothesis properties at CI strength (5,000 examples); override with
# `make test HYPOTHESIS_PROFILE=dev` for a quicker local run.  Extra pytest args: PYTEST_ARGS.
HYPOTHESIS_PROFILE ?= ci
PYTEST_ARGS ?=
LINT_PATHS := $(wildcard src tests bench examples)

.DEFAULT_GOAL := help

.PHONY: help venv .venv demo lint test faults docs bench bench-peers clean

help:
	@echo "make demo   create .venv, install, run the example app with two worker processes"
	@echo "make test   create .venv, install dev deps, run lint and the whole test suite"
	@echo "make faults the fault suite's long version (kills, pauses, outages, skew, deploys, bad input)"
	@echo "make docs   install the docs tools into .venv, build the site into site/ (mkdocs --strict)"
	@echo "make lint   ruff check, ruff format --check, mypy (strict on src/), oncely lint on src tests bench examples"
	@echo "make bench  every benchmark beside the peers into docs/performance.md (RUNS=5; RUNS=1 for a quick look)"
	@echo "make bench-peers  bench/engine.py beside procrastinate, pgqueuer, APScheduler 4; bench/lint.py beside flake8, lint-imports, ruff"
	@echo "make clean  remove .venv and caches"

venv .venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "error: oncely needs Python >= 3.11; '$(PYTHON)' is $$($(PYTHON) -V 2>&1)." \
		       "Run e.g. 'make PYTHON=python3.11'." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/oncely lint $(LINT_PATHS)

# A second track runs beside the rest, which mostly waits on PostgreSQL and worker processes:
# tests/unit (the Hypothesis properties: CPU only, no database, no subprocess), then the tests that
# judge no time of their own (the engine model's fake clock, the public API fuzz). One after the
# other they took twelve minutes on a 2-core machine. Its report is printed when both are done.
UNIT_LOG := .pytest-unit.log
BESIDE   := tests/engine/test_engine_model.py tests/faults/test_public_api_fuzz.py

test: $(STAMP) lint
	@( HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(BIN)/pytest tests/unit -p no:cacheprovider \
		$(PYTEST_ARGS); units=$$?; \
	  HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(BIN)/pytest $(BESIDE) -p no:cacheprovider \
		$(PYTEST_ARGS); beside=$$?; [ $$units -eq 0 ] && [ $$beside -eq 0 ] ) \
		> $(UNIT_LOG) 2>&1 & side=$$!; \
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(BIN)/pytest --ignore=tests/unit \
		$(addprefix --ignore=,$(BESIDE)) $(PYTEST_ARGS); \
	rest=$$?; wait $$side; sides=$$?; \
	echo "--- tests/unit and $(BESIDE) (ran beside the rest) ---"; cat $(UNIT_LOG); \
	[ $$rest -eq 0 ] && [ $$sides -eq 0 ]

# The documentation tools are an extra of their own (pyproject's `docs`), never runtime deps.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -e '.[dev,docs]'
	touch $@

# NO_MKDOCS_2_WARNING: mkdocs-material prints a notice about its own future on every build; it
# says nothing about these pages.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# `make test` runs the fault suite's short version; this is the long one, with the engine model's
# thousands of examples. Its counts are printed in a section at the end.
faults: $(STAMP)
	ONCELY_FAULTS=long $(BIN)/pytest tests/faults tests/engine/test_engine_model.py -m faults \
		$(PYTEST_ARGS)

# The peers (procrastinate, pgqueuer, APScheduler 4), the peer linters and matplotlib live in
# their own virtualenv: bench-only, never dependencies of oncely.
PEERS_STAMP := .venv-bench/.installed

# `make bench` runs every benchmark beside the peers (bench/report.py; about 2.5 hours on 2
# cores) and writes docs/performance.md and docs/performance-lag.png. RUNS: runs per figure (median);
# BENCH_ARGS: more options of bench/report.py, e.g. BENCH_ARGS="--peers pgqueuer", or
# BENCH_ARGS=--resume to go on where a stopped run stopped (outcomes are saved in bench/results).
RUNS ?= 5
BENCH_ARGS ?=

bench: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python bench/report.py --runs $(RUNS) --via "make bench RUNS=$(RUNS)" $(BENCH_ARGS)

$(PEERS_STAMP): bench/requirements-peers.txt
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install -r bench/requirements-peers.txt
	touch $@

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/lint.py

clean:
	rm -rf $(VENV) .venv-bench build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf .demo site
	find src tests bench examples -name __pycache__ -type d -prune -exec rm -rf {} +
	find src -maxdepth 2 -name '*.egg-info' -type d -prune -exec rm -rf {} +
