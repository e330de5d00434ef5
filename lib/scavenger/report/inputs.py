"""What a report reads: the small output tables of the jobs (adc, evaluate, validate), their result.json files,
the daily history of estimates, and optionally the generator's ground_truth.json.

All of these are small aggregated tables (one row per position/method, per policy/estimator, per check), so a
local path is read with pandas/pyarrow without starting Spark; a remote location (``scheme://``) is read by the
engine ``engine_factory()`` returns (Spark: its ``read_table``; still only aggregated rows reach the driver).

Two ways to point at the inputs:
  * explicit: ``--adc PATH --estimates PATH [--validation PATH] [--history ROOT] [--ground-truth FILE]``; a PATH
    may be a job's ``--out`` directory (holding ``adc/``, ``estimates/``, ``validation/``) or the table itself;
  * the daily DAG's layout ``{root}/<job>/dt=<ds>/`` (airflow_dags/scavenger_airflow/config.py:out_dir):
    ``--root ROOT --dt DS`` reads ``{root}/adc/dt=DS``, every ``{root}/evaluate/<dataset>/dt=DS`` and
    ``{root}/validate/dt=DS``, and takes the trend from every ``{root}/evaluate/*/dt=*``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..errors import UsageError
from .layout import is_remote, local_path, root_layout
from .preflight import check_truth_matches
from .read import (
    find_data_docs,
    quarantine_counts,
    read_by_day,
    read_history,
    read_result,
    read_table,
    resolve_table,
)


@dataclass
class ReportInputs:
    """Everything a report shows; every field may be missing (the section then says what to pass)."""

    adc: pd.DataFrame | None = None
    estimates: pd.DataFrame | None = None
    diagnostics: pd.DataFrame | None = None
    validation: pd.DataFrame | None = None
    history: pd.DataFrame | None = None            # estimates + column ``run_dt`` (one row set per daily run)
    by_day: pd.DataFrame | None = None             # estimates_by_day of the evaluate runs (column ``dt``)
    running: pd.DataFrame | None = None            # running/ of the evaluate runs (``dt``; ``source``: which run)
    ground_truth: dict | None = None
    results: dict = field(default_factory=dict)    # job name -> result.json dict
    quarantine: pd.DataFrame | None = None         # table, dt, rows
    data_docs: str | None = None                   # path of the Data Docs index.html
    sources: dict = field(default_factory=dict)    # what was read from where


def _by_day_beside(est_paths: list, engine_factory: Callable | None) -> pd.DataFrame | None:
    """The estimates_by_day tables beside the evaluate runs read (``evaluate --by-day`` writes them)."""
    return _concat([read_by_day(Path(job) / "estimates_by_day", engine_factory) for _, job in est_paths
                    if job is not None and not is_remote(job) and (Path(job) / "estimates_by_day").is_dir()])


def _running_beside(est_paths: list, engine_factory: Callable | None) -> pd.DataFrame | None:
    """The running tables beside the evaluate runs read (``evaluate --by-day``), ``source`` naming the run (the
    registry dataset of the daily layout: the directory above dt=)."""
    frames = []
    for _, job in est_paths:
        if job is None or is_remote(job) or not (Path(job) / "running").is_dir():
            continue
        df = read_by_day(Path(job) / "running", engine_factory, "running")
        name = Path(job).parent.name if Path(job).name.startswith("dt=") else Path(job).name
        frames.append(None if df is None else df.assign(source=name))
    return _concat(frames)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    frames = [f for f in frames if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else None


def load_inputs(adc: str | None = None, estimates: str | None = None, diagnostics: str | None = None,
                validation: str | None = None, history: str | None = None, ground_truth: str | None = None,
                root: str | None = None, dt: str | None = None, engine_factory: Callable | None = None
                ) -> ReportInputs:
    """Read every input of a report (see the module docstring for the two layouts)."""
    inp = ReportInputs()
    est_paths: list[tuple[str, str | None]] = []
    diag_paths: list[str] = []
    history_given, adc_given, validation_given = history is not None, adc is not None, validation is not None
    if root is not None:
        adc, validation, history, est_paths = root_layout(root, dt, adc, estimates, validation, history)
        est_paths = [(path, job, "--root") for path, job in est_paths]
        _check_root_found(root, dt, adc, validation, est_paths)
    if estimates is not None:
        est_paths.append((*resolve_table(estimates, "estimates"), "--estimates"))
    if diagnostics is not None:
        diag_paths.append((resolve_table(diagnostics, "diagnostics")[0], "--diagnostics"))
    if adc is not None:
        path, job = resolve_table(adc, "adc")
        inp.adc = read_table(path, engine_factory, "adc", "--adc" if adc_given else "--root")
        inp.sources["adc"] = path
        if (res := read_result(job)) is not None:
            inp.results["adc"] = res
    _read_estimates(inp, est_paths, diag_paths, not diagnostics, engine_factory)
    if validation is not None:
        _read_validation(inp, validation, engine_factory, "--validation" if validation_given else "--root")
    if history is not None:
        inp.history = read_history(history, engine_factory, "--history" if history_given else "--root")
        inp.sources["history"] = history
        if inp.history is None and history_given:
            raise UsageError(f"--history: no daily estimates under {history} (expected dt=YYYY-MM-DD/estimates/ "
                             f"holding rows, up to 3 levels below it, e.g. the daily DAG's {{root}}/evaluate)")
    if ground_truth is not None:
        inp.ground_truth, inp.sources["ground_truth"] = _read_ground_truth(ground_truth)
        check_truth_matches(inp, ground_truth)
    return inp


def _check_root_found(root: str, dt: str, adc, validation, est_paths: list) -> None:
    """``--root ROOT --dt DS`` that finds none of DS's outputs: exit 2 when ROOT is not a daily output root at all
    (no adc/, evaluate/ or validate/ below it), else exit 3 (the day has no outputs yet)."""
    from ..errors import DataCheckFailed

    if adc is not None or validation is not None or est_paths:
        return
    r = local_path(root)
    if not any((r / job).is_dir() for job in ("adc", "evaluate", "validate")):
        raise UsageError(f"--root {root}: not a daily output root (no adc/, evaluate/ or validate/ directory below "
                         f"it; expected {{root}}/<job>/dt=YYYY-MM-DD/)")
    raise DataCheckFailed(f"--root {root} --dt {dt}: no output of dt={dt} found (none of "
                          f"adc/dt={dt}/adc, evaluate/*/dt={dt}/estimates, validate/dt={dt}/validation): did the "
                          f"jobs of that day run?")


def _read_estimates(inp: ReportInputs, est_paths: list, diag_paths: list, diagnostics_beside: bool,
                    engine_factory: Callable | None) -> None:
    """The estimates of every evaluate run (path, job directory, flag), their result.json, by-day tables and
    (``diagnostics_beside``: no --diagnostics given) the diagnostics beside them."""
    est_frames = []
    for path, job, flag in est_paths:
        est_frames.append(read_table(path, engine_factory, "estimates", flag))
        inp.sources.setdefault("estimates", []).append(path)
        if job is not None:
            if (res := read_result(job)) is not None:
                inp.results["evaluate" if len(est_paths) == 1 else f"evaluate[{Path(job).parent.name}]"] = res
            if diagnostics_beside and (Path(job) / "diagnostics").exists():
                diag_paths.append((str(Path(job) / "diagnostics"), flag))
    inp.estimates = _concat(est_frames)
    inp.by_day = _by_day_beside([(p, j) for p, j, _ in est_paths], engine_factory)
    inp.running = _running_beside([(p, j) for p, j, _ in est_paths], engine_factory)
    inp.diagnostics = _concat([read_table(p, engine_factory, "diagnostics", flag) for p, flag in diag_paths])
    if diag_paths:
        inp.sources["diagnostics"] = [p for p, _ in diag_paths]


def _read_validation(inp: ReportInputs, validation: str, engine_factory: Callable | None,
                     flag: str = "--validation") -> None:
    """The validation table, its result.json, quarantine counts and Data Docs."""
    path, validate_dir = resolve_table(validation, "validation")
    inp.validation = read_table(path, engine_factory, "validation", flag)
    inp.sources["validation"] = path
    if (res := read_result(validate_dir)) is not None:
        inp.results["validate"] = res
    if validate_dir:  # a validate run that set nothing aside may have no quarantine/ directory
        qdir = Path(validate_dir) / "quarantine"
        inp.quarantine = quarantine_counts(qdir) if qdir.exists() else pd.DataFrame(columns=["table", "dt", "rows"])
    docs = ((inp.results.get("validate") or {}).get("outputs") or {}).get("data_docs")
    inp.data_docs = docs if docs and Path(docs).is_file() else find_data_docs(validate_dir)


def _read_ground_truth(ground_truth: str) -> tuple[dict, str]:
    """The generator's ground_truth.json (a file, or the directory holding it) and where it was read."""
    gt = local_path(ground_truth)
    if gt.is_dir():
        gt = gt / "ground_truth.json"
    if not gt.is_file():
        raise UsageError(f"--ground-truth: no such file {ground_truth}")
    try:
        with open(gt, encoding="utf-8") as fh:
            value = json.load(fh)
    except UnicodeDecodeError:
        raise UsageError(f"--ground-truth {gt}: not a ground_truth.json (not UTF-8 text); pass the file "
                         f"`scavenger generate` wrote beside the logs") from None
    except ValueError as exc:
        raise UsageError(f"--ground-truth {gt}: not a ground_truth.json (not JSON: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); pass the file `scavenger generate` "
                         f"wrote beside the logs") from None
    except OSError as exc:
        raise UsageError(f"--ground-truth {gt}: cannot read it ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise UsageError(f"--ground-truth {gt}: not a ground_truth.json (a JSON {type(value).__name__}, not an "
                         f"object); pass the file `scavenger generate` wrote beside the logs")
    return value, str(gt)
