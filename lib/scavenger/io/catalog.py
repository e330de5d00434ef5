"""Outputs as partitioned tables of the Spark session's catalog (Spark's built-in Hive metastore locally; whatever
catalog the session has on a cluster), appended or replaced per ``dt``:

    write(spark, frame, "db.estimates", dt=window_end)     # a pandas frame, one partition
    write_sql(spark, "SELECT ... dt FROM ...", "db.quarantine_logs")   # engine rows, their own dt values

A table that does not exist is created (Parquet, partitioned by dt); otherwise the rows go in with a dynamic
partition overwrite, so re-running a day replaces that day's partition and nothing else. A dashboard then reads
``SELECT * FROM db.estimates WHERE policy_id = ...`` with its history. Columns are matched by name; a column the
table lacks is added first (``ALTER TABLE ... ADD COLUMNS``).
"""
from __future__ import annotations

import datetime as _dt

import pandas as pd

from ..errors import UsageError

_IDENT = __import__("re").compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


def check_database(spark, database: str) -> str:
    """The database (``db`` or ``catalog.db``) exists in the session's catalog; UsageError (exit 2) otherwise."""
    if not _IDENT.match(database or ""):
        raise UsageError(f"--catalog expects a database name (db or catalog.db), got {database!r}")
    try:
        ok = spark.catalog.databaseExists(database)
    except Exception as exc:  # noqa: BLE001 - a catalog that cannot answer
        raise UsageError(f"--catalog {database}: the session's catalog cannot be read "
                         f"({str(exc).splitlines()[0]})") from None
    if not ok:
        raise UsageError(f"--catalog {database}: no such database in the session's catalog "
                         f"(CREATE DATABASE {database}, or point spark.sql.warehouse.dir / the metastore at it)")
    return database


def _column_type(values: pd.Series):
    """Spark type of one small output column by its non-null values: boolean, long, double, date or string."""
    import numbers

    from pyspark.sql.types import BooleanType, DateType, DoubleType, LongType, StringType

    vals = [v for v in values if v is not None and not (isinstance(v, float) and v != v)]
    if not vals:
        return DoubleType() if pd.api.types.is_numeric_dtype(values) else StringType()
    if all(isinstance(v, bool) for v in vals):
        return BooleanType()
    if all(isinstance(v, _dt.date) and not isinstance(v, _dt.datetime) for v in vals):
        return DateType()
    if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in vals):
        return LongType()
    if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in vals):
        return DoubleType()
    return StringType()


def spark_frame(spark, frame: pd.DataFrame):
    """A small pandas frame as a Spark DataFrame with explicit types (NaN and None become null)."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    clean = frame.astype(object).where(frame.notna(), None)
    for c in clean.columns:
        clean[c] = [v.item() if hasattr(v, "item") and not isinstance(v, (list, dict, str)) else v
                    for v in clean[c]]
    fields = [StructField(str(c), _column_type(clean[c]), True) for c in clean.columns]
    conv = {StringType: lambda v: None if v is None else str(v), DoubleType: lambda v: None if v is None else float(v),
            LongType: lambda v: None if v is None else int(v)}
    casts = [conv.get(type(f.dataType), lambda v: v) for f in fields]
    rows = [tuple(f(v) for f, v in zip(casts, rec)) for rec in clean.itertuples(index=False, name=None)]
    return spark.createDataFrame(rows, StructType(fields))


def _frame(spark, frame: pd.DataFrame):
    return spark_frame(spark, frame)


def write(spark, frame: pd.DataFrame, table: str, dt: _dt.date | None = None) -> str:
    """A small result table (pandas) into ``table``, its rows under partition ``dt`` (or their own dt column)."""
    df = frame.copy()
    if dt is not None:
        df["dt"] = dt
    if "dt" not in df.columns:
        raise ValueError(f"{table}: rows need a dt")
    df["dt"] = pd.to_datetime(df["dt"]).dt.date
    return _write_df(spark, _frame(spark, df), table)


def write_sql(spark, sql: str, table: str) -> str:
    """The rows of a statement (with a ``dt`` column) into ``table``."""
    return _write_df(spark, spark.sql(sql), table)


def _write_df(spark, sdf, table: str) -> str:
    from pyspark.sql import functions as F

    cols = [c for c in sdf.columns if c != "dt"] + ["dt"]
    sdf = sdf.select(*[F.col(c) for c in cols])
    if not spark.catalog.tableExists(table):
        sdf.write.format("parquet").partitionBy("dt").saveAsTable(table)
        return table
    have = [f.name for f in spark.table(table).schema.fields]
    extra = [f for f in sdf.schema.fields if f.name not in have]
    if extra:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS (" + ", ".join(f"`{f.name}` {f.dataType.simpleString()}"
                                                                  for f in extra) + ")")
        have = [f.name for f in spark.table(table).schema.fields]
    types = {f.name: f.dataType for f in spark.table(table).schema.fields}
    aligned = sdf.select(*[(F.col(c) if c in sdf.columns else F.lit(None)).cast(types[c]).alias(c) for c in have])
    previous = spark.conf.get("spark.sql.sources.partitionOverwriteMode", None)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        aligned.write.insertInto(table, overwrite=True)
    finally:
        if previous is not None:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", previous)
    return table


def read(spark, table: str, where: str | None = None) -> pd.DataFrame:
    """A result table (or its rows matching ``where``) as pandas (result tables are small)."""
    df = spark.table(table)
    if where:
        df = df.where(where)
    return df.toPandas()
