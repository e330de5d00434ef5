"""What a job says when it ends: a short summary on stdout (rows, checks, estimates or the ADC table), and the
one-line advice when it ran out of memory (the setting to raise, not an internal error)."""
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
    from ..checks.assumptions import CHECK_NAMES

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


def summary_lines(result) -> list[str]:
    """The run summary: status, engine, rows, checks, estimates (``*`` marks the recommended estimate)."""
    lines = [f"scavenger {result.job}: {result.status}" + (f" (exit {result.exit_code})" if result.exit_code else "")
             + (f" -- window {result.summary['window']}" if result.summary.get("window") else "")]
    if result.engine:
        lines.append(f"  engine {result.engine.get('name')} ({result.engine.get('why')})")
    c = result.counts
    if c.get("days") is not None:
        from ..checks.judge import day_ranges

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
        lines.append("estimates (value, interval; * = recommended):")
        lines += est
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


def memory_advice(exc: BaseException) -> str | None:
    """The one-line answer when an engine ran out of memory, naming the setting to raise."""
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfMemoryError" in text or "Java heap space" in text or "GC overhead limit" in text:
        return ("Spark ran out of memory (java.lang.OutOfMemoryError): raise the driver heap with --conf "
                "spark.driver.memory=8g (or the executors' with spark.executor.memory), or use --batch-days N")
    if "Out of Memory Error" in text or "OutOfMemoryException" in text or type(exc).__name__ == "OutOfMemoryException":
        return ("DuckDB ran out of memory: raise SCAVENGER_DUCKDB_MEMORY (e.g. 16GB) or point "
                "SCAVENGER_DUCKDB_TEMP at a disk with room to spill, or use --batch-days N")
    if isinstance(exc, MemoryError):
        return "Python ran out of memory: use --batch-days N or a machine with more memory"
    return None
