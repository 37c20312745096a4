# KnowHub: `make run` starts everything, `make test` runs the fast suite, `make test-all` every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-slow test-all fuzz install clean-var

run: $(STAMP)
	$(BIN)/python manage.py serve

# The fast suite: every test not marked slow (tests/conftest.py marks them), about 3 minutes on 2 cores.
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Only the slow tests: subprocess stacks, real Celery workers, browsers, fault injection, load, benches.
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

# Every test, fast and slow: what CI (.ci/run) runs.
test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Schemathesis against a live server, every phase, FUZZ_EXAMPLES per operation (not part of .ci/run).
FUZZ_EXAMPLES ?= 50
fuzz: $(STAMP)
	KNOWHUB_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) KNOWHUB_FUZZ_PHASES=examples,coverage,fuzzing,stateful \
		$(BIN)/python -m pytest -p no:cacheprovider tests/api/test_schemathesis.py

install: $(STAMP)

# Reinstall only when the dependency list changes.
$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet -e ./clients/python
	touch $(STAMP)

# Deletes local data (the embedded database, generated keys): asks first.
clean-var:
	@read -p "Delete var/ (local database and keys)? [y/N] " ok && [ "$$ok" = y ] && rm -rf var

# `make run` logs readable text lines (one per request and per job); deployments keep the default, JSON lines.
run: export LOG_FORMAT ?= text
