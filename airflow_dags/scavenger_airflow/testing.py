"""Test support: an isolated AIRFLOW_HOME (never ~/airflow) set up BEFORE Airflow is imported.

    from scavenger_airflow.testing import isolate_airflow_home
    isolate_airflow_home()          # then import airflow
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

DAGS_FOLDER = Path(__file__).resolve().parents[1]
_MARK = "SCAVENGER_TEST_AIRFLOW_HOME"


def isolate_airflow_home() -> Path:
    """Point AIRFLOW_HOME at one temp dir per test process (removed at exit) and configure a quiet local Airflow.

    Idempotent: the second call (another test module) reuses the same directory.
    """
    home = os.environ.get(_MARK)
    if not home:
        home = tempfile.mkdtemp(prefix="scavenger-airflow-home-")
        os.environ[_MARK] = home
        atexit.register(shutil.rmtree, home, True)
    os.environ["AIRFLOW_HOME"] = home
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS_FOLDER)
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db"
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = '{"conn_type": "spark", "host": "local[*]"}'
    return Path(home)
