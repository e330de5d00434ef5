"""DuckDB, embedded: the engine for local Parquet on one machine. No JVM, no Java needed.

Every statement is the Spark SQL of ``statistics/sql``, written for DuckDB by sqlglot (:mod:`.dialect`). Materialized
relations are temporary tables; partitioned outputs are written to a hidden staging directory and each ``dt=``
directory is then swapped in with a rename, so a killed job leaves the previous partition or the new one. DuckDB
gets a memory limit (``SCAVENGER_DUCKDB_MEMORY``, default 60% of the machine's memory) and a spill directory
(``SCAVENGER_DUCKDB_TEMP``, default under the system temp directory); both are reported in result.json.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid

import pandas as pd

from ..io import fs
from ..io.partitions import commit_partitions
from .base import Engine, days_filter, normalize_frame, timed
from .dialect import TranslationError, to_duckdb
from .duck_settings import (ROW_BYTES, _limit_bytes, check_environment,  # noqa: F401 - check_* re-exported
                            check_memory_setting, default_memory_limit)


@contextlib.contextmanager
def _backslash_free(path: str):
    """``path``, or where it holds a backslash (DuckDB's partitioned COPY reads one as a directory separator) a
    symbolic link to it from the system temp directory, removed afterwards."""
    if "\\" not in path:
        yield path
        return
    link = os.path.join(tempfile.gettempdir(), f"scavenger-copy-{uuid.uuid4().hex}")
    os.symlink(path, link)
    try:
        yield link
    finally:
        os.unlink(link)


def _with_file_rid(files: str, offset: int, schema, contract) -> str:
    """The files' rows plus ``_rid``: the file's place in the list and the row's place in the file (unique, and
    computed in parallel, unlike row_number() OVER ()). A file's own ``scv_filename`` column makes the file name's
    column another name. A file holding a column named ``file_row_number`` hides
    DuckDB's own (its reader refuses the option then): its rows are numbered in the order of their contract columns,
    so the same rows get the same ids on every run (which of two rows equal in every contract column comes first
    cannot show in any output)."""
    fname = "scv_filename"
    while fname in schema.names:        # a file's own column of that name (DuckDB refuses the option then)
        fname += "_"
    pos = f"CAST(({offset} + list_position([{files}], {fname})) AS BIGINT) * 4294967296"
    if "file_row_number" not in schema.names:
        return (f"SELECT *, {pos} + file_row_number AS _rid FROM read_parquet([{files}], hive_partitioning = false, "
                f"filename = '{fname}', file_row_number = true)")
    order = ", ".join('"' + c.replace('"', '""') + '"' for c in contract.columns if c in schema.names)
    return (f"SELECT *, {pos} + row_number() OVER (PARTITION BY {fname} ORDER BY {order or fname}) "
            f"AS _rid FROM read_parquet([{files}], hive_partitioning = false, filename = '{fname}')")


def _nanos_columns(schema, contract) -> set:
    """Contract timestamp columns that ``schema`` (pyarrow) holds as nanosecond timestamps (pandas' and pyarrow's
    default): read as longs, as Spark reads them (spark.nanosAsLong), so that the conform step truncates both to
    microseconds alike (DuckDB's cast rounded: 23:59:59.999999999 became the next day, EVENT_TIME_OUTSIDE_DT on
    DuckDB only)."""
    import pyarrow as pa
    from pyspark.sql.types import TimestampType

    wanted = {f.name for f in contract.struct_type().fields if isinstance(f.dataType, TimestampType)}
    return {f.name for f in schema if f.name in wanted and pa.types.is_timestamp(f.type) and f.type.unit == "ns"}


def _nanos_as_longs(names: set) -> str:
    """SELECT list of every column, the nanosecond timestamps ``names`` as nanoseconds since the epoch."""
    cols = ", ".join(f'epoch_ns("{n}") AS "{n}"' for n in sorted(names))
    return f"* REPLACE ({cols})"


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


class DuckDBEngine(Engine):
    name = "duckdb"

    def __init__(self, why: str = "", threads: int | None = None, memory_limit: str | None = None,
                 temp_dir: str | None = None):
        import duckdb

        super().__init__(why)
        env = check_environment()           # UsageError (exit 2) naming a bad SCAVENGER_DUCKDB_* variable
        # a spill directory of its own, removed at close: under SCAVENGER_DUCKDB_TEMP, never that directory itself
        # (it may be shared, or hold the user's files)
        own = f"scavenger-duckdb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.temp_dir = temp_dir or os.path.join(env.get("SCAVENGER_DUCKDB_TEMP") or tempfile.gettempdir(), own)
        self.memory_limit = check_memory_setting(memory_limit, "memory_limit") if memory_limit else \
            default_memory_limit()
        self.con = duckdb.connect(":memory:")
        settings = {"memory_limit": self.memory_limit, "temp_directory": self.temp_dir,
                    "preserve_insertion_order": "false", "TimeZone": "UTC"}
        if threads or "SCAVENGER_DUCKDB_THREADS" in env:
            settings["threads"] = str(threads or env["SCAVENGER_DUCKDB_THREADS"])
        for key, value in settings.items():
            self._exec(f"SET {key} = {_quote(value)}")
        threads_now = self.con.execute("SELECT current_setting('threads')").fetchall()[0][0]
        self.info.settings = {"memory_limit": self.memory_limit, "spill_directory": self.temp_dir,
                              "threads": int(threads_now), "duckdb": duckdb.__version__}
        self._tables: list[str] = []
        self._kept: list[str] = []
        self._translating: dict = {}       # Spark SQL -> future of its DuckDB text (prepare)
        self._translator = None
        # input rows a pass holds in memory: a longer window is scanned in batches of days (statistics/window.py)
        self.row_budget = _limit_bytes(self.memory_limit) // ROW_BYTES

    # -- relations -------------------------------------------------------------------------------------------
    def _exec(self, sql: str) -> None:
        """Run a statement and consume its result (DuckDB refuses other work on the connection until then)."""
        with timed(sql):
            self.con.execute(sql).fetchall()

    def _sql(self, sql: str, label: str) -> str:
        future = self._translating.pop(sql, None)
        if future is not None:
            with contextlib.suppress(TranslationError):     # raised again below, naming the statement
                return future.result()
        return to_duckdb(sql, label)

    def prepare(self, statements) -> None:
        """Translate ``statements`` on a thread of their own while the connection runs the ones before them: sqlglot
        is Python and the statements wait on DuckDB, which leaves the interpreter free (4M events: 0.35 s of
        translation off the pass). A statement that does not translate raises when it is run, as before."""
        from concurrent.futures import ThreadPoolExecutor

        if self._translator is None:
            self._translator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scavenger-sqlglot")
        for sql in statements:
            if sql not in self._translating:
                self._translating[sql] = self._translator.submit(to_duckdb, sql, "statement")

    def view(self, name: str, sql: str) -> None:
        self._exec(f"CREATE OR REPLACE TEMP VIEW {name} AS {self._sql(sql, name)}")

    def materialize(self, name: str, sql: str, keep: bool = False) -> None:
        self._exec(f"CREATE OR REPLACE TEMP TABLE {name} AS {self._sql(sql, name)}")
        (self._kept if keep else self._tables).append(name)

    def fetch(self, sql: str, label: str = "fetch") -> pd.DataFrame:
        query = self._sql(sql, label)
        with timed(f"{label}: {query}"):
            return normalize_frame(self.con.execute(query).df())

    def register_frame(self, name: str, frame: pd.DataFrame) -> None:
        self.con.register(f"{name}__df", frame)
        self._exec(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {name}__df")
        self.con.unregister(f"{name}__df")
        self._kept.append(name)

    def columns(self, name: str) -> list[str]:
        return [r[0] for r in self.con.execute(f"DESCRIBE {name}").fetchall()]

    def read_csv(self, name: str, uri: str) -> None:
        self._exec(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_csv({_quote(fs.local_path(uri))}, "
                   f"header = true, all_varchar = true)")

    def read(self, name: str, source, contract, days) -> None:
        """Relation ``name``: the source's rows of ``days`` conformed to the contract (one group per schema)."""
        from ..contract_sql import conform_sql, empty_sql

        if source.kind == "arrow":
            tmp = f"{name}__arrow"
            self.con.register(tmp, source.obj)
            nanos = _nanos_columns(source.obj.schema, contract)
            if nanos:
                self._exec(f"CREATE OR REPLACE TEMP VIEW {tmp}_n AS SELECT {_nanos_as_longs(nanos)} FROM {tmp}")
                tmp = f"{tmp}_n"
            sql = conform_sql(contract, tmp, source.obj.schema, None, nanos)
            where = days_filter(days)
            self._with_rid(name, f"SELECT * FROM ({sql}) c" + (f" WHERE {where}" if where else ""))
            return
        if source.kind != "files" or not fs.is_local(source.uri):
            raise RuntimeError(f"DuckDB reads local Parquet only; {source.name} needs the Spark engine")
        parts, n_files = [], 0
        for key, groups in source.days.items():
            if key is not None and days is not None and key not in days:
                continue
            for g in groups:
                raw = f"{name}__{len(parts)}"
                files = ", ".join(_quote(f) for f in g.files)
                nanos = _nanos_columns(g.schema, contract)
                read = _with_file_rid(files, n_files, g.schema, contract)
                if nanos:
                    read = f"SELECT {_nanos_as_longs(nanos)} FROM ({read}) r"
                self._exec(f"CREATE OR REPLACE TEMP VIEW {raw} AS {read}")
                n_files += len(g.files)
                parts.append(self._sql(conform_sql(contract, raw, g.schema, g.dt, nanos, carry=("_rid",)), raw))
        if not parts:
            self._with_rid(name, empty_sql(contract))
            return
        union = " UNION ALL ".join(f"SELECT * FROM ({p}) c{i}" for i, p in enumerate(parts))
        where = days_filter(days) if None in source.days else ""
        self._exec(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM ({union}) u"
                   + (f" WHERE {self._sql(where, 'days')}" if where else ""))

    def _with_rid(self, name: str, sql: str) -> None:
        """The rows of ``sql`` plus ``_rid``, a row id in read order (in-memory tables)."""
        self._exec(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT *, row_number() OVER () AS _rid "
                   f"FROM ({self._sql(sql, name)}) r")

    def read_parquet(self, name: str, uris: list, root: str | None = None) -> None:
        """Stored Parquet files as relation ``name``; with ``root`` the dt=... directories give a ``dt`` column."""
        if not uris:
            raise ValueError(f"no stored files for {name}")
        files = ", ".join(_quote(fs.local_path(u)) for u in uris)
        hive = ", hive_partitioning = true, hive_types = {'dt': DATE}" if root else ""
        self._exec(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM read_parquet([{files}], "
                   f"union_by_name = true{hive})")

    def write(self, sql: str, uri: str, dts, partition: str = "dt") -> int:
        """COPY to a staging directory with PARTITION_BY, then swap each dt directory in (see module doc)."""
        target = fs.local_path(uri)
        staging = os.path.join(target, "_staging", uuid.uuid4().hex)
        os.makedirs(staging, exist_ok=True)
        try:
            query = self._sql(sql, f"write {os.path.basename(target)}")
            # one pass: COPY returns the rows it wrote (none: no dt directory, and commit removes the dts)
            with timed(f"write {target}"), _backslash_free(staging) as to:
                n = self.con.execute(f"COPY ({query}) TO {_quote(to)} (FORMAT PARQUET, COMPRESSION ZSTD, "
                                     f"PARTITION_BY ({partition}), OVERWRITE_OR_IGNORE TRUE)").fetchall()[0][0]
            commit_partitions(staging, target, dts, partition)
        finally:
            fs.delete_own(staging)
        return int(n)

    def relation(self, sql: str):
        return self.con.sql(self._sql(sql, "relation"))

    def interrupt(self) -> None:
        self.con.interrupt()

    def drop(self, names) -> None:
        names = set(names)
        for t in [t for t in self._tables if t in names]:
            self._exec(f"DROP TABLE IF EXISTS {t}")
            self._tables.remove(t)

    def release(self) -> None:
        self.drop(self._tables)

    def close(self) -> None:
        if self._translator is not None:
            self._translator.shutdown(wait=True, cancel_futures=True)
            self._translator, self._translating = None, {}
        self.release()
        self._tables, self._kept = self._kept, []
        self.release()
        self.con.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

