"""Assemble the static HTML report: one self-contained file (CSS inline, plots as base64 PNG ``data:`` URIs, no
script and no network access needed to view it).

Sections (each a ``<section id=...>``; every number is a ``<td data-value="repr(float)">`` so a test or a script
can read the exact values back): ``overview`` (data window, row counts, quarantine counts), ``adc``,
``estimates`` (forest plot per target policy, logging policy as reference line), ``diagnostics`` (PI vs PI++),
``validation`` (verdicts, messages, link to the Data Docs), ``trend`` (estimates over the daily windows), ``daily``
(each policy's one-day estimates with their intervals, from ``evaluate --by-day``'s estimates_by_day), ``running``
(each target's running estimate and its difference against ``--baseline`` with both bands, and the first day the
confidence sequence excludes the baseline: report/decision.py).
The page opens with the answer before them (``<div id="answer">``, report/answer.py): one line per policy, a plot of
every policy side by side, the checks with failed and warned first.
"""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from .inputs import ReportInputs
from .markup import _esc, html_table, img  # noqa: F401  (html_table, img: importable from here as before)
# the report's numbers, importable from here as before (api.py, the notebook and the tests do)
from .numbers import (OFF_SCALE, alpha_table, diag_value, flatten_counts, truth_for_window,  # noqa: F401
                      variance_reduction, window_days)
from .sections import (section_adc, section_daily, section_diagnostics, section_estimates, section_overview,
                       section_trend, section_validation)

SECTIONS = ("overview", "adc", "estimates", "running", "daily", "diagnostics", "validation", "trend")
TITLES = {"overview": "Data window and row counts", "adc": "Attention-decay coefficients (ADC)",
          "estimates": "Target policy estimates", "diagnostics": "PI vs PI++ diagnostics",
          "validation": "Validation verdicts", "trend": "Trend over the daily windows",
          "daily": "Daily estimates (each day alone)",
          "running": "Running estimates against the baseline (first day through each day)"}

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


def render_html(inp: ReportInputs, out_dir: str | None = None, title: str = "scavenger evaluation report") -> str:
    """The whole report as one HTML string (self-contained): the answer first, then the sections."""
    from .answer import ANSWER_CSS, section_answer
    from .decision import section_running

    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    bodies = {
        "overview": section_overview(inp), "adc": section_adc(inp), "estimates": section_estimates(inp),
        "diagnostics": section_diagnostics(inp), "validation": section_validation(inp, out_dir),
        "trend": section_trend(inp), "daily": section_daily(inp), "running": section_running(inp),
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
