"""The top of the report: the answer first (issue 26, item 6).

One line per target policy: the recommended estimate of its value per event with its interval (the estimates'
``recommended`` flag), the logging policy's value (diagnostics ``logged_value`` +- ``logged_value_se``), the lift
over it, and the verdicts of the checks that bear on that estimate (the estimates' ``checks`` column). Then one
plot of every policy side by side, then the checks: failed and warned first, each passing check collapsed to one
line. A policy the data cannot identify reads "not identified: <reason>", an estimate without a finite interval
"no interval: <reason>": no number stands where the data support none.

Every value reaches the page through ``_esc``; the plot's texts are literal (plotting._literal).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .plotting import _err, _finite, _literal
from .markup import _esc, img
from .numbers import OFF_SCALE, diag_value, truth_for_window
from .honest import honest_text
from .decision import answer_lines
from .verdicts import checks_block, rank

ANSWER_CSS = """
#answer{margin-bottom:28px} td.why,li.why{color:#a33;font-style:italic;text-align:left}
table.answer{font-size:15px;width:100%} table.answer td,table.answer th{padding:6px 10px;vertical-align:top}
table.answer td.num{white-space:nowrap} table.answer th.policy{font-size:16px;background:#fafafa}
.est,.vs{font-size:12px;color:#555} .vs-above{color:#1a7f37} .vs-below{color:#a33}
.badge{display:inline-block;padding:1px 6px;margin:1px;border-radius:3px;font-size:12px;background:#eee}
.badge.verdict-pass{background:#e3f6e3} .badge.verdict-warn{background:#fff4cc} .badge.verdict-fail{background:#f9d6d6}
p.lead{font-size:15px} p.alert{background:#f9d6d6;padding:6px 10px;border-radius:3px}
p.decision{font-size:15px;margin:4px 0} div.decisions{margin:10px 0 14px 0}
div.check{border-left:4px solid #ccc;padding:2px 10px;margin:8px 0} div.check.verdict-fail{border-color:#d62728}
div.check.verdict-warn{border-color:#e0a800} div.check ul{margin:2px 0 6px 0;font-size:13px}
details.check{margin:3px 0} details.check summary{cursor:pointer}
"""
_STYLE = {"fail": ("#d62728", "a check it relies on failed"), "warn": ("#ff7f0e", "a check it relies on warned"),
          "not_run": ("#7f7f7f", "a check it relies on did not run"), "pass": ("#1f77b4", "its checks passed")}


def _tokens(checks) -> list[tuple[str, str]]:
    """``"b:pass d:fail"`` -> [("d", "fail"), ("b", "pass")], worst first."""
    if not isinstance(checks, str):
        return []
    pairs = [tuple(t.split(":", 1)) if ":" in t else (t, "") for t in checks.split()]
    return sorted(pairs, key=lambda kv: (rank(kv[1]), kv[0]))


def worst(checks) -> str:
    """fail, warn, not_run or pass: the worst verdict of a ``checks`` string (pass when it has none)."""
    ranks = [rank(v) for _, v in _tokens(checks)]
    return {0: "fail", 1: "warn", 2: "not_run"}.get(min(ranks), "pass") if ranks else "pass"


def _recommended(rows: pd.DataFrame) -> list[dict]:
    """A policy's recommended estimate(s): evaluate's flag; without one (an older table, or only an off-scale row
    flagged), the first identified estimate with a finite interval that is not a worst-case bound, passed checks
    first."""
    rows = rows[~rows["estimator"].isin(OFF_SCALE)]
    if "recommended" in rows.columns:
        flagged = [r for r in rows[rows["recommended"].fillna(False).astype(bool)].to_dict("records")
                   if honest_text(r) is None]
        if flagged:
            return flagged
    ok = [r for r in rows.to_dict("records") if honest_text(r) is None and r.get("interval_kind") != "bound"]
    return sorted(ok, key=lambda r: ":fail" in str(r.get("checks")))[:1]


def _estimate(r: dict, logged) -> dict:
    value, lo, hi = (float(r[c]) for c in ("value", "ci_low", "ci_high"))
    line = {"status": "ok", "estimator": r["estimator"], "interval_kind": r.get("interval_kind"),
            "level": r.get("level"), "value": value, "ci_low": lo, "ci_high": hi, "checks": r.get("checks"),
            "lift": None, "lift_rel": None, "vs_logged": None}
    if _finite(logged):
        line["lift"] = value - logged
        line["lift_rel"] = (value - logged) / abs(logged) if logged else None
        line["vs_logged"] = "above" if lo > logged else "below" if hi < logged else "includes"
    return line


def _no_estimate(rows: pd.DataFrame) -> dict:
    """No recommended estimate: an identified one without a finite interval ("no interval"), else the reasons
    the data identify none ("not identified")."""
    rows = rows[~rows["estimator"].isin(OFF_SCALE)]
    recs = rows.to_dict("records")
    for r in recs:
        text = honest_text(r)
        if text and text.startswith("no interval") and _finite(r.get("value")):
            return {"status": "no_interval", "estimator": r["estimator"], "value": float(r["value"]),
                    "reason": text.split(": ", 1)[1], "checks": r.get("checks")}
    reasons = dict.fromkeys(f"{r['estimator']}: {(honest_text(r) or 'not identified: ').split(': ', 1)[1]}"
                            for r in recs if honest_text(r)) or {"no estimate in the table": None}
    return {"status": "not_identified", "reason": "; ".join(reasons)}


def policy_lines(estimates: pd.DataFrame | None, diagnostics: pd.DataFrame | None = None,
                 ground_truth: dict | None = None) -> list[dict]:
    """One dict per policy (two for a policy with two recommended rows, e.g. two datasets): status ``ok``,
    ``no_interval`` or ``not_identified``, the estimate, the logged value and the lift. Ordered: estimates with
    an interval by value (highest first), then those without one, then those the data cannot identify."""
    if estimates is None or not len(estimates):
        return []
    out = []
    for p in dict.fromkeys(estimates["policy_id"]):
        rows = estimates[estimates["policy_id"] == p]
        windows = rows["window"].dropna() if "window" in rows.columns else pd.Series(dtype=object)
        window = windows.iloc[0] if len(windows) else None
        logged = diag_value(diagnostics, p, "logged_value")
        logged = logged if logged is not None else diag_value(diagnostics, p, "pbar_hat")
        base = {"policy_id": p, "window": window, "logged_value": logged,
                "logged_value_se": diag_value(diagnostics, p, "logged_value_se"),
                "true_value": truth_for_window(ground_truth, p, window)}
        recs = _recommended(rows)
        out += [{**base, **_estimate(r, logged)} for r in recs] or [{**base, **_no_estimate(rows)}]
    order = {"ok": 0, "no_interval": 1, "not_identified": 2}
    return sorted(out, key=lambda ln: (order[ln["status"]], -ln.get("value", 0.0)))


# ---- the plot --------------------------------------------------------------------------------------------------
def _short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


@_literal
def policies_figure(lines: list[dict]) -> Figure | None:
    """Every policy side by side: its recommended estimate with its interval (colored by the worst verdict of the
    checks it relies on), the logging policy's logged value as a reference line (band: +-1.96 se), the true value
    when known (generated logs); a policy without an estimate is a line of text in its row."""
    if not lines:
        return None
    fig = Figure(figsize=(8.5, 0.55 * len(lines) + 1.9))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(lines))[::-1]
    pts = [float(ln[k]) for ln in lines for k in ("value", "ci_low", "ci_high", "true_value", "logged_value")
           if _finite(ln.get(k))]
    lo, hi = (min(pts), max(pts)) if pts else (0.0, 1.0)
    pad = 0.12 * (hi - lo) if hi > lo else max(abs(hi) * 0.1, 0.01)
    ax.set_xlim(lo - pad, hi + pad)
    labelled = set()

    def once(label):                     # each legend entry once
        if label in labelled:
            return "_"
        labelled.add(label)
        return label

    for yi, ln in zip(y, lines):
        if ln["status"] == "not_identified":
            ax.text(0.01, yi, _short("not identified: " + ln["reason"]), transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8, color="#a33", style="italic")
            continue
        color, label = _STYLE[worst(ln.get("checks"))]
        v = ln["value"]
        if ln["status"] == "ok":
            ax.errorbar([v], [yi], xerr=_err([v], [ln["ci_low"]], [ln["ci_high"]]), fmt="o", capsize=4,
                        color=color, label=once(label))
            text = f"{ln['estimator']}: {v:.4g} [{ln['ci_low']:.4g}, {ln['ci_high']:.4g}]"
        else:
            ax.plot([v], [yi], "o", color=color, label=once(label))
            text = _short(f"{ln['estimator']}: {v:.4g}, no interval: {ln['reason']}", 80)
        ax.annotate(text, (v, yi), xytext=(0, 7), textcoords="offset points", ha="center", fontsize=7)
        if _finite(ln.get("true_value")):
            ax.plot([ln["true_value"]], [yi], "*", color="#2ca02c", markersize=11, label=once("true value (generator)"))
    _logged_reference(ax, lines, y)
    ax.set_ylim(-0.7, len(lines) - 0.3)
    ax.set_yticks(y)
    ax.set_yticklabels([str(ln["policy_id"]) for ln in lines], fontsize=9)
    ax.set_xlabel("value per event: recommended estimate with its interval")
    ax.set_title("Every policy side by side, beside the logging policy")
    ax.grid(True, axis="x", alpha=0.3)
    axes_inches = (0.55 * len(lines) + 1.9) * 0.77          # the legend ~0.5 in below the axes, under the x label
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.55 / axes_inches), ncol=3, frameon=False)
    return fig


def _logged_reference(ax, lines: list[dict], y) -> None:
    """One line for the logged value (and its +-1.96 se band) when every policy shares it, else a tick per row."""
    logged = [(yi, ln["logged_value"], ln.get("logged_value_se")) for yi, ln in zip(y, lines)
              if _finite(ln.get("logged_value"))]
    if not logged:
        return
    values = {round(float(v), 12) for _, v, _ in logged}
    if len(values) == 1:
        _, v, se = logged[0]
        ax.axvline(float(v), color="k", linestyle="--", linewidth=1, label=f"logging policy (logged) = {v:.4g}")
        if _finite(se) and se > 0:
            ax.axvspan(v - 1.96 * se, v + 1.96 * se, color="k", alpha=0.08, linewidth=0)
        return
    for i, (yi, v, _) in enumerate(logged):
        ax.plot([v], [yi], "|", color="k", markersize=16, label="logging policy (logged)" if i == 0 else "_")


# ---- the HTML ----------------------------------------------------------------------------------------------------
def _num(name: str, policy, v, fmt: str = ".4g") -> str:
    """A number with its exact value in ``data-value`` (``data-name``/``data-policy`` say what it is)."""
    return (f'<span data-name="{name}" data-policy="{_esc(policy)}" data-value="{float(v)!r}">'
            f"{float(v):{fmt}}</span>")


def _badges(checks) -> str:
    pairs = _tokens(checks)
    if not pairs:
        return '<span class="muted">none recorded</span>'
    return " ".join(f'<span class="badge verdict-{_esc(v or "none")}" data-check="{_esc(k)}">{_esc(k)}:{_esc(v)}'
                    f"</span>" for k, v in pairs)


def _estimate_cells(ln: dict) -> str:
    p = ln["policy_id"]
    if ln["status"] == "not_identified":
        return f'<td colspan="2" class="why">not identified: {_esc(ln["reason"])}</td>'
    est = (f'<td class="num"><b>{_num("answer_value", p, ln["value"])}</b><br>'
           f'<span class="est" data-name="answer_estimator">{_esc(ln["estimator"])}</span></td>')
    if ln["status"] == "no_interval":
        return est + f'<td class="why">no interval: {_esc(ln["reason"])}</td>'
    level = ln.get("level")
    kind = (f"{float(level):.0%} " if _finite(level) else "") + str(ln.get("interval_kind") or "")
    return est + (f'<td class="num">[{_num("answer_ci_low", p, ln["ci_low"])}, '
                  f'{_num("answer_ci_high", p, ln["ci_high"])}]<br><span class="muted">{_esc(kind)}</span></td>')


def _logged_and_lift(ln: dict) -> str:
    p, v, se = ln["policy_id"], ln.get("logged_value"), ln.get("logged_value_se")
    if not _finite(v):
        return '<td class="why">unknown (no logged_value in the diagnostics)</td><td class="num">&ndash;</td>'
    logged = _num("answer_logged", p, v) + (f' <span class="muted">&plusmn; {1.96 * se:.2g}</span>'
                                            if _finite(se) else "")
    if not _finite(ln.get("lift")):
        return f'<td class="num">{logged}</td><td class="num">&ndash;</td>'
    rel = f" ({ln['lift_rel']:+.1%})" if _finite(ln.get("lift_rel")) else ""
    vs = {"above": "interval above it", "below": "interval below it",
          "includes": "interval includes it"}.get(ln.get("vs_logged"), "no interval to compare")
    return (f'<td class="num">{logged}</td><td class="num">{_num("answer_lift", p, ln["lift"], "+.4g")}{rel}<br>'
            f'<span class="vs vs-{_esc(ln.get("vs_logged") or "none")}">{vs}</span></td>')


def lines_table(lines: list[dict]) -> str:
    """The top lines: one ``<tr data-policy data-status>`` per policy."""
    truth = any(_finite(ln.get("true_value")) for ln in lines)
    head = ["policy", "recommended estimate", "interval", "logging policy (logged)", "lift over logging"] + \
        (["true value (generator)"] if truth else []) + ["checks bearing on it"]
    body = []
    for ln in lines:
        cells = [f'<th scope="row" class="policy">{_esc(ln["policy_id"])}</th>', _estimate_cells(ln),
                 _logged_and_lift(ln)]
        if truth:
            tv = ln.get("true_value")
            cells.append(f'<td class="num">{_num("answer_true", ln["policy_id"], tv)}</td>'
                         if _finite(tv) else '<td class="num">&ndash;</td>')
        cells.append(f'<td class="checks">{_badges(ln.get("checks")) if ln["status"] != "not_identified" else ""}'
                     "</td>")
        body.append(f'<tr data-policy="{_esc(ln["policy_id"])}" data-status="{ln["status"]}">{"".join(cells)}</tr>')
    return ('<table class="answer" data-answer="lines"><thead><tr>' + "".join(f"<th>{_esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(body) + "</tbody></table>")


def section_answer(inp) -> str:
    """The top of the page (``<div id="answer">``): the policies' lines, the side-by-side plot, the checks."""
    lines = policy_lines(inp.estimates, inp.diagnostics, inp.ground_truth)
    parts = ['<div id="answer"><h2>The answer</h2>']
    if lines:
        windows = sorted({str(ln["window"]) for ln in lines if ln.get("window")})
        failed = sum(ln["status"] != "not_identified" and worst(ln.get("checks")) == "fail" for ln in lines)
        parts.append(f'<p class="lead">Value per event of each target policy{" over " if windows else ""}'
                     f'{_esc(", ".join(windows))}: the recommended estimate with its interval, beside the logging '
                     "policy's logged value (&plusmn; 1.96 se).</p>")
        if failed:
            parts.append(f'<p class="alert">A check that bears on the recommended estimate failed for {failed} of '
                         f"{len(lines)} policies: read those numbers with the failed checks below.</p>")
        parts.append(lines_table(lines))
        parts.append(answer_lines(inp))          # against --baseline: since when, anytime-valid (report/decision.py)
        parts.append(img(policies_figure(lines), "every policy side by side with intervals"))
    else:
        parts.append('<p class="missing">No estimates given (pass --estimates).</p>')
    parts.append('<h3 id="answer-checks">Checks</h3>' + checks_block(inp.validation, inp.estimates) + "</div>")
    return "".join(parts)
