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
    for groups in src.days.values():
        for uri in (u for g in groups for u in g.files):
            loc = fs.resolve(uri)
            out.update(pc.unique(pq.read_table(loc.path, filesystem=loc.fs, columns=[column]).column(column))
                       .to_pylist())
    return out
