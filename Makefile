# Two commands on a fresh machine (Java 17 is the only system prerequisite):
#   make demo   - installs into .venv, generates a week of logs and runs every estimator on the embedded Spark
#   make test   - installs into .venv and runs the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/scavenger demo --out demo-out

test: $(STAMP)
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) demo-out .pytest_cache
