"""The engine seam: what the statistics layer asks of an engine, and nothing more.

An engine holds named relations. The statistics are Spark SQL statements over those names (``statistics/sql``);
the engine runs them as they are (Spark) or as sqlglot writes them for DuckDB. Everything above this floor (the
estimators, the checks, great-expectations, the report) sees pandas frames and never knows which engine ran.

    engine.read(name, source, contract, days)    the input rows of those days as relation ``name`` (conformed)
    engine.view(name, sql)                       a lazy named relation
    engine.materialize(name, sql)                computed once and kept until ``release()`` (the one read/join)
    engine.drop(names)                           materialized relations dropped early (their readers are done)
    engine.fetch(sql) -> pandas                  a small result (aggregated tables only)
    engine.write(sql, uri, dts)                  Parquet partitioned by dt; each dt replaced at once, others kept
    engine.write_quarantine(sql, uri, dts, n)    quarantined rows the same way, or into a catalog table (Spark)
    engine.read_parquet(name, uris)              stored per-day tables (the statistics store) read back
    engine.read_csv(name, uri)                   a CSV file, every column text (external sources: OBD)

Nothing above ``engines/`` touches a Spark session or a DuckDB connection: what a job asks of the engine besides
relations are methods too (catalog tables, the days per scan its settings ask for, a phase of work, an interrupt,
a small result table as its user holds it). The base class answers them for an engine without a session.
"""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import UsageError


@dataclass
class EngineInfo:
    """What ran: shown in result.json and the run summary."""

    name: str
    why: str
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "why": self.why, **self.settings}


class Engine:
    """Base class; see the module docstring. Subclasses: DuckDBEngine, SparkEngine."""

    name = "base"
    row_budget = 0      # input rows a pass may hold in memory (DuckDB: from its memory limit); 0: no known limit

    def __init__(self, why: str = ""):
        self.info = EngineInfo(self.name, why)

    # -- relations -------------------------------------------------------------------------------------------
    def read(self, name: str, source, contract, days) -> None:
        raise NotImplementedError

    def view(self, name: str, sql: str) -> None:
        raise NotImplementedError

    def materialize(self, name: str, sql: str, keep: bool = False) -> None:
        """``keep``: survives ``release()`` (dropped by ``close()``)."""
        raise NotImplementedError

    def fetch(self, sql: str) -> pd.DataFrame:
        raise NotImplementedError

    def write(self, sql: str, uri: str, dts, partition: str = "dt") -> int:
        """Rows of ``sql`` as Parquet under ``uri``/<partition>=<value>/; returns the rows written."""
        raise NotImplementedError

    def write_quarantine(self, sql: str, uri: str, days, rows: int) -> None:
        """The quarantined rows of ``days`` (``sql``; ``rows`` of them, from the pass's counts: none runs no
        statement) under ``uri``/dt=*/, the partitions of these days replaced (a day that now has none removed). A
        ``catalog:<db>.<table>`` URI is a table of the Spark session's catalog (SparkEngine)."""
        if uri.startswith("catalog:"):
            raise UsageError("--catalog writes tables of the Spark session's catalog: use --engine spark (or auto)")
        if rows:
            self.write(sql, uri, days)
            return
        from ..io.partitions import clear_partitions

        clear_partitions(uri, days)

    def read_parquet(self, name: str, uris: list, root: str | None = None) -> None:
        raise NotImplementedError

    def columns(self, name: str) -> list[str]:
        raise NotImplementedError

    def register_frame(self, name: str, frame: pd.DataFrame) -> None:
        """A small pandas table (e.g. a score table) as relation ``name``."""
        raise NotImplementedError

    def read_csv(self, name: str, uri: str) -> None:
        """A CSV file with a header as relation ``name``, every column text (an external source, e.g. OBD)."""
        raise NotImplementedError

    def prepare(self, statements) -> None:
        """A hint: these Spark SQL statements run soon (DuckDB writes them in its dialect meanwhile)."""

    def drop(self, names) -> None:
        """Drop these materialized relations now, before ``release()``: the pass is done with them."""

    def release(self) -> None:
        """Drop the materialized relations not kept (end of a scan's batch)."""

    def close(self) -> None:
        self.release()

    # -- what the layers above ask instead of touching a session or a connection ------------------------------
    def relation(self, sql: str):
        """The rows of ``sql`` as the engine's own lazy table (a Spark DataFrame, a DuckDB relation), for a caller
        that hands them to its user as they are (obd.ingest_obd)."""
        raise NotImplementedError

    def user_table(self, frame: pd.DataFrame):
        """A small result table as its user works with it on this engine: a Spark DataFrame on Spark (explicit
        types: io/catalog.spark_frame), else the pandas frame itself."""
        return frame

    def read_table(self, uri: str) -> pd.DataFrame:
        """A small stored Parquet table at a location only this engine reads (a remote URI) as pandas."""
        raise UsageError(f"the {self.name} engine reads local tables only; {uri} needs the Spark engine")

    def scan_batch_days(self) -> int | None:
        """Days per statistics pass the engine's own settings ask for (Spark: spark.scavenger.scanBatchDays), or
        None: the window decides (statistics/batches.auto_batch_days)."""
        return None

    def check_catalog(self, database: str) -> str:
        """``database`` (db or catalog.db) exists in the engine's catalog: UsageError (exit 2) otherwise, and
        from every engine without a catalog."""
        raise UsageError("--catalog writes tables of the Spark session's catalog: use --engine spark (or auto)")

    def write_catalog_table(self, frame: pd.DataFrame, table: str, dt: _dt.date | None = None) -> str:
        """A small result table (pandas) into catalog table ``table``, its rows under partition ``dt`` (or their
        own dt column), each partition replaced (io/catalog.py)."""
        raise UsageError("--catalog writes tables of the Spark session's catalog: use --engine spark (or auto)")

    def phase(self, name: str, detail: str = "", group: str | None = None, log: bool | None = None):
        """A context manager around a phase of work: a ``[scavenger]`` note on stderr and, on Spark, the job tag
        ``scavenger-<name>`` on the jobs started inside (progress.phase)."""
        from ..progress import phase

        return phase(None, name, detail, group, log)

    def interrupt(self) -> None:
        """Cancel what the engine runs now (called from another thread: the CLI's stop watcher)."""


def timed(label: str):
    """SCAVENGER_PROFILE=1: the seconds of every statement on stderr (both engines' statements)."""
    import contextlib
    import sys
    import time

    if os.environ.get("SCAVENGER_PROFILE") != "1":
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def _cm():
        t = time.perf_counter()
        yield
        width = int(os.environ.get("SCAVENGER_PROFILE_WIDTH", "110"))   # characters of the statement shown
        print(f"[profile] {time.perf_counter() - t:8.2f}s {' '.join(label.split())[:width]}", file=sys.stderr)
    return _cm()


def days_filter(days) -> str:
    """The SQL condition of a read's days: none (every day) for None, no row for an empty set."""
    if days is None:
        return ""
    if not days:
        return "1 = 0"
    return "dt IN (" + ", ".join(f"DATE '{d.isoformat()}'" for d in sorted(days)) + ")"


def normalize_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The same pandas shapes from both engines: dt as ``datetime.date``, arrays as float numpy arrays, whole
    numbers of integer columns as int64, nulls of text columns as None."""
    for col in df.columns:
        s = df[col]
        if col == "dt" or col.endswith("_dt"):
            df[col] = _as_dates(s)
            continue
        if s.dtype == object and len(s):
            first = next((v for v in s if v is not None and not (isinstance(v, float) and np.isnan(v))
                          and not (isinstance(v, (list, tuple, np.ndarray)) and len(v) == 0)), None)
            if isinstance(first, (list, tuple, np.ndarray)) and _numeric_list(first):
                df[col] = [None if v is None else np.asarray([np.nan if x is None else x for x in v], dtype=float)
                           for v in s]
    return df


def _numeric_list(values) -> bool:
    import numbers

    items = [x for x in values if x is not None]
    return all(isinstance(x, numbers.Number) for x in items)


def _as_dates(s: pd.Series) -> list:
    """``_as_date`` of every value, computed once per distinct value (a table of 200,000 cells holds a few days:
    1.2 s -> 0.01 s)."""
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    dates = [_as_date(v) for v in uniques] + [None]          # code -1 (a null) -> the last entry, None
    return [dates[c] for c in codes.tolist()]


def _as_date(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    if isinstance(v, _dt.datetime):
        return v.date()
    if isinstance(v, _dt.date):
        return v
    if isinstance(v, (pd.Timestamp, np.datetime64)):
        return pd.Timestamp(v).date()
    return _dt.date.fromisoformat(str(v)[:10])
