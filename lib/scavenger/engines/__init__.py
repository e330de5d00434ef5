"""Two engines, one SQL: DuckDB embedded on one machine, Spark on the warehouse (see base.py for the seam).

``choose(requested, inputs, ...)`` applies the ``--engine auto`` rule: Spark when given a Spark DataFrame, a
catalog table or a URI that is not local, when ``SPARK_REMOTE`` is set, under spark-submit, or when a Spark master
or Spark settings were given; DuckDB for local Parquet paths and in-memory pandas/pyarrow tables.
"""
from __future__ import annotations

import os

from ..errors import UsageError
from .base import Engine, EngineInfo

ENGINES = ("auto", "duckdb", "spark")


def under_spark() -> str | None:
    """Why this process must use Spark whatever its inputs (or None)."""
    if os.environ.get("SPARK_REMOTE"):
        return "SPARK_REMOTE is set (Spark Connect)"
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return "running under spark-submit"
    return None


def choose(requested: str, sources, spark_hint: str | None = None) -> tuple[str, str]:
    """(engine name, why) for ``requested`` in auto|duckdb|spark given the input sources (see module doc)."""
    requested = (requested or "auto").lower()
    if requested not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {requested!r}")
    needs_spark = [f"{s.name} is a {'Spark DataFrame' if s.kind == 'spark' else 'catalog table' if s.kind == 'table' else 'non-local URI'}"
                   for s in sources if s is not None and not s.local]
    if requested == "duckdb":
        if needs_spark:
            raise UsageError(f"--engine duckdb reads local Parquet only: {needs_spark[0]}; use --engine spark")
        return "duckdb", "--engine duckdb"
    if requested == "spark":
        return "spark", "--engine spark"
    reason = under_spark() or spark_hint or (needs_spark[0] if needs_spark else None)
    if reason:
        return "spark", f"auto: {reason}"
    return "duckdb", "auto: local Parquet inputs (no JVM needed)"


def choose_for_output(requested: str, out: str, spark_hint: str | None = None) -> tuple[str, str]:
    """The same rule for the jobs that write without reading logs (generate, ingest-obd, demo): the output is the
    location that counts, so a ``--out`` that is not a local path needs Spark."""
    from ..io import fs

    local = fs.is_local(out)
    if (requested or "auto").lower() == "duckdb" and not local:
        raise UsageError(f"--engine duckdb writes local paths only; --out is {out}: use --engine spark")
    name, why = choose(requested, [], spark_hint or (None if local else "--out is not a local path"))
    return name, ("auto: local --out (no JVM needed)" if name == "duckdb" and why.startswith("auto") else why)


def check_environment(requested: str | None = "auto") -> dict:
    """The engine settings read from the environment (SCAVENGER_DUCKDB_MEMORY, _THREADS, _TEMP), checked before any
    engine starts: UsageError (exit 2) naming the variable and what it accepts. Nothing to check for --engine spark."""
    if (requested or "auto").lower() == "spark":
        return {}
    from .duck import check_environment as check_duckdb

    return check_duckdb()


def open_engine(name: str, why: str, spark=None, master: str | None = None, conf: dict | None = None,
                app_name: str = "scavenger") -> Engine:
    if name == "duckdb":
        from .duck import DuckDBEngine

        return DuckDBEngine(why)
    from .spark import SparkEngine

    changed: dict = {}       # settings changed on a session that was already active (a notebook's): restored on close
    if spark is None:
        from ..session import get_spark

        spark = get_spark(app_name=app_name, master=master, conf=conf, changed=changed)
    return SparkEngine(spark, why, restore=changed)


def open_for(requested: str, sources, spark_hint: str | None = None) -> Engine:
    """``choose`` then ``open_engine``: Spark runs on the session of a Spark DataFrame among ``sources`` when one
    is given (a notebook's), else on the active session or a new one."""
    name, why = choose(requested, sources, spark_hint)
    spark = next((s.obj.sparkSession for s in sources if s is not None and s.kind == "spark"), None)
    return open_engine(name, why, spark=spark if name == "spark" else None)


__all__ = ["Engine", "EngineInfo", "ENGINES", "check_environment", "choose", "choose_for_output", "open_engine",
           "open_for", "under_spark"]
