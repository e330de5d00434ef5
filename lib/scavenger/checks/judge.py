"""The gate's verdicts as pure functions of a window's merged statistics (the same tables the estimators read).

    counts  = row_counts(stats)                       rows in / used / quarantined, per reason and per dt
    rows    = quarantine_rows(counts, max_share)      the quarantine verdicts
    rows   += assumption_rows(stats, checks, config)  checks a-f (checks/assumptions.py), no engine involved
    verdicts = worst_by_check(rows, checks)           {"a": "pass", ...}

A gated window after one new day judges the stored days' tables and the new day's: no row is read again.
"""
from __future__ import annotations

import pandas as pd

from . import assumptions as A
from .rules import DECISION_REASONS, LOG_REASONS
from ..statistics.tables import ordered_text, plain_text

LOGS, DECISIONS = "impression_log", "decisions"


def _per_day(stats, name: str) -> pd.DataFrame:
    frames = [t[name] for t in stats.per_day.values() if name in t and len(t[name])]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _counts(pdf: pd.DataFrame, codes: list) -> dict:
    if not len(pdf):
        return {"rows_in": 0, "rows_used": 0, "rows_quarantined": 0, "quarantined_share": 0.0, "by_reason": {},
                "by_dt": []}
    rows_in, q = int(pdf["rows"].sum()), int(pdf["quarantined"].sum())
    return {"rows_in": rows_in, "rows_used": rows_in - q, "rows_quarantined": q,
            "quarantined_share": q / rows_in if rows_in else 0.0,
            "by_reason": {c: int(pdf[c].sum()) for c in codes if c in pdf and int(pdf[c].sum()) > 0},
            "by_dt": [{"dt": str(r["dt"]), "rows": int(r["rows"]), "used": int(r["rows"] - r["quarantined"]),
                       "quarantined": int(r["quarantined"])} for r in pdf.sort_values("dt").to_dict("records")]}


def row_counts_empty() -> dict:
    """The counts of a table of which no row was read."""
    return _counts(pd.DataFrame(), [])


def row_counts(stats, undated: dict | None = None, orphans: dict | None = None) -> dict:
    """{"logs": ..., "decisions": ...}: rows in = rows used + rows quarantined, exactly, per table and per dt.
    ``undated``: rows no day holds (common.window_days), outside every dt, counted as
    ``rows_without_dt`` beside them; ``orphans``: {day: rows} of decision days in the window the logs lack
    (common.decision_rows_without_logs), counted as ``rows_without_logs`` with their ``days_without_logs``."""
    lc = _per_day(stats, "log_counts")
    out = {"logs": _counts(lc, LOG_REASONS)}
    if len(lc) and "null_propensity_events" in lc:
        out["logs"]["null_propensity_events"] = int(lc["null_propensity_events"].sum())
    dc = _per_day(stats, "decision_counts")
    if len(dc):
        out["decisions"] = _counts(dc, DECISION_REASONS)
    for table, n in (undated or {}).items():
        out.setdefault(table, _counts(pd.DataFrame(), []))["rows_without_dt"] = int(n)
    if orphans:
        d = out.setdefault("decisions", _counts(pd.DataFrame(), []))
        d["rows_without_logs"] = int(sum(orphans.values()))
        d["days_without_logs"] = [str(day) for day in sorted(orphans)]
    return out


def _undated_row(name: str, c: dict, max_share: float) -> list[dict]:
    """The verdict on rows without a date (``rows_without_dt``): judged like quarantined rows."""
    rows = []
    for key, why in (("rows_without_dt", "have a null dt or one that is not a date, or lie in a file outside every "
                                         "dt=YYYY-MM-DD directory"),
                     ("rows_without_logs",
                      f"lie in day(s) the logs lack ({', '.join(c.get('days_without_logs', [])[:5])})")):
        n = c.get(key, 0)
        if not n:
            continue
        share = n / (c["rows_in"] + n)
        fix = ("give each row the UTC date of its event (dt), each file under its day's dt=YYYY-MM-DD "
               "directory" if key == "rows_without_dt" else
               "check the logs' path for those days, or the window (--from, --to)")
        rows.append(A.row("input", name, share, max_share, A.FAIL if share > max_share else A.WARN,
                          f"{n} {name} row(s) {why} ({share:.4%} of {c['rows_in'] + n}): no pass reads them, so no "
                          f"estimate uses them; {fix}"))
    return rows


def quarantine_rows(counts: dict, max_share: float) -> list[dict]:
    rows = []
    for table, name in (("logs", LOGS), ("decisions", DECISIONS)):
        c = counts.get(table)
        if not c:
            continue
        rows += _undated_row(name, c, max_share)
        share = c["quarantined_share"]
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(c["by_reason"].items(), key=lambda kv: -kv[1])) or "none"
        if c["rows_in"] == 0:
            rows.append(A.row("input", name, 0, None, A.FAIL, f"no {name} rows in the window: check the input "
                                                               f"path, --from and --to"))
        elif share > max_share:
            rows.append(A.row("quarantine", name, share, max_share, A.FAIL,
                              f"{c['rows_quarantined']} of {c['rows_in']} rows quarantined ({share:.4%}) > "
                              f"{max_share:.4%} (reasons: {reasons}); fix the upstream data (see quarantine/) or "
                              f"raise --max-quarantine-share"))
        else:
            rows.append(A.row("quarantine", name, share, max_share, A.WARN if c["rows_quarantined"] else A.PASS,
                              f"{c['rows_quarantined']} of {c['rows_in']} rows set aside (reasons: {reasons}); "
                              f"proceeding on {c['rows_used']} clean rows"))
    return rows


def day_ranges(days, most: int = 5) -> str:
    """Days as runs of consecutive days, the first ``most`` of them: '2025-01-01..2025-12-31, 2026-01-02'."""
    import datetime as dt

    runs: list = []
    for d in sorted(dt.date.fromisoformat(str(x)) for x in days):
        if runs and (d - runs[-1][1]).days == 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    text = ", ".join(a.isoformat() if a == b else f"{a.isoformat()}..{b.isoformat()}" for a, b in runs[:most])
    return text + (f" and {len(runs) - most} more run(s)" if len(runs) > most else "")


def absent_days_rows(absent: list, dates: list) -> list[dict]:
    """A warning for the days of the window the logs hold no row of (common.days_without_logs): the estimates cover
    the other days only."""
    if not absent:
        return []
    n = len(absent) + len(dates)
    return [A.row("input", "logs", len(absent) / n, None, A.WARN,
                  f"no logs on {len(absent)} of the window's {n} days ({day_ranges(absent)}): the estimates cover "
                  f"the other "
                  f"{len(dates)} day(s); check the logs' delivery for those days, or the window (--from, --to)")]


def slot_table(stats) -> pd.DataFrame:
    """(logging_policy, dt, position, ad_id): n impressions and the logged propensities (checks a, b, e)."""
    ap = _per_day(stats, "ad_position")
    cols = ["logging_policy", "dt", "position", "ad_id", "n", "n_p", "sum_p", "min_p", "max_p", "stratum_min",
            "stratum_max"]
    if not len(ap):
        return pd.DataFrame(columns=cols)
    text = ["stratum_min", "stratum_max"]
    g = ordered_text(ap, text).groupby(["logging_policy", "dt", "position", "ad_id"], as_index=False,
                                       observed=True).agg(
        n=("m", "sum"), n_p=("n_p", "sum"), sum_p=("sum_p", "sum"), min_p=("min_p", "min"), max_p=("max_p", "max"),
        stratum_min=("stratum_min", "min"), stratum_max=("stratum_max", "max"))
    g = plain_text(g, text)
    g["dt"] = g["dt"].astype(str)
    return g[cols]


def mass_table(stats, slot: pd.DataFrame) -> pd.DataFrame | None:
    """(policy_id, logging_policy, position, ad_id): the target's mass sum_t pi_k(a|x_t) over its events, beside
    the logged support (n, max_p) of the events' logging policy (checks b, c)."""
    tp = stats.table("target_placements")
    if not len(tp):
        return None
    mass = tp.rename(columns={"pos_j": "position", "s_p": "mass"})[
        ["policy_id", "logging_policy", "position", "ad_id", "mass"]]
    support = slot.groupby(["logging_policy", "position", "ad_id"], as_index=False).agg(
        n=("n", "sum"), max_p=("max_p", "max"))
    return mass.merge(support, on=["logging_policy", "position", "ad_id"], how="left")


def assumption_rows(stats, checks, acfg: A.AssumptionConfig, decisions: bool = True,
                    additive: tuple = ((), ())) -> list[dict]:
    """Checks a-f (those asked for) over the window's tables: see checks/assumptions.py for each test.
    ``additive``: (the estimators that assume additive slots, those that do not), which check f's messages name
    (the registry knows them: pipelines.common.additive_estimators)."""
    rows = []
    slot = slot_table(stats)
    plain = slot.drop(columns=["stratum_min", "stratum_max"])
    mass = mass_table(stats, slot) if decisions else None
    if "a" in checks:
        ctx = stats.table("context_cells")
        rows += A.check_a(ctx, plain, acfg)
    if "b" in checks:
        rows += A.check_b(plain, mass, acfg)
    if "c" in checks:
        rows += A.check_c(mass, acfg) if mass is not None else [
            A.row("c.support", "all", None, acfg.support_max, A.WARN, "no decisions given: the target's support "
                                                                       "cannot be checked")]
    if "d" in checks:
        strata = _per_day(stats, "pair_strata")
        rows += A.check_d(strata, acfg) if len(strata) else [
            A.row("d.slot_dependence", "all", None, acfg.factor_v_max, A.PASS, "one slot per event: nothing to "
                                                                               "factorize")]
    if "e" in checks:
        rows += _check_e(stats, slot, acfg)
    if "f" in checks:
        rows += A.check_f(stats.table("interaction_cells"), acfg, *additive)
    return rows


def _check_e(stats, slot: pd.DataFrame, acfg: A.AssumptionConfig) -> list[dict]:
    """Propensity calibration; not testable without logged propensities (a propensity-free log disables only the
    estimators that need them)."""
    if not len(slot) or float(slot["n_p"].sum()) == 0:
        return [A.row("e.calibration", "all", None, acfg.calib_tol, A.WARN,
                      "not testable: the logs hold no propensities (the IPS/PI family is not identified here)")]
    mode, key = A.parse_calibration_scope(acfg.calibration_scope)
    hint = None
    if mode == "fixed":
        cal = _per_day(stats, "calibration_cells")
        cal = cal.assign(dt=cal["dt"].astype(str)) if len(cal) else cal
        note = f"within each value of {key}"
    else:
        strata_of = A.partition_strata(slot) if mode == "auto" else {}
        cal = A.calibration_slot(slot, strata_of)
        note = {p: f"within each of the {s.nunique()} values of {key}, which partition its ads"
                for p, s in strata_of.items()}
        hint = (_scope_hints(slot, strata_of, key) if mode == "auto" else
                "if each context has its own ads and propensities, compare within it: --calibration-scope "
                "context_id (or context:NAME)")
    events = cal.groupby(["logging_policy", "stratum", "dt", "position"], as_index=False).agg(events=("n", "sum"))
    return A.check_e(cal, events, acfg, scope_note=note, scope_hint=hint)


def _scope_hints(slot: pd.DataFrame, strata_of: dict, key: str) -> dict:
    """Per pooled policy whose impressions show >= 2 values of the auto scope's key: why no partition was found
    (:func:`.calibration.no_partition_reasons`, with the counts a partition needs) and the scope to try."""
    why = A.no_partition_reasons(slot, key)
    return {p: f"these cells pool {k} values of {key} ({why.get(p, f'no partition of the ads by {key} was found')}"
               f"); if each value has its own ads and propensities, rerun with --calibration-scope {key}, which "
               f"compares them within each value"
            for p, k in A.mixed_scope(slot, strata_of).items()}


def worst_by_check(rows: list[dict], checks) -> dict:
    df = pd.DataFrame(rows, columns=A.VERDICT_COLUMNS)
    out = {}
    for c in checks:
        sub = df[df["check"].str.startswith(f"{c}.")]
        out[c] = A.worst(sub["verdict"]) if len(sub) else "not_run"
    q = df[df["check"].isin(["quarantine", "input"])]
    out["quarantine"] = A.worst(q["verdict"]) if len(q) else "not_run"
    return out
