"""`scavenger generate`: impression logs with exactly known ground truth (issue 2, item 3), on either engine.

The world (contexts, ads, intrinsic click rates P(x, a), ADCs C_k, the logging and target policies) is a set of small
numpy arrays built from the seed (``world.py``, ``model.py``). The events are rows of one Spark SQL statement over a
range of row numbers (``statements.py``, ``sampling.py``): every random draw is a uniform from a portable integer
hash of (seed, day, index, stream, j) (``hashing.py``), so the rows depend neither on the partitioning nor on the
engine: DuckDB (through sqlglot) and Spark write the same rows for the same config. Nothing row-level comes back
(history mode reads back the previous day's per-ad clicks and impressions; the truth, the per-(dt, context)
event counts: ``truth.py``).

Python API::

    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=4, n_ads=100, ...)
    truth = generate(None, cfg, out_dir)      # DuckDB; or generate(spark, ...), generate(engine, ...)
    values = true_policy_value(None, out_dir + "/decisions", out_dir + "/logs", out_dir + "/truth")
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import time

import pandas as pd

from ..contract import DECISIONS, LOGS, load_contract
from ..io import fs
from . import generator_sql as S
from . import truth as T
from .config import LAYOUTS, LOGGING_MODES, MULTI_BASES, TARGET_POLICIES, GeneratorConfig  # noqa: F401
from .world import BasePolicy, World, base_value, build_world, history_exploit, target_values  # noqa: F401


@contextlib.contextmanager
def engine_for(target, why: str = "generator"):
    """An engine from what the caller gave: an Engine (kept open), None or "duckdb" (DuckDB), "spark" (a Spark
    session from the environment), or a SparkSession (classic or Spark Connect)."""
    from ..engines import Engine, open_engine

    if isinstance(target, Engine):
        yield target
        return
    if target is None or target == "duckdb":
        engine = open_engine("duckdb", f"{why}: DuckDB")
    elif target == "spark":
        engine = open_engine("spark", f"{why}: Spark")
    else:
        engine = open_engine("spark", f"{why}: a SparkSession was given", spark=target)
    try:
        yield engine
    finally:
        engine.close()


def _read_logs(engine, name: str, logs_path: str, first: _dt.date, last: _dt.date) -> None:
    from ..io.sources import describe

    contract = load_contract(LOGS)
    source = describe(logs_path, contract, first, last)
    engine.read(name, source, contract, {first + _dt.timedelta(days=d) for d in range((last - first).days + 1)})


def _day_ad_counts(engine, logs_path: str, dt: _dt.date) -> tuple[dict, dict]:
    """Per-ad clicks and impressions (any position) of one written day: n_ads rows come back."""
    _read_logs(engine, "_gen_prev_logs", logs_path, dt, dt)
    rows = engine.fetch(S.ad_counts_sql("_gen_prev_logs"))
    return ({r.ad_id: float(r.clicks) for r in rows.itertuples()},
            {r.ad_id: int(r.impressions) for r in rows.itertuples()})


def _context_counts(engine, logs_path: str, first: _dt.date, last: _dt.date) -> pd.DataFrame:
    """Events, slots and clicks per (dt, context_id) of the written logs: days x n_contexts rows come back."""
    _read_logs(engine, "_gen_logs", logs_path, first, last)
    return engine.fetch(S.context_counts_sql("_gen_logs"))


@contextlib.contextmanager
def _timed(timings: dict | None, name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[name] = round(time.perf_counter() - start, 3)


def _write_days(engine, world: World, first: int, n_days: int, dates: list, paths: dict, timings) -> None:
    """Logs and decisions of days first .. first + n_days - 1, each day's partition replaced at once."""
    days = dates[first:first + n_days]
    span = f"{days[0]}..{days[-1]}"
    suffix = f"_{days[0].isoformat()}" if n_days == 1 else ""
    engine.view(S.WORLD, S.world_sql(world))
    engine.view(S.IDS, S.ids_sql(world, first, n_days))
    engine.view(S.EVENTS, S.events_sql(world))
    with _timed(timings, "write_logs" + suffix), engine.phase("generate", f"logs {span}"):
        engine.write(S.logs_sql(world), paths["logs"], days)
    with _timed(timings, "write_decisions" + suffix), engine.phase("generate", f"decisions {span}"):
        engine.write(S.decisions_sql(world), paths["decisions"], days)


def generate(engine, cfg: GeneratorConfig, out_dir: str, timings: dict | None = None) -> dict:
    """Write out/logs, out/decisions (Parquet by dt), out/truth/ and out/ground_truth.json; return the truth dict.

    ``engine``: an Engine, a SparkSession, "spark", or None/"duckdb" (see :func:`engine_for`). ``timings``
    (optional dict) receives seconds per phase."""
    world = build_world(cfg)
    cfg = world.cfg
    paths = {name: fs.join(out_dir, name) for name in ("logs", "decisions", "truth")}
    start = _dt.date.fromisoformat(cfg.start_date)
    dates = [start + _dt.timedelta(days=d) for d in range(cfg.days)]
    logging_per_day: dict[str, list] = {}   # dt -> per-base per-context values of that day
    # history mode: day by day (each day's ranking comes from the previous day's written logs); otherwise the
    # world does not change over days and one statement per table writes every day.
    batches = [(d, 1) for d in range(cfg.days)] if cfg.logging == "history" else [(0, cfg.days)]
    with engine_for(engine) as eng:
        for first, n_days in batches:
            if cfg.logging == "history" and first > 0:
                clicks, impressions = _day_ad_counts(eng, paths["logs"], dates[first - 1])
                exploit = history_exploit(world, clicks, impressions)
                world.bases = [BasePolicy(world.bases[0].name, cfg.epsilon, exploit)]
                world.base_values = [base_value(world, b) for b in world.bases]
            for d in range(first, first + n_days):
                logging_per_day[dates[d].isoformat()] = list(world.base_values)
            _write_days(eng, world, first, n_days, dates, paths, timings)
        with _timed(timings, "count"):
            counts = _context_counts(eng, paths["logs"], dates[0], dates[-1])
    abs_paths = {k: os.path.abspath(v) if fs.is_local(v) else v for k, v in paths.items()}
    truth, per_context = T.ground_truth(world, counts, dates, logging_per_day, abs_paths)
    with _timed(timings, "write_truth"):
        T.write_truth_tables(world, paths["truth"], per_context)
    fs.write_bytes(fs.join(out_dir, "ground_truth.json"), (json.dumps(truth, indent=2) + "\n").encode("utf-8"))
    return truth


def true_policy_value_sql(adc: list[float], decisions: str, logs: str, rates: str) -> str:
    """Per policy, the mean over its logged events of sum_k sum_a pi_k(a|x_t) C_k P(x_t, a) (one statement)."""
    adc_arr = "array(" + ", ".join(f"CAST('{float(c)!r}' AS DOUBLE)" for c in adc) + ")"
    term = ("coalesce(e.probability, CAST(0 AS DOUBLE)) * coalesce(try_element_at(" + adc_arr + ", e.position), "
            "CAST(0 AS DOUBLE)) * coalesce(r.p, CAST(0 AS DOUBLE))")
    # explode_outer, spelled for both engines: a decision without slots keeps one null entry (worth 0)
    outer = ("CASE WHEN size(slots) > 0 THEN slots ELSE "
             "array(CAST(NULL AS struct<position:int,ad_id:string,probability:double>)) END")
    entries = (f"SELECT d.policy_id, d.event_id, l.context_id, d.s.position AS position, d.s.ad_id AS ad_id, "
               f"d.s.probability AS probability FROM (SELECT policy_id, event_id, explode({outer}) AS s "
               f"FROM {decisions}) d JOIN (SELECT event_id, context_id FROM {logs}) l ON d.event_id = l.event_id")
    per_event = (f"SELECT e.policy_id, e.event_id, sum({term}) AS v FROM ({entries}) e LEFT JOIN {rates} r "
                 f"ON e.context_id = r.context_id AND e.ad_id = r.ad_id AND (r.slot IS NULL OR r.slot = e.position) "
                 f"GROUP BY e.policy_id, e.event_id")
    return (f"SELECT policy_id, avg(v) AS true_value, CAST(count(1) AS BIGINT) AS n_events FROM ({per_event}) pe "
            f"GROUP BY policy_id ORDER BY policy_id")


def true_policy_value(engine, decisions, logs, truth_dir: str) -> pd.DataFrame:
    """True value of ANY decisions: per policy, the mean over its logged events of
    sum_k sum_a pi_k(a|x_t) C_k P(x_t, a) (seed 001, section 4), from out/truth. ``decisions`` and ``logs``: paths
    or DataFrames (Spark with a SparkSession; pandas or pyarrow on DuckDB). Returns pandas (policy_id, true_value,
    n_events). Ads unknown to the truth (or a slotted ad at another slot's position, or a position beyond K)
    contribute 0."""
    from ..io.sources import describe

    adc = fs.read_parquet(fs.join(truth_dir, "adc")).sort_values("position")["coefficient"].tolist()
    rate_files = [f[0] for f in fs.data_files(fs.join(truth_dir, "click_rates"))]
    with engine_for(engine, "true_policy_value") as eng:
        for name, obj, contract in (("_tpv_logs", logs, LOGS), ("_tpv_decisions", decisions, DECISIONS)):
            eng.read(name, describe(obj, load_contract(contract)), load_contract(contract), None)
        eng.read_parquet("_tpv_rates", rate_files)
        out = eng.fetch(true_policy_value_sql(adc, "_tpv_decisions", "_tpv_logs", "_tpv_rates"))
    out["n_events"] = out["n_events"].astype("int64")
    return out.reset_index(drop=True)
