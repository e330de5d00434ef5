"""The report's sections after the answer, each a function of the :class:`ReportInputs` returning its HTML:
overview (window, row and quarantine counts), adc, estimates (forest plot per policy), diagnostics (PI vs PI++),
validation (verdicts, Data Docs link), trend (the daily runs) and daily (``evaluate --by-day``)."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from . import figures
from .honest import honest_text, text_when
from .inputs import ReportInputs
from .markup import _esc, _missing, html_table, img
from .numbers import OFF_SCALE, alpha_table, diag_value, flatten_counts, truth_for_window, variance_reduction


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
    parts.append(_adc_not_identified(adc))
    parts.append(html_table(adc.sort_values(["method", "position"]) if "method" in adc.columns else adc, "adc",
                            ["position", "method", "interval_kind", "coefficient", "std_error", "ci_low", "ci_high",
                             "ads_used", "impressions_used", "dcg"],
                            cell_text={"coefficient": text_when("not identified")}))
    return "".join(parts)


def _adc_not_identified(adc: pd.DataFrame) -> str:
    """The positions the ADC table could not identify, said in words with the table's reason (the plot leaves
    them out and the table's cells say "not identified: <reason>"): one line per reason."""
    if "identified" not in adc.columns:
        return ""
    missing = adc[~adc["identified"].fillna(True).astype(bool)]
    if not len(missing):
        return ""
    items = []
    for reason, g in missing.groupby(missing["reason"].fillna("no reason recorded").astype(str), sort=False):
        positions = ", ".join(str(int(p)) for p in sorted(g["position"].unique()))
        methods = ", ".join(dict.fromkeys(g["method"].astype(str))) if "method" in g.columns else ""
        items.append(f'<li class="why" data-name="adc_not_identified">position(s) {_esc(positions)}'
                     f'{" (" + _esc(methods) + ")" if methods else ""}: not identified: {_esc(reason)}</li>')
    return '<ul class="honest">' + "".join(items) + "</ul>"


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
             "<p class=\"muted\">predicted (PI++ over PI) = P'(2 P&#772; - P') K (M - H) (seed 002, eq. 41); "
             "realized = n (SE<sub>base</sub><sup>2</sup> - SE<sup>2</sup>) on this window, for each estimator "
             "over the one it improves on.</p>",
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
