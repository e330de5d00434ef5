"""Reading a run manifest (``<out>/_manifest.json``, written by :mod:`.manifest`, whose docstring describes it):
``read`` it, ``verify`` that ``out`` is one complete set of one run (each listed table's own mark: ``_run.json``,
the rows' run_id, a file's sha256), and the names and the digest the writer shares with it."""
from __future__ import annotations

import hashlib

from . import fs

MANIFEST = "_manifest.json"
MARK = "_run.json"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    h.update(fs.read_bytes(path))
    return h.hexdigest()


class Malformed(ValueError):
    """A manifest or result.json that is not a JSON object of the expected shape (names the file)."""


def _json_object(uri: str) -> dict:
    """The JSON object in ``uri``; :class:`Malformed` (naming the file and what is wrong) when the file cannot
    be read, is not UTF-8 JSON, or is not an object."""
    try:
        value = fs.read_json(uri)
    except UnicodeDecodeError:
        raise Malformed(f"{uri} is malformed: not UTF-8 text") from None
    except ValueError as exc:
        raise Malformed(f"{uri} is malformed: not JSON ({str(exc).splitlines()[0] if str(exc) else ''})") from None
    except OSError as exc:
        raise Malformed(f"{uri} cannot be read ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise Malformed(f"{uri} is malformed: a JSON {type(value).__name__}, not an object")
    return value


def read(out: str) -> dict | None:
    """The manifest of ``out``, None when there is none; :class:`Malformed` (a ValueError naming the file) when it
    is not a JSON object."""
    uri = fs.join(out, MANIFEST)
    return _json_object(uri) if fs.exists(uri) else None


def _shape_problems(uri: str, m: dict) -> list[str]:
    """What makes a manifest's ``tables`` unusable (a reader cannot check a set it cannot list)."""
    tables = m.get("tables", [])
    if not isinstance(tables, list):
        return [f"{uri} is malformed: 'tables' is a JSON {type(tables).__name__}, not a list"]
    bad = [i for i, t in enumerate(tables) if not isinstance(t, dict) or not isinstance(t.get("location"), str)]
    if bad:
        return [f"{uri} is malformed: entry {bad[0]} of 'tables' is not a table (an object with a location)"]
    return []


def verify(out: str, spark=None) -> list[str]:
    """Problems that make ``out`` not one complete set of one run (empty: safe to read every listed table).
    Catalog tables are checked with ``spark`` (their rows' run_id under the listed days); skipped without."""
    try:
        m = read(out)
    except Malformed as exc:
        return [f"{exc}: cannot tell whether one run wrote the set"]
    if m is None:
        return [f"{out}: no {MANIFEST} (written by a run that did not finish, or by an older version)"]
    problems = _shape_problems(fs.join(out, MANIFEST), m)
    if problems:
        return problems
    if m.get("complete") is not True:
        problems.append(f"{out}: the run {m.get('run_id')} did not finish (status {m.get('status')}, exit code "
                        f"{m.get('exit_code')}): its tables may mix two runs")
    res = fs.join(out, "result.json")
    if fs.exists(res):
        try:
            rid = _json_object(res).get("run_id")
        except Malformed as exc:
            return problems + [f"{exc}: cannot tell which run it reports"]
        if rid != m.get("run_id"):
            problems.append(f"{out}: result.json is of run {rid}, the manifest of run {m.get('run_id')}: a later "
                            f"run started and did not finish")
    for t in m.get("tables", []):
        problems += _check_table(t, spark)
    return problems


def _marks(t: dict) -> list[str]:
    if t.get("days"):
        return [fs.join(t["location"], f"dt={d}", MARK) for d in t["days"]]
    return [fs.join(t["location"], MARK)]


def _check_table(t: dict, spark) -> list[str]:
    kind, name, rid = t.get("kind"), t.get("name"), t.get("run_id")
    try:
        if kind in ("parquet", "dir"):
            out = []
            for uri in _marks(t):
                got = fs.read_json(uri).get("run_id") if fs.exists(uri) else None
                if got != rid:
                    out.append(f"{name}: {uri} names run {got}, the manifest {rid}")
            return out
        if kind == "file":
            if not fs.exists(t["location"]) or _sha256(t["location"]) != t.get("sha256"):
                return [f"{name}: {t['location']} is not the file the run {rid} wrote"]
            return []
        if kind == "rows":
            return _check_rows(t)
        if kind == "catalog" and spark is not None:
            return _check_catalog(t, spark)
    except Exception as exc:  # noqa: BLE001 - a location that cannot be read is a problem to report, not a crash
        return [f"{name}: cannot check {t.get('location')}: {type(exc).__name__}"]
    return []


def _check_rows(t: dict) -> list[str]:
    import pyarrow.parquet as pq

    out = []
    for d in t.get("days", []):
        uri = fs.join(t["location"], f"dt={d}")
        for path, _, _ in fs.data_files(uri) if fs.exists(uri) else []:
            loc = fs.resolve(path)
            ids = set(pq.read_table(loc.path, columns=["run_id"], filesystem=loc.fs).column(0).to_pylist())
            if ids - {t["run_id"]}:
                out.append(f"{t['name']}: {uri} holds rows of run(s) {sorted(map(str, ids - {t['run_id']}))}")
                break
    return out


def _check_catalog(t: dict, spark) -> list[str]:
    days = ", ".join(f"DATE '{d}'" for d in t.get("days", []))
    if not days:
        return []
    if not spark.catalog.tableExists(t["location"]):
        return [] if t.get("rows") == 0 else [f"{t['name']}: no table {t['location']}"]
    rows = spark.sql(f"SELECT DISTINCT run_id FROM {t['location']} WHERE dt IN ({days})").collect()
    other = sorted(str(r[0]) for r in rows if r[0] != t["run_id"])
    return [f"{t['name']}: {t['location']} holds rows of run(s) {other}"] if other else []

