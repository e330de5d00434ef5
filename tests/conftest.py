"""Shared fixtures: one SparkSession for the suite, the OBD sample, and a runner for the CLI.

Most tests run on the DuckDB engine (no JVM). Tests that start servers, clusters, Airflow or whole jobs in
subprocesses carry the ``e2e`` marker; tests that use the ``spark`` fixture get the ``spark`` marker here;
``make test-fast`` leaves both out, and the ``slow`` ones. See tests/README.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OBD_DIR = Path(os.environ.get("SCAVENGER_OBD_DIR", REPO.parent / "shared" / "data" / "obd"))
SCAVENGER = Path(sys.executable).with_name("scavenger")

# Spark's interpreted evaluation instead of generated code, for every Spark the tests start: on the tests' few
# thousand rows, compiling each statement's code is most of its time (test_engines.py's table comparisons: 100 s -> 60
# s; the whole suite 1,075-1,106 -> 890-983 s on 2 cores). The answers are the same: Spark's own suites run both
# modes, and a statement whose generated code fails to compile falls back to the interpreter anyway. Generated code
# stays covered where it matters: the standalone cluster's jobs (cluster_util gives them Spark's defaults), the
# 1e7-row sums of test_statistics_numerics.py (the ``spark_codegen`` fixture) and benchmarks/run outside the tests.
CODEGEN = {"spark.sql.codegen.wholeStage": ("false", "true"),          # key: (interpreted, Spark's default)
           "spark.sql.codegen.factoryMode": ("NO_CODEGEN", "FALLBACK")}

# CODEGEN's interpreted values and a class-data-sharing archive of Spark's classes, for every JVM of every Spark
# the tests start (the CLI, spark-submit under Airflow, the Spark Connect server, the notebook's kernel, this
# process's session), through SPARK_SUBMIT_OPTS: see spark_jvm.py
from helpers.spark_jvm import set_test_jvm_opts, stop_builder  # noqa: E402

# The in-process session: few shuffle partitions, no UI, a 4g heap for the few tests that build sizeable frames.
SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
    **{key: interpreted for key, (interpreted, _) in CODEGEN.items()},
}


@pytest.fixture(scope="session")
def spark():
    """The suite's one SparkSession (embedded, ``local[2]``); stopped at the end of the run."""
    from scavenger.session import get_spark

    session = get_spark(app_name="scavenger-tests", master=os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
                        conf={**SESSION_CONF, "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="scv-wh-")})
    yield session
    session.stop()


@pytest.fixture
def spark_codegen(spark):
    """The suite's session with Spark's generated code for one test (its default; the session runs interpreted,
    SESSION_CONF): for a test over millions of rows, where interpreting each row costs more than compiling
    (test_statistics_numerics.py's 1e7 rows: 126 s interpreted)."""
    for key, (_, default) in CODEGEN.items():
        spark.conf.set(key, default)
    try:
        yield spark
    finally:
        for key, (interpreted, _) in CODEGEN.items():
            spark.conf.set(key, interpreted)


@pytest.fixture(scope="session")
def obd_dir() -> Path:
    """The Open Bandit Dataset sample (../shared/data/obd, or $SCAVENGER_OBD_DIR)."""
    if not OBD_DIR.exists():
        pytest.skip(f"OBD sample not found at {OBD_DIR}")
    return OBD_DIR


def run_cli(*args, timeout: float = 600, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """Run ``scavenger <args>`` in a subprocess and return it (exit code, stdout, stderr) for the test to assert."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([str(SCAVENGER), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=cwd)


@pytest.fixture(scope="session")
def cli():
    """``cli("evaluate", "--logs", ...)``: the CLI as a user runs it; returns the CompletedProcess."""
    return run_cli


def pytest_configure(config):
    # before xdist starts its workers, which inherit the environment; a run that leaves Spark out (make test-fast)
    # builds no class archive
    set_test_jvm_opts(CODEGEN, build="not spark" not in (config.option.markexpr or ""))


def pytest_unconfigure(config):
    stop_builder()      # a class archive still being built when the run ends (spark_jvm.py)


def pytest_collection_modifyitems(items):
    """Tests that use the ``spark`` fixture (a JVM in this process) are marked ``spark``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
