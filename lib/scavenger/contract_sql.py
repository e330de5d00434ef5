"""The contracts of ``schemas/`` outside Spark DataFrames: as SQL (the SELECTs that conform a source to a contract,
the same on both engines: Spark SQL, DuckDB via sqlglot), as Arrow types (writers that do not go through Spark) and
as pandas dtypes (the small output tables). Reading and writing Spark DataFrames is :mod:`scavenger.contract`."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .contract import Contract


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


def sql_type(data_type) -> str:
    """Spark SQL type text of a contract type (nested fields keep their names)."""
    return data_type.simpleString()


def empty_sql(contract) -> str:
    """A SELECT of no rows with the contract's columns and types (a window with no input file)."""
    cols = ", ".join(f"CAST(NULL AS {sql_type(f.dataType)}) AS {f.name}" for f in contract.struct_type().fields)
    return f"SELECT {cols} WHERE 1 = 0"


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
    from .contract import load_contract

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

    from .contract import load_contract

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
