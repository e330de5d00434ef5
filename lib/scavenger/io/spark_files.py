"""Spark's Parquet readers and writers on plain paths: a path as Spark's readers take it literally, and a Spark
DataFrame written partitioned by dt, each partition committed at once (:mod:`.partitions`). The Spark engine and
the contract's DataFrame helpers (``contract.read_source``, ``contract.write_partitioned``) share them; nothing
here opens a session."""
from __future__ import annotations

import re
import uuid

from . import fs
from .partitions import append_partitions, commit_partitions

_GLOB = re.compile(r"([\\*?\[\]{}])")


def spark_path(uri: str) -> str:
    """``uri`` as Spark's writers and the ``basePath`` option take it (as it is, normalized)."""
    return fs.normalize(uri)


def spark_read_path(uri: str) -> str:
    """``uri`` as Spark's readers take it literally: they expand Hadoop globs, so ``\\ * ? [ ] { }`` in a directory
    or file name are escaped with a backslash (unescaped, such a name read as a pattern: PATH_NOT_FOUND, exit 1).
    Writers and the ``basePath`` option take paths as they are."""
    return _GLOB.sub(r"\\\1", spark_path(uri))


def write_frame(df, uri: str, partition: str = "dt", dts=None, append: bool = False) -> list[str]:
    """Parquet partitioned by ``partition``: Spark writes a staging directory, each partition is then swapped in
    (pyarrow.fs renames); ``dts`` not in the data are removed (a re-run of a day that now writes nothing). Where
    pyarrow cannot open the URI's file system, Spark's dynamic partition overwrite replaces the days instead."""
    try:
        fs.resolve(uri)
    except Exception:  # noqa: BLE001 - a scheme only Spark can open
        df.write.mode("append" if append else "overwrite").option("partitionOverwriteMode", "dynamic") \
            .partitionBy(partition).parquet(uri)
        return []
    staging = fs.join(uri, "_staging", uuid.uuid4().hex)
    try:
        df.write.mode("overwrite").partitionBy(partition).parquet(spark_path(staging))
        if append:
            return append_partitions(staging, fs.normalize(uri), partition)
        return commit_partitions(staging, fs.normalize(uri), dts, partition)
    finally:
        fs.delete_own(staging)
