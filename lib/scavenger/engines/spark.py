"""Spark: the engine for warehouses, clusters, catalog tables, any URI Spark reads, and Spark Connect.

The statements of ``statistics/sql`` run as they are (``spark.sql``) over temporary views. Materialized relations
are local checkpoints at ``spark.scavenger.rowStorageLevel`` (default DISK_ONLY: rows on disk take no executor
heap, so memory does not grow with the window). Nothing here uses ``sparkContext``, ``_jvm`` or RDDs, so it runs the
same under Spark Connect. Partitioned outputs are written by Spark to a hidden staging directory and each ``dt=``
directory is swapped in with a rename (pyarrow.fs); where this process cannot open the URI's file system (e.g.
hdfs:// without libhdfs), Spark's own dynamic partition overwrite replaces the days instead.
"""
from __future__ import annotations

import pandas as pd

from ..io import fs
from ..io.spark_files import spark_path, spark_read_path, write_frame
from .base import Engine, days_filter, normalize_frame, timed

ROW_STORAGE_CONF = "spark.scavenger.rowStorageLevel"


def _storage_level(spark):
    from pyspark import StorageLevel

    from ..errors import UsageError

    name = (spark.conf.get(ROW_STORAGE_CONF, "DISK_ONLY") or "DISK_ONLY").strip().upper()
    level = getattr(StorageLevel, name, None)
    if not isinstance(level, StorageLevel):
        raise UsageError(f"{ROW_STORAGE_CONF}={name!r} is not a pyspark StorageLevel (e.g. DISK_ONLY, "
                         "MEMORY_AND_DISK)")
    return level


def _nanos_columns(files: list) -> set:
    """Top-level columns stored as Parquet INT64 TIMESTAMP(NANOS) (pandas' and pyarrow's default)."""
    import pyarrow.parquet as pq

    loc = fs.resolve(files[0])
    meta = pq.read_metadata(loc.path, filesystem=loc.fs)
    out = set()
    for i in range(meta.num_columns):
        col = meta.schema.column(i)
        logical = str(col.logical_type).upper()
        if "." not in col.path and col.physical_type == "INT64" and "TIMESTAMP" in logical and "NANOS" in logical:
            out.add(col.path)
    return out


def _as_longs(schema, names: set):
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([StructField(f.name, LongType(), True) if f.name in names else f for f in schema.fields])


def _long_timestamps(df, contract) -> set:
    """Contract timestamp columns Spark read as longs (Parquet INT64 nanoseconds under
    spark.sql.legacy.parquet.nanosAsLong): converted from nanoseconds by the conform step."""
    from pyspark.sql.types import LongType, TimestampType

    fields = {f.name: f.dataType for f in df.schema.fields}
    return {f.name for f in contract.struct_type().fields
            if isinstance(f.dataType, TimestampType) and isinstance(fields.get(f.name), LongType)}


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, spark, why: str = "", restore: dict | None = None):
        super().__init__(why)
        self.spark = spark
        # the session's settings before this engine changed them ({key: value or None}), put back by close(): a
        # notebook's session keeps reading nanosecond timestamps as timestamps, its time zone and overwrite mode
        self._restore = dict(restore or {})
        self._checkpoints: list[str] = []
        self._views: list[str] = []
        self._frames: dict = {}             # in-memory inputs as Spark DataFrames (id of the pyarrow table)
        self.level = _storage_level(spark)
        remote = type(spark).__module__.startswith("pyspark.sql.connect")
        self.info.settings = {"master": _conf(spark, "spark.master"), "connect": remote,
                              "driver_memory": _conf(spark, "spark.driver.memory"),
                              "row_storage_level": str(self.level), "spark": spark.version}

    def _df(self, sql: str):
        return self.spark.sql(sql)

    def view(self, name: str, sql: str) -> None:
        self._df(sql).createOrReplaceTempView(name)
        self._views.append(name)

    def materialize(self, name: str, sql: str, keep: bool = False) -> None:
        """Compute the relation once, now, and cut its lineage (a local checkpoint at the row storage level, on disk
        by default). A checkpoint is read by reference: no plan has to match a cached one (a statement with a WITH
        clause used twice never matches its persisted plan, so a persisted relation would be recomputed at every
        use), and writing rows costs less than building Spark's columnar cache of nested slots (4M events: 11.6 s
        against 18.1 s measured)."""
        with timed(f"materialize {name}"):
            df = self._df(sql).localCheckpoint(eager=True, storageLevel=self.level)
        df.createOrReplaceTempView(name)
        (self._checkpoints if keep else self._views).append(name)

    def fetch(self, sql: str, label: str = "fetch") -> pd.DataFrame:
        with timed(label):
            return normalize_frame(self._df(sql).toPandas())

    def register_frame(self, name: str, frame: pd.DataFrame) -> None:
        clean = frame.astype(object).where(frame.notna(), None)
        self.spark.createDataFrame(clean).createOrReplaceTempView(name)

    def columns(self, name: str) -> list[str]:
        return list(self.spark.table(name).columns)

    def read_csv(self, name: str, uri: str) -> None:
        self.spark.read.option("header", True).option("inferSchema", False).csv(spark_read_path(uri)) \
            .createOrReplaceTempView(name)
        self._views.append(name)

    def read(self, name: str, source, contract, days) -> None:
        from ..contract_sql import conform_sql, empty_sql

        parts = []
        if source.kind == "files":
            # Parquet INT64 nanosecond timestamps (pandas' and pyarrow's default) are refused by Spark unless read
            # as longs; the conform step turns those longs back into timestamps (_long_timestamps)
            self._set_conf("spark.sql.legacy.parquet.nanosAsLong", "true")
            for key, groups in source.days.items():
                if key is not None and days is not None and key not in days:
                    continue
                for g in groups:
                    raw = f"{name}__{len(parts)}"
                    df = self.spark.read.parquet(*[spark_read_path(f) for f in g.files])
                    nanos = _nanos_columns(g.files)
                    if nanos:   # read those as longs explicitly: Spark's inferred timestamp cannot be decoded
                        df = self.spark.read.schema(_as_longs(df.schema, nanos)).parquet(
                            *[spark_read_path(f) for f in g.files])
                    df.createOrReplaceTempView(raw)
                    self._views.append(raw)
                    parts.append(conform_sql(contract, raw, g.schema, g.dt, _long_timestamps(df, contract)))
            where = days_filter(days) if None in source.days else ""
        else:
            if source.kind == "table" and not self.spark.catalog.tableExists(source.obj):
                from ..errors import UsageError

                raise UsageError(f"no such catalog table: {source.obj}")
            if source.kind == "table":
                df = self.spark.table(source.obj)
            elif source.kind == "arrow":    # pandas or pyarrow in memory (a notebook on Spark, SPARK_REMOTE set)
                df = self._frames.get(id(source.obj))
                if df is None:              # sent to Spark once per job, whatever the number of reads
                    df = self._frames[id(source.obj)] = self.spark.createDataFrame(source.obj)
            else:
                df = source.obj
            if source.kind != "arrow":      # in-memory tables were checked when described
                _check_schema(df, source, contract)
            if days is not None and contract.partition_column in df.columns:
                df = df.where(days_filter(days))
            raw = f"{name}__0"
            df.createOrReplaceTempView(raw)
            self._views.append(raw)
            parts.append(conform_sql(contract, raw, _arrow_schema(df.schema), None))
            where = ""
        if not parts:
            self._with_rid(name, empty_sql(contract))
            return
        union = " UNION ALL ".join(f"SELECT * FROM ({p}) c{i}" for i, p in enumerate(parts))
        self._with_rid(name, f"SELECT * FROM ({union}) u" + (f" WHERE {where}" if where else ""))

    def _with_rid(self, name: str, sql: str) -> None:
        """The conformed rows plus ``_rid``, a row id (ties of duplicate keys, joins back within the batch)."""
        from pyspark.sql import functions as F

        df = self._df(sql)
        df.select(*[F.col(c) for c in df.columns], F.monotonically_increasing_id().alias("_rid")) \
            .createOrReplaceTempView(name)
        self._views.append(name)

    def read_parquet(self, name: str, uris: list, root: str | None = None) -> None:
        """Stored Parquet files as relation ``name``; with ``root`` the dt=... directories give a ``dt`` column."""
        if not uris:
            raise ValueError(f"no stored files for {name}")
        reader = self.spark.read.option("mergeSchema", "true")
        if root:
            reader = reader.option("basePath", spark_path(root))
        reader.parquet(*[spark_read_path(u) for u in uris]).createOrReplaceTempView(name)
        self._views.append(name)

    def write(self, sql: str, uri: str, dts, partition: str = "dt") -> int:
        written = write_frame(self._df(sql), uri, partition, dts=dts)
        return len(written)

    def relation(self, sql: str):
        return self._df(sql)

    def user_table(self, frame: pd.DataFrame):
        from ..io.catalog import spark_frame

        return spark_frame(self.spark, frame)

    def read_table(self, uri: str) -> pd.DataFrame:
        return self.spark.read.parquet(spark_read_path(uri)).toPandas()

    def scan_batch_days(self) -> int | None:
        from ..session import scan_batch_days

        return scan_batch_days(self.spark)

    def check_catalog(self, database: str) -> str:
        from ..io import catalog

        return catalog.check_database(self.spark, database)

    def write_catalog_table(self, frame: pd.DataFrame, table: str, dt=None) -> str:
        from ..io import catalog

        return catalog.write(self.spark, frame, table, dt)

    def write_quarantine(self, sql: str, uri: str, days, rows: int) -> None:
        """Engine.write_quarantine; into the catalog table of ``catalog:<db>.<table>``: the days' partitions
        dropped, then the rows (if any) inserted."""
        if not uri.startswith("catalog:"):
            return super().write_quarantine(sql, uri, days, rows)
        from ..io import catalog

        table = uri[len("catalog:"):].replace("/", "_")
        for d in days:
            if self.spark.catalog.tableExists(table):
                self.spark.sql(f"ALTER TABLE {table} DROP IF EXISTS PARTITION (dt = DATE '{d.isoformat()}')")
        if rows:
            catalog.write_sql(self.spark, sql, table)

    def phase(self, name: str, detail: str = "", group: str | None = None, log: bool | None = None):
        from ..progress import phase

        return phase(self.spark, name, detail, group, log)

    def interrupt(self) -> None:
        try:
            self.spark.interruptAll()    # classic Spark and Spark Connect alike (no SparkContext needed)
        except Exception:  # noqa: BLE001 - a session already stopping
            pass

    def _set_conf(self, key: str, value: str) -> None:
        if key not in self._restore:
            self._restore[key] = self.spark.conf.get(key, None)
        self.spark.conf.set(key, value)

    def close(self) -> None:
        self.release()
        self._views, self._checkpoints = self._checkpoints, []
        self.release()
        from ..session import restore_conf

        restore_conf(self.spark, self._restore)
        self._restore, self._frames = {}, {}

    def drop(self, names) -> None:
        names = set(names)
        for v in [v for v in self._views if v in names]:
            self.spark.catalog.dropTempView(v)
            self._views.remove(v)

    def release(self) -> None:
        for v in self._views:
            try:
                self.spark.catalog.dropTempView(v)
            except Exception:  # noqa: BLE001
                pass
        self._views.clear()


def _conf(spark, key: str):
    try:
        return spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - Spark Connect may refuse static confs
        return None


def _arrow_schema(struct):
    """A pyarrow schema for a Spark schema (for the conform step, which reads names and nested field names)."""
    import pyarrow as pa

    from ..contract_sql import arrow_type

    fields = []
    for f in struct.fields:
        try:
            t = arrow_type(f.dataType, nullable=True)
        except TypeError:          # a type the contract never uses (float, decimal, short, nested such types)
            t = _any_arrow_type(f.dataType)
        fields.append(pa.field(f.name, t, True))
    return pa.schema(fields)


def _any_arrow_type(data_type):
    """pyspark's Arrow type of a Spark type; null for one Arrow cannot hold (the conform step then casts it as
    it is)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(data_type, timezone="UTC")
    except Exception:  # noqa: BLE001 - pyspark raises several kinds for unsupported types
        return pa.null()


def _check_schema(df, source, contract) -> None:
    """io.sources.check_schema for a Spark DataFrame or catalog table (its Spark schema as Arrow types): a column
    that cannot become the contract's is exit 2 naming it, as for Parquet files, instead of Spark's analysis error
    (exit 1)."""
    from ..io.sources import check_schema

    check_schema(_arrow_schema(df.schema), contract, source.name, source.flag, partitioned=False)
