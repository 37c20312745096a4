# KnowHub: `make run` starts everything, `make test` runs the fast suite, `make test-all` every test.
# `make install` is the full development install (what the test targets install).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: running needs the runtime dependencies only; tests add the test extras and the client package.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PIP := PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet

.PHONY: run test test-slow test-all fuzz install clean-var

run: $(RUN_STAMP)
	$(BIN)/python manage.py serve

# The fast suite: every test not marked slow (tests/conftest.py marks them), about 5 minutes on 2 cores.
test: $(DEV_STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Only the slow tests: subprocess stacks, real Celery workers, browsers, fault injection, load, benches.
test-slow: $(DEV_STAMP)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

# Every test, fast and slow: what CI (.ci/run) runs.
test-all: $(DEV_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Schemathesis against a live server, every phase, FUZZ_EXAMPLES per operation (not part of .ci/run).
FUZZ_EXAMPLES ?= 50
fuzz: $(DEV_STAMP)
	KNOWHUB_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) KNOWHUB_FUZZ_PHASES=examples,coverage,fuzzing,stateful \
		$(BIN)/python -m pytest -p no:cacheprovider tests/api/test_schemathesis.py

install: $(DEV_STAMP)

# Reinstall only when the dependency list changes. The server needs neither the test extras nor the
# agent client (clients/python: for agents and examples/, and the tests that drive the API with it).
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP) pyproject.toml clients/python/pyproject.toml
	$(PIP) -e '.[test]'
	$(PIP) -e ./clients/python
	touch $(DEV_STAMP)

# Deletes local data (the embedded database, generated keys): asks first.
clean-var:
	@read -p "Delete var/ (local database and keys)? [y/N] " ok && [ "$$ok" = y ] && rm -rf var

# `make run` logs readable text lines (one per request and per job); deployments keep the default, JSON lines.
run: export LOG_FORMAT ?= text
