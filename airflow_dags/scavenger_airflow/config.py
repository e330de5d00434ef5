"""Configuration of the scavenger DAGs: defaults, checks and merging. Pure Python (no Airflow, no Spark, no I/O at
import; ``read_config_file`` reads a file and is called at run time only). The jobs' argument lists are built from
a checked configuration in ``plans``.

Where the settings come from (later wins), resolved at RUN time by the DAGs' ``plan`` task, never at parse time:
  1. ``DEFAULTS`` below (local: embedded Spark, outputs under ``<repo>/airflow-out``);
  2. a JSON file: the path in the Airflow Variable ``scavenger_config_file`` or in ``$SCAVENGER_AIRFLOW_CONFIG``
     (see ``airflow_dags/scavenger_config.example.json``);
  3. the Airflow Variable ``scavenger_config`` (a JSON object with any subset of the keys).
Every value is checked against strict patterns before it reaches a command line: paths are absolute or URIs,
tables are ``[catalog.][db.]table`` identifiers, nothing may start with ``-`` (no flag injection), and the job
arguments are passed to spark-submit as an argv list (never through a shell).
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import os
from pathlib import Path

from .config_values import (  # noqa: F401 (read as config.<name> by the DAGs, plans and tests)
    ENGINES, ADC_SOURCES, ADC_METHODS, REPORT_MODES, STATS_COMMANDS, PRIOR_MEAN_RANGE, MAX_WINDOW_DAYS, _PATH,
    SOURCE_PATTERN, LOCATION_PATTERN, NAME_PATTERN, ESTIMATOR_PATTERN, DATE_PATTERN, SPARK_KEY_PATTERN,
    SPARK_VALUE_PATTERN, ConfigError, check_pattern, check_source, check_location, check_date, check_prior_mean,
    check_enum, check_adc_source)

REPO = Path(__file__).resolve().parents[2]


def _registry():
    """scavenger.registry, the one declaration of the estimators (lib/ of this checkout when not installed)."""
    try:
        from scavenger import registry
    except ImportError:  # the DAG processor without the package installed: the checkout beside the DAGs
        import sys

        sys.path.insert(0, str(REPO / "lib"))
        from scavenger import registry
    return registry




def __getattr__(name: str):
    """ESTIMATORS / ESTIMATOR_NAMES: the estimators a deployment may name, the registry's (built-in and plugins),
    read when first asked for: parsing a DAG file loads no estimator module (the DAG processor parses them often)."""
    if name == "ESTIMATORS":
        return tuple(_registry().ESTIMATORS)
    if name == "ESTIMATOR_NAMES":
        return tuple(_registry().names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULTS: dict = {
    # where every task writes: {root}/<job>/dt=<ds>/ (a re-run replaces exactly that directory)
    "root": str(REPO / "airflow-out"),
    # the checkout that holds jobs/<name>.py (the spark-submit applications)
    "repo": str(REPO),
    # the statistics stores shared by all days: {stats_dir}/logs/ and {stats_dir}/datasets/<name>/, each
    # <table>/dt=<day>/ (plans.stores)
    "stats_dir": None,  # None -> {root}/stats-store
    "logs": str(REPO / "demo-out" / "logs"),
    # the policy registry: each entry = one decisions dataset (path or table) and optionally which policy ids
    "registry": [{"name": "demo", "decisions": str(REPO / "demo-out" / "decisions"), "policies": []}],
    "window_days": 7,
    # an experiment's first day (YYYY-MM-DD): from it on, each day's evaluate covers experiment_start..dt (not the
    # trailing window), so its running/ holds every day of the experiment (plans.daily_plan); null: the trailing
    # window only
    "experiment_start": None,
    # evaluate's --baseline: each target minus this policy on the same events (another target of the decisions,
    # or "logging" for what the logs earned), with confidence sequences; null: none
    "baseline": None,
    # the gate (`scavenger validate` of the day's logs); only these typed options, mapped to its flags
    "validate": {"great_expectations": True, "checks": None, "max_quarantine_share": None, "cramers_v_max": None,
                 "reward_max": None},
    "estimators": [],          # the estimators this deployment runs ([] -> the default set): validate gates only
                               # their checks, evaluate estimates only them
    "engine": "spark",         # spark: spark-submit through the connection; duckdb: the job in a local process
                               # (small deployments; no JVM). The daily DAG's param `engine` overrides it per run
    "catalog": None,           # a database of the Spark session's catalog: results also as tables <db>.<name>
    "prior_mean": None,        # None -> the job's default (logged mean reward)
    "adc_source": "daily",     # daily: evaluate uses this dt's `adc` task output; estimate: its own window
    "adc_method": None,        # None -> the job's default (heuristic)
    "stats_command": "auto",   # auto: `stats` if that job exists, else `evaluate` over the single day
    "report": "required",      # required | if_available (skip, with a warning, when the job is absent) | off
    "spark_conf": {},          # extra --conf for every job, e.g. {"spark.executor.memory": "4g"}
    "pyspark_python": "",      # "" -> the Python running Airflow (fine for local[*]); set it for a cluster
    "py_files": "",            # e.g. a zip of lib/ for cluster deploy mode
}

KEYS = frozenset(DEFAULTS)


def check_estimators(values, what: str = "estimators") -> list[str]:
    if not isinstance(values, (list, tuple)):
        raise ConfigError(f"{what}: expected a list of estimator names, got {values!r}")
    names = __getattr__("ESTIMATOR_NAMES") if values else ()
    bad = [v for v in values if v not in names]
    if bad:
        raise ConfigError(f"{what}: unknown estimator(s) {bad}; choose from {list(__getattr__('ESTIMATORS'))}")
    if len(set(values)) != len(values):
        raise ConfigError(f"{what}: duplicate estimator in {list(values)}")
    return list(values)


def check_baseline(value, policy_lists=(), what: str = "baseline"):
    """None, "logging", or a policy id; a policy id must be among each given list of policies that is not empty
    (those datasets' evaluate reads only those policies, as `evaluate --policies ... --baseline` requires)."""
    if value is None:
        return None
    check_pattern(NAME_PATTERN, value, what)
    for where, policies in policy_lists:
        if value != "logging" and policies and value not in policies:
            raise ConfigError(f"{what}: {value!r} is not among {where} ({', '.join(policies)}), so its decisions "
                              f"are not read; add it there, or give 'logging' for what the logs earned")
    return value


def validate_config(cfg: dict) -> dict:
    """Return a checked copy of ``cfg`` (all keys of DEFAULTS present); raise ConfigError naming the bad key."""
    unknown = sorted(set(cfg) - KEYS)
    if unknown:
        raise ConfigError(f"unknown config key(s) {unknown}; allowed: {sorted(KEYS)}")
    out = copy.deepcopy(cfg)
    check_location(out["root"], "root")
    check_location(out["repo"], "repo")
    if out["stats_dir"] is None:
        out["stats_dir"] = out["root"].rstrip("/") + "/stats-store"
    check_location(out["stats_dir"], "stats_dir")
    check_source(out["logs"], "logs")
    if not isinstance(out["registry"], list) or not out["registry"]:
        raise ConfigError("registry: expected a non-empty list of {name, decisions, policies}")
    names = set()
    for i, entry in enumerate(out["registry"]):
        if not isinstance(entry, dict) or set(entry) - {"name", "decisions", "policies", "catalog"}:
            raise ConfigError(f"registry[{i}]: expected an object with keys name, decisions, policies (and "
                              f"optionally catalog)")
        check_pattern(NAME_PATTERN, entry.get("name"), f"registry[{i}].name")
        if entry["name"] in names:
            raise ConfigError(f"registry[{i}].name: {entry['name']!r} appears twice")
        names.add(entry["name"])
        check_source(entry.get("decisions"), f"registry[{i}].decisions")
        policies = entry.setdefault("policies", [])
        if not isinstance(policies, list):
            raise ConfigError(f"registry[{i}].policies: expected a list of policy ids")
        for p in policies:
            check_pattern(NAME_PATTERN, p, f"registry[{i}].policies")
    out["validate"] = _check_validate_options(out["validate"])
    wd = out["window_days"]
    if isinstance(wd, bool) or not isinstance(wd, int) or not 1 <= wd <= MAX_WINDOW_DAYS:
        raise ConfigError(f"window_days: expected an integer in [1, {MAX_WINDOW_DAYS}], got {wd!r}")
    out["estimators"] = check_estimators(out["estimators"])
    if out["experiment_start"] is not None:
        check_date(out["experiment_start"], "experiment_start")
    out["baseline"] = check_baseline(out["baseline"], [(f"registry[{i}].policies", e["policies"])
                                                        for i, e in enumerate(out["registry"])])
    out["prior_mean"] = check_prior_mean(out["prior_mean"])
    out["adc_source"] = check_adc_source(out["adc_source"])
    out["adc_method"] = check_enum(out["adc_method"], ADC_METHODS, "adc_method")
    out["engine"] = check_enum(out["engine"], ENGINES, "engine") or "spark"
    _check_catalogs(out)
    if out["stats_command"] not in STATS_COMMANDS:
        raise ConfigError(f"stats_command: {out['stats_command']!r} is not one of {list(STATS_COMMANDS)}")
    if out["report"] not in REPORT_MODES:
        raise ConfigError(f"report: {out['report']!r} is not one of {list(REPORT_MODES)}")
    if not isinstance(out["spark_conf"], dict):
        raise ConfigError("spark_conf: expected an object of spark.* keys to string values")
    for k, v in out["spark_conf"].items():
        check_pattern(SPARK_KEY_PATTERN, k, "spark_conf key")
        check_pattern(SPARK_VALUE_PATTERN, str(v), f"spark_conf[{k}]")
    if out["pyspark_python"]:
        check_pattern(f"^{_PATH}$", out["pyspark_python"], "pyspark_python")
    if out["py_files"]:
        for f in str(out["py_files"]).split(","):
            check_location(f, "py_files")
    return out


CATALOG_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$"


def dataset_catalog(cfg: dict, entry: dict) -> str | None:
    """The database a registry dataset's evaluate writes its tables to: its own ``catalog``, else the config's."""
    return entry.get("catalog") or cfg.get("catalog")


def _check_catalogs(out: dict) -> None:
    """``catalog`` and each registry entry's ``catalog``: database names, Spark only, and one database per dataset.
    Each dataset's evaluate writes <db>.estimates (diagnostics, adc, estimates_by_day, quarantine) with the day's
    partitions replaced, so two datasets in one database would replace each other's rows of every day."""
    names = [("catalog", out["catalog"])] + [(f"registry[{i}].catalog", e.get("catalog"))
                                             for i, e in enumerate(out["registry"])]
    for key, value in names:
        if value is None:
            continue
        check_pattern(CATALOG_PATTERN, value, key)
        if out["engine"] != "spark":
            raise ConfigError(f"{key}: catalog tables are written by Spark; set engine to spark")
    seen: dict = {}
    for e in out["registry"]:
        db = dataset_catalog(out, e)
        if db is None:
            continue
        if db in seen:
            raise ConfigError(f"registry: datasets {seen[db]!r} and {e['name']!r} would both write their estimates "
                              f"to the catalog database {db!r}, each run replacing the other's rows of the day; "
                              f"give each dataset its own database (registry[].catalog)")
        seen[db] = e["name"]


_VALIDATE_DEFAULTS = DEFAULTS["validate"]


def _check_validate_options(opts) -> dict:
    if not isinstance(opts, dict) or set(opts) - set(_VALIDATE_DEFAULTS):
        raise ConfigError(f"validate: expected an object with keys {sorted(_VALIDATE_DEFAULTS)}")
    out = {**_VALIDATE_DEFAULTS, **opts}
    if not isinstance(out["great_expectations"], bool):
        raise ConfigError("validate.great_expectations: expected true or false")
    if out["checks"] is not None:
        check_pattern(r"^[a-e](?:,[a-e]){0,4}$", out["checks"], "validate.checks")
    for key in ("max_quarantine_share", "cramers_v_max", "reward_max"):
        v = out[key]
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1e9):
            raise ConfigError(f"validate.{key}: expected a non-negative number or null, got {v!r}")
    return out


def validate_flags(opts: dict) -> list[str]:
    """Flags of `scavenger validate` from the typed ``validate`` options."""
    flags = [] if opts["great_expectations"] else ["--no-great-expectations"]
    if opts["checks"]:
        flags += ["--checks", opts["checks"]]
    for key in ("max_quarantine_share", "cramers_v_max", "reward_max"):
        if opts[key] is not None:
            flags += [f"--{key.replace('_', '-')}", repr(float(opts[key]))]
    return flags


def merge_config(file_text: str | None = None, variable_text: str | None = None) -> dict:
    """DEFAULTS <- JSON file text <- Variable JSON text; validated. Pure: the caller does the reading."""
    cfg = copy.deepcopy(DEFAULTS)
    for label, text in (("config file", file_text), ("Variable scavenger_config", variable_text)):
        if not text:
            continue
        try:
            layer = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{label}: not valid JSON ({exc})") from None
        if not isinstance(layer, dict):
            raise ConfigError(f"{label}: expected a JSON object")
        cfg.update(layer)
    return validate_config(cfg)


def evaluate_params(params: dict) -> dict:
    """Check the params of ``scavenger_evaluate`` (second line after the Param JSON schemas, plus cross-field
    rules); return them normalized. Raise ConfigError with a message naming the param."""
    p = dict(params)
    check_source(p.get("logs"), "param logs")
    check_source(p.get("decisions"), "param decisions")
    check_date(p.get("date_from"), "param date_from")
    check_date(p.get("date_to"), "param date_to")
    if p["date_from"] > p["date_to"]:
        raise ConfigError(f"param date_from {p['date_from']} is after date_to {p['date_to']}")
    span = (_dt.date.fromisoformat(p["date_to"]) - _dt.date.fromisoformat(p["date_from"])).days + 1
    if span > MAX_WINDOW_DAYS:
        raise ConfigError(f"params date_from..date_to span {span} days; at most {MAX_WINDOW_DAYS}")
    p["estimators"] = check_estimators(p.get("estimators") or [], "param estimators")
    p["prior_mean"] = check_prior_mean(p.get("prior_mean"), "param prior_mean")
    p["adc_source"] = check_adc_source(p.get("adc_source"), "param adc_source")
    p["adc_method"] = check_enum(p.get("adc_method"), ADC_METHODS, "param adc_method")
    p["policies"] = list(p.get("policies") or [])
    for pid in p["policies"]:
        check_pattern(NAME_PATTERN, pid, "param policies")
    p["baseline"] = check_baseline(p.get("baseline"), [("param policies", p["policies"])], "param baseline")
    return p


def read_config_file(path: str | None) -> str | None:
    """Text of the config file (I/O: call at run time only)."""
    path = path or os.environ.get("SCAVENGER_AIRFLOW_CONFIG")
    if not path:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the scavenger config file {path}: {exc}") from None
