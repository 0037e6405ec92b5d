# Two commands on a fresh machine: `make demo` and `make test`.
# The venv's interpreter: the system's Python 3.11+ when there is one (a distribution builds it with profile-
# guided optimisation and a static libpython: ~20% less CPU importing Prefect than pyenv's default shared,
# unoptimised build, and the suite is CPU-bound), else the first python3 on PATH. PY=... chooses another.
# (Debian ships venv's pip bootstrap apart, in python3-venv: without it the system's Python is passed over.)
SYSTEM_PY := $(shell /usr/bin/python3 -c 'import sys, ensurepip, venv; print(sys.version_info >= (3, 11))' 2>/dev/null)
PY ?= $(if $(filter True,$(SYSTEM_PY)),/usr/bin/python3,python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TESTSTAMP := $(VENV)/.installed-test
DEMOSTAMP := $(VENV)/.installed-demo
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
# the suite and the demo start hundreds of gep processes: let them cache the bytecode of gep/ and flows/
# (an environment that forbids it makes each one compile them again, ~0.2 s of CPU)
unexport PYTHONDONTWRITEBYTECODE
# `python` in gene validation commands resolves through PATH: the venv's first (it has pytest)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test check lint bench clean

# tests run in one process per core (pytest-xdist), a file's tests together so module fixtures are built once;
# most of the suite waits on git, subprocesses and servers, so two cores nearly halve its wall time;
# the longest files first (tests/heavy_first.py), not xdist's default of the files with the most tests
PYTEST_JOBS ?= auto

# the suite's scratch files (a full run makes ~60,000 of them, ~1.4 GB: git repositories, SQLite stores, Prefect
# homes) go to RAM when /dev/shm is a tmpfs with 4 GB free: on a disk, creating and unlinking them costs a run
# 10-20 s (measured on an ext4 mounted with discard; docs/performance.md). There only a failed test's files are
# kept, so a passing run holds no RAM once it ends. `make test TEST_TMPDIR=` keeps the system's temporary folder.
TEST_TMPDIR ?= $(shell d=/dev/shm; [ -d $$d ] && [ -w $$d ] && [ "$$(stat -f -c %T $$d)" = tmpfs ] && \
  [ "$$(df -Pk $$d | awk 'NR==2 {print $$4}')" -ge 4194304 ] && echo $$d)
PYTEST = $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) $(BIN)/python -m pytest -q -n $(PYTEST_JOBS) --dist loadfile \
  --no-loadscope-reorder $(if $(TEST_TMPDIR),-o tmp_path_retention_policy=failed)

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(TESTSTAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# the example workspace's tests run with pytest: the demo's validation needs it in the venv
$(DEMOSTAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q -e '.[demo]'
	touch $@

demo: $(DEMOSTAMP)
	$(BIN)/python examples/run_demo.py $(DEMO_ARGS)

test: $(TESTSTAMP)
	$(BIN)/ruff check gep flows tests bench examples
	$(BIN)/mypy gep flows
	MYPYPATH=tests:bench $(BIN)/mypy bench
	$(PYTEST) $(PYTEST_ARGS)

# the quick loop: lint, types and the tests not marked e2e (tests/conftest.py marks a test e2e from the
# fixtures it uses: a Prefect server, PostgreSQL, a whole cycle in the example workspace or the sandbox)
check: $(TESTSTAMP)
	$(BIN)/ruff check gep flows tests bench examples
	$(BIN)/mypy gep flows
	$(PYTEST) -m "not e2e" $(PYTEST_ARGS)

lint: $(TESTSTAMP)
	$(BIN)/ruff check gep flows tests bench examples
	$(BIN)/mypy gep flows
	MYPYPATH=tests:bench $(BIN)/mypy bench

# bench/fleet.py needs PostgreSQL's driver (a test extra); it starts PostgreSQL itself when
# GEP_TEST_POSTGRES_URL is not set
# every bench prints its figures even when an earlier one misses its target (the A/B table of
# bench/evolution.py comes last); the targets missed are named at the end and make fails
BENCHES = signals store selection cycle cli fleet evolution
bench: $(TESTSTAMP)
	@missed=; for b in $(BENCHES); do echo "== bench/$$b.py"; \
	  $(BIN)/python bench/$$b.py || missed="$$missed $$b"; done; \
	if [ -n "$$missed" ]; then echo "targets missed:$$missed"; exit 1; fi

clean:
	rm -rf $(VENV) .pytest_cache
