"""Partitioned tables on any file system: a writer puts its ``<partition>=<value>`` directories under a hidden
staging directory (``<table>/_staging/<uuid>``, skipped by readers), then each one is swapped into the table in one
rename, so a killed job leaves a day's previous partition or its new one, never half of one.

Engine-neutral (local paths and every pyarrow file system): the DuckDB and Spark engines commit their writes
through it, and so do the writers that go through neither (pyarrow datasets, a Spark DataFrame of a notebook).
"""
from __future__ import annotations

import uuid

from . import fs


def commit_partitions(staging: str, target: str, dts, partition: str = "dt") -> list[str]:
    """Swap every ``<partition>=<v>`` directory of ``staging`` into ``target`` (exchanged with the old one in one
    step on a local Linux file system, elsewhere the old one moved aside first and deleted after), and delete the
    target's partitions of ``dts`` that the new data does not have (a re-run of a day that now writes nothing).
    Local or any pyarrow file system: a directory rename is one step. Returns the values written."""
    prefix = f"{partition}="
    written = []
    trash = fs.join(target, "_trash", uuid.uuid4().hex)
    for name, is_dir in fs.listdir(staging):
        if not is_dir or not name.startswith(prefix):
            continue
        new, old = fs.join(staging, name), fs.join(target, name)
        written.append(name[len(prefix):])
        if fs.exists(old):
            if fs.is_local(old) and _exchange(new, old):    # one step: the day is never missing
                fs.delete(new)                              # now the replaced partition
                continue
            fs.makedirs(trash)
            _move(old, fs.join(trash, name))
        _move(new, old)
    for d in dts or []:
        value = d.isoformat() if hasattr(d, "isoformat") else str(d)
        if value not in written and fs.exists(fs.join(target, prefix + value)):
            fs.makedirs(trash)
            _move(fs.join(target, prefix + value), fs.join(trash, prefix + value))
    fs.delete_own(trash)
    fs.makedirs(target)
    return sorted(written)


def clear_partitions(target: str, dts, partition: str = "dt") -> None:
    """The partitions of ``dts`` removed from ``target`` the same way (a re-run of days that now hold no rows)."""
    staging = fs.join(target, "_staging", uuid.uuid4().hex)
    fs.makedirs(staging)
    try:
        commit_partitions(staging, fs.normalize(target), dts, partition)
    finally:
        fs.delete_own(staging)


def append_partitions(staging: str, target: str, partition: str = "dt") -> list[str]:
    """Move the files of every ``<partition>=<v>`` directory of ``staging`` into the target's (each under a new
    name): rows added to those partitions, none replaced. Returns the values written."""
    out = []
    for name, is_dir in fs.listdir(staging):
        if not (is_dir and name.startswith(partition + "=")):
            continue
        fs.makedirs(fs.join(target, name))
        for part, _ in fs.listdir(fs.join(staging, name)):
            if fs.hidden(part):
                continue
            dst = fs.join(target, name, f"{uuid.uuid4().hex[:8]}-{part}")
            _move(fs.join(staging, name, part), dst)
        out.append(name.split("=", 1)[1])
    return sorted(out)


def _exchange(a: str, b: str) -> bool:
    """Swap two local directories in one step where the OS can (Linux renameat2); False elsewhere."""
    from ..result import _rename_exchange

    return _rename_exchange(fs.local_path(a), fs.local_path(b))


def _move(src: str, dst: str) -> None:
    loc = fs.resolve(src)
    loc.fs.move(loc.path, fs.resolve(dst).path)
