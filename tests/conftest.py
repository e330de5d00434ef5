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

# Small data: few shuffle partitions, no UI, a 4g heap for the few tests that build sizeable frames.
SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
}


@pytest.fixture(scope="session")
def spark():
    """The suite's one SparkSession (embedded, ``local[2]``); stopped at the end of the run."""
    from scavenger.session import get_spark

    session = get_spark(app_name="scavenger-tests", master=os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
                        conf={**SESSION_CONF, "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="scv-wh-")})
    yield session
    session.stop()


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


def pytest_collection_modifyitems(items):
    """Tests that use the ``spark`` fixture (a JVM in this process) are marked ``spark``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
