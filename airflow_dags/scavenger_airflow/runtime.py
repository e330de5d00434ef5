"""Run-time helpers of the DAGs' ``plan`` tasks: read the scavenger config (Variables + file) and fail fast.

Imported only inside task callables, so parsing a DAG file never reads Variables or files.
"""
from __future__ import annotations

from airflow.sdk import Variable
from airflow.sdk.exceptions import AirflowFailException

from . import config as C

VAR_CONFIG = "scavenger_config"
VAR_CONFIG_FILE = "scavenger_config_file"


def load_config() -> dict:
    """DEFAULTS <- file (Variable scavenger_config_file or $SCAVENGER_AIRFLOW_CONFIG) <- Variable scavenger_config.

    A bad setting fails the task at once (no retries) with the message naming the key.
    """
    try:
        file_text = C.read_config_file(Variable.get(VAR_CONFIG_FILE, default=None))
        return C.merge_config(file_text, Variable.get(VAR_CONFIG, default=None))
    except C.ConfigError as exc:
        raise AirflowFailException(f"scavenger config: {exc}") from None
