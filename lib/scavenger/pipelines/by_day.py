"""``evaluate --by-day``: one estimate per day of the window, from the stored per-day statistics (no extra scan), the
days several at a time (pipelines/window_pool.py); a day without logs after the first such one takes that one's
rows, renamed."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..estimators.declaration import EstimateOptions
from .common import by_day_dates, concat_days, empty_day_reason
from .estimate_rows import prepare_windows, run_estimators
from .window_pool import Job


def by_day_job(stats, policies, run, opts: EstimateOptions, window, finish) -> tuple:
    """estimates_by_day: one estimate per day of the window, from the stored per-day statistics (no extra scan),
    as (window_pool.Job, assemble): window_pool.start runs the job's ``prepare()`` (what the days read from the
    engine, estimate_rows.prepare_windows) then its chunks, several at a time (with running/'s prefixes,
    pipelines/running.running_job), ``assemble(results)`` makes the table. A day without logs after the first such
    one: that one's rows, renamed. ``finish(rows, window_name)``: a day's estimator rows as its estimates table
    (gate verdicts, checks column)."""
    dates = by_day_dates(window)
    lacking = [d for d in dates if d in window.absent]
    todo = [d for d in dates if d not in window.absent or d == lacking[0]]

    def days(chunk: list) -> list:
        out = []
        for d in chunk:
            day = stats.day(d)
            est = finish(run_estimators(day, policies, run, opts.for_day(d, d.isoformat(), stats)), d.isoformat())
            why = empty_day_reason(day, d, window.absent)
            if why:  # every estimator's own reason would blame its inputs (no base policy, no ADC, ...)
                est = est.assign(identified=False, recommended=False, reason=why)
            out.append(est.assign(dt=d))
        return out

    def done(frames: list) -> pd.DataFrame:
        if len(lacking) > 1:
            blank = frames[todo.index(lacking[0])].drop(columns=["dt"])
            frames = [*frames, _absent_days(blank, lacking[1:], window.absent)]
        return concat_days(frames).sort_values("dt", kind="stable").reset_index(drop=True)
    return Job(todo, days, lambda: prepare_windows(stats, run, opts, "by_day")), done


def _absent_days(blank: pd.DataFrame, days: list, absent) -> pd.DataFrame:
    """The --by-day rows of ``days`` without logs: the rows of the first such day, once per day, each naming its day."""
    rows = blank.iloc[np.tile(np.arange(len(blank)), len(days))].reset_index(drop=True)
    day = np.repeat(np.array(days, dtype=object), len(blank))
    return rows.assign(window=[d.isoformat() for d in day], reason=[empty_day_reason(None, d, absent) for d in day],
                       dt=day)
