"""Inputs as users give them: a Parquet dataset partitioned by ``dt`` (any writer: Spark, pandas, pyarrow, DuckDB,
Polars), a single Parquet file or directory holding a ``dt`` column, a catalog table, or a DataFrame in memory.

A file source is described before any engine starts: its days, and per day its files grouped by their Parquet
schema (a pyarrow metadata read per file, no data). Each group is later conformed to the contract on its own, so
files of one day written by different tools (int32 and int64 positions, microsecond and nanosecond timestamps,
large strings) are read correctly side by side. A file that is not Parquet or is truncated, or a column whose type
cannot become the contract's, is a :class:`~scavenger.errors.UsageError` (exit 2) naming the file, the column,
the type found and the type expected.
"""
from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field

from ..errors import UsageError
from . import fs
from .dt_layout import DtLayout, dt_layout

# a catalog table is qualified (``db.t`` or ``cat.db.t``): a bare word is a path, so a mistyped path is answered
# "no such path" before any engine starts instead of starting Spark to look for a table
_TABLE = __import__("re").compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){1,2}$")


@dataclass
class FileGroup:
    """Files of one day (or of a whole undivided source) that share one Parquet schema."""

    files: list
    schema: object                # pyarrow.Schema
    dt: _dt.date | None           # from the dt=... directory; None when the files hold a dt column


@dataclass
class Source:
    """What an input is, resolved without reading its rows. ``kind``: files | table | spark | arrow."""

    kind: str
    name: str                                   # as the user gave it (for messages)
    uri: str | None = None
    days: dict = field(default_factory=dict)    # files: {date: [FileGroup]}; undivided sources use key None
    obj: object = None                          # table name, Spark DataFrame or pyarrow Table
    signature: dict = field(default_factory=dict)  # files: {date: [[relpath, size, mtime_ns], ...]}
    undated: list = field(default_factory=list)    # files: what a dt-partitioned source holds outside its dated
    #                                                 directories (dt= names without a date, other dirs and files)
    flag: str = "--logs"                        # the flag or argument that named it (for messages)
    held: list = field(default_factory=list)    # every day the source holds, whatever the window (dt= listing;
    #                                             an undivided source's after its one query of dt values)

    @property
    def local(self) -> bool:
        return self.kind == "arrow" or (self.kind == "files" and fs.is_local(self.uri))

    def dates(self) -> list | None:
        """The days the source holds when known without reading rows (files partitioned by dt), else None."""
        if self.kind == "files" and None not in self.days:
            return sorted(self.days)
        return None


def require_days(src: Source, date_from, date_to, window: str = "--from/--to") -> None:
    """UsageError (exit 2) when the source holds days but none of the window [date_from, date_to]: a window chosen
    outside the logs, answered with the days they hold (the dt= listing, or an undivided source's dt values)."""
    if not src.held or any((date_from is None or d >= date_from) and (date_to is None or d <= date_to)
                           for d in src.held):
        return
    runs: list = []
    for d in sorted(src.held):
        if runs and (d - runs[-1][1]).days == 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    held = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs[:4]) + \
        (f" and {len(runs) - 4} more run(s)" if len(runs) > 4 else "")
    raise UsageError(f"{src.flag} {src.name}: no logs in the window {date_from or '-'}..{date_to or '-'}; they hold "
                     f"{len(src.held)} day(s): {held}; give {window} within those days")


def is_table_name(text: str) -> bool:
    """``db.t`` or ``cat.db.t`` that is not an existing local path."""
    import os

    return bool(_TABLE.match(text)) and not os.path.exists(text)


def describe(obj, contract, date_from=None, date_to=None, flag: str = "--logs") -> Source:
    """Resolve an input without reading rows: see the module docstring."""
    if isinstance(obj, str) or hasattr(obj, "__fspath__"):
        text = str(obj)
        if is_table_name(text):
            return Source(kind="table", name=text, obj=text, flag=flag)
        return _describe_files(text, contract, date_from, date_to, flag)
    cls = type(obj).__module__ + "." + type(obj).__name__
    if cls.startswith("pyspark."):
        return Source(kind="spark", name="<Spark DataFrame>", obj=obj, flag=flag)
    import pyarrow as pa

    if isinstance(obj, pa.Table):
        return _in_memory("<pyarrow Table>", obj, contract, flag)
    if hasattr(obj, "iloc"):
        from .frames import from_pandas

        return _in_memory("<pandas DataFrame>", from_pandas(obj, contract, flag), contract, flag)
    raise UsageError(f"{flag}: expected a path, a table name or a DataFrame, got {cls}")


def _in_memory(name: str, table, contract, flag: str) -> Source:
    """An in-memory table: its rows' days come from its dt column, so a table without one is refused (exit 2)."""
    if contract.partition_column not in table.schema.names:
        raise UsageError(f"{flag}: {name} has no {contract.partition_column} column (the UTC date of each row's "
                         f"event); add one")
    check_schema(table.schema, contract, name, flag, partitioned=False)
    return Source(kind="arrow", name=name, obj=table, flag=flag)


def _describe_files(text: str, contract, date_from, date_to, flag: str) -> Source:
    uri = fs.normalize(text)
    if fs.is_local(uri) and not fs.exists(uri):
        raise UsageError(f"{flag}: no such path: {text}")
    layout = dt_layout(uri, contract.partition_column) if fs.isdir(uri) else DtLayout({}, [], [])
    parts = layout.days
    src = Source(kind="files", name=text, uri=uri, flag=flag,
                 undated=[fs.join(uri, n) for n in sorted(layout.undated + layout.other)] if parts else [])
    if parts:
        src.held = sorted(parts)
        _note_undated(flag, contract.partition_column, layout)
        for day, day_uris in sorted(parts.items()):
            if (date_from and day < date_from) or (date_to and day > date_to):
                continue
            files, base = [], day_uris[0] if len(day_uris) == 1 else uri
            for day_uri in day_uris:
                files += fs.data_files(day_uri)
            src.signature[day] = [[f[0][len(base):].lstrip("/"), f[1], f[2]] for f in files]
            src.days[day] = _groups([f[0] for f in files], contract, day, flag)
        return src
    files = fs.data_files(uri)
    if not files:
        raise UsageError(f"{flag}: {text} holds no data files (expected Parquet partitioned by "
                         f"{contract.partition_column}=YYYY-MM-DD, or Parquet files with a "
                         f"{contract.partition_column} column)")
    src.signature[None] = [[f[0], f[1], f[2]] for f in files]
    src.days[None] = _groups([f[0] for f in files], contract, None, flag)
    return src


def _note_undated(flag: str, column: str, layout) -> None:
    """Name on stderr what a partitioned source holds outside its dated directories: no window reads those rows;
    they are counted (from the Parquet footers) and judged as rows without a date (pipelines.common.window_days)."""
    from ..progress import note

    def shown(names: list) -> str:
        names = sorted(names)
        return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    if layout.undated:
        n = len(layout.undated)
        note(f"{flag}: skipped {n} director{'y' if n == 1 else 'ies'} whose name holds no date "
             f"({shown(layout.undated)}): their rows belong to no day of any window; they are counted and judged "
             f"as rows without a date")
    if layout.other:
        n = len(layout.other)
        note(f"{flag}: skipped {n} entr{'y' if n == 1 else 'ies'} beside the {column}=YYYY-MM-DD directories "
             f"({shown(layout.other)}): outside every {column}= directory their rows belong to no day of any "
             f"window; they are counted and judged as rows without a date (move them into their day's "
             f"{column}= directory, or out of the input)")


def _groups(files: list, contract, day, flag: str) -> list:
    import pyarrow.parquet as pq

    by_schema: dict = {}
    for uri in files:
        loc = fs.resolve(uri)
        try:
            schema = pq.read_schema(loc.path, filesystem=loc.fs)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for non-Parquet files
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"{flag}: {uri} is not a readable Parquet file ({first})") from None
        check_schema(schema, contract, uri, flag, partitioned=day is not None)
        key = schema.remove_metadata().to_string()
        by_schema.setdefault(key, FileGroup(files=[], schema=schema.remove_metadata(), dt=day)).files.append(uri)
    return list(by_schema.values())


# ---- can a column become the contract's type? ---------------------------------------------------------------
def _kind(t) -> str:
    """The contract-level kind of a pyarrow type: string, integer, double, timestamp, date, map, list, struct,
    pairs (a list of (key, value) pairs: a map as pandas writes it back), other."""
    import pyarrow as pa
    import pyarrow.types as T

    if is_pairs(t):
        return "pairs"
    if T.is_string(t) or T.is_large_string(t) or (hasattr(T, "is_string_view") and T.is_string_view(t)):
        return "string"
    if T.is_dictionary(t):
        return _kind(t.value_type)
    if T.is_integer(t) or T.is_boolean(t):
        return "integer"
    if T.is_floating(t) or T.is_decimal(t):
        return "double"
    if T.is_timestamp(t):
        return "timestamp"
    if T.is_date(t):
        return "date"
    if T.is_map(t):
        return "map"
    if T.is_list(t) or T.is_large_list(t) or (hasattr(T, "is_list_view") and T.is_list_view(t)):
        return "list"
    if T.is_struct(t):
        return "struct"
    if t == pa.null():
        return "null"
    return "other"


_ACCEPTS = {  # contract kind -> source kinds a cast can turn into it (values that do not parse become null)
    "string": {"string", "integer", "double", "null"},
    "integer": {"integer", "string", "double", "null"},
    "double": {"double", "integer", "string", "null"},
    "timestamp": {"timestamp", "string", "date", "null"},
    "date": {"date", "string", "timestamp", "null"},
    "map": {"map", "null", "pairs", "struct"},      # struct: a dict per row (checked by _check_struct_map)
    "list": {"list", "null"},
}


def is_pairs(t) -> bool:
    """A list of 2-element lists of strings, or of structs of two fields: a map after a pandas round trip."""
    import pyarrow.types as T

    if not (T.is_list(t) or T.is_large_list(t)):
        return False
    v = t.value_type
    if T.is_struct(v):
        return v.num_fields == 2
    return (T.is_list(v) or T.is_large_list(v)) and (T.is_string(v.value_type) or T.is_large_string(v.value_type))


def _spark_kind(data_type) -> str:
    name = type(data_type).__name__
    return {"StringType": "string", "IntegerType": "integer", "LongType": "integer", "DoubleType": "double",
            "TimestampType": "timestamp", "DateType": "date", "MapType": "map", "ArrayType": "list",
            "StructType": "struct"}.get(name, "other")


def check_schema(schema, contract, uri: str, flag: str, partitioned: bool) -> None:
    """UsageError naming file, column, type found and type expected when a column cannot become the contract's."""
    from pyspark.sql.types import ArrayType

    for f in contract.struct_type().fields:
        if f.name not in schema.names:
            if f.name == contract.partition_column and not partitioned:
                raise UsageError(f"{flag}: {uri} has no {f.name} column and is not under a "
                                 f"{f.name}=YYYY-MM-DD directory")
            continue
        found = schema.field(f.name).type
        want = _spark_kind(f.dataType)
        if _kind(found) not in _ACCEPTS.get(want, {want}):
            raise UsageError(f"{flag}: {uri}: column {f.name} has type {found}, expected "
                             f"{f.dataType.simpleString()} (the contract in schemas/{contract.name}.schema.json)")
        if isinstance(f.dataType, ArrayType) and _kind(found) == "list":
            _check_elements(found.value_type, f.dataType.elementType, f"{f.name}[]", uri, flag, contract)
        if want == "map" and _kind(found) == "struct":
            _check_struct_map(found, f, uri, flag, contract)


_FIELD_NAME = re.compile(r"^[A-Za-z0-9_ .:/@+-]+$")


def _check_struct_map(found, f, uri: str, flag: str, contract) -> None:
    """A map column given as a struct (one field per key: pyarrow's and Spark's type of a column of dicts) is read as
    the map of its fields (contract_sql._struct_map) when every field has a name SQL can quote and text, integer or
    null values, which both engines turn into the same text; anything else is exit 2 naming the field."""
    names = [found.field(i).name for i in range(found.num_fields)]
    for i, name in enumerate(names):
        t = found.field(i).type
        why = ("appears twice" if names.count(name) > 1 else
               "has a name that is not letters, digits, spaces or _.:/@+-" if not _FIELD_NAME.match(name or "") else
               f"holds {t}, not text or integers" if _kind(t) not in ("string", "integer", "null") else None)
        if why:
            from ..safe import clip

            raise UsageError(f"{flag}: {uri}: column {f.name} is a struct whose field {clip(repr(name))} {why}; "
                             f"expected {f.dataType.simpleString()} (the contract in "
                             f"schemas/{contract.name}.schema.json): give {f.name} as a map of text values")


def _check_elements(found, want, where: str, uri: str, flag: str, contract) -> None:
    if _kind(found) != "struct":
        raise UsageError(f"{flag}: {uri}: column {where} has element type {found}, expected "
                         f"{want.simpleString()} (schemas/{contract.name}.schema.json)")
    names = [found.field(i).name for i in range(found.num_fields)]
    for sub in want.fields:
        if sub.name not in names:
            if sub.nullable:
                continue
            raise UsageError(f"{flag}: {uri}: column {where} lacks field {sub.name} "
                             f"({sub.dataType.simpleString()}), required by schemas/{contract.name}.schema.json")
        t = found.field(names.index(sub.name)).type
        if _kind(t) not in _ACCEPTS.get(_spark_kind(sub.dataType), set()):
            raise UsageError(f"{flag}: {uri}: field {where}.{sub.name} has type {t}, expected "
                             f"{sub.dataType.simpleString()} (schemas/{contract.name}.schema.json)")
