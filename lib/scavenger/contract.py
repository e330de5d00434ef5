"""The data contracts of ``schemas/``: impression logs and target-policy decisions.

The JSON files in ``schemas/`` are the single source of truth for column names and types; this module reads
them and offers readers/writers that accept either a path (Parquet partitioned by ``dt``) or a catalog table
name, conform the data to the contract's column order and types, and write per-``dt`` partitions idempotently.
The same contracts as SQL, Arrow and pandas types are :mod:`scavenger.contract_sql` (importable from here too).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .contract_sql import (arrow_type, conform_frame, conform_sql, empty_sql, nullable_type,  # noqa: F401
                           sql_type)
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
    def fields(self) -> list[dict]:
        return self.spec["schema"]["fields"]

    @property
    def columns(self) -> list[str]:
        return [f["name"] for f in self.fields]

    @property
    def required_columns(self) -> list[str]:
        return [f["name"] for f in self.fields if not f.get("metadata", {}).get("optional")]

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


def select_sql(name: str, exprs: dict, source: str) -> str:
    """SELECT from ``source`` of contract ``name``'s columns in order, each SQL expression of ``exprs`` (missing:
    null) ``try_cast`` to the contract's type with nested fields nullable: how writers that build rows in SQL
    (the generator, the OBD ingest) give both engines the same output schema."""
    cols = [f"try_cast({exprs.get(f.name, 'NULL')} AS {sql_type(nullable_type(f.dataType))}) AS {f.name}"
            for f in load_contract(name).struct_type().fields]
    return "SELECT " + ", ".join(cols) + f" FROM {source}"


def arrow_schema(name: str, nullable: bool = False):
    """The contract as a pyarrow schema (for writers that do not go through Spark: pyarrow, DuckDB)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, arrow_type(f.dataType, nullable), f.nullable or nullable)
                      for f in load_contract(name).struct_type().fields])


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
    from .io.spark_files import spark_read_path

    _check_path(source)
    try:
        return spark.read.option("basePath", source).parquet(spark_read_path(source))
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
    from .io.spark_files import write_frame

    if mode not in ("overwrite", "append"):
        raise UsageError(f"write mode must be overwrite or append, got {mode!r}")
    return write_frame(df, path, partition_column, append=(mode == "append"))
