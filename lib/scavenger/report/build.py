"""Assemble the static HTML report: one self-contained file (CSS inline, plots as base64 PNG ``data:`` URIs, no
script and no network access needed to view it).

Sections (each a ``<section id=...>``; every number is a ``<td data-value="repr(float)">`` so a test or a script
can read the exact values back): ``overview`` (data window, row counts, quarantine counts), ``adc``,
``estimates`` (forest plot per target policy, logging policy as reference line), ``diagnostics`` (PI vs PI++),
``validation`` (verdicts, messages, link to the Data Docs), ``trend`` (estimates over the daily windows), ``daily``
(each policy's one-day estimates with their intervals, from ``evaluate --by-day``'s estimates_by_day).
The page opens with the answer before them (``<div id="answer">``, report/answer.py): one line per policy, a plot of
every policy side by side, the checks with failed and warned first.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from . import figures
from .honest import honest_text, text_when
from .inputs import ReportInputs

SECTIONS = ("overview", "adc", "estimates", "daily", "diagnostics", "validation", "trend")
TITLES = {"overview": "Data window and row counts", "adc": "Attention-decay coefficients (ADC)",
          "estimates": "Target policy estimates", "diagnostics": "PI vs PI++ diagnostics",
          "validation": "Validation verdicts", "trend": "Trend over the daily windows",
          "daily": "Daily estimates (each day alone)"}
# estimators on another scale than "value per event": listed in tables, left out of forest plots and trends
OFF_SCALE = ("reorder_lift",)

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;color:#222}
h1{font-size:24px;margin-bottom:4px} h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin-top:22px} nav a{margin-right:14px} .muted{color:#666;font-size:13px}
table{border-collapse:collapse;margin:8px 0 16px 0;font-size:13px} th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3;text-align:left} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.verdict-pass{background:#e3f6e3} td.verdict-warn{background:#fff4cc} td.verdict-fail{background:#f9d6d6}
img{max-width:100%;border:1px solid #eee;margin:6px 0} .missing{color:#a33;font-style:italic}
td{overflow-wrap:anywhere} table[data-table="validation"]{width:100%;table-layout:fixed}
table[data-table="validation"] th:nth-child(1){width:14%} table[data-table="validation"] th:nth-child(2){width:20%}
table[data-table="validation"] th:nth-child(3),table[data-table="validation"] th:nth-child(4){width:8%}
table[data-table="validation"] th:nth-child(5){width:6%}
"""


# ---- small pure computations -------------------------------------------------------------------------------------
def window_days(window: str | None) -> list[str]:
    """Days of a window string ``YYYY-MM-DD..YYYY-MM-DD`` (one date alone is a one-day window)."""
    if not isinstance(window, str) or not window:
        return []
    a, _, b = window.partition("..")
    start = _dt.date.fromisoformat(a)
    end = _dt.date.fromisoformat(b) if b else start
    return [(start + _dt.timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


def truth_for_window(ground_truth: dict | None, policy_id: str | None, window: str | None) -> float | None:
    """True value of a target policy (or of the logging policy when ``policy_id`` is None) over a window:
    sum_d v_d n_d / sum_d n_d, with v_d the generator's realized per-day value and n_d its event count
    (ground_truth.json: policies[p].per_day, logging_policy.per_day, counts.per_day)."""
    if not ground_truth:
        return None
    if policy_id is None:
        per_day = {d: v["realized_value"] for d, v in ground_truth.get("logging_policy", {}).get("per_day", {}).items()}
    else:
        pol = ground_truth.get("policies", {}).get(policy_id)
        if pol is None:
            return None
        per_day = pol.get("per_day", {})
    counts = ground_truth.get("counts", {}).get("per_day", {})
    days = [d for d in window_days(window) if d in per_day and d in counts] if window else list(per_day)
    if not days:
        return None
    n = np.array([counts[d]["events"] for d in days], dtype=float)
    v = np.array([per_day[d] for d in days], dtype=float)
    return float(v @ n / n.sum()) if n.sum() > 0 else None


def diag_value(diagnostics: pd.DataFrame | None, policy_id: str, metric: str) -> float | None:
    """A policy-level metric of the evaluate ``diagnostics`` table (slot null), or None."""
    if diagnostics is None or not len(diagnostics):
        return None
    sub = diagnostics[(diagnostics["policy_id"] == policy_id) & (diagnostics["metric"] == metric)
                      & diagnostics["slot"].isna()]
    return float(sub["value"].iloc[0]) if len(sub) else None


def variance_reduction(estimates: pd.DataFrame | None, diagnostics: pd.DataFrame | None) -> pd.DataFrame:
    """Per policy: predicted n*MSE reduction of PI++ over PI, P'(2 Pbar - P') K (M - H) (seed 002 section 5,
    eq. 41; from the diagnostics table), and the realized one on this window, n (SE_PI^2 - SE_PI++^2) with
    SE the estimators' standard errors of the mean (so n SE^2 is the per-event sample variance)."""
    cols = ["policy_id", "n_events", "M", "H", "prior_mean", "predicted", "realized", "se_pi", "se_pi_plus_plus"]
    if estimates is None or not len(estimates):
        return pd.DataFrame(columns=cols)
    rows = []
    for p in dict.fromkeys(estimates["policy_id"]):
        e = estimates[estimates["policy_id"] == p]
        pi_row = e[e["estimator"] == "slate_pi"]
        pp_row = e[e["estimator"] == "slate_pi_plus_plus"]
        if not len(pi_row) or not len(pp_row):
            continue
        n = float(pi_row["n_events"].iloc[0])
        se_pi, se_pp = float(pi_row["std_error"].iloc[0]), float(pp_row["std_error"].iloc[0])
        rows.append({"policy_id": p, "n_events": n, "M": diag_value(diagnostics, p, "M"),
                     "H": diag_value(diagnostics, p, "H"), "prior_mean": diag_value(diagnostics, p, "prior_mean"),
                     "predicted": diag_value(diagnostics, p, "predicted_nmse_reduction"),
                     "realized": n * (se_pi ** 2 - se_pp ** 2), "se_pi": se_pi, "se_pi_plus_plus": se_pp})
    return pd.DataFrame(rows, columns=cols)


def alpha_table(diagnostics: pd.DataFrame | None) -> pd.DataFrame:
    """alpha_k per (policy, slot) from the diagnostics table (metric ``alpha``)."""
    if diagnostics is None or not len(diagnostics):
        return pd.DataFrame(columns=["policy_id", "slot", "value"])
    sub = diagnostics[(diagnostics["metric"] == "alpha") & diagnostics["slot"].notna()]
    return sub[["policy_id", "slot", "value"]].reset_index(drop=True)


def flatten_counts(counts: dict, prefix: str = "", depth: int = 3) -> list[tuple[str, float]]:
    """Numeric leaves of a result.json ``counts`` dict as (dotted.key, value); lists are skipped."""
    out = []
    for key, val in counts.items():
        name = f"{prefix}{key}"
        if isinstance(val, dict) and depth > 1:
            out += flatten_counts(val, name + ".", depth - 1)
        elif _is_num(val):
            out.append((name, val))
    return out


# ---- HTML helpers --------------------------------------------------------------------------------------------
def _esc(x) -> str:
    """Every value on the page: bounded (a 10 MiB id shows its first characters and its length), control
    characters escaped, HTML-escaped (safe.html_text)."""
    from ..safe import html_text

    return html_text("" if x is None else x)


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return '<td class="num" data-value="nan">&ndash;</td>'
    if _is_num(v):
        f = float(v)
        if isinstance(v, (int, np.integer)):
            return f'<td class="num" data-value="{int(v)}">{int(v):,}</td>'
        if math.isfinite(f) and f.is_integer() and abs(f) >= 1 and abs(f) < 1e15:
            text = f"{int(f):,}"
        else:
            text = f"{f:.4g}" if math.isfinite(f) else str(f)
        return f'<td class="num" data-value="{f!r}">{text}</td>'
    if isinstance(v, (list, tuple, np.ndarray)):
        return f"<td>{_esc(', '.join(str(x) for x in v))}</td>"
    return f"<td>{_esc(v)}</td>"


def html_table(df: pd.DataFrame | None, name: str, columns: list[str] | None = None,
               cell_class: dict | None = None, cell_text: dict | None = None) -> str:
    """A table with ``data-table=name``, one ``<tr>`` per row, numbers carrying their exact value; ``cell_text``
    {column: fn(row) -> text or None} shows a text in a cell instead (its ``data-value`` kept)."""
    if df is None or not len(df):
        return f'<p class="missing" data-table="{_esc(name)}">no rows</p>'
    columns = [c for c in (columns or list(df.columns)) if c in df.columns]
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    body = []
    for rec in df.to_dict("records"):
        cells = []
        for c in columns:
            td = _cell(rec[c])
            if cell_text and c in cell_text and (text := cell_text[c](rec)) is not None:
                td = td[:td.index(">") + 1].replace('class="num"', 'class="why"') + _esc(text) + "</td>"
            if cell_class and c in cell_class:
                td = td.replace("<td", f'<td class="{_esc(cell_class[c](rec[c]))}"', 1)
            cells.append(td.replace("<td", f'<td data-col="{_esc(c)}"', 1))
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table data-table="{_esc(name)}"><thead><tr>{head}</tr></thead><tbody>' + "".join(body)
            + "</tbody></table>")


def img(fig, alt: str) -> str:
    """A Figure as an inline base64 PNG (or a note when there is nothing to draw)."""
    if fig is None:
        return f'<p class="missing">no data for: {_esc(alt)}</p>'
    data = base64.b64encode(figures.to_png(fig)).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _missing(what: str, flag: str) -> str:
    return f'<p class="missing">No {what} given (pass {flag}).</p>'


# ---- sections ----------------------------------------------------------------------------------------------------
def _windows(inp: ReportInputs) -> list[tuple[str, str]]:
    """(source, window) pairs: each job's window (result.json) and the estimates' window column."""
    out = []
    for job, res in inp.results.items():
        w = (res.get("summary") or {}).get("window")
        ins = res.get("inputs") or {}
        if not w and (ins.get("from") or ins.get("to")):
            w = f"{ins.get('from') or ''}..{ins.get('to') or ''}"
        if w:
            out.append((job, w))
    if inp.estimates is not None and "window" in inp.estimates.columns:
        out += [("estimates", w) for w in inp.estimates["window"].dropna().unique() if w]
    return list(dict.fromkeys(out))


def section_overview(inp: ReportInputs) -> str:
    parts = []
    windows = _windows(inp)
    parts.append("<p>Data window: " + ("; ".join(f'{_esc(j)} <b data-window="{_esc(w)}">{_esc(w)}</b>'
                                                  for j, w in windows)
                                        if windows else '<span class="missing">unknown</span>') + "</p>")
    rows = []
    for job, res in inp.results.items():
        for key, val in flatten_counts(res.get("counts") or {}):
            rows.append({"job": job, "count": key, "value": val})
    parts.append("<h3>Row counts</h3>")
    parts.append(html_table(pd.DataFrame(rows, columns=["job", "count", "value"]), "row_counts"))
    runs = [{"job": j, "run_id": r.get("run_id"), "status": r.get("status"), "finished_at": r.get("finished_at")}
            for j, r in inp.results.items()]
    if runs:
        parts.append("<h3>Runs</h3>" + html_table(pd.DataFrame(runs), "runs"))
    parts.append("<h3>Quarantined rows</h3>")
    if inp.quarantine is not None:
        q = inp.quarantine
        total = int(q["rows"].sum()) if len(q) else 0
        parts.append(f'<p>Rows set aside by validation: <b data-value="{total}" data-name="quarantine_total">'
                     f"{total:,}</b></p>")
        parts.append(html_table(q, "quarantine"))
    else:
        parts.append(_missing("quarantine directory", "--validation pointing at a validate --out directory"))
    return "".join(parts)


def section_adc(inp: ReportInputs) -> str:
    if inp.adc is None:
        return _missing("ADC table", "--adc")
    adc = inp.adc
    kinds = list(dict.fromkeys(adc["interval_kind"])) if "interval_kind" in adc.columns else [None]
    true = (inp.ground_truth or {}).get("adc")
    parts = [img(figures.adc_figure(adc, kinds[0] or "delta", true), "ADC by position")]
    if true:
        parts.append("<p>Generator's true ADCs: " + ", ".join(
            f'<span data-name="true_adc" data-position="{i + 1}" data-value="{c!r}">C_{i + 1} = {c:.4g}</span>'
            for i, c in enumerate(true)) + "</p>")
    parts.append(html_table(adc.sort_values(["method", "position"]) if "method" in adc.columns else adc, "adc",
                            ["position", "method", "interval_kind", "coefficient", "std_error", "ci_low", "ci_high",
                             "ads_used", "impressions_used", "dcg"]))
    return "".join(parts)


def section_estimates(inp: ReportInputs) -> str:
    est = inp.estimates
    if est is None:
        return _missing("estimates table", "--estimates")
    parts = []
    for p in dict.fromkeys(est["policy_id"]):
        rows = est[est["policy_id"] == p]
        window = rows["window"].dropna().iloc[0] if "window" in rows.columns and rows["window"].notna().any() \
            else None
        logging_value = diag_value(inp.diagnostics, p, "pbar_hat")
        label = "logged mean reward"
        if logging_value is None and inp.ground_truth:
            logging_value, label = truth_for_window(inp.ground_truth, None, window), "logging policy (true)"
        true_value = truth_for_window(inp.ground_truth, p, window)
        parts.append(f'<h3 data-policy="{_esc(p)}">Policy {_esc(p)}</h3>')
        ref = []
        if logging_value is not None:
            ref.append(f'{_esc(label)}: <b data-name="logging_value" data-policy="{_esc(p)}" '
                       f'data-value="{logging_value!r}">{logging_value:.4g}</b>')
        if true_value is not None:
            ref.append(f'true value (generator): <b data-name="true_value" data-policy="{_esc(p)}" '
                       f'data-value="{true_value!r}">{true_value:.4g}</b>')
        if ref:
            parts.append("<p>" + "; ".join(ref) + "</p>")
        shown = rows[~rows["estimator"].isin(OFF_SCALE)]
        texts = [(r["estimator"], r.get("interval_kind"), honest_text(r)) for r in shown.to_dict("records")]
        plot_rows = shown[[not (t or "").startswith("not identified") for _, _, t in texts]]
        parts.append(img(figures.forest_figure(plot_rows, p, logging_value, label, true_value),
                         f"forest plot of {p}"))
        if any(t for _, _, t in texts):       # not drawn as empty rows: said in words
            parts.append('<ul class="honest">' + "".join(
                f'<li class="why" data-estimator="{_esc(e)}"><b>{_esc(e)}</b>'
                f'{" (" + _esc(k) + ")" if isinstance(k, str) and k and k != "none" else ""}: {_esc(t)}</li>'
                for e, k, t in texts if t) + "</ul>")
        table = rows.copy()
        if true_value is not None:
            table["covers_truth"] = [("yes" if lo <= true_value <= hi else "no") if pd.notna(lo) and pd.notna(hi)
                                     else "" for lo, hi in zip(table["ci_low"], table["ci_high"])]
        parts.append(html_table(table, f"estimates:{p}",
                                ["estimator", "interval_kind", "value", "std_error", "ci_low", "ci_high", "n_events",
                                 "supported_share", "window", "covers_truth", "note"],
                                cell_text={"value": text_when("not identified"), "ci_low": text_when("no interval")}))
    return "".join(parts)


def section_diagnostics(inp: ReportInputs) -> str:
    alpha = alpha_table(inp.diagnostics)
    vr = variance_reduction(inp.estimates, inp.diagnostics)
    if not len(alpha) and not len(vr):
        return _missing("slate diagnostics (PI / PI++ rows)", "--estimates of an evaluate run with the slate "
                        "estimators")
    parts = [img(figures.alpha_figure(alpha), "alpha_k per slot"),
             html_table(alpha.rename(columns={"value": "alpha"}), "alpha"),
             img(figures.variance_reduction_figure(vr), "predicted vs realized variance reduction"),
             "<p class=\"muted\">predicted = P'(2 P&#772; - P') K (M - H) (seed 002, eq. 41); realized = n "
             "(SE<sub>PI</sub><sup>2</sup> - SE<sub>PI++</sub><sup>2</sup>) on this window.</p>",
             html_table(vr, "variance_reduction")]
    return "".join(parts)


def _verdict_class(v) -> str:
    return f"verdict-{str(v).lower()}"


def section_validation(inp: ReportInputs, out_dir: str | None) -> str:
    if inp.validation is None:
        return _missing("validation table", "--validation")
    v = inp.validation
    parts = []
    if "verdict" in v.columns:
        counts = v["verdict"].value_counts()
        parts.append("<p>" + ", ".join(f'<span data-name="verdicts_{_esc(k)}" data-value="{int(n)}">{int(n)} '
                                        f"{_esc(k)}</span>" for k, n in counts.items()) + "</p>")
        if "check" in v.columns:
            by_check = (v.groupby(["check", "verdict"]).size().unstack(fill_value=0).reset_index())
            parts.append(html_table(by_check, "verdicts_by_check"))
    if inp.data_docs:
        target = os.path.relpath(inp.data_docs, out_dir) if out_dir else inp.data_docs
        parts.append(f'<p>Data Docs: <a id="data-docs-link" href="{_esc(Path(target).as_posix())}">'
                     f"{_esc(target)}</a></p>")
    else:
        parts.append('<p class="missing" id="data-docs-link">No Data Docs found beside the validation table.</p>')
    order = {"fail": 0, "warn": 1, "pass": 2}
    if "verdict" in v.columns:
        v = v.assign(_o=v["verdict"].map(order).fillna(3)).sort_values(["_o", "check"] if "check" in v.columns
                                                                         else ["_o"]).drop(columns="_o")
    table = html_table(v, "validation", ["check", "scope", "statistic", "threshold", "verdict", "message"],
                       cell_class={"verdict": _verdict_class})
    parts.append(f"<details><summary>All {len(v)} verdict rows, failed and warned first (each check in one line "
                 f'at the top: <a href="#answer-checks">Checks</a>)</summary>{table}</details>')
    return "".join(parts)


def section_trend(inp: ReportInputs) -> str:
    h = inp.history
    if h is None or not len(h):
        return _missing("history of daily runs", "--history ROOT or --root")
    h = h[~h["estimator"].isin(OFF_SCALE)]
    parts = [f'<p>{h["run_dt"].nunique()} daily runs: {_esc(h["run_dt"].min())} .. {_esc(h["run_dt"].max())}</p>']
    for p in dict.fromkeys(h["policy_id"]):
        sub = h[h["policy_id"] == p].sort_values(["estimator", "interval_kind", "run_dt"])
        parts.append(f'<h3 data-policy="{_esc(p)}">Policy {_esc(p)}</h3>')
        parts.append(img(figures.trend_figure(sub, p), f"trend of {p}"))
        parts.append(html_table(sub, f"trend:{p}", ["run_dt", "estimator", "interval_kind", "value", "ci_low",
                                                     "ci_high", "window", "dataset"],
                                cell_text={"value": text_when("not identified")}))
    return "".join(parts)


def section_daily(inp: ReportInputs) -> str:
    """Each policy's one-day estimates with their intervals (``evaluate --by-day``: estimates_by_day)."""
    d = inp.by_day
    if d is None or not len(d):
        return _missing("daily estimates", "--estimates of an evaluate run with --by-day")
    d = d[~d["estimator"].isin(OFF_SCALE) & d["identified"].astype(bool)]
    parts = [f'<p>{d["dt"].nunique()} days: {_esc(d["dt"].min())} .. {_esc(d["dt"].max())}; each day estimated '
             f'from its own statistics</p>']
    for p in dict.fromkeys(d["policy_id"]):
        sub = d[d["policy_id"] == p].sort_values(["estimator", "interval_kind", "dt"])
        parts.append(f'<h3 data-policy="{_esc(p)}">Policy {_esc(p)}</h3>')
        parts.append(img(figures.daily_figure(sub, p), f"daily estimates of {p}"))
        last = sorted(sub["dt"].astype(str).unique())[-31:]          # the table: the last 31 days
        parts.append(html_table(sub[sub["dt"].astype(str).isin(last)], f"daily:{p}",
                                ["dt", "estimator", "interval_kind", "value", "ci_low", "ci_high", "n_events",
                                 "reason"]))
    return "".join(parts)


def render_html(inp: ReportInputs, out_dir: str | None = None, title: str = "scavenger evaluation report") -> str:
    """The whole report as one HTML string (self-contained): the answer first, then the sections."""
    from .answer import ANSWER_CSS, section_answer

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    bodies = {
        "overview": section_overview(inp), "adc": section_adc(inp), "estimates": section_estimates(inp),
        "diagnostics": section_diagnostics(inp), "validation": section_validation(inp, out_dir),
        "trend": section_trend(inp), "daily": section_daily(inp),
    }
    nav = "".join(f'<a href="#{s}">{_esc(TITLES[s])}</a>' for s in SECTIONS)
    sections = "".join(f'<section id="{s}"><h2>{_esc(TITLES[s])}</h2>{bodies[s]}</section>' for s in SECTIONS)
    sources = "".join(f"<li>{_esc(k)}: {_esc(v)}</li>" for k, v in inp.sources.items())
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{CSS}{ANSWER_CSS}</style></head><body>"
            f"<h1>{_esc(title)}</h1><p class=\"muted\">generated {now}</p>{section_answer(inp)}"
            f"<nav>{nav}</nav>{sections}"
            f"<h2>Sources</h2><ul class=\"muted\">{sources}</ul></body></html>\n")


def write_report(inp: ReportInputs, out_dir: str, title: str = "scavenger evaluation report",
                 filename: str = "report.html") -> Path:
    """Write ``<out_dir>/report.html`` atomically; returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / filename
    tmp = out / f".{filename}.{os.getpid()}.tmp"
    tmp.write_text(render_html(inp, str(out), title), encoding="utf-8")
    os.replace(tmp, target)
    return target
