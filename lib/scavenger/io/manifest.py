"""The run manifest ``<out>/_manifest.json``: which tables the last run of a job wrote, and whether it finished.

Each table is committed at once (io/outputs.py), but a job writes several: a job killed between two of them
(SIGKILL, a lost node) leaves a set that mixes two runs. The manifest tells a reader which set it is looking at:

    start   ``_manifest.json`` = {"run_id": R, "status": "running", "complete": false, "tables": []}
            (before any output is touched: from now on the previous run's manifest no longer vouches for the set)
    write   every table committed by this run is recorded (name, location, kind, days, run_id, rows), and carries
            its own mark of the run that wrote it: ``_run.json`` inside a Parquet table directory (committed with
            the table, in the same rename), the ``run_id`` column of catalog and quarantine rows, the sha256 of a
            file
    end     ``_manifest.json`` rewritten last, on every ending the process sees (ok, exit 3, an error, SIGTERM or
            SIGINT): status, exit_code, ``complete`` (true only for a run that ended normally, status ok or
            data_check_failed) and the tables

Before reading a job's outputs (README "Reading outputs"): ``_manifest.json`` says ``"complete": true``, its
``run_id`` is the one in ``result.json``, and the table is listed; :func:`verify` checks that and each listed
table's own mark (``scavenger.io.manifest.verify(out)`` returns the problems, an empty list when the set is
complete and from one run).
"""
from __future__ import annotations

import datetime as _dt
import threading

from . import fs
from .manifest_read import (  # noqa: F401 - the readers re-exported
    MANIFEST,
    MARK,
    Malformed,
    _json_object,
    _sha256,
    read,
    verify,
)

COMPLETE_STATUSES = ("ok", "data_check_failed")

_lock = threading.Lock()
_current: "Run | None" = None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


class Run:
    """The manifest of the run in progress (one per process: the CLI's job)."""

    def __init__(self, out: str, run_id: str, job: str):
        self.out, self.run_id, self.job = out, run_id, job
        self.started_at = _now()
        self.tables: list = []
        self.day_rows: dict = {}     # (name, location) -> {day: rows} of the tables recorded with day_rows

    def to_dict(self, status: str, exit_code) -> dict:
        from ..safe import bound_json

        return bound_json({"run_id": self.run_id, "job": self.job, "status": status, "exit_code": exit_code,
                           "complete": status in COMPLETE_STATUSES, "started_at": self.started_at,
                           "finished_at": None if status == "running" else _now(), "tables": list(self.tables)})

    def write(self, status: str, exit_code=None) -> str:
        uri = fs.join(self.out, MANIFEST)
        fs.write_json(uri, self.to_dict(status, exit_code))
        return uri


def begin(out: str | None, run_id: str, job: str) -> Run | None:
    """Start the manifest of this process's run (and say "running" in ``<out>/_manifest.json``)."""
    global _current
    if not out:
        return None
    run = Run(out, run_id, job)
    with _lock:
        _current = run
    try:
        run.write("running")
    except OSError:
        pass                                       # --out not writable: result.json reports it
    return run


def _add_unrecorded(run: Run, outputs: dict) -> None:
    known = [str(t["location"]).rstrip("/") for t in run.tables]
    for name, loc in outputs.items():
        if not isinstance(loc, str) or not loc:
            continue
        loc = loc[len("catalog:"):] if loc.startswith("catalog:") else loc
        if any(loc.rstrip("/") == k or loc.startswith(k + "/") or k.startswith(loc.rstrip("/") + "/")
               or k.startswith(loc.rstrip("/") + "_") for k in known):
            continue                      # recorded (or a part of it is): the marks say more
        run.tables.append({"name": name, "location": loc, "kind": "unmarked", "run_id": run.run_id})


def current() -> Run | None:
    return _current


def finish(status: str, exit_code, outputs: dict | None = None) -> str | None:
    """Write the manifest last (every ending) and end the run. ``outputs`` (result.json's) adds what the job
    wrote without recording it here (e.g. generate's logs and decisions, on either engine): kind ``unmarked``,
    listed with this run's id, no mark of its own to verify."""
    global _current
    with _lock:
        run, _current = _current, None
    if run is None:
        return None
    _add_unrecorded(run, outputs or {})
    try:
        return run.write(status, exit_code)
    except OSError:
        return None


def mark(run_id: str | None = None) -> bytes | None:
    """The ``_run.json`` of a table directory written now (None outside a run)."""
    import json

    run = _current
    if run is None and run_id is None:
        return None
    body = {"run_id": run_id or run.run_id, "job": run.job if run else None, "written_at": _now()}
    return (json.dumps(body) + "\n").encode("utf-8")


def record(name: str, location: str, kind: str = "parquet", days=None, rows: int | None = None,
           run_id: str | None = None, day_rows: dict | None = None, **extra) -> None:
    """Record a committed output of this run. ``kind``: parquet (a directory with ``_run.json``; with ``days``,
    one ``dt=`` directory per day, each with its own), rows (engine-written partitions whose rows carry
    ``run_id``), catalog (a catalog table, rows with ``run_id`` under the ``dt`` of ``days``), file (sha256),
    dir (a directory written in place, ``_run.json`` written after it), shared (written by this run into a place
    other jobs write too: listed, not verified). ``day_rows``: the rows of each of ``days`` (``rows`` their sum): a
    day recorded again (its partition written again, e.g. a window scanned a second time) replaces its count."""
    run = _current
    if run is None:
        return
    if day_rows is not None:
        day_rows = {(d.isoformat() if hasattr(d, "isoformat") else str(d)): int(n) for d, n in day_rows.items()}
        rows = sum(day_rows.values())
    entry = {"name": name, "location": location, "kind": kind, "run_id": run_id or run.run_id}
    if days is not None:
        entry["days"] = sorted({d.isoformat() if hasattr(d, "isoformat") else str(d) for d in days})
    if rows is not None:
        entry["rows"] = int(rows)
    entry.update(extra)
    with _lock:
        same = [t for t in run.tables if t["name"] == name and t["location"] == location]
        if same and days is not None and same[0].get("days") is not None:   # another batch of the same table
            entry["days"] = sorted(set(entry["days"]) | set(same[0]["days"]))
            if day_rows is not None and (name, location) in run.day_rows:
                day_rows = {**run.day_rows[(name, location)], **day_rows}
                entry["rows"] = sum(day_rows.values())
            elif rows is not None and same[0].get("rows") is not None:
                entry["rows"] += same[0]["rows"]
        if day_rows is not None:
            run.day_rows[(name, location)] = day_rows
        run.tables = [t for t in run.tables if t not in same]
        run.tables.append(entry)


def record_quarantine(uri: str, days, rows: int | dict | None = None) -> None:
    """Quarantined rows of ``days`` written under ``uri`` (``<out>/quarantine/logs``, beside a statistics store, or
    ``catalog:<db>.quarantine/logs``); their rows carry the run_id. Under ``--out`` they are this job's (kind rows,
    verified); beside a statistics store or in the catalog they are shared by every job using the store or the
    database, and a later job scanning the same day rightly replaces them (kind shared: listed, not verified).
    ``rows``: their number, or {day: rows} (a day written again in the run is counted once)."""
    run = _current
    rows, day_rows = (None, rows) if isinstance(rows, dict) else (rows, None)
    if uri.startswith("catalog:"):
        table = uri[len("catalog:"):].replace("/", "_")
        record(table.rsplit(".", 1)[-1], table, "shared", days=days, rows=rows, day_rows=day_rows)
        return
    loc = fs.normalize(uri)
    own = run is not None and loc.startswith(fs.normalize(run.out).rstrip("/") + "/")
    record("quarantine_" + loc.rstrip("/").rsplit("/", 1)[-1], loc, "rows" if own else "shared", days=days,
           rows=rows, day_rows=day_rows)


def record_file(name: str, path: str) -> None:
    record(name, path, "file", sha256=_sha256(path))


def unmark(uri: str) -> None:
    """Before writing a directory in place: its old ``_run.json`` no longer vouches for it."""
    target = fs.join(uri, MARK)
    if fs.exists(target):
        fs.delete(target)


def stamp(name: str, uri: str) -> None:
    """After writing a directory in place (Data Docs): its ``_run.json`` and the manifest entry."""
    body = mark()
    if body is None:
        return
    fs.write_bytes(fs.join(uri, MARK), body)
    record(name, uri, "dir")
