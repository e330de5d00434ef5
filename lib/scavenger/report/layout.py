"""Where a report's inputs are: a location that only Spark reads (``scheme://``) or a local path, and the daily
DAG's layout ``{root}/<job>/dt=<ds>/`` (airflow_dags/scavenger_airflow/config.py:out_dir)."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..errors import UsageError


def is_remote(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def local_path(path: str) -> Path:
    return Path(str(path).replace("file://", ""))


def root_layout(root: str, dt: str | None, adc, estimates, validation, history) -> tuple:
    """(adc, validation, history, estimates paths) of the daily DAG's layout ``{root}/<job>/dt=<dt>/``; an input
    given explicitly is kept."""
    if dt is None:
        raise UsageError("--root needs --dt (the run date whose outputs to show)")
    try:
        _dt.date.fromisoformat(dt)
    except ValueError:
        raise UsageError(f"--dt expects YYYY-MM-DD, got {dt!r}") from None
    r = local_path(root)
    if not r.is_dir():
        raise UsageError(f"--root: no such directory {root}")
    if adc is None and (r / "adc" / f"dt={dt}" / "adc").exists():
        adc = str(r / "adc" / f"dt={dt}")
    est_paths = []
    if estimates is None:
        for ds_dir in sorted((r / "evaluate").glob(f"*/dt={dt}")) + sorted((r / "evaluate").glob(f"dt={dt}")):
            if (ds_dir / "estimates").exists():
                est_paths.append((str(ds_dir / "estimates"), str(ds_dir)))
    if validation is None and (r / "validate" / f"dt={dt}" / "validation").exists():
        validation = str(r / "validate" / f"dt={dt}")
    if history is None and (r / "evaluate").exists():
        history = str(r / "evaluate")
    return adc, validation, history, est_paths
