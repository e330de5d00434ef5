"""Directories partitioned by day (``dt=YYYY-MM-DD``) as Spark and the Hive metastore lay them out, as a reader
sees them: their days, and every other entry at their top level accounted for (io/partitions.py writes them)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from .fs import hidden, join, listdir


def dt_partitions(uri: str, column: str = "dt", undated: list | None = None) -> dict:
    """{date: uri} of the ``<column>=YYYY-MM-DD`` directories under ``uri``; the names of ``<column>=`` directories
    that hold no date (``__HIVE_DEFAULT_PARTITION__``, a typo) are appended to ``undated``, others are ignored."""
    prefix = f"{column}="
    out = {}
    for name, is_dir in listdir(uri):
        if is_dir and name.startswith(prefix):
            try:
                out[_dt.date.fromisoformat(name[len(prefix):])] = join(uri, name)
            except ValueError:
                if undated is not None:
                    undated.append(name)
    return out


@dataclass
class DtLayout:
    """What a directory partitioned by ``<column>=YYYY-MM-DD`` holds at its top level (see :func:`dt_layout`)."""

    days: dict          # {date: [uri, ...]}: the directories of each day, the exact ``<column>=`` spelling first
    undated: list       # names of ``<column>=`` directories (any case) that hold no date
    other: list         # names of the other visible entries: directories and files beside the partitions


def dt_layout(uri: str, column: str = "dt") -> DtLayout:
    """The top level of a partitioned directory, every visible entry accounted for. A directory named
    ``<column>=YYYY-MM-DD`` in any case (``DT=2026-03-03``) holds that day's rows, as in Spark (partition columns are
    matched case-insensitively unless spark.sql.caseSensitive) and the Hive metastore (lower-case names); one day
    may have several such directories. Hidden names (``_SUCCESS``, ``.crc``, ``_temporary``) are writer metadata,
    skipped as Spark skips them."""
    prefix = f"{column}=".lower()
    days: dict = {}
    undated, other = [], []
    for name, is_dir in listdir(uri):
        if hidden(name):
            continue
        if not (is_dir and name.lower().startswith(prefix)):
            other.append(name)
            continue
        try:
            day = _dt.date.fromisoformat(name[len(prefix):])
        except ValueError:
            undated.append(name)
            continue
        days.setdefault(day, []).append(name)
    exact = f"{column}="
    return DtLayout({d: [join(uri, n) for n in sorted(names, key=lambda n: (not n.startswith(exact), n))]
                     for d, names in days.items()}, undated, other)
