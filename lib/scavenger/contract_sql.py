"""The contracts of ``schemas/`` outside Spark DataFrames: as SQL (the SELECTs that conform a source to a contract,
the same on both engines: Spark SQL, DuckDB via sqlglot), as Arrow types (writers that do not go through Spark) and
as pandas dtypes (the small output tables). Reading and writing Spark DataFrames is :mod:`scavenger.contract`.

Every function here takes a :class:`scavenger.contract.Contract` (or a type of one) and imports nothing from that
module: the contracts are loaded there, the engines below it conform sources with what is here."""
from __future__ import annotations


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


_INTEGER = "[+-]?[0-9]+"
_DECIMAL = "[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?"


def _lossy(source, data_type) -> bool:
    """Does casting an Arrow ``source`` type to the contract's ``data_type`` differ between the engines? Spark
    truncates 1.5 to the integer 1 and reads '0.2d' as 0.2; DuckDB rounds to 2, reads '0x2' as 2 and '0.2d' as
    null; text read as a timestamp: see _TIMESTAMP."""
    import pyarrow.types as T
    from pyspark.sql import types as S

    if isinstance(data_type, (S.IntegerType, S.LongType)):
        return T.is_floating(source) or T.is_decimal(source) or T.is_string(source) or T.is_large_string(source)
    if isinstance(data_type, (S.DoubleType, S.TimestampType)):
        return T.is_string(source) or T.is_large_string(source)
    return False


# Text read as a timestamp: the ISO forms both engines read alike (date, then optionally a time, Z, UTC or an
# offset up to 18:00). Each engine also reads other forms the other does not: DuckDB hour 24 ('... 24:00:00' as the
# next midnight) and offsets beyond 18 hours, Spark an hour without minutes ('2026-05-03 10'), a trailing space,
# a space before the offset, a leading '+'; those are null on both.
_TIMESTAMP = ("[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([T ]([01]?[0-9]|2[0-3]):[0-9]{1,2}(:[0-9]{1,2}([.][0-9]*)?)?"
              "(Z| UTC|[+-](0[0-9]|1[0-7])(:?[0-5][0-9])?|[+-]18(:?00)?)?)?")


def _matches(expr: str, pattern: str) -> str:
    """``expr`` is ``pattern`` as a whole, alike on both engines: no ``$`` (Java's matches before a final line
    break, RE2's does not: '12\\n' passed on Spark only)."""
    return f"regexp_extract({expr}, '^{pattern}', 0) = {expr}"


def cast_sql(expr: str, source, data_type) -> str:
    """``expr`` of Arrow type ``source`` as the contract's ``data_type``, the same value on both engines: a number
    with a fraction, or text that is not a plain decimal numeral, becomes null (then quarantined by its rule)."""
    t = sql_type(data_type)
    if source is None or not _lossy(source, data_type):
        return f"try_cast({expr} AS {t})"
    import pyarrow.types as T

    if T.is_floating(source) or T.is_decimal(source):
        return f"CASE WHEN {expr} = floor({expr}) THEN try_cast({expr} AS {t}) END"
    pattern = _TIMESTAMP if t == "timestamp" else _DECIMAL if t == "double" else _INTEGER
    return f"CASE WHEN {_matches(expr, pattern)} THEN try_cast({expr} AS {t}) END"


def _struct_sql(var: str, struct, source) -> str:
    """named_struct of a contract struct from element ``var`` of Arrow struct type ``source`` (by name; missing
    nullable fields are null)."""
    have = {source.field(i).name: source.field(i).type for i in range(source.num_fields)} \
        if hasattr(source, "num_fields") else {}
    parts = []
    for f in struct.fields:
        value = cast_sql(f"{var}.{f.name}", have[f.name], f.dataType) if f.name in have \
            else f"CAST(NULL AS {sql_type(f.dataType)})"
        parts.append(f"'{f.name}', {value}")
    return "named_struct(" + ", ".join(parts) + ")"


def _is_null(t) -> bool:
    """A column of Arrow type null: what pandas writes for an empty frame's or an all-None column."""
    import pyarrow as pa

    return t == pa.null()


def _is_struct(t) -> bool:
    import pyarrow.types as T

    return T.is_struct(t)


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


def _struct_map(name: str, t, data_type) -> str:
    """A map column written as a struct (what pyarrow and Spark make of Python dicts: one field per key) as the
    contract's map: each field a key, its value as text (null kept). The same expression on both engines (DuckDB
    would also cast it implicitly, Spark cannot); io.sources.check_schema admits only fields it can name and whose
    values read alike (text, integers, nulls)."""
    keys = [t.field(i).name for i in range(t.num_fields)]
    if not keys:
        return f"CAST(NULL AS {sql_type(data_type)})"
    values = ", ".join(f"CAST({name}.`{k}` AS STRING)" for k in keys)
    literals = ", ".join(f"'{k}'" for k in keys)
    return f"CASE WHEN {name} IS NULL THEN NULL ELSE map_from_arrays(array({literals}), array({values})) END"


def conform_sql(contract, view: str, schema, dt=None, nanos_as_long=(), carry=()) -> str:
    """SELECT of ``view`` as the contract's columns and types (Spark SQL; DuckDB via sqlglot).

    ``schema``: the source's pyarrow schema. Values that do not parse become null (``try_cast``) and are then
    quarantined with a reason; missing optional columns are null. ``dt`` is the partition's date: the ``dt=``
    directory wins over a ``dt`` column in its files, as in Hive and Spark's partition discovery (a row whose
    event_time lies outside that day is quarantined as EVENT_TIME_OUTSIDE_DT; none vanish). An array of structs is
    cast as a whole when its fields are the contract's in the contract's order, else rebuilt field by field by name.
    ``nanos_as_long``: timestamp columns Spark reads as nanoseconds since the epoch (Parquet INT64 nanos). ``carry``:
    extra columns passed through (a row id)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    names = list(schema.names)
    cols = []
    for f in contract.struct_type().fields:
        t = sql_type(f.dataType)
        if f.name == contract.partition_column and dt is not None:     # the directory's date, as Hive reads it
            cols.append(f"DATE '{dt.isoformat()}' AS {f.name}")
        elif f.name not in names or _is_null(schema.field(f.name).type):   # absent, or a column of nulls only
            cols.append(f"CAST(NULL AS {t}) AS {f.name}")
        elif f.name in nanos_as_long:
            cols.append(f"timestamp_micros({f.name} DIV 1000) AS {f.name}")
        elif isinstance(f.dataType, MapType) and _is_struct(schema.field(f.name).type):
            cols.append(f"{_struct_map(f.name, schema.field(f.name).type, f.dataType)} AS {f.name}")
        elif _is_pairs(schema.field(f.name).type):
            cols.append(f"try_cast(map_from_entries({_pairs_entries(f.name, schema.field(f.name).type)}) AS {t}) "
                        f"AS {f.name}")
        elif isinstance(f.dataType, ArrayType) and isinstance(f.dataType.elementType, StructType):
            elem = schema.field(f.name).type.value_type
            have = [elem.field(i) for i in range(elem.num_fields)] if hasattr(elem, "num_fields") else []
            want = f.dataType.elementType.fields
            if [h.name for h in have] == [w.name for w in want] and \
                    not any(_lossy(h.type, w.dataType) for h, w in zip(have, want)):
                cols.append(f"try_cast({f.name} AS {t}) AS {f.name}")
            else:
                cols.append(f"transform({f.name}, s -> {_struct_sql('s', f.dataType.elementType, elem)}) "
                            f"AS {f.name}")
        else:
            cols.append(f"{cast_sql(f.name, schema.field(f.name).type, f.dataType)} AS {f.name}")
    cols += list(carry)
    return "SELECT " + ", ".join(cols) + f" FROM {view}"


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


_PANDAS_TYPES = {"double": "float64", "long": "Int64", "integer": "Int32", "boolean": "boolean"}


def conform_frame(df, contract):
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
