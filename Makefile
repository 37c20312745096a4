# KnowHub: `make run` starts everything, `make test` tests everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test fuzz install clean-var

run: $(STAMP)
	$(BIN)/python manage.py serve

test: $(STAMP)
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
