"""How one input of a report is read: a small table (local with pandas/pyarrow, remote through Spark) with its
columns checked, a job's result.json (an incomplete run refused), the quarantine counts, the Data Docs index, and
the daily history and by-day tables (``report/inputs.py`` puts them together)."""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..errors import UsageError
from .layout import is_remote, local_path
from .preflight import check_columns

_DT_DIR = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")


def read_table(path: str | os.PathLike, engine_factory: Callable | None = None, kind: str | None = None,
               flag: str | None = None) -> pd.DataFrame:
    """A small Parquet (directory or file) or CSV table as pandas; remote paths go through Spark. With ``kind``
    (a key of REPORT_COLUMNS) its columns are checked (UsageError naming ``flag`` when one is missing)."""
    path = str(path)
    flag = flag or (f"--{kind}" if kind else "table")
    if is_remote(path):
        if engine_factory is None:
            raise UsageError(f"cannot read remote table {path} without a SparkSession")
        df = engine_factory().read_table(path)
        return check_columns(df, kind, path, flag) if kind else df
    p = local_path(path)
    if not p.exists():
        raise UsageError(f"{flag}: no such table: {path}")
    try:
        if kind and p.suffix != ".csv":       # the columns from the footers first: a big table of another kind
            import pyarrow.dataset as pads    # (e.g. the logs) is refused without reading its rows

            names = pads.dataset(str(p), format="parquet", partitioning="hive").schema.names
            check_columns(pd.DataFrame(columns=names), kind, path, flag)
        if p.suffix == ".csv":
            df = pd.read_csv(p)
        else:
            df = pd.read_parquet(p)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a table we cannot parse is a bad argument
        raise UsageError(f"{flag}: cannot read table {path}: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    return check_columns(df, kind, path, flag) if kind else df


def resolve_table(path: str | None, name: str) -> tuple[str | None, str | None]:
    """(table path, job directory) for ``--<name> PATH``: PATH is the job's --out dir or the table dir."""
    if path is None:
        return None, None
    if is_remote(path):
        return path, None
    p = local_path(path)
    if not p.exists():
        raise UsageError(f"--{name}: no such path {path}")
    if p.is_dir() and (p / name).exists():
        return str(p / name), str(p)
    job = p.parent if (p.parent / "result.json").exists() else None
    return str(p), (str(job) if job else None)


def read_result(job_dir: str | None) -> dict | None:
    """A job's result.json, or None."""
    if not job_dir or is_remote(job_dir):
        return None
    f = local_path(job_dir) / "result.json"
    if not f.exists():
        return None
    _check_complete(job_dir)
    from ..errors import DataCheckFailed
    from ..io import manifest

    try:
        return manifest._json_object(str(f))
    except manifest.Malformed as exc:            # a half-written or overwritten result: not a complete run
        raise DataCheckFailed(f"{job_dir} is not one complete run: {exc}") from None


def _check_complete(job_dir: str) -> None:
    """A job directory with a run manifest must hold one complete run (io/manifest.py): a set that a killed or
    still-running job left mixed is refused (exit 3) instead of reported; so is one whose manifest or result.json
    is malformed. Directories without a manifest (older versions, tables written by hand) are read as they are."""
    from ..errors import DataCheckFailed
    from ..io import manifest

    try:
        if manifest.read(str(local_path(job_dir))) is None:
            return
    except manifest.Malformed as exc:
        raise DataCheckFailed(f"{job_dir} is not one complete run: {exc}") from None
    problems = manifest.verify(str(local_path(job_dir)))
    if problems:
        raise DataCheckFailed(f"{job_dir} is not one complete run ({len(problems)} problem(s)): "
                              + "; ".join(problems[:3]))


def quarantine_counts(quarantine_dir: str | Path) -> pd.DataFrame:
    """Rows set aside per (table, dt), read from Parquet footers only (no data pages): table is the directory
    under ``quarantine/`` (``logs``/``decisions``) or ``logs`` when the dt partitions sit directly under it."""
    import pyarrow.parquet as pq

    root = Path(quarantine_dir)
    rows = []
    for f in sorted(root.rglob("*.parquet")):
        rel = f.relative_to(root).parts
        if any(part.startswith(("_", ".")) for part in rel):
            continue
        dt = next((m.group(1) for part in rel if (m := _DT_DIR.match(part))), None)
        table = rel[0] if len(rel) > 1 and not _DT_DIR.match(rel[0]) else "logs"
        rows.append({"table": table, "dt": dt, "rows": int(pq.ParquetFile(f).metadata.num_rows)})
    if not rows:
        return pd.DataFrame(columns=["table", "dt", "rows"])
    return pd.DataFrame(rows).groupby(["table", "dt"], as_index=False, dropna=False)["rows"].sum()


def find_data_docs(validate_dir: str | None) -> str | None:
    """The Data Docs index.html under ``<validate out>/data_docs/`` (Great Expectations site), if any."""
    if not validate_dir or is_remote(validate_dir):
        return None
    root = local_path(validate_dir) / "data_docs"
    if not root.exists():
        return None
    candidates = sorted(root.rglob("index.html"), key=lambda p: (len(p.parts), str(p)))
    return str(candidates[0]) if candidates else None


def read_history(root: str | Path, engine_factory: Callable | None = None, flag: str = "--history"
                 ) -> pd.DataFrame | None:
    """Estimates of every daily run under ``root``: directories ``dt=DS`` (at any depth up to 3 below root)
    holding ``estimates/``; adds ``run_dt`` (DS) and ``dataset`` (the directory above dt=, e.g. the registry
    name of the daily DAG)."""
    root = local_path(str(root))
    if not root.is_dir():
        raise UsageError(f"{flag}: no such directory {root}")
    frames = []
    for est in sorted(set(root.glob("dt=*/estimates")) | set(root.glob("*/dt=*/estimates"))
                      | set(root.glob("*/*/dt=*/estimates"))):
        m = _DT_DIR.match(est.parent.name)
        if not m:
            continue
        df = read_table(est, engine_factory, "estimates", flag)
        if not len(df):
            continue
        df = df.assign(run_dt=m.group(1), dataset=est.parent.parent.name if est.parent.parent != root else "")
        frames.append(df)
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True)


def read_by_day(path: str | os.PathLike, engine_factory: Callable | None = None, kind: str = "estimates_by_day"
                ) -> pd.DataFrame | None:
    """A table partitioned by day (``*_by_day``, ``running``): its dt=DAY partitions, each read alone (a column that
    is null all day has no type there, so the partitions do not share one schema), with column ``dt``."""
    p = local_path(str(path))
    frames = [read_table(d, engine_factory, kind, "--estimates").assign(dt=d.name.split("=", 1)[1])
              for d in sorted(p.glob("dt=*")) if d.is_dir()]
    frames = [f.astype({c: object for c in f.columns if f[c].isna().all()}) for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else None

