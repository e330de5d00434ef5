"""What a run says when it ends, in a few lines (status, engine, days, rows, checks, estimates or the ADC table):
the command line prints it on stdout and the notebook API's results show it as their repr, from the same fields
(a ``RunResult``: job, status, exit_code, engine, counts, summary, verdicts, message, outputs)."""
from __future__ import annotations

import math


def _fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e-3 or abs(v) >= 1e4 else f"{v:.{digits}f}"
    return str(v)


def _rows_lines(counts: dict) -> list[str]:
    out = []
    for table in ("logs", "decisions"):
        c = counts.get(table)
        if not c:
            continue
        by_reason = sorted((c.get("by_reason") or {}).items(), key=lambda kv: -kv[1])
        reasons = ", ".join(f"{k} {v}" for k, v in by_reason[:3]) + \
            (f" and {len(by_reason) - 3} more reason(s), see result.json" if len(by_reason) > 3 else "")
        out.append(f"  {table:<9} rows in {c['rows_in']:>10,}  used {c['rows_used']:>10,}  quarantined "
                   f"{c['rows_quarantined']:>8,}" + (f"  ({reasons})" if reasons else ""))
        # rows no pass read: named on stderr, judged by the gate, and said here beside the rows read
        if c.get("rows_without_dt"):
            out.append(f"  {'':<9} rows without a date {c['rows_without_dt']:,} (not read: see stderr)")
        if c.get("rows_without_logs"):
            days = c.get("days_without_logs") or []
            out.append(f"  {'':<9} rows without logs {c['rows_without_logs']:,} (day(s) the logs lack: "
                       f"{', '.join(days[:3])}{' ...' if len(days) > 3 else ''})")
    return out


def _check_lines(result) -> list[str]:
    from .checks.assumptions import CHECK_NAMES

    checks = result.summary.get("checks") or {}
    out = []
    for c, verdict in checks.items():
        if c == "quarantine" or verdict == "not_run":
            continue
        worst = [v for v in result.verdicts if v.get("check", "").startswith(f"{c}.") and v.get("verdict") == verdict]
        msg = worst[0]["message"] if worst and verdict != "pass" else ""
        out.append(f"  {c} {CHECK_NAMES.get(c, c):<24} {verdict:<5} {_clip(msg)}")
    return out


def _clip(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters (blanks collapsed)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _estimate_lines(result) -> list[str]:
    """One line per identified estimate (the recommended one marked *), then one line per estimator and reason
    the data could not support, with the policies it concerns."""
    rows = result.summary.get("estimates") or []
    out, missing = [], {}
    for r in rows:
        if r.get("interval_kind") == "bound":
            continue
        if not r.get("identified", True):
            who = missing.setdefault((r["estimator"], r.get("reason") or ""), [])
            if r["policy_id"] not in who:     # one line per policy, whatever rows (el, bound) it refused
                who.append(r["policy_id"])
            continue
        lo, hi = r.get("ci_low"), r.get("ci_high")
        finite = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi))
        interval = f"[{_fmt(lo)}, {_fmt(hi)}]" if finite else \
            "no interval" + (f": {_clip(r.get('reason'), 70)}" if r.get("reason") else "")
        star = " *" if r.get("recommended") else ""
        out.append(f"  {_clip(r['policy_id'], 22):<22} {r['estimator']:<22} {_fmt(r['value']):>9} {interval}{star}")
    for (estimator, reason), policies in missing.items():
        who = ", ".join(_clip(p, 30) for p in policies[:3]) + (f" and {len(policies) - 3} more" if len(policies) > 3
                                                                else "")
        out.append(f"  {estimator:<22} not identified for {who}: {_clip(reason, 110)}")
    return out


def _difference_lines(result) -> list[str]:
    """One line per difference against --baseline: value, interval and confidence sequence, or why none."""
    out, missing = [], {}
    for r in result.summary.get("differences") or []:
        lo, hi, cl, ch = (r.get(k) for k in ("ci_low", "ci_high", "cs_low", "cs_high"))
        if not isinstance(r.get("value"), (int, float)) or not math.isfinite(r["value"]):
            missing.setdefault((r["estimator"], r.get("reason") or ""), []).append(r["policy_id"])
            continue
        ci = f"[{_fmt(lo)}, {_fmt(hi)}]" if all(isinstance(v, float) and math.isfinite(v) for v in (lo, hi)) \
            else "no interval"
        cs = f"[{_fmt(cl)}, {_fmt(ch)}]" if all(isinstance(v, float) and math.isfinite(v) for v in (cl, ch)) \
            else "no sequence"
        out.append(f"  {_clip(r['policy_id'], 22):<22} {r['estimator']:<22} {_fmt(r['value']):>9} {ci} {cs}")
    for (estimator, reason), policies in missing.items():
        who = ", ".join(_clip(p, 30) for p in policies[:3]) + (f" and {len(policies) - 3} more"
                                                                if len(policies) > 3 else "")
        out.append(f"  {estimator:<22} not given for {who}: {_clip(reason, 110)}")
    return out


def summary_lines(result) -> list[str]:
    """The run summary: status, engine, rows, checks, estimates (``*`` marks the recommended estimate)."""
    lines = [f"scavenger {result.job}: {result.status}" + (f" (exit {result.exit_code})" if result.exit_code else "")
             + (f" -- window {result.summary['window']}" if result.summary.get("window") else "")]
    if result.engine:
        lines.append(f"  engine {result.engine.get('name')} ({result.engine.get('why')})")
    c = result.counts
    if c.get("days") is not None:
        from .checks.judge import day_ranges

        absent = c.get("days_without_logs") or []
        lines.append(f"  days {c['days']} (read {c.get('days_scanned', 0)}, from the store {c.get('days_loaded', 0)})"
                     + (f"; no logs on {len(absent)} day(s) of the window: {day_ranges(absent, 3)}"
                        if absent else ""))
    lines += _rows_lines(c)
    checks = _check_lines(result)
    if checks:
        lines.append("checks:")
        lines += checks
    est = _estimate_lines(result)
    if est:
        lines.append("estimates (value: reward per logged event, interval; * = recommended):")
        lines += est
    diffs = _difference_lines(result)
    if diffs:
        base = (result.summary.get("differences") or [{}])[0].get("baseline_id")
        lines.append(f"minus {base} (value, interval, anytime-valid sequence):")
        lines += diffs
    adc = result.summary.get("adc")
    if isinstance(adc, dict) and adc:
        lines.append("ADC by position (C_1..C_K):")
        for method, values in adc.items():
            lines.append(f"  {method:<17} " + " ".join(f"{_fmt(v, 3):>7}" for v in values))
        if result.summary.get("dcg"):
            lines.append(f"  {'dcg':<17} " + " ".join(f"{_fmt(v, 3):>7}" for v in result.summary["dcg"]))
        for reason in result.summary.get("not_identified") or []:
            lines.append(f"  not identified: {reason}")
    for warning in (result.summary.get("warnings") or [])[:8]:
        lines.append(f"warning: {_clip(warning)}")
    for note in [n for n in (result.summary.get("notes") or []) if "not identified" not in n][:8]:
        lines.append(f"note: {_clip(note)}")
    if result.message and result.status == "ok":
        lines.append(f"note: {_clip(result.message)}")
    if result.outputs:
        lines.append("outputs: " + ", ".join(f"{k}={v}" for k, v in result.outputs.items()))
    return lines


# -- the fields of a run that the summary reads, made once for the command line and the notebook API --------------
ESTIMATE_FIELDS = ("policy_id", "estimator", "interval_kind", "value", "ci_low", "ci_high", "n_events", "identified",
                   "reason", "recommended", "checks")


def estimate_rows(est) -> list:
    """The estimates as the summary (and result.json's summary) lists them: one dict per row, a few fields."""
    return [{k: r.get(k) for k in ESTIMATE_FIELDS} for r in est.to_dict("records")]


def adc_fields(table, bootstrap: int = 0) -> dict:
    """The ADC table as the summary shows it: C_1..C_K per method (delta intervals, or bootstrap when run), the DCG
    reference, and the reasons of the positions not identified."""
    t = table[table["interval_kind"] == ("bootstrap" if bootstrap else "delta")]
    return {"adc": {m: [None if v != v else round(float(v), 6) for v in g.sort_values("position")["coefficient"]]
                    for m, g in t.groupby("method")},
            "dcg": t.drop_duplicates("position").sort_values("position")["dcg"].round(6).tolist(),
            "not_identified": sorted({str(x) for x in t.loc[~t["identified"].astype(bool), "reason"].dropna()})}


def summary_text(result, tables: str = "", limit: int = 4000) -> str:
    """``summary_lines`` as one text of at most ``limit`` characters (the notebook API's repr): lines past the limit
    are counted, not shown, and ``tables`` (where the full tables are) is always the last line."""
    lines, tail = summary_lines(result), [tables] if tables else []
    room = limit - sum(len(t) + 1 for t in tail) - 80
    shown: list = []
    for i, line in enumerate(lines):
        if sum(len(x) + 1 for x in shown) + len(line) + 1 > room:
            shown.append(f"... {len(lines) - i} more line(s) not shown")
            break
        shown.append(line)
    return "\n".join(shown + tail)


# -- the notebook API's results: the RunResult the command line would have written, for their repr ----------------
def _run(job: str, engine: dict, counts: dict, summary: dict, verdicts, message: str | None = None):
    from .result import RunResult

    run = RunResult(job=job, engine={"name": engine.get("name"), "why": engine.get("why")}, counts=counts,
                    summary=summary, verdicts=list(verdicts or []), status="ok", message=message)
    return run


def adc_run(res, engine: dict, bootstrap: int = 0):
    """What ``scavenger adc`` says of ``res`` (pipelines.adc.AdcResult): its counts and summary fields."""
    from .estimators.attention_decay import unknown_rewards

    ap = res.stats.table("ad_position")
    counts = {**res.window.record(), "impressions": int(ap["m"].sum()) if len(ap) else 0,
              "impressions_reward_unknown": unknown_rewards(ap)}
    return _run("adc", engine, counts, {"window": res.stats.window, "checks": res.window.check_verdicts,
                                        **adc_fields(res.table, bootstrap)}, res.window.verdicts)


def evaluation_run(ev, engine: dict):
    """What ``scavenger evaluate`` says of ``ev`` (pipelines.evaluate.Evaluation)."""
    est = ev.estimates
    counts = {**ev.window.record(), "policies": int(est["policy_id"].nunique()), "estimates": len(est)}
    summary = {"window": ev.stats.window, "checks": ev.window.check_verdicts, "notes": ev.notes,
               "estimates": estimate_rows(est)}
    if ev.warnings:
        summary["warnings"] = list(ev.warnings)
    return _run("evaluate", engine, counts, summary, ev.verdicts)


def validation_run(v, gate: str, engine: dict):
    """What ``scavenger validate`` says of ``v`` (pipelines.validate.Validation) under ``--gate gate``."""
    summary = {"window": v.window.stats.window, "estimators": v.estimators, "checks": v.window.check_verdicts,
               "failed_checks": v.failed, "gate": gate, "message": v.message}
    if v.not_applicable:
        summary["not_applicable"] = v.not_applicable
        summary["notes"] = list(v.not_applicable)
    return _run("validate", engine, v.window.record(), summary, v.verdicts,
                f"--gate {gate}: {v.message}" if v.failed else None)
