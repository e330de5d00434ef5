# Two commands on a fresh machine (Java 17 is the only system prerequisite):
#   make demo   - installs into .venv, generates a week of logs and runs every estimator on DuckDB (no JVM)
#   make test   - installs everything the tests need into .venv (incl. Airflow, ending with one consistent
#                 pyspark) and runs the test suite
#   make notebook - installs Jupyter (the `notebook` extra of pyproject.toml) and opens notebooks/example.ipynb
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
TEST_STAMP := $(VENV)/.installed-test
NOTEBOOK_STAMP := $(VENV)/.installed-notebook

.PHONY: demo test test-fast install install-test notebook clean

$(BASE_STAMP): pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

# Tests also need Airflow 3 + the Spark provider (whose pyspark-client overwrites pyspark's files: the script
# reinstalls pyspark last and verifies every file) and, for the report rendering test, Debian's chromium.
$(TEST_STAMP): pyproject.toml airflow_dags/install_airflow.sh
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null; \
	  else echo "note: chromium not installed (needs root); the report rendering test will be skipped"; fi; \
	fi
	PYTHON=$(PYTHON) bash airflow_dags/install_airflow.sh $(VENV)
	touch $(BASE_STAMP) $@

install: $(BASE_STAMP)

install-test: $(TEST_STAMP)

demo: $(BASE_STAMP)
	$(BIN)/scavenger demo --out demo-out

# Jupyter and an IPython kernel in .venv (pip install -e ".[notebook]"), then the example notebook, run from
# notebooks/ as its relative paths expect (its Spark, DuckDB and the OBD sample: tests/test_api_notebook.py)
$(NOTEBOOK_STAMP): $(BASE_STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e ".[notebook]"
	touch $@

notebook: $(NOTEBOOK_STAMP)
	cd notebooks && $(abspath $(BIN))/jupyter notebook example.ipynb

# the layers of lib/scavenger first (pyproject.toml [tool.importlinter], a fraction of a second), then two workers
# (pytest-xdist), each running whole modules: module fixtures (a cluster, Airflow, a server) stay in one process,
# and the second core works while the first waits on a JVM or a subprocess
test: $(TEST_STAMP)
	$(BIN)/lint-imports --no-cache && $(BIN)/python -m pytest -q -n 2 --dist loadfile

# the inner loop: no JVM, no other process, no long statistics (tests/README.md)
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not e2e and not spark and not slow"

clean:
	rm -rf $(VENV) demo-out .pytest_cache
