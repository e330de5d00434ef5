"""What ``evaluate --baseline`` and ``--by-day`` add to the estimates, from the same per-day statistics
(no extra scan):

- ``differences``: each target minus the baseline (``logging``: what the logs earned; or another target of the
  decisions) per estimator of the IPS/PI family, on the same events (estimators/differences.py,
  estimators/pair_differences.py), with the paired interval and the confidence sequence;
- ``running``: one row per (policy_id, baseline_id, estimator, dt): the estimate (and difference) over the window's
  first day through dt, from the stored days merged one day at a time (WindowStats.prefix), each exactly what a
  fresh run over that prefix window gives (the estimators run on the prefix's merged tables; the confidence
  sequence over the prefix's blocks is the running band at dt).

Cost (30 days of 20,000 slotted events, DuckDB, the default estimators, 4 targets, 2 cores): the prefixes and the
by-day windows, each a run of every estimator over a window's merged tables, run on two workers
(pipelines/window_pool.py; both jobs started together by pipelines/evaluate, :func:`running_job` one chunk of
prefixes per worker, each adding one day to the one before); a prefix merges only the tables its estimators read
(statistics/lazy_tables.py) with the numpy group-by (statistics/fast_merge.py), the derived frames several
estimators share are made once per window (WindowStats.memo), the direct approach's sums of every prefix come from
one statement run before the workers start (estimators/scavenging_family._windows), and a window whose tables are
not written skips what only they need (EstimateOptions.keeps_side).
"""
from __future__ import annotations

import math

import pandas as pd

from ..errors import UsageError
from ..estimators.declaration import EstimateOptions
from .. import registry
from ..estimators.differences import DIFFERENCE_COLUMNS, LOGGING
from .estimate_rows import prepare_windows, run_estimators
from .window_pool import Job

RUNNING_COLUMNS = ("policy_id", "baseline_id", "estimator", "window", "value", "std_error", "ci_low", "ci_high",
                   "interval_kind", "cs_low", "cs_high", "level", "n_events", "identified", "reason", "cs_reason",
                   "dt")


def baseline_missing(baseline: str, stats) -> str | None:
    """Why --baseline names no policy of the decisions (None when it does, or is ``logging``): checked right after
    the pass, from the policies the decisions hold (decision_policies: every policy read, before the join)."""
    if baseline in (None, LOGGING):
        return None
    read = stats.table("decision_policies")
    have = sorted(str(p) for p in read["policy_id"].unique()) if len(read) else []
    return None if baseline in have else _not_a_policy(baseline, have)


def check_baseline_name(baseline: str | None, policies=None, decisions=None) -> None:
    """--baseline (the API's ``baseline=``) before any engine starts: a name, not blank, among ``policies``
    (--policies) when those are given, the others not being read, and among the policy ids of ``decisions`` (a
    described source: its window's files, one column read, or an in-memory table). A catalog table's or a Spark
    DataFrame's policies, and the window's clean rows, are known only after the pass: :func:`check_baseline`."""
    if baseline is None:
        return
    if not isinstance(baseline, str) or not baseline.strip():
        raise UsageError("--baseline names no policy; give a target policy of --decisions, or 'logging'")
    if baseline == LOGGING:
        return
    if policies and baseline not in policies:
        raise UsageError(f"--baseline {baseline!r} is not among --policies ({', '.join(policies)}), so its decisions "
                         f"are not read; add it to --policies, or give 'logging'")
    if decisions is None:
        return
    from ..io.column_values import column_holds, column_values

    if column_holds(decisions, "policy_id", baseline) is False:      # then every policy read, for the message
        have = column_values(decisions, "policy_id")
        raise UsageError(_not_a_policy(baseline, sorted(str(p) for p in have if p is not None)))


def _not_a_policy(baseline: str, have: list) -> str:
    listed = ", ".join(have[:10]) + (f" and {len(have) - 10} more" if len(have) > 10 else "")
    return (f"--baseline {baseline!r} is not a policy of --decisions in the window (policies read: "
            f"{listed or 'none'}); give one of them, or 'logging' for what the logs earned")


def check_baseline(baseline: str | None, stats) -> None:
    why = baseline_missing(baseline, stats)
    if why:
        raise UsageError(why)


def differences(stats, policies: list, run: list, options: EstimateOptions, baseline: str | None):
    """The differences table of the window (None without --baseline)."""
    if baseline is None:
        return None
    rows = difference_rows(stats, policies, run, options, baseline)
    return pd.DataFrame(rows, columns=list(DIFFERENCE_COLUMNS))


def difference_rows(stats, policies: list, run: list, options: EstimateOptions, baseline: str) -> list[dict]:
    """Rows of every estimator in ``run`` whose declaration gives a paired difference (registry ``difference``),
    for every target but the baseline (and the re-orderings of the logged slate)."""
    specs = [s for s in (registry.get(e) for e in run) if s.difference is not None]
    out = []
    for p in policies:
        if p == baseline or p in options.derived:
            continue
        out += [s.difference_function(stats, p, baseline, options) for s in specs]
    return out


def running_job(stats, policies: list, run: list, options: EstimateOptions, baseline: str | None = None,
                absent=()) -> tuple:
    """The running table (module doc): for each day of the window with logs, the estimators (and differences)
    over the first day through it, as (window_pool.Job, assemble): window_pool.start runs the job's ``prepare()``
    (what the prefixes read from the engine, estimate_rows.prepare_windows) then its chunks, several at a time
    (with the by-day windows, pipelines/by_day.by_day_job), ``assemble(results)`` makes the table."""
    days = sorted(stats.dates)
    first = min([*stats.dates, *absent]) if stats.dates else None

    def prefixes(chunk: list) -> list:
        before = None
        out = []
        for d in chunk:
            prefix = stats.prefix(d, before)      # one day merged onto the prefix before (a chunk's first: all)
            before = prefix
            out.append(_prefix_rows(prefix, d, f"{first.isoformat()}..{d.isoformat()}", policies, run, options,
                                    baseline, stats))
        return out

    def done(results: list) -> pd.DataFrame:
        frames = [f for f in results if f is not None]
        if not frames:
            return pd.DataFrame(columns=list(RUNNING_COLUMNS))
        return pd.concat(frames, ignore_index=True)
    # contiguous: a chunk's first prefix merges every day before it (the next ones add one day each)
    return Job(days, prefixes, lambda: prepare_windows(stats, run, options, "running"), contiguous=True), done


def _prefix_rows(prefix, d, label: str, policies: list, run: list, options: EstimateOptions, baseline, whole):
    """The running rows of the prefix window through ``d`` (None: no row)."""
    # the run's shared cache (each day's block moments and terms, estimators/slate_sequences.py), a cache of its
    # own for the prefix window, as a fresh run over it has
    opts = options.for_prefix(d, label, whole)
    rows = [{**r, "baseline_id": None} for r in run_estimators(prefix, policies, run, opts)]
    if baseline is not None:
        rows += [_as_running(r) for r in difference_rows(prefix, policies, run, opts, baseline)]
    df = pd.DataFrame(rows)
    if not len(df):
        return None
    if "interval_kind" in df.columns:       # Theorem 3/4's bounds are no interval of the estimate
        df = df[df["interval_kind"].fillna("") != "bound"]
    df = df.drop_duplicates(["policy_id", "baseline_id", "estimator"], keep="first")
    return df.assign(window=label, dt=d).reindex(columns=list(RUNNING_COLUMNS))


def _as_running(r: dict) -> dict:
    """A differences row as a running row: identified where it has a value, with its own interval's kind."""
    finite = lambda v: v is not None and math.isfinite(float(v))     # noqa: E731
    kind = r.get("interval_kind") or "none" if finite(r["ci_low"]) and finite(r["ci_high"]) else "none"
    return {**r, "identified": finite(r["value"]), "interval_kind": kind}

