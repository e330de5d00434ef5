"""The steps of the scavenger DAGs: spark-submit applications and their argument lists, built from a configuration
that ``config.validate_config`` checked. Pure Python (``job_exists`` looks at files and is called at run time only);
the argument lists are argv lists that spark-submit gets verbatim (never through a shell).
"""
from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

from .config import (MAX_WINDOW_DAYS, ConfigError, check_date, check_pattern, dataset_catalog, evaluate_params,
                     validate_flags)


def out_dir(cfg: dict, job: str, ds: str) -> str:
    """The one directory a task owns for a given dt: {root}/<job>/dt=<ds>."""
    return f"{cfg['root'].rstrip('/')}/{job}/dt={ds}"


def window(ds: str, days: int) -> tuple[str, str]:
    """Trailing window of ``days`` days ending at ``ds`` (inclusive)."""
    end = _dt.date.fromisoformat(ds)
    return (end - _dt.timedelta(days=days - 1)).isoformat(), end.isoformat()


def application(cfg: dict, job: str) -> str:
    return f"{cfg['repo'].rstrip('/')}/jobs/{job}.py"


def job_exists(cfg: dict, command: str) -> bool:
    """Whether the checkout has both jobs/<command>.py and the command module (file checks only)."""
    repo = Path(cfg["repo"])
    return (repo / "jobs" / f"{command}.py").exists() and \
        (repo / "lib" / "scavenger" / "cli" / f"{command}_command.py").exists()


def _estimation_flags(cfg: dict, settings: dict, adc_day: str) -> list[str]:
    """--estimators/--prior-mean/--adc/--adc-method of `scavenger evaluate` from config or params."""
    args: list[str] = []
    if settings.get("estimators"):
        args += ["--estimators", ",".join(settings["estimators"])]
    if settings.get("prior_mean") is not None:
        args += ["--prior-mean", repr(float(settings["prior_mean"]))]
    if settings.get("adc_source") == "daily":
        args += ["--adc", out_dir(cfg, "adc", adc_day)]
    elif settings.get("adc_source") == "estimate":
        args += ["--adc", "estimate"]
    if settings.get("adc_method"):
        args += ["--adc-method", settings["adc_method"]]
    return args


def spark_conf(cfg: dict, python: str) -> dict:
    """--conf for every job: the Python that runs the job (driver and executors) plus the configured extras."""
    conf = {}
    py = cfg["pyspark_python"] or python
    if py:
        conf["spark.pyspark.python"] = py
        conf["spark.pyspark.driver.python"] = py
    conf.update({k: str(v) for k, v in cfg["spark_conf"].items()})
    return conf


CATALOG_JOBS = ("validate", "adc", "evaluate")     # the jobs that take --catalog (report reads files only)


def _step(cfg, job, args, python, skip="", catalog: str | None = "config"):
    """One job: spark-submit of jobs/<job>.py (engine spark) or the same job in a local process (engine duckdb).
    ``catalog``: the database the job writes its tables to ("config": the config's; None: none, as for an ad-hoc
    run, see evaluate_plan, and the day-statistics task, whose one-day estimates are not the day's results)."""
    if catalog == "config":
        catalog = cfg.get("catalog")
    if cfg["engine"] == "duckdb":
        args = [*args, "--engine", "duckdb"]
    elif catalog and job in CATALOG_JOBS:
        # a trailing window's by-day rows go to the catalog for dt only: the window's earlier days belong to the
        # runs of those days, which a re-run or a backfill of dt must leave alone
        args = [*args, *(["--catalog-days", "last"] if "--by-day" in args else []), "--catalog", catalog]
    step = {"application": application(cfg, job), "application_args": args,
            "conf": spark_conf(cfg, python), "skip_reason": skip, "engine": cfg["engine"]}
    if cfg.get("py_files") and cfg["engine"] == "spark":
        step["py_files"] = cfg["py_files"]         # spark-submit --py-files (cluster deploy mode)
    return step


def stores(cfg: dict) -> dict:
    """The statistics stores: one for the logs alone (validate, adc) and one per registry dataset (its decisions
    shape the day's tables: two datasets in one store would replace each other's days)."""
    root = cfg["stats_dir"].rstrip("/")
    return {"logs": f"{root}/logs", **{e["name"]: f"{root}/datasets/{e['name']}" for e in cfg["registry"]}}


def daily_plan(cfg: dict, ds: str, python: str = "", run_id: str = "") -> dict:
    """Every Spark step of ``scavenger_daily`` for one dt: {step: {application, application_args, conf, skip_reason}}.

    ``evaluate`` and ``stats`` are lists (one entry per registry dataset); the others are single steps.
    """
    check_date(ds, "ds")
    logs, store = cfg["logs"], stores(cfg)
    frm, to = window(ds, cfg["window_days"])
    efrm = evaluate_from(cfg, ds, frm)
    base = ["--baseline", cfg["baseline"]] if cfg.get("baseline") else []
    rid = ["--run-id", run_id] if run_id and re.fullmatch(r"[A-Za-z0-9_.:+-]{1,200}", run_id) else []
    est = ["--estimators", ",".join(["adc", *cfg["estimators"]])] if cfg["estimators"] else []
    plan = {
        "validate": _step(cfg, "validate", ["--logs", logs, "--from", ds, "--to", ds, *est,
                                            *validate_flags(cfg["validate"]), "--stats-dir", store["logs"],
                                            "--out", out_dir(cfg, "validate", ds), *rid], python),
        "adc": _step(cfg, "adc", ["--logs", logs, "--from", frm, "--to", to, "--stats-dir", store["logs"],
                                  "--by-day", "--out", out_dir(cfg, "adc", ds), *rid], python),
    }
    stats_cmd = cfg["stats_command"]
    if stats_cmd == "auto":
        stats_cmd = "stats" if job_exists(cfg, "stats") else "evaluate"
    stats, evaluate = [], []
    for entry in cfg["registry"]:
        pol = ["--policies", ",".join(entry["policies"])] if entry["policies"] else []
        name = entry["name"]
        # the day's pass with evaluate's own estimation flags (its --adc above all: ADCs given make tables that
        # ADCs estimated do not, reorder_pairs and the ADC-based ones, and a stored day lacking a table the window
        # wants is scanned again), so that evaluate merges this day instead of reading it a second time
        stats.append(_step(cfg, stats_cmd, [
            "--logs", logs, "--decisions", entry["decisions"], *pol, "--from", ds, "--to", ds,
            *_estimation_flags(cfg, cfg, ds), "--stats-dir", store[name],
            "--out", out_dir(cfg, f"stats/{name}", ds), *rid], python, catalog=None))
        evaluate.append(_step(cfg, "evaluate", [
            "--logs", logs, "--decisions", entry["decisions"], *pol, "--from", efrm, "--to", to,
            *_estimation_flags(cfg, cfg, ds), "--stats-dir", store[name], "--by-day", *base,
            "--out", out_dir(cfg, f"evaluate/{name}", ds), *rid], python, catalog=dataset_catalog(cfg, entry)))
    plan["stats"], plan["evaluate"] = stats, evaluate
    report_args = ["--root", cfg["root"], "--dt", ds, "--out", out_dir(cfg, "report", ds), *rid]
    if cfg["report"] == "off":
        skip = "report is off in the scavenger config (report: off)"
    elif cfg["report"] == "if_available" and not job_exists(cfg, "report"):
        skip = ("the `report` job does not exist in this checkout; skipped because the scavenger config says "
                "report: if_available")
    else:
        skip = ""
    plan["report"] = _step(cfg, "report", report_args, python, skip)
    return plan


def evaluate_from(cfg: dict, ds: str, trailing_from: str) -> str:
    """The first day of the daily evaluate's window: the config's experiment_start once dt reaches it (its
    running/ then holds every day of the experiment, each day's band the sequence since the start), else the
    trailing window's. A start more than MAX_WINDOW_DAYS before dt is a setting to fix."""
    start = cfg.get("experiment_start")
    if not start or start > ds:
        return trailing_from
    span = (_dt.date.fromisoformat(ds) - _dt.date.fromisoformat(start)).days + 1
    if span > MAX_WINDOW_DAYS:
        raise ConfigError(f"experiment_start: {start} is {span} days before dt {ds}; a window holds at most "
                          f"{MAX_WINDOW_DAYS} days: set a later experiment_start (or null for the trailing window)")
    return start


def evaluate_plan(cfg: dict, params: dict, run_key: str, python: str = "") -> dict:
    """The single Spark step of ``scavenger_evaluate``; output under {root}/evaluate-adhoc/<run_key>/."""
    p = evaluate_params(params)
    check_pattern(r"^[A-Za-z0-9_.=-]{1,120}$", run_key, "run key")
    pol = ["--policies", ",".join(p["policies"])] if p["policies"] else []
    out = f"{cfg['root'].rstrip('/')}/evaluate-adhoc/{run_key}"
    args = ["--logs", p["logs"], "--decisions", p["decisions"], *pol, "--from", p["date_from"],
            "--to", p["date_to"], *_estimation_flags(cfg, p, p["date_to"]),
            *(["--baseline", p["baseline"]] if p.get("baseline") else []), "--stats-dir", f"{cfg['stats_dir'].rstrip('/')}/adhoc", "--out", out]
    # no --catalog: the catalog tables are the daily DAG's, one partition per dt; an ad-hoc window ending on a day
    # would replace that day's scheduled estimates with its own (other policies, estimators or window)
    return _step(cfg, "evaluate", args, python, catalog=None)
