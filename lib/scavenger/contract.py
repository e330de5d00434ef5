"""The data contracts of ``schemas/``: impression logs and target-policy decisions.

The JSON files in ``schemas/`` are the single source of truth for column names and types; this module reads
them and offers readers/writers that accept either a path (Parquet partitioned by ``dt``) or a catalog table
name, conform the data to the contract's column order and types, and write per-``dt`` partitions idempotently.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import ContractError, UsageError

LOGS = "impression_log"
DECISIONS = "decisions"



def schema_dir() -> Path:
    """Where the contracts live: ``$SCAVENGER_SCHEMA_DIR`` or the repository's ``schemas/``."""
    env = os.environ.get("SCAVENGER_SCHEMA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "schemas"


@dataclass(frozen=True)
class Contract:
    name: str
    spec: dict

    @property
    def partition_column(self) -> str:
        return self.spec["partition_column"]

    @property
    def unique_key(self) -> list[str]:
        return list(self.spec.get("unique_key", []))

    @property
    def fields(self) -> list[dict]:
        return self.spec["schema"]["fields"]

    @property
    def columns(self) -> list[str]:
        return [f["name"] for f in self.fields]

    @property
    def required_columns(self) -> list[str]:
        return [f["name"] for f in self.fields if not f.get("metadata", {}).get("optional")]

    @property
    def data_columns(self) -> list[str]:
        """Columns other than the partition column."""
        return [c for c in self.columns if c != self.partition_column]

    def struct_type(self):
        """The contract as a pyspark StructType (nullability as declared)."""
        from pyspark.sql.types import StructType

        return StructType.fromJson(self.spec["schema"])

    def field_type(self, name: str):
        return self.struct_type()[name].dataType


@lru_cache(maxsize=None)
def load_contract(name: str) -> Contract:
    path = schema_dir() / f"{name}.schema.json"
    if not path.exists():
        raise UsageError(f"contract {name!r} not found at {path}")
    with open(path) as fh:
        return Contract(name=name, spec=json.load(fh))


def is_table_name(source: str) -> bool:
    """A catalog table name (``db.t``, ``cat.db.t``) rather than a path (io.sources.is_table_name)."""
    from .io.sources import is_table_name as _is_table

    return _is_table(source)


def _check_path(source: str) -> None:
    if "://" in source:
        return  # remote filesystem: let Spark resolve it
    if not os.path.exists(source):
        raise UsageError(f"no such path: {source}")


def parse_date(value: str | _dt.date | None, flag: str = "date") -> _dt.date | None:
    if value is None or isinstance(value, _dt.date):
        return value
    try:
        return _dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{flag} expects a date YYYY-MM-DD, got {value!r}") from None


def read_source(spark, source: str):
    """Read a path (Parquet dataset partitioned by dt) or a catalog table, unconformed."""
    from pyspark.errors import AnalysisException

    if is_table_name(source):
        try:
            return spark.table(source)
        except AnalysisException:
            raise UsageError(f"no such table or path: {source}") from None
    _check_path(source)
    try:
        return spark.read.option("basePath", source).parquet(source)
    except AnalysisException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot read {source}: {first}") from None


def conform(df, contract: Contract):
    """Select the contract's columns in order, cast to the contract's types; optional columns default to null.

    A missing required column raises ContractError (exit 3) naming it.
    """
    from pyspark.sql import functions as F

    present = set(df.columns)
    missing = [c for c in contract.required_columns if c not in present]
    if missing:
        raise ContractError(f"{contract.name}: missing column(s) {', '.join(missing)}; "
                            f"the contract is in {schema_dir() / (contract.name + '.schema.json')}")
    struct = contract.struct_type()
    selected = []
    for field in struct.fields:
        target = nullable_type(field.dataType)
        if field.name in present:
            # try_cast: a value that does not parse becomes null (and is quarantined by the gate with a
            # reason) instead of failing the job under ANSI mode
            selected.append(F.col(field.name).try_cast(target).alias(field.name))
        else:
            selected.append(F.lit(None).cast(target).alias(field.name))
    return df.select(*selected)


def nullable_type(data_type):
    """The same type with every nested field nullable: Spark cannot cast to NOT NULL nested fields, and
    non-null rules are enforced by validation (quarantine), not by casts."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, nullable_type(f.dataType), True, f.metadata)
                           for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(nullable_type(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, nullable_type(data_type.valueType), True)
    return data_type


def filter_window(df, date_from=None, date_to=None, column: str = "dt"):
    """Keep partitions with date_from <= dt <= date_to (either bound optional); prunes partitions."""
    from pyspark.sql import functions as F

    date_from = parse_date(date_from, "--from")
    date_to = parse_date(date_to, "--to")
    if date_from and date_to and date_from > date_to:
        raise UsageError(f"--from {date_from} is after --to {date_to}")
    condition = None
    if date_from is not None:
        condition = F.col(column) >= F.lit(date_from)
    if date_to is not None:
        upper = F.col(column) <= F.lit(date_to)
        condition = upper if condition is None else condition & upper
    return df if condition is None else df.where(condition)


def read_logs(spark, source: str, date_from=None, date_to=None):
    """Impression logs (path or table) conformed to ``schemas/impression_log.schema.json``, dt-window filtered."""
    contract = load_contract(LOGS)
    raw = filter_window(read_source(spark, source), date_from, date_to)
    return conform(raw, contract)


def read_decisions(spark, source: str, date_from=None, date_to=None, policies: list[str] | None = None):
    """Target-policy decisions conformed to ``schemas/decisions.schema.json``; optionally only some policies."""
    from pyspark.sql import functions as F

    contract = load_contract(DECISIONS)
    raw = filter_window(read_source(spark, source), date_from, date_to)
    df = conform(raw, contract)
    if policies:
        df = df.where(F.col("policy_id").isin(list(policies)))
    return df


def write_partitioned(df, path: str, partition_column: str = "dt", mode: str = "overwrite") -> list[str]:
    """Write a Spark DataFrame as Parquet partitioned by ``dt``, each partition committed at once: the data goes to
    ``<path>/_staging/<uuid>`` (skipped by readers), then each ``dt=...`` directory is swapped in with a rename
    (pyarrow.fs; any URI it opens), so a driver killed midway leaves the previous partitions and no partial one.
    ``overwrite`` replaces only the days in ``df``; ``append`` adds files to them. Returns the days written."""
    from .engines.spark import write_frame

    if mode not in ("overwrite", "append"):
        raise UsageError(f"write mode must be overwrite or append, got {mode!r}")
    return write_frame(df, path, partition_column, append=(mode == "append"))


def empty_frame(spark, name: str):
    """An empty DataFrame with the contract's schema (for tests and edge cases)."""
    return spark.createDataFrame([], load_contract(name).struct_type())


# ---- conforming as SQL (both engines) ----------------------------------------------------------------------------
def sql_type(data_type) -> str:
    """Spark SQL type text of a contract type (nested fields keep their names)."""
    return data_type.simpleString()


def _struct_sql(var: str, struct, present: list[str]) -> str:
    """named_struct of a contract struct from element ``var`` (by name; missing nullable fields are null)."""
    parts = []
    for f in struct.fields:
        value = f"try_cast({var}.{f.name} AS {sql_type(f.dataType)})" if f.name in present \
            else f"CAST(NULL AS {sql_type(f.dataType)})"
        parts.append(f"'{f.name}', {value}")
    return "named_struct(" + ", ".join(parts) + ")"


def _is_pairs(t) -> bool:
    from .io.sources import is_pairs

    return is_pairs(t)


def _pairs_entries(name: str, t) -> str:
    """The (key, value) structs of a map written as a list of pairs (lists, or structs of two fields)."""
    import pyarrow.types as T

    v = t.value_type
    if T.is_struct(v):
        a, b = v.field(0).name, v.field(1).name
        return f"transform({name}, x -> named_struct('key', x.{a}, 'value', x.{b}))"
    return f"transform({name}, x -> named_struct('key', x[0], 'value', x[1]))"


def conform_sql(contract: Contract, view: str, schema, dt=None, nanos_as_long=(), carry=()) -> str:
    """SELECT of ``view`` as the contract's columns and types (Spark SQL; DuckDB via sqlglot).

    ``schema``: the source's pyarrow schema. Values that do not parse become null (``try_cast``) and are then
    quarantined with a reason; missing optional columns are null; ``dt`` is the partition's date when the files do
    not hold it. An array of structs is cast as a whole when its fields are the contract's in the contract's order,
    else rebuilt field by field by name. ``nanos_as_long``: timestamp columns Spark reads as nanoseconds since the
    epoch (Parquet INT64 nanos). ``carry``: extra columns passed through (a row id)."""
    from pyspark.sql.types import ArrayType, StructType

    names = list(schema.names)
    cols = []
    for f in contract.struct_type().fields:
        t = sql_type(f.dataType)
        if f.name == contract.partition_column and dt is not None and f.name not in names:
            cols.append(f"DATE '{dt.isoformat()}' AS {f.name}")
        elif f.name not in names:
            cols.append(f"CAST(NULL AS {t}) AS {f.name}")
        elif f.name in nanos_as_long:
            cols.append(f"timestamp_micros({f.name} DIV 1000) AS {f.name}")
        elif _is_pairs(schema.field(f.name).type):
            cols.append(f"try_cast(map_from_entries({_pairs_entries(f.name, schema.field(f.name).type)}) AS {t}) "
                        f"AS {f.name}")
        elif isinstance(f.dataType, ArrayType) and isinstance(f.dataType.elementType, StructType):
            elem = schema.field(f.name).type.value_type
            have = [elem.field(i).name for i in range(elem.num_fields)] if hasattr(elem, "num_fields") else []
            want = [s.name for s in f.dataType.elementType.fields]
            if have == want:
                cols.append(f"try_cast({f.name} AS {t}) AS {f.name}")
            else:
                cols.append(f"transform({f.name}, s -> {_struct_sql('s', f.dataType.elementType, have)}) "
                            f"AS {f.name}")
        else:
            cols.append(f"try_cast({f.name} AS {t}) AS {f.name}")
    cols += list(carry)
    return "SELECT " + ", ".join(cols) + f" FROM {view}"


def select_sql(name: str, exprs: dict, source: str) -> str:
    """SELECT from ``source`` of contract ``name``'s columns in order, each SQL expression of ``exprs`` (missing:
    null) ``try_cast`` to the contract's type with nested fields nullable: how writers that build rows in SQL
    (the generator, the OBD ingest) give both engines the same output schema."""
    cols = [f"try_cast({exprs.get(f.name, 'NULL')} AS {sql_type(nullable_type(f.dataType))}) AS {f.name}"
            for f in load_contract(name).struct_type().fields]
    return "SELECT " + ", ".join(cols) + f" FROM {source}"


def arrow_type(data_type, nullable: bool = False):
    """The pyarrow type of a contract type (timestamps as UTC microseconds, as Spark writes them); ``nullable``:
    every nested field nullable (a writer of bad data, or one that does not know the contract)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType, nullable), f.nullable or nullable)
                          for f in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return pa.list_(pa.field("element", arrow_type(data_type.elementType, nullable),
                                 data_type.containsNull or nullable))
    if isinstance(data_type, T.MapType):
        return pa.map_(arrow_type(data_type.keyType, nullable), arrow_type(data_type.valueType, nullable))
    simple = {T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
              T.DoubleType: pa.float64(), T.BooleanType: pa.bool_(), T.DateType: pa.date32(),
              T.TimestampType: pa.timestamp("us", tz="UTC")}
    for cls, t in simple.items():
        if isinstance(data_type, cls):
            return t
    raise TypeError(f"no pyarrow type for {data_type}")


def arrow_schema(name: str, nullable: bool = False):
    """The contract as a pyarrow schema (for writers that do not go through Spark: pyarrow, DuckDB)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, arrow_type(f.dataType, nullable), f.nullable or nullable)
                      for f in load_contract(name).struct_type().fields])


_PANDAS_TYPES = {"double": "float64", "long": "Int64", "integer": "Int32", "boolean": "boolean"}


def conform_frame(df, contract: Contract):
    """A small pandas output table cast to its contract (schemas/<name>.schema.json): the contract's columns in
    order with their types (a missing column is null), then any other columns (``dt`` of a by-day table)."""
    import pandas as pd

    out = pd.DataFrame(index=df.index)
    for f in contract.fields:
        name, kind = f["name"], f["type"]
        col = df[name] if name in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)
        if kind == "string":
            out[name] = pd.Series([None if v is None or (isinstance(v, float) and v != v) else str(v)
                                   for v in col], index=df.index, dtype="string")
        elif kind in ("double",):
            out[name] = pd.to_numeric(col, errors="coerce").astype("float64")
        else:
            out[name] = col.astype("object").where(col.notna(), None).astype(_PANDAS_TYPES[kind])
    for c in df.columns:
        if c not in out.columns:
            out[c] = df[c]
    return out.reset_index(drop=True)
