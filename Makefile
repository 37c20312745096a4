# KnowHub: `make run` starts everything, `make test` tests everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install clean-var

run: $(STAMP)
	$(BIN)/python manage.py serve

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
