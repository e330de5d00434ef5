"""Per-dt store of the statistics tables and window assembly.

Layout: ``<stats_dir>/<table>/dt=YYYY-MM-DD/part-0.parquet`` plus ``<stats_dir>/_manifest/dt=YYYY-MM-DD.json``
holding the day's fingerprint: a sha256 of (the input files of that dt of the logs and of the decisions, with size
and modification time; the StatsConfig; the policy filter; the spec of any derived policies). The manifest is
written last (atomic rename), so an interrupted write is never trusted. ``window_statistics`` loads the days whose
fingerprint matches, scans the missing or changed days (in batches of ``spark.scavenger.scanBatchDays`` days, one
persisted scan each), stores each batch's days as soon as it is done, and merges.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..contract import is_table_name, parse_date, read_decisions, read_logs
from .scan import StatsConfig, scan
from .tables import TABLES, merge, split_by_dt


@dataclass
class WindowStats:
    """The merged statistics of a window and how they were obtained."""

    tables: dict
    dates: list
    scanned: list = field(default_factory=list)
    loaded: list = field(default_factory=list)
    per_day: dict = field(default_factory=dict)   # dt -> {table: frame}, as stored

    def table(self, name: str) -> pd.DataFrame:
        keys = TABLES[name][0]
        return self.tables.get(name, pd.DataFrame(columns=keys))

    @property
    def window(self) -> str:
        if not self.dates:
            return ""
        return f"{min(self.dates).isoformat()}..{max(self.dates).isoformat()}"


def _local_dt_dirs(source: str) -> dict | None:
    """{date: dir} of dt=YYYY-MM-DD partitions of a local path source, or None when not a local path."""
    if "://" in source and not source.startswith("file://"):
        return None
    root = Path(source.replace("file://", ""))
    if not root.is_dir():
        return None
    out = {}
    for child in root.iterdir():
        if child.is_dir() and child.name.startswith("dt="):
            try:
                out[_dt.date.fromisoformat(child.name[3:])] = child
            except ValueError:
                continue
    return out


def _files_signature(directory: Path | None) -> list:
    if directory is None or not directory.exists():
        return []
    sig = []
    for base, _, files in os.walk(directory):
        for name in sorted(files):
            if name.startswith(".") or name.startswith("_"):
                continue
            p = Path(base) / name
            st = p.stat()
            sig.append([str(p.relative_to(directory)), st.st_size, st.st_mtime_ns])
    return sorted(sig)


def list_dates(spark, logs_source: str, date_from=None, date_to=None) -> list:
    d0, d1 = parse_date(date_from, "--from"), parse_date(date_to, "--to")
    dirs = None if is_table_name(logs_source) else _local_dt_dirs(logs_source)
    if dirs is not None:
        dates = sorted(dirs)
    else:
        from pyspark.sql import functions as F
        rows = read_logs(spark, logs_source, d0, d1).select(F.col("dt")).distinct().collect()
        dates = sorted(r["dt"] for r in rows)
    return [d for d in dates if (d0 is None or d >= d0) and (d1 is None or d <= d1)]


def fingerprint(spark, dt, logs_source: str, decisions_source: str | None, config: StatsConfig,
                policies=None, derived_spec=None) -> str:
    """sha256 of the day's input files (path sources: names, sizes, mtimes; table sources: Spark's input files)
    and of the configuration that shapes the statistics."""
    def source_sig(source):
        if source is None:
            return None
        dirs = None if is_table_name(source) else _local_dt_dirs(source)
        if dirs is not None:
            return _files_signature(dirs.get(dt))
        reader = read_logs if source == logs_source else read_decisions
        return sorted(reader(spark, source, dt, dt).inputFiles())

    payload = {
        "dt": dt.isoformat(), "logs": source_sig(logs_source), "decisions": source_sig(decisions_source),
        "config": config.to_dict(), "policies": sorted(policies) if policies else None,
        "derived": derived_spec,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _manifest_path(stats_dir: str, dt) -> Path:
    return Path(stats_dir) / "_manifest" / f"dt={dt.isoformat()}.json"


def read_day(stats_dir: str, dt) -> tuple[dict | None, dict]:
    """(manifest or None, {table: frame}) of one stored day."""
    mpath = _manifest_path(stats_dir, dt)
    if not mpath.exists():
        return None, {}
    with open(mpath) as fh:
        manifest = json.load(fh)
    tables = {}
    for name in manifest.get("tables", []):
        f = Path(stats_dir) / name / f"dt={dt.isoformat()}" / "part-0.parquet"
        df = pd.read_parquet(f)
        for col in df.columns:
            if df[col].dtype == object and len(df) and hasattr(df[col].iloc[0], "__len__") \
                    and not isinstance(df[col].iloc[0], str):
                df[col] = [pd.array(v).to_numpy(dtype=float) for v in df[col]]
        df.insert(0, "dt", dt)
        tables[name] = df
    return manifest, tables


def write_day(stats_dir: str, dt, tables: dict, fp: str, extra: dict | None = None) -> None:
    root = Path(stats_dir)
    mpath = _manifest_path(stats_dir, dt)
    if mpath.exists():
        mpath.unlink()  # invalidate first: the day is being rewritten
    names = []
    for name, df in tables.items():
        d = root / name / f"dt={dt.isoformat()}"
        d.mkdir(parents=True, exist_ok=True)
        body = df.drop(columns=["dt"]) if "dt" in df.columns else df
        tmp = d / ".part-0.parquet.tmp"
        body.to_parquet(tmp, index=False)
        os.replace(tmp, d / "part-0.parquet")
        names.append(name)
    for name in TABLES:  # remove stale tables of a previous version of this day
        stale = root / name / f"dt={dt.isoformat()}" / "part-0.parquet"
        if name not in names and stale.exists():
            stale.unlink()
    mpath.parent.mkdir(parents=True, exist_ok=True)
    manifest = {"dt": dt.isoformat(), "fingerprint": fp, "tables": sorted(names),
                "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(), **(extra or {})}
    tmp = mpath.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        json.dump(manifest, fh, indent=1)
    os.replace(tmp, mpath)


def window_statistics(spark, logs_source: str, decisions_source: str | None = None, date_from=None,
                      date_to=None, stats_dir: str | None = None, config: StatsConfig = StatsConfig(),
                      policies=None, derived_decisions=None, derived_spec=None, dates=None,
                      logs_df=None, decisions_df=None, rows_tag: str | None = None) -> WindowStats:
    """Statistics of the window [date_from, date_to]: stored days whose fingerprint matches are loaded, the
    others are scanned (:func:`scavenger.session.scan_batch_days` days per persisted scan) and stored batch by
    batch. ``derived_decisions(spark, logs_df)`` may add decisions of derived policies (e.g. re-orderings);
    ``derived_spec`` (json-able) must describe them."""
    from ..session import scan_batch_days

    # a bad value fails before any work (usage error, exit 2); without a session (every day stored) one scan
    batch_days = scan_batch_days(spark) if spark is not None else 0
    dates = list(dates) if dates is not None else list_dates(spark, logs_source, date_from, date_to)
    # rows_tag distinguishes statistics of the gate's clean rows from those of the raw rows of the same files
    spec = derived_spec if rows_tag is None else {"derived": derived_spec, "rows": rows_tag}
    fps = {d: fingerprint(spark, d, logs_source, decisions_source, config, policies, spec) for d in dates} \
        if stats_dir else {}
    per_day, loaded, missing = {}, [], []
    for d in dates:
        if stats_dir:
            manifest, tables = read_day(stats_dir, d)
            if manifest is not None and manifest.get("fingerprint") == fps[d]:
                per_day[d] = tables
                loaded.append(d)
                continue
        missing.append(d)
    if missing:
        from ..progress import phase

        size = batch_days or len(missing)
        batches = [missing[i:i + size] for i in range(0, len(missing), size)]
        for n, batch in enumerate(batches, start=1):
            what = f"one scan of {len(batch)} day(s) {min(batch)}..{max(batch)}"
            with phase(spark, "statistics", what + (f" (batch {n} of {len(batches)})" if len(batches) > 1 else "")):
                scanned = _scan_days(spark, batch, logs_source, decisions_source, config, policies,
                                     derived_decisions, logs_df, decisions_df)
            for d in batch:
                tables = scanned.get(d, {})
                per_day[d] = tables
                if stats_dir:
                    write_day(stats_dir, d, tables, fps[d])
    merged = {name: merge(name, [per_day[d].get(name) for d in dates]) for name in TABLES}
    merged = {k: v for k, v in merged.items() if len(v)}
    return WindowStats(tables=merged, dates=dates, scanned=missing, loaded=loaded, per_day=per_day)


def _scan_days(spark, days: list, logs_source, decisions_source, config: StatsConfig, policies, derived_decisions,
               logs_df, decisions_df) -> dict:
    """One persisted scan of the given days: {dt: {table: frame}}. Pre-read frames (e.g. the gate's clean rows)
    win over reading the sources again; the sources are read with their dt partitions pruned to these days."""
    from pyspark.sql import functions as F

    logs = logs_df if logs_df is not None else read_logs(spark, logs_source, min(days), max(days))
    logs = logs.where(F.col("dt").isin(days))
    decisions = None
    if decisions_df is not None:
        decisions = decisions_df
        if policies:
            decisions = decisions.where(F.col("policy_id").isin(list(policies)))
        decisions = decisions.where(F.col("dt").isin(days))
    elif decisions_source is not None:
        decisions = read_decisions(spark, decisions_source, min(days), max(days), policies)
        decisions = decisions.where(F.col("dt").isin(days))
    if derived_decisions is not None:
        extra = derived_decisions(spark, logs)
        decisions = extra if decisions is None else decisions.unionByName(extra)
    return split_by_dt(scan(logs, decisions, config))
