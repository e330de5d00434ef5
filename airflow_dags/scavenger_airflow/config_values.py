"""The values a scavenger DAG setting may take, and the checks of one setting (config.py checks a whole
configuration with them). Pure Python: no Airflow, no Spark, no I/O."""
from __future__ import annotations

import datetime as _dt
import re

ENGINES = ("spark", "duckdb")
# estimate: ADCs from the evaluated window's own logs; daily: the table of scavenger_daily's `adc` task for the
# window's last day ({root}/adc/dt=<to>/adc)
ADC_SOURCES = ("estimate", "daily")
ADC_METHODS = ("naive", "uniform", "heuristic", "variance_optimal")
REPORT_MODES = ("required", "if_available", "off")
STATS_COMMANDS = ("auto", "stats", "evaluate")
PRIOR_MEAN_RANGE = (0.0, 1000.0)
MAX_WINDOW_DAYS = 366

_TABLE = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){1,2}"   # qualified: db.t or cat.db.t
_PATH = r"/[A-Za-z0-9_./=:+@%,-]*"
_URI = r"[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9_./=:+@%,-]+"
# JSON-schema friendly (no lookarounds): an absolute path, a URI, or a catalog table name.
SOURCE_PATTERN = rf"^(?:{_PATH}|{_URI}|{_TABLE})$"
LOCATION_PATTERN = rf"^(?:{_PATH}|{_URI})$"
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
ESTIMATOR_PATTERN = r"^[a-z0-9_+]{1,64}$"   # an estimator's name or alias (pi++); the registry checks it at run time
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
SPARK_KEY_PATTERN = r"^spark\.[A-Za-z0-9_.-]+$"
SPARK_VALUE_PATTERN = r"^[A-Za-z0-9_./=:+@%,\[\]* -]{0,512}$"


class ConfigError(ValueError):
    """A setting or a param that fails validation; the message names the key and what is allowed."""


def check_pattern(pattern: str, value, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(pattern, value) or "/../" in value + "/" \
            or value.startswith("-"):
        raise ConfigError(f"{what}: {value!r} is not allowed (expected a value matching {pattern})")
    return value


def check_source(value, what: str) -> str:
    """A logs/decisions source: an absolute path, a URI, or a qualified catalog table name [catalog.]db.table."""
    return check_pattern(SOURCE_PATTERN, value, what)


def check_location(value, what: str) -> str:
    """An output location: an absolute path or a URI (never a table)."""
    return check_pattern(LOCATION_PATTERN, value, what)


def check_date(value, what: str) -> str:
    check_pattern(DATE_PATTERN, value, what)
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{what}: {value!r} is not a calendar date YYYY-MM-DD") from None
    return value


def check_prior_mean(value, what: str = "prior_mean"):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what}: expected a number or null, got {value!r}")
    lo, hi = PRIOR_MEAN_RANGE
    if not (lo <= float(value) <= hi):
        raise ConfigError(f"{what}: {value} is outside [{lo}, {hi}]")
    return float(value)


def check_enum(value, allowed, what: str):
    """None or one of ``allowed``."""
    if value is None:
        return None
    if value not in allowed:
        raise ConfigError(f"{what}: {value!r} is not one of {list(allowed)}")
    return value


def check_adc_source(value, what: str = "adc_source"):
    return check_enum(value, ADC_SOURCES, what)
