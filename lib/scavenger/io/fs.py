"""URIs as users write them: a local path, ``file://``, ``s3a://``/``s3://``, ``gs://``, ``hdfs://``, ``abfss://``.

Small files (result.json, manifests, the per-day statistics tables) and directory listings go through
``pyarrow.fs``; row data goes through the engine (Spark writes any URI Spark can write). Nothing here starts a JVM
or reaches into one, so it works beside Spark Connect and on a machine without Java. A URI whose scheme this
process cannot open gets a :class:`~scavenger.errors.UsageError` (exit 2) naming it, before any work.
"""
from __future__ import annotations

import io
import json
import os
import posixpath
import uuid
from dataclasses import dataclass

from ..errors import UsageError

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}


def scheme(uri: str) -> str:
    """``file`` for local paths and file:// URIs, else the URI scheme (s3a is s3)."""
    if "://" not in str(uri):
        return "file"
    s = str(uri).split("://", 1)[0].lower()
    return _SCHEME_ALIASES.get(s, s)


def is_local(uri: str) -> bool:
    return scheme(uri) == "file"


def local_path(uri: str) -> str:
    """Absolute local path of a local path or file:// URI."""
    text = str(uri)
    if text.startswith("file://"):
        text = text[len("file://"):]
    return os.path.abspath(os.path.expanduser(text))


def normalize(uri: str) -> str:
    """A local path made absolute (``file://`` stripped); other URIs as given without a trailing slash."""
    return local_path(uri) if is_local(uri) else str(uri).rstrip("/")


def join(base: str, *parts: str) -> str:
    base = normalize(base)
    return os.path.join(base, *parts) if is_local(base) else posixpath.join(base, *parts)


@dataclass(frozen=True)
class Location:
    fs: object
    path: str
    uri: str


def resolve(uri: str) -> Location:
    """pyarrow FileSystem and path of ``uri``; UsageError when this process cannot open the scheme."""
    from pyarrow import fs as pafs

    s = scheme(uri)
    if s == "file":
        p = local_path(uri)
        return Location(pafs.LocalFileSystem(), p, p)
    text = str(uri)
    if s == "s3" and not text.startswith("s3://"):
        text = "s3://" + text.split("://", 1)[1]
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types (ArrowInvalid, OSError, ...)
        raise UsageError(f"cannot open {uri}: the {s}:// scheme is not available to this process "
                         f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return Location(fs, path.rstrip("/"), str(uri).rstrip("/"))


def exists(uri: str) -> bool:
    from pyarrow import fs as pafs

    loc = resolve(uri)
    return loc.fs.get_file_info(loc.path).type != pafs.FileType.NotFound


def isdir(uri: str) -> bool:
    from pyarrow import fs as pafs

    loc = resolve(uri)
    return loc.fs.get_file_info(loc.path).type == pafs.FileType.Directory


def makedirs(uri: str) -> None:
    loc = resolve(uri)
    loc.fs.create_dir(loc.path, recursive=True)


def delete(uri: str) -> None:
    """Remove a file or a directory tree; nothing when absent."""
    from pyarrow import fs as pafs

    loc = resolve(uri)
    info = loc.fs.get_file_info(loc.path)
    if info.type == pafs.FileType.Directory:
        loc.fs.delete_dir(loc.path)
    elif info.type == pafs.FileType.File:
        loc.fs.delete_file(loc.path)


def delete_own(uri: str) -> None:
    """Remove this run's working directory ``uri`` (``<table>/_staging/<uuid>``, ``<table>/_trash/<uuid>``), then
    its parent when that is left empty: never the parent's other entries, which another run writing the same table
    may be using (removing the whole ``_staging`` lost a concurrent run's day). A remote parent is left as it is
    (readers skip ``_`` names, and its delete would be recursive)."""
    import os

    delete(uri)
    if is_local(uri):
        try:
            os.rmdir(os.path.dirname(local_path(uri).rstrip("/\\")))
        except OSError:
            pass


def listdir(uri: str) -> list[tuple[str, bool]]:
    """(name, is_dir) of the entries of a directory (none when it does not exist)."""
    from pyarrow import fs as pafs

    loc = resolve(uri)
    if loc.fs.get_file_info(loc.path).type != pafs.FileType.Directory:
        return []
    out = []
    for info in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False)):
        out.append((info.base_name, info.type == pafs.FileType.Directory))
    return sorted(out)


def hidden(name: str) -> bool:
    """Spark, Hadoop and this project skip names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``, staging)."""
    return name.startswith("_") or name.startswith(".")


def data_files(uri: str) -> list[tuple[str, int, int]]:
    """(uri, size, mtime_ns) of every visible file under a directory (or the file itself), sorted. A local file's
    time is the later of its mtime and ctime (``changed_ns``)."""
    from pyarrow import fs as pafs

    loc = resolve(uri)
    info = loc.fs.get_file_info(loc.path)
    if info.type == pafs.FileType.File:
        if is_local(loc.uri):
            st = os.stat(loc.path)
            return [(loc.uri, st.st_size, changed_ns(st))]
        return [(loc.uri, info.size, info.mtime_ns or 0)]
    if info.type != pafs.FileType.Directory:
        return []
    if is_local(loc.uri):
        return sorted(_local_files(loc.path))
    out = []
    for f in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True)):
        rel = f.path[len(loc.path):].lstrip("/")
        if f.type != pafs.FileType.File or any(hidden(part) for part in rel.split("/")):
            continue
        out.append((_child_uri(loc, rel), f.size, f.mtime_ns or 0))
    return sorted(out)


def _local_files(root: str) -> list[tuple[str, int, int]]:
    """The visible regular files under a local directory, each directory listed once: a symbolic link back to an
    ancestor, or two links to one directory, are followed once (pyarrow's recursive listing follows them until the
    kernel's link limit: two links to ``.`` in one directory made 2**40 paths, a listing that never ended)."""
    import stat

    seen, out = set(), []

    def fail(exc):
        raise exc

    for parent, dirs, names in os.walk(root, followlinks=True, onerror=fail):
        st = os.stat(parent)
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = [d for d in dirs if not hidden(d)]
        for name in names:
            path = os.path.join(parent, name)
            try:
                st = os.stat(path)
            except OSError:         # a dangling link: no file to read
                continue
            if not hidden(name) and stat.S_ISREG(st.st_mode):
                out.append((path, st.st_size, changed_ns(st)))
    return out


def changed_ns(st) -> int:
    """When a local file last changed: the later of mtime and ctime. A file rewritten in place and given back its
    size and mtime (``touch -d``, ``os.utime``, ``cp -p`` over it) keeps its mtime but not its ctime, which no user
    call can set, so the statistics store sees the new content; a file only renamed, copied or chmod-ed is read
    again once, which costs time, never a wrong number."""
    return max(int(st.st_mtime_ns), int(st.st_ctime_ns))


def parquet_rows(uris) -> int:
    """Rows of the Parquet files ``uris`` from their footers (no row read); a file that is not Parquet holds none
    a job could read."""
    import pyarrow.parquet as pq

    total = 0
    for uri in uris:
        loc = resolve(uri)
        try:
            with loc.fs.open_input_file(loc.path) as fh:
                total += pq.ParquetFile(fh).metadata.num_rows
        except (OSError, ValueError):
            continue
    return total


def _child_uri(loc: Location, rel: str) -> str:
    return os.path.join(loc.path, rel) if is_local(loc.uri) else posixpath.join(loc.uri, rel)


def read_bytes(uri: str) -> bytes:
    loc = resolve(uri)
    with loc.fs.open_input_stream(loc.path) as fh:
        return fh.read()


def write_bytes(uri: str, data: bytes) -> None:
    """Write a small file at once: a hidden temporary sibling, then a move (a rename on local, HDFS; a copy on
    object stores, whose single-object PUT is atomic anyway)."""
    loc = resolve(uri)
    parent = posixpath.dirname(loc.path) if not is_local(uri) else os.path.dirname(loc.path)
    loc.fs.create_dir(parent, recursive=True)
    name = posixpath.basename(loc.path)
    tmp = (os.path.join if is_local(uri) else posixpath.join)(parent, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    with loc.fs.open_output_stream(tmp) as fh:
        fh.write(data)
    loc.fs.move(tmp, loc.path)


def read_json(uri: str):
    return json.loads(read_bytes(uri).decode("utf-8"))


def write_json(uri: str, value) -> None:
    write_bytes(uri, (json.dumps(value, indent=1, sort_keys=False, default=str) + "\n").encode("utf-8"))


def write_parquet(uri: str, frame) -> None:
    """One Parquet file from a pandas frame or pyarrow Table, written at once (see :func:`write_bytes`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    write_bytes(uri, sink.getvalue())


def read_parquet(uri: str):
    """A pandas frame of one Parquet file or a directory of them."""
    import pyarrow.parquet as pq

    loc = resolve(uri)
    return pq.read_table(loc.path, filesystem=loc.fs).to_pandas()


def check_writable(uri: str, flag: str = "--out") -> str:
    """Fail fast (exit 2) when ``uri`` cannot be written by this process: an unknown scheme, or a local path whose
    nearest existing ancestor is a file or not writable. Returns the normalized URI."""
    resolve(uri)
    if is_local(uri):
        p = local_path(uri)
        probe = p
        while not os.path.exists(probe):
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        if os.path.exists(p) and not os.path.isdir(p):
            raise UsageError(f"{flag} {uri}: exists and is not a directory")
        if os.path.isfile(probe) or not os.access(probe, os.W_OK):
            raise UsageError(f"{flag} {uri}: cannot create it ({probe} is not a writable directory)")
    return normalize(uri)


def probe_writable(directory: str) -> None:
    """Create and delete a hidden file in local ``directory``: OSError when files cannot be written there."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=".scavenger-probe-", dir=directory)
    os.close(fd)
    os.unlink(name)
