"""What validate, adc and evaluate share: inputs described before any engine starts, the engine, and the gated
window (one pass per new day, merged statistics, verdicts of the checks the estimators in use rely on)."""
from __future__ import annotations

import datetime as _dt
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd

from ..checks import assumptions as A
from ..checks import judge as J
from ..checks.rules import RuleConfig
from ..contract import DECISIONS, LOGS, load_contract, parse_date
from ..errors import DataCheckFailed, ScavengerError, UsageError
from ..io import sources
from ..statistics.scan import ScanPlan, StatsConfig
from ..statistics.store import Store
from ..statistics.window import WindowStats, window_statistics

GATE_MODES = ("enforce", "report", "off")


@dataclass
class GateConfig:
    """The data gate: quarantine threshold, assumption checks and what a failure does (enforce: exit 3;
    report: mark the estimates; off: no checks)."""

    rules: RuleConfig = field(default_factory=RuleConfig)
    assumptions: A.AssumptionConfig = field(default_factory=A.AssumptionConfig)
    max_quarantine_share: float = 0.001
    mode: str = "enforce"
    great_expectations: bool = True
    ge_row_sample: int = 0
    seed: int = 0

    @property
    def enforce(self) -> bool:
        return self.mode == "enforce"


@dataclass
class Inputs:
    """The inputs of a job, resolved without reading rows (see io/sources.py)."""

    logs: sources.Source
    decisions: sources.Source | None
    date_from: _dt.date | None = None
    date_to: _dt.date | None = None
    policies: list | None = None

    def all(self) -> list:
        return [s for s in (self.logs, self.decisions) if s is not None]


def describe_inputs(logs, decisions=None, date_from=None, date_to=None, policies=None) -> Inputs:
    """Check dates and local paths and describe the inputs (exit 2 on bad usage) before any engine starts."""
    d0, d1 = parse_date(date_from, "--from"), parse_date(date_to, "--to")
    if d0 and d1 and d0 > d1:
        raise UsageError(f"--from {d0} is after --to {d1}")
    lsrc = sources.describe(logs, load_contract(LOGS), d0, d1, "--logs")
    sources.require_days(lsrc, d0, d1)       # a window outside the logs' dt= days: exit 2 naming those days
    dsrc = sources.describe(decisions, load_contract(DECISIONS), d0, d1, "--decisions") \
        if decisions is not None else None
    return Inputs(lsrc, dsrc, d0, d1, list(policies) if policies else None)


def window_dates(engine, inputs: Inputs) -> list:
    """The days of the window: from the dt= directories when the logs have them, else one query of dt values."""
    return window_days(engine, inputs)[0]


def window_days(engine, inputs: Inputs) -> tuple[list, dict]:
    """(the days of the window, {"logs": n, "decisions": n} of the rows no day holds). The days come from the dt=
    directories when the logs have them, else from one query of an undivided source's dt values, which counts its
    rows whose dt is null or not a date in the same read. Rows under a ``dt=`` directory that names no date
    (``__HIVE_DEFAULT_PARTITION__``) are counted from the Parquet footers. No window reads those rows; they are
    counted so that they never vanish: the gate judges them with the quarantined rows."""
    from ..io import fs

    undated, known = {}, inputs.logs.dates()
    for table, source, contract in (("logs", inputs.logs, LOGS), ("decisions", inputs.decisions, DECISIONS)):
        if source is None:
            continue
        n = fs.parquet_rows(f[0] for d in source.undated for f in fs.data_files(d))
        if source.dates() is None:
            days, n_null = _dt_values(engine, f"scv_dates_{table}", source, contract)
            known = days if table == "logs" else known
            source.held = list(days)
            if n_null:
                from ..progress import note

                note(f"--{table}: {n_null} row(s) of {source.name} have a null dt or one that is not a date: they "
                     f"belong to no day of any window; give each row the UTC date of its event (dt)")
            n += n_null
        if n:
            undated[table] = n
    dates = [d for d in known if (inputs.date_from is None or d >= inputs.date_from)
             and (inputs.date_to is None or d <= inputs.date_to)]
    return dates, undated


def _dt_values(engine, name: str, source, contract: str) -> tuple[list, int]:
    """(the dates an undivided source holds, its rows whose dt is null): one query."""
    engine.read(name, source, load_contract(contract), None)
    df = engine.fetch(f"SELECT dt, count(1) AS n FROM {name} GROUP BY dt", "dates")
    null = df["dt"].isna()
    return sorted(df.loc[~null, "dt"].tolist()), int(df.loc[null, "n"].sum())


def concat_days(frames: list) -> pd.DataFrame | None:
    """The per-day frames of a --by-day run one below the other; a day's all-null columns (an empty day, nothing to
    estimate) take the other days' types instead of deciding them (pandas' concatenation rule to come)."""
    if not frames:
        return None
    cols = list(dict.fromkeys(c for f in frames for c in f.columns))
    parts = [f.dropna(axis=1, how="all") for f in frames] if len(frames) > 1 else frames
    return pd.concat(parts, ignore_index=True).reindex(columns=cols)


def empty_day_reason(day, d, absent=()) -> str | None:
    """Why a --by-day row of day ``d`` has nothing to estimate: the logs hold no row of it (``absent``), or the day
    holds no clean logged event (every row quarantined), with its counts; None when it holds one. ``day``: the
    window's statistics of that day alone (WindowStats.day)."""
    if d in absent:
        return (f"no logs on {d.isoformat()}: --logs holds no row of that day (no dt={d.isoformat()} partition), "
                f"so nothing to estimate on that day; check the logs' delivery for it")
    summary = day.table("log_summary")
    if len(summary) and float(summary["n_events"].sum()) > 0:
        return None
    counts = day.table("log_counts")
    rows = int(counts["rows"].sum()) if len(counts) else 0
    quarantined = int(counts["quarantined"].sum()) if len(counts) else 0
    return (f"no clean logged event on {d.isoformat()} ({rows} rows read, {quarantined} quarantined): nothing to "
            f"estimate on that day")


def days_without_logs(inputs: Inputs, dates: list) -> list:
    """The calendar days of the window (``--from``..``--to``, else the logs' first..last day) that the logs hold no
    row of: a missing partition is said, never silently left out of the window."""
    import datetime as dt

    if not dates:
        return []
    lo, hi = inputs.date_from or min(dates), inputs.date_to or max(dates)
    held = set(dates)
    return [d for d in (lo + dt.timedelta(i) for i in range((hi - lo).days + 1)) if d not in held]


def by_day_dates(window) -> list:
    """The days a --by-day table lists: every day of the window, those without logs included (their rows say so:
    :func:`empty_day_reason`)."""
    return sorted(set(window.stats.dates) | set(window.absent))


def decision_rows_without_logs(inputs: Inputs, dates: list) -> dict:
    """{day: rows} of the decisions' ``dt=`` partitions inside the window (``--from``..``--to``, else the logs'
    first..last day) for which the logs hold no partition: no pass reads them, so they are counted from their
    Parquet footers (no rows read) and judged like quarantined rows (each would be an UNKNOWN_EVENT)."""
    src = inputs.decisions
    if src is None or src.dates() is None or not dates:
        return {}
    from ..statistics.batches import day_rows

    lo, hi, logged = inputs.date_from or min(dates), inputs.date_to or max(dates), set(dates)
    rows = {d: day_rows(src, d) for d in src.dates() if lo <= d <= hi and d not in logged}
    return {d: n for d, n in rows.items() if n}


@dataclass
class Window:
    """A gated window: its statistics, counts and verdicts."""

    stats: WindowStats
    counts: dict
    verdicts: list
    check_verdicts: dict
    checks: tuple
    absent: tuple = ()           # days of the window with no logs at all (days_without_logs)

    def verdict_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.verdicts, columns=A.VERDICT_COLUMNS)

    def record(self) -> dict:
        """result.json's counts of the window: its days and the rows read (window_counts), then the row counts
        (rows in = used + quarantined per table and dt, rows without a date or without logs)."""
        return {**window_counts(self.stats), **self.counts}


def window_counts(stats) -> dict:
    """Days of the window, read (scanned) or taken from the store, the log rows actually read, K (the largest
    position held) and how many positions this run's scans kept as wide columns (statistics/scan.wide_positions)."""
    read = 0
    for d in stats.scanned:
        lc = stats.per_day.get(d, {}).get("log_counts")
        if lc is not None and len(lc):
            read += int(lc["rows"].sum())
    return {"days": len(stats.dates), "days_scanned": len(stats.scanned), "days_loaded": len(stats.loaded),
            "rows_read": read, "scan_batches": stats.batches, "K": int(stats.K),
            "wide_positions": int(stats.Kw) if stats.scanned else None}


@contextmanager
def counted(window: Window):
    """A job stopped after its window was read (a failed check, no estimator left, a usage error found late) keeps
    the window's counts: an error raised inside without counts of its own is given the window's record, which the
    command line writes to result.json with the quarantine the pass wrote (job_endings._record_counts)."""
    try:
        yield
    except ScavengerError as exc:
        if not getattr(exc, "counts", None):
            exc.counts = window.record()
        raise


def run_window(engine, inputs: Inputs, checks: tuple, plan: ScanPlan, gate: GateConfig,
               config: StatsConfig = StatsConfig(), store: str | None = None, quarantine_dir: str | None = None,
               run_id: str = "adhoc", batch_days: int | None = None, decisions_key=None, derived=None,
               stop_on_quarantine: bool = True) -> Window:
    """One pass per missing day, merged statistics, and the verdicts of ``checks`` (none with the gate off).
    Under ``--gate enforce`` a failed quarantine check raises DataCheckFailed here, unless ``stop_on_quarantine``
    is False (validate: it writes its verdicts and Data Docs first, then exits 3)."""
    from ..progress import phase

    dates, undated = window_days(engine, inputs)
    if not dates:
        sources.require_days(inputs.logs, inputs.date_from, inputs.date_to)     # days outside the window: exit 2
        why = (f": its {undated['logs']} row(s) have a null dt or one that is not a date, or lie in a file "
               f"outside every dt=YYYY-MM-DD directory; give each row the UTC date of its event (dt)") \
            if undated.get("logs") else ""
        raise DataCheckFailed(f"no log partitions in the window {inputs.date_from or '-'}..{inputs.date_to or '-'} "
                              f"of {inputs.logs.name}{why}",
                              counts={t: {**J.row_counts_empty(), "rows_without_dt": n} for t, n in undated.items()})
    key = {"policies": sorted(inputs.policies) if inputs.policies else None, "extra": decisions_key}
    if gate.mode != "off":
        config = calibration_stats_config(config, gate.assumptions)
    from ..warm import prefetch

    prefetch()      # the estimators' imports overlap the scan (see warm.py)
    stats = window_statistics(engine, inputs.logs, inputs.decisions, dates, plan, config,
                              Store(store) if store else None, quarantine_dir, run_id, key, batch_days, derived)
    orphans = decision_rows_without_logs(inputs, dates)
    counts = J.row_counts(stats, undated, orphans)
    absent = days_without_logs(inputs, dates)
    stats.absent = tuple(absent)
    if absent:
        from ..progress import note

        counts["days_without_logs"] = [d.isoformat() for d in absent]
        note(f"--logs: no partition for {len(absent)} day(s) of the window "
             f"{(inputs.date_from or dates[0]).isoformat()}..{(inputs.date_to or dates[-1]).isoformat()} "
             f"({J.day_ranges(absent)}): the statistics cover the {len(dates)} day(s) that have logs")
    verdicts = J.quarantine_rows(counts, gate.max_quarantine_share) + J.absent_days_rows(absent, dates)
    checks = tuple(checks) if gate.mode != "off" else ()
    with phase(None, "gate", f"checks {','.join(checks) or '-'} over {len(dates)} day(s)",
               log=None if checks else False):      # None: as SCAVENGER_PROGRESS says
        verdicts += J.assumption_rows(stats, checks, gate.assumptions,
                                      inputs.decisions is not None or bool(derived),
                                      additive_estimators() if "f" in checks else ((), ()))
    window = Window(stats, counts, verdicts, J.worst_by_check(verdicts, checks), checks, tuple(absent))
    if gate.enforce and stop_on_quarantine and window.check_verdicts.get("quarantine") == A.FAIL:
        raise DataCheckFailed("; ".join(quarantine_messages(verdicts)), verdicts=verdicts, counts=window.record())
    return window


def additive_estimators() -> tuple[list, list]:
    """(the estimators declared as relying on check f, those that are not): check f's messages name both."""
    from .. import registry

    specs = registry.ESTIMATORS.values()
    return [e.name for e in specs if "f" in e.checks], [e.name for e in specs if "f" not in e.checks]


def quarantine_messages(verdicts: list) -> list[str]:
    """The failed quarantine (and input) verdicts' messages: what a job stopped by the quarantined share says."""
    return [r["message"] for r in verdicts if r["check"] in ("quarantine", "input") and r["verdict"] == A.FAIL]


def calibration_stats_config(config: StatsConfig, assumptions: A.AssumptionConfig) -> StatsConfig:
    """The statistics check e's calibration scope reads: ``auto[:KEY]`` needs ad_position's stratum_min/max by KEY
    (does KEY partition the ads?), a fixed ``KEY`` the calibration_cells table by KEY; ``policy`` neither."""
    import dataclasses

    mode, key = A.parse_calibration_scope(assumptions.calibration_scope)
    if mode == "auto":
        return dataclasses.replace(config, calibration_key=key)
    if mode == "fixed":
        return dataclasses.replace(config, fixed_calibration_key=key)
    return config


def require_clean_rows(window: Window, what: str) -> None:
    """adc and evaluate need clean rows: a window whose every row was quarantined (even with --gate report) is a
    failed data check (exit 3), not an estimator fed empty tables."""
    logs = window.counts.get("logs") or {}
    if not logs.get("rows_in"):
        raise DataCheckFailed(f"the window's log files hold no rows: no {what} can be estimated; check the input "
                              f"path, --from and --to", verdicts=window.verdicts, counts=window.record())
    if not logs.get("rows_used"):
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted((logs.get("by_reason") or {}).items(),
                                                           key=lambda kv: -kv[1])[:5])
        raise DataCheckFailed(f"all {logs['rows_in']} log rows of the window were quarantined ({reasons}): no "
                              f"{what} can be estimated; see quarantine/ for the reasons", verdicts=window.verdicts,
                              counts=window.record())


def failed_checks_message(window: Window, failed: list) -> str:
    names = ", ".join(f"{c} ({A.CHECK_NAMES.get(c, c)})" for c in failed)
    detail = " | ".join(f"{r['check']} [{r['scope']}]: {r['message']}" for r in window.verdicts
                        if r["verdict"] == A.FAIL and r["check"].split(".")[0] in failed)
    return f"data checks failed: {names}. {detail}"
