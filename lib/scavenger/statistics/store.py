"""Per-day store of the statistics tables, on any URI pyarrow.fs opens (local, file://, s3a://, gs://, ...).

Layout: ``<store>/<table>/dt=YYYY-MM-DD/part-0.parquet`` (small tables, written from pandas), ``<store>/<table>/
dt=YYYY-MM-DD/*.parquet`` (the big slate tables, written by the engine; the event ids under ``event_hashes``), and
``<store>/_manifest/dt=YYYY-MM-DD.json``, written last: a day without a manifest (an interrupted write) is never
trusted. Beside the small tables' files, ``<store>/_small/dt=YYYY-MM-DD.parquet`` holds the same tables in one file
(one row per table: its name and its Arrow IPC stream), named by the manifest: a window reads one file per stored
day instead of one per table and day (some 330 in a 30-day window, the window's main cost after its new day); a day
without it, or whose bundle does not read, is read from the tables' own files. The manifest holds two fingerprints:
the logs' (the day's input files with size and modification time, the statistics configuration) and the decisions'
(their files, the policy filter, derived policies). A day is reused when its logs fingerprint matches, its decisions
fingerprint matches whenever decisions are asked for, and it holds every table asked for; otherwise it is scanned
again and replaced.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os

import pandas as pd

from ..io import fs
from .tables import TABLES

LOAD_THREADS = min(8, max(2, os.cpu_count() or 2))   # stored small files read at once (Store.load_days)
BUNDLE = "_small"    # <store>/_small/dt=YYYY-MM-DD.parquet: a day's small tables in one file (see module doc)
# where a big table's days live when not under its own name: the event ids as 64-bit integers (statistics/sql/logs
# ID_HASH); a day written before them holds its ids as hex text under LEGACY_IDS (Store.legacy_id_files)
BIG_DIRS = {"event_ids": "event_hashes"}
LEGACY_IDS = "event_ids"


# What a stored day's tables mean: part of every day's fingerprint, so that a store written before a change to
# what a table holds is scanned again instead of merged with the new days. Raise it with any such change
# (2: ad ids escaped in the slate keys, statistics/sql/logs.slate_key; a context map entry repeating context_id
# counted once in check a's cells; 3: slate_covered, the direct approach's T_a among a policy's decided events;
# 4: policy_ads, the factored T_a and the re-ordering lift's clicks among them; 5: policy_ads' ev, the factored
# eligibility strata's T_s / T among them; 6: base_targets' t, the base-policy action's T_a among a policy's decided
# events; 7: reorder_pairs, the re-ordering estimate's event-level variance; 8: log_counts' and decision_counts'
# ranges leave NaN out, checks.rules.not_nan, where one NaN made a day's max NaN).
STORE_LAYOUT = 8


def _day_files(root: str, days) -> list:
    """The data files of the ``dt=`` directories of ``days`` under ``root``."""
    out = []
    for d in days:
        out += [f[0] for f in fs.data_files(fs.join(root, f"dt={d.isoformat()}"))]
    return out


def fingerprint(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def day_signature(source, day) -> object:
    """What identifies a day of an input: its files with sizes and mtimes (file sources), else the source's name
    (a table or DataFrame: re-scanned unless the caller pins it with a fingerprint of its own)."""
    if source is None:
        return None
    if source.kind == "files":
        key = day if day in source.signature else None
        return {"uri": source.uri, "files": source.signature.get(key)}
    return {"kind": source.kind, "name": source.name, "unpinned": True}


class Store:
    """The statistics of stored days; ``uri`` may be any URI pyarrow.fs can open."""

    def __init__(self, uri: str):
        self.uri = fs.normalize(uri)

    def _manifest(self, day) -> str:
        return fs.join(self.uri, "_manifest", f"dt={day.isoformat()}.json")

    def manifest(self, day) -> dict | None:
        path = self._manifest(day)
        if not fs.exists(path):
            return None
        try:
            m = fs.read_json(path)
        except (ValueError, OSError):
            return None
        return m if _well_formed(m) else None

    def usable(self, day, logs_fp: str, decisions_fp: str | None, tables: set) -> dict | None:
        """The day's manifest when it can be reused for this request (see module doc), else None."""
        m = self.manifest(day)
        if m is None or m.get("logs_fp") != logs_fp:
            return None
        if decisions_fp is not None and m.get("decisions_fp") != decisions_fp:
            return None
        if not set(tables) <= set(m.get("tables", [])):
            return None
        if m.get("unpinned"):
            return None
        return m

    def load_days(self, manifests: dict) -> dict:
        """{day: {table: frame with dt}} of the small tables of stored days ({day: manifest})."""
        return self.load_tables(manifests)[0]

    def load_tables(self, manifests: dict) -> tuple:
        """({day: {table: frame with dt}}, {table: [frames with dt]}) of the small tables of stored days ({day:
        manifest}); the second holds each table's days at once (one frame per schema the days share), ready to be
        merged. The bundles (or the tables' own files) are read as Arrow by a pool of threads (local or remote, the
        reads wait on I/O and release the GIL), and the days of a table with the same schema are converted to pandas
        at once (one conversion per file was most of the time)."""
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow as pa

        out = {d: {} for d in manifests}
        wanted = [(name, d) for d, m in manifests.items() for name in m.get("tables", [])
                  if name in TABLES and not TABLES[name].big]
        bundled = [d for d, m in manifests.items() if m.get("bundle")]
        with ThreadPoolExecutor(max_workers=LOAD_THREADS) as pool:
            read = {(name, d): t for d, tabs in zip(bundled, pool.map(self._read_bundle, bundled))
                    for name, t in tabs.items()}
            rest = [nd for nd in wanted if nd not in read]
            read.update(zip(rest, pool.map(lambda nd: self._read_small(*nd), rest)))
        groups: dict = {}            # (table, schema) -> [(day, arrow table)]
        for name, d in wanted:
            t = read[(name, d)]
            groups.setdefault((name, t.schema), []).append((d, t))
        frames: dict = {}
        for (name, _), parts in groups.items():
            df = _arrays_back(pa.concat_tables([t for _, t in parts]).to_pandas(date_as_object=True))
            frames.setdefault(name, []).append(df)
            bounds = [0]
            for _, t in parts:
                bounds.append(bounds[-1] + t.num_rows)
            for (d, _), lo, hi in zip(parts, bounds, bounds[1:]):
                out[d][name] = df.iloc[lo:hi].reset_index(drop=True)
        return out, frames

    def _read_small(self, name: str, day):
        """One stored day's small table as an Arrow table with its dt column first."""
        import pyarrow.parquet as pq

        loc = fs.resolve(fs.join(self.uri, name, f"dt={day.isoformat()}", "part-0.parquet"))
        with loc.fs.open_input_file(loc.path) as fh:
            t = pq.ParquetFile(fh).read(use_threads=False)
        return _with_dt(t, day)

    def _bundle(self, day) -> str:
        return fs.join(self.uri, BUNDLE, f"dt={day.isoformat()}.parquet")

    def _read_bundle(self, day) -> dict:
        """{table: Arrow table with dt first} of a day's bundle; {} when it does not read (its tables' own files are
        read instead)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            loc = fs.resolve(self._bundle(day))
            with loc.fs.open_input_file(loc.path) as fh:
                rows = pq.ParquetFile(fh).read(use_threads=False).to_pydict()
            out = {}
            for name, blob in zip(rows["table"], rows["ipc"]):
                out[name] = _with_dt(pa.ipc.open_stream(pa.py_buffer(blob)).read_all(), day)
            return out
        except (OSError, ValueError, KeyError, pa.ArrowException):
            return {}

    def big_root(self, name: str) -> str:
        """The directory of a big table's days."""
        return fs.join(self.uri, BIG_DIRS.get(name, name))

    def big_files(self, name: str, days) -> list:
        return _day_files(self.big_root(name), days)

    def legacy_id_files(self, days) -> list:
        """The event-id files of the ``days`` stored before the ids were integers (their id_hash is the hex text of
        the same 16 digits: statistics/sql/logs.id_hash_of reads it as the integer). A day rewritten since has no
        legacy files (:meth:`drop_legacy_ids`)."""
        days = list(days)
        if not days or not fs.exists(fs.join(self.uri, LEGACY_IDS)):    # a store written since: one look
            return []
        return _day_files(fs.join(self.uri, LEGACY_IDS), days)

    def id_days(self) -> list:
        """The days whose event ids the store holds (integer or legacy hex text): the stored days, and days made
        stale (:meth:`invalidate`) whose logs were read before and whose ids still count for the cross-day
        DUPLICATE_EVENT_ID until the day is scanned again."""
        out = set()
        for root in (self.big_root("event_ids"), fs.join(self.uri, LEGACY_IDS)):
            for name, is_dir in fs.listdir(root):
                if is_dir and name.startswith("dt="):
                    try:
                        out.add(_dt.date.fromisoformat(name[3:]))
                    except ValueError:
                        continue
        return sorted(out)

    def invalidate(self, day) -> None:
        """The day is no longer reused (its manifest and small tables go); its event ids stay (:meth:`id_days`)
        until the day is written again (:meth:`drop_legacy_ids`, then the new ids replace the old)."""
        fs.delete(self._manifest(day))
        fs.delete(self._bundle(day))

    def drop_legacy_ids(self, day) -> None:
        """A day about to be written again drops its ids stored as hex text (its new ids are integers)."""
        fs.delete(fs.join(self.uri, LEGACY_IDS, f"dt={day.isoformat()}"))

    def write_small(self, day, tables: dict) -> None:
        """The day's small tables, each in its own file and all of them in the day's bundle (which the manifest
        then names)."""
        import pyarrow as pa

        names, blobs = [], []
        for name, df in tables.items():
            if TABLES[name].big:
                continue
            body = df[df["dt"] == day].drop(columns=["dt"]) if "dt" in df.columns else df
            table = _small_table(_arrays_out(body.reset_index(drop=True)))
            fs.write_parquet(fs.join(self.uri, name, f"dt={day.isoformat()}", "part-0.parquet"), table)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            names.append(name)
            blobs.append(sink.getvalue().to_pybytes())
        fs.write_parquet(self._bundle(day), pa.table({"table": pa.array(names, pa.string()),
                                                      "ipc": pa.array(blobs, pa.binary())}))

    def write_manifest(self, day, logs_fp: str, decisions_fp: str | None, tables: set, extra: dict) -> None:
        fs.write_json(self._manifest(day), {
            "dt": day.isoformat(), "logs_fp": logs_fp, "decisions_fp": decisions_fp, "tables": sorted(tables),
            "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(), **extra})

    def stored_days(self) -> list:
        out = []
        for name, is_dir in fs.listdir(fs.join(self.uri, "_manifest")):
            if name.startswith("dt=") and name.endswith(".json"):
                try:
                    out.append(_dt.date.fromisoformat(name[3:-5]))
                except ValueError:
                    continue
        return sorted(out)


def _well_formed(m) -> bool:
    """A manifest as write_manifest writes it: an object whose ``tables`` is a list of names and whose ``K``, when
    present, a slate length a scan can have. Anything else (a file edited or damaged by hand) is no manifest: the
    day is scanned again instead of stopping the job or padding every row to a K of 10**30."""
    if not isinstance(m, dict) or not isinstance(m.get("tables", []), list):
        return False
    if not all(isinstance(t, str) for t in m.get("tables", [])):
        return False
    K = m.get("K", 0)
    return isinstance(K, int) and not isinstance(K, bool) and 0 <= K <= 4096


def _with_dt(table, day):
    """A stored day's Arrow table with its dt column first."""
    import pyarrow as pa

    return table.add_column(0, "dt", pa.array([day] * table.num_rows, pa.date32()))


def _small_table(df: pd.DataFrame):
    """A stored small table as Arrow, without pandas' schema metadata unless a column needs it to come back (a
    pandas extension dtype): the Arrow types give the same frame, and a file without that metadata reads in half
    the time (0.5 ms against 1.1 ms; a 30-day window reads some 400 of them)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    if any(isinstance(t, pd.api.extensions.ExtensionDtype) for t in df.dtypes):
        return table
    return table.replace_schema_metadata(None)


def _arrays_out(df: pd.DataFrame) -> pd.DataFrame:
    """numpy arrays in object columns as lists (Parquet lists)."""
    import numpy as np

    for c in df.columns:
        if df[c].dtype == object and len(df) and any(isinstance(v, np.ndarray) for v in df[c]):
            df[c] = [None if v is None else list(np.asarray(v, dtype=float)) for v in df[c]]
    return df


def _arrays_back(df: pd.DataFrame) -> pd.DataFrame:
    import numpy as np

    for c in df.columns:
        if df[c].dtype == object and len(df):
            first = next((v for v in df[c] if v is not None), None)
            if first is not None and not isinstance(first, str) and hasattr(first, "__len__"):
                df[c] = [None if v is None else np.asarray(v, dtype=float) for v in df[c]]
    return df
