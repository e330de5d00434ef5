"""Shared fixtures: one SparkSession for the whole suite, paths to the OBD sample."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OBD_DIR = Path(os.environ.get("SCAVENGER_OBD_DIR", REPO.parent / "shared" / "data" / "obd"))


@pytest.fixture(scope="session")
def spark():
    from scavenger.session import get_spark

    session = get_spark(
        app_name="scavenger-tests",
        master=os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "4g",
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="scavenger-warehouse-"),
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def obd_dir() -> Path:
    if not OBD_DIR.exists():
        pytest.skip(f"OBD sample not found at {OBD_DIR}")
    return OBD_DIR
