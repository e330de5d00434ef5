"""The decision against a baseline: from ``running/`` (``evaluate --by-day --baseline``), each
target's running estimate with both bands (the fixed-horizon interval and the anytime-valid confidence sequence)
against the baseline, and the first day the sequence of the difference excludes 0: "soft beats logging since
2026-10-12, anytime-valid at 95%", or "not yet". The sequence is a running intersection (it only narrows), so once
it excludes 0 it does for every later day; its level holds however often one looks, the fixed-horizon interval's
does not.

Which estimator speaks for a target: its recommended one (the estimates' flag) when that has a difference, else
the one of the lowest recommend rank (registry) among those that have one; chosen from the declarations and the
gate, not from the bands. Every value reaches the page through ``_esc``; the plot's texts are literal.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .markup import _esc, html_table, img
from .plotting import COLORS, _finite, _literal


def _rank(name: str) -> int:
    from .. import registry

    try:
        return registry.get(registry.base_of(name)).recommend_rank
    except Exception:  # noqa: BLE001 - an estimator this checkout does not declare: last
        return 10_000


def _chosen(diffs: pd.DataFrame, recommended: set) -> str | None:
    """The estimator whose difference speaks for the target (module docstring)."""
    names = sorted(set(diffs["estimator"]))
    if not names:
        return None
    flagged = [e for e in names if e in recommended]
    return flagged[0] if flagged else min(names, key=lambda e: (_rank(e), e))


def decisions(running: pd.DataFrame | None, estimates: pd.DataFrame | None = None) -> list[dict]:
    """One dict per (source, target, baseline): the estimator, ``since`` (the first day its sequence of the
    difference excludes 0, or None), ``direction`` (beats / trails), the level and the last day's band."""
    if running is None or not len(running) or "baseline_id" not in running.columns:
        return []
    run = running.assign(dt=running["dt"].astype(str), source=running.get("source", ""))
    diffs = run[run["baseline_id"].notna()]
    out = []
    for (src, p, b), g in diffs.groupby(["source", "policy_id", "baseline_id"], sort=False, dropna=False):
        rec = set()
        if estimates is not None and "recommended" in estimates.columns:
            mine = estimates[(estimates["policy_id"] == p) & estimates["recommended"].fillna(False).astype(bool)]
            rec = set(mine["estimator"])
        e = _chosen(g, rec)
        rows = g[g["estimator"] == e].sort_values("dt")
        lo, hi = rows["cs_low"].astype(float).to_numpy(), rows["cs_high"].astype(float).to_numpy()
        above, below = np.flatnonzero(lo > 0), np.flatnonzero(hi < 0)
        first = min([*above[:1], *below[:1]], default=None)
        last = rows.iloc[-1]
        out.append({"source": src, "policy_id": p, "baseline_id": b, "estimator": e, "level": float(last["level"]),
                    "since": None if first is None else rows["dt"].iloc[first],
                    "direction": None if first is None else ("beats" if lo[first] > 0 else "trails"),
                    "last_dt": last["dt"], "cs_low": float(last["cs_low"]), "cs_high": float(last["cs_high"]),
                    "cs_reason": last.get("cs_reason"), "value": float(last["value"])})
    return out


def sentence(d: dict) -> str:
    """The decision in words (plain text; escape it where it meets markup)."""
    level = f"{d['level']:.0%}" if _finite(d.get("level")) else "the run's level"
    if d["since"] is not None:
        return f"{d['policy_id']} {d['direction']} {d['baseline_id']} since {d['since']}, anytime-valid at {level}"
    if _finite(d["cs_low"]) and _finite(d["cs_high"]):
        return (f"{d['policy_id']} vs {d['baseline_id']}: not yet (the {level} confidence sequence of the "
                f"difference holds 0 on every day through {d['last_dt']}: [{d['cs_low']:.4g}, {d['cs_high']:.4g}])")
    why = d.get("cs_reason") if isinstance(d.get("cs_reason"), str) else "no band on the last day"
    return f"{d['policy_id']} vs {d['baseline_id']}: not yet (no confidence sequence on {d['last_dt']}: {why})"


def sentence_html(d: dict, many_sources: bool = False) -> str:
    """The sentence as one ``<p data-name="decision">`` (its day in ``data-since``, empty when not yet)."""
    where = f"[{_esc(d['source'])}] " if many_sources else ""
    detail = (f" ({_esc(d['estimator'])}; on {_esc(d['last_dt'])} the sequence of the difference is "
              f"[{d['cs_low']:.4g}, {d['cs_high']:.4g}])" if d["since"] is not None else f" ({_esc(d['estimator'])})")
    return (f'<p class="decision" data-name="decision" data-policy="{_esc(d["policy_id"])}" '
            f'data-baseline="{_esc(d["baseline_id"])}" data-estimator="{_esc(d["estimator"])}" '
            f'data-since="{_esc(d["since"] or "")}"><b>{where}{_esc(sentence(d))}</b>'
            f'<span class="muted">{detail}</span></p>')


def _bands(ax, x, g: pd.DataFrame, color: str, label: str) -> None:
    """A running series: its value, the interval's band and the sequence's (lighter, dashed edges)."""
    ax.plot(x, g["value"].astype(float), marker=".", color=color, label=label)
    ax.fill_between(x, g["ci_low"].astype(float), g["ci_high"].astype(float), color=color, alpha=0.25,
                    label=f"{label}: interval (fixed horizon)")
    lo, hi = g["cs_low"].astype(float), g["cs_high"].astype(float)
    ax.fill_between(x, lo, hi, color=color, alpha=0.08, label=f"{label}: confidence sequence (anytime)")
    ax.plot(x, lo, color=color, linestyle="--", linewidth=0.8)
    ax.plot(x, hi, color=color, linestyle="--", linewidth=0.8)


@_literal
def running_figure(run: pd.DataFrame, d: dict) -> Figure | None:
    """Top: the target's running estimate with both bands, and the baseline's running value (a target's own
    running estimate, or what the logs earned on the same events: estimate minus difference). Bottom: the
    difference with both bands, 0 (the baseline) and the first day the sequence excludes it."""
    e, p, b = d["estimator"], d["policy_id"], d["baseline_id"]
    mine = run[(run["estimator"] == e) & (run["policy_id"] == p)].sort_values("dt")
    plain, diff = mine[mine["baseline_id"].isna()], mine[mine["baseline_id"] == b]
    if not len(diff):
        return None
    fig = Figure(figsize=(8.0, 6.2))
    top = fig.add_subplot(2, 1, 1)
    bottom = fig.add_subplot(2, 1, 2, sharex=top)
    if len(plain):
        x = pd.to_datetime(plain["dt"])
        _bands(top, x, plain, COLORS[0], f"{p}")
        base = plain.merge(diff[["dt", "value"]], on="dt", suffixes=("", "_d"))
        top.plot(pd.to_datetime(base["dt"]), base["value"].astype(float) - base["value_d"].astype(float),
                 color="k", linestyle=":", marker=".", label=f"{b} (same events)")
    top.set_ylabel("value per event")
    top.set_title(f"{p} ({e}) since the window's first day, against {b}")
    _bands(bottom, pd.to_datetime(diff["dt"]), diff, COLORS[3], f"{p} - {b}")
    bottom.axhline(0.0, color="k", linewidth=1)
    if d["since"] is not None:
        bottom.axvline(pd.to_datetime(d["since"]), color=COLORS[2], linewidth=1.5,
                       label=f"sequence excludes 0 since {d['since']}")
    bottom.set_ylabel("difference per event")
    bottom.set_xlabel("last day of the running window (first day .. this day)")
    pts = np.concatenate([diff[c].astype(float).to_numpy() for c in ("value", "ci_low", "ci_high")] + [[0.0]])
    pts = pts[np.isfinite(pts)]
    if pts.size:           # the y range from the point and the interval; a sequence still wide at first is cut
        lo, hi = pts.min(), pts.max()
        pad = 0.6 * (hi - lo) if hi > lo else 0.1
        bottom.set_ylim(lo - pad, hi + pad)
    from matplotlib import dates as mdates

    days = pd.to_datetime(diff["dt"])
    bottom.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, (days.max() - days.min()).days // 8 + 1)))
    bottom.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    return fig


def section_running(inp) -> str:
    """Each target against the baseline: the sentence, the figure, and the chosen estimator's running rows."""
    run = inp.running
    if run is None or not len(run):
        return ('<p class="missing">No running table given (pass --estimates of an evaluate run with --by-day, '
                "and --baseline for the decision).</p>")
    found = decisions(run, inp.estimates)
    if not found:
        return ('<p class="missing">The running table holds no difference (pass evaluate --baseline POLICY, or '
                "logging, for the decision against it).</p>")
    run = run.assign(dt=run["dt"].astype(str), source=run.get("source", ""))
    many = run["source"].nunique() > 1
    parts = []
    for d in found:
        sub = run[run["source"] == d["source"]]
        parts.append(f'<h3 data-policy="{_esc(d["policy_id"])}">{_esc(d["policy_id"])} against '
                     f'{_esc(d["baseline_id"])}</h3>' + sentence_html(d, many))
        parts.append(img(running_figure(sub, d), f"running estimate of {d['policy_id']} against {d['baseline_id']}"))
        rows = sub[(sub["policy_id"] == d["policy_id"]) & (sub["estimator"] == d["estimator"])
                   & (sub["baseline_id"].isna() | (sub["baseline_id"] == d["baseline_id"]))]
        parts.append(html_table(rows.sort_values(["dt", "baseline_id"], na_position="first").tail(62),
                                f"running:{d['policy_id']}:{d['baseline_id']}",
                                ["dt", "baseline_id", "estimator", "value", "ci_low", "ci_high", "cs_low", "cs_high",
                                 "n_events", "cs_reason"]))
    return "".join(parts)


def answer_lines(inp) -> str:
    """The decisions for the top of the page (empty without a running table holding differences)."""
    found = decisions(inp.running, inp.estimates)
    if not found:
        return ""
    many = len({d["source"] for d in found}) > 1
    return ('<div class="decisions" data-answer="decisions">' + "".join(sentence_html(d, many) for d in found)
            + '<p class="muted">The day each target\'s confidence sequence of the difference first excludes 0: '
              'valid however often the days are looked at (<a href="#running">running estimates</a>).</p></div>')
