"""Values of one column of an input, read before any engine starts (pyarrow, one column per file): what a flag
names can be checked against the data without a pass (evaluate --baseline against the decisions' policies)."""
from __future__ import annotations

from . import fs
from .sources import Source


def column_values(src: Source, column: str) -> set | None:
    """The distinct values of ``column`` in a file source's files of the window (one column read per file, no
    engine) or in an in-memory table; None for a catalog table or a Spark DataFrame (known only after the pass)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if src.kind == "arrow":
        return set(pc.unique(src.obj.column(column)).to_pylist())
    if src.kind != "files":
        return None
    out: set = set()
    for uri in _files(src):
        loc = fs.resolve(uri)
        if column in pq.read_schema(loc.path, filesystem=loc.fs).names:     # a file without it: the pass says so
            out.update(pc.unique(pq.read_table(loc.path, filesystem=loc.fs, columns=[column]).column(column))
                       .to_pylist())
    return out


def column_holds(src: Source, column: str, value) -> bool | None:
    """Whether some row of the source's window has ``value`` in ``column`` (None where :func:`column_values` gives
    None). Stops at the first row group that holds it, and reads no row group whose Parquet statistics (min, max)
    rule it out: a policy of a 100M-row decisions table is found without reading the whole column."""
    import pyarrow.compute as pc

    if src.kind == "arrow":
        col = _as_text(src.obj.column(column), value)
        return col is not None and bool(pc.any(pc.equal(col, value)).as_py())
    if src.kind != "files":
        return None
    for uri in _files(src):
        if _file_holds(uri, column, value):
            return True
    return False


def _files(src: Source):
    for groups in src.days.values():
        yield from (u for g in groups for u in g.files)


def _file_holds(uri: str, column: str, value) -> bool:
    """Row group by row group, the ones whose statistics cannot rule ``value`` out (none kept, or another type)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    loc = fs.resolve(uri)
    with pq.ParquetFile(loc.path, filesystem=loc.fs) as f:
        if column not in f.schema_arrow.names:
            return False
        meta = f.metadata
        paths = [meta.schema.column(j).path for j in range(meta.num_columns)]   # Parquet's leaf columns
        i = paths.index(column) if column in paths else None
        for g in range(meta.num_row_groups):
            if i is not None and not _may_hold(meta.row_group(g), i, value):
                continue
            col = _as_text(f.read_row_group(g, columns=[column]).column(column), value)
            if col is not None and pc.any(pc.equal(col, value)).as_py():
                return True
    return False


def _as_text(col, value):
    """``col`` as ``value``'s type where it differs (a dictionary-encoded or numeric column against a text id, as
    column_values' set comparison treats it: 3 is not "3"), None where no value of it can equal ``value``."""
    import pyarrow as pa

    if isinstance(value, str):
        t = col.type
        if pa.types.is_dictionary(t):
            return col.cast(t.value_type) if pa.types.is_string(t.value_type) or pa.types.is_large_string(
                t.value_type) else None
        return col if pa.types.is_string(t) or pa.types.is_large_string(t) else None
    return col


def _may_hold(row_group, i: int, value) -> bool:
    """False only where the column chunk's min/max statistics exclude ``value``."""
    try:
        stats = row_group.column(i).statistics
        if stats is None or not stats.has_min_max:
            return True
        return not (value < stats.min or value > stats.max)
    except (TypeError, ValueError, IndexError):      # statistics of another type or kind: read the row group
        return True
