"""The report's plots: matplotlib (Agg canvas, no display, no global pyplot state) -> PNG bytes.

Every ``*_figure`` function takes a small pandas table and returns a Figure whose texts are literal (or None when
there is nothing to draw); :func:`to_png` renders it (plotting.py). The notebook calls the same functions and shows
the PNG (``IPython.display.Image``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .plotting import COLORS, _err, _finite, _literal, to_png  # noqa: F401  (to_png: the notebook's, as before)

__all__ = ["to_png", "adc_figure", "forest_figure", "alpha_figure", "variance_reduction_figure", "trend_figure",
           "daily_figure"]


@_literal
def adc_figure(adc: pd.DataFrame, interval_kind: str = "delta", true_adc=None) -> Figure | None:
    """ADC C_i by position, one series per method with its interval, the DCG reference 1/log_b(b+i-1) and, when
    known (generated logs), the true C_i."""
    if adc is None or not len(adc):
        return None
    table = adc
    if "interval_kind" in table.columns and (table["interval_kind"] == interval_kind).any():
        table = table[table["interval_kind"] == interval_kind]
    methods = list(dict.fromkeys(table["method"]))
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.6 / max(len(methods), 1)
    for j, method in enumerate(methods):
        sub = table[table["method"] == method].sort_values("position")
        x = sub["position"].to_numpy(dtype=float) + (j - (len(methods) - 1) / 2) * width
        ax.errorbar(x, sub["coefficient"], yerr=_err(sub["coefficient"], sub["ci_low"], sub["ci_high"]),
                    fmt="o", capsize=3, color=COLORS[j % len(COLORS)], label=method.replace("_", " "))
    if "dcg" in table.columns:
        ref = table.drop_duplicates("position").sort_values("position")
        ax.plot(ref["position"], ref["dcg"], "k--", marker="s", markersize=4, label="DCG 1/log_b(b+i-1)")
    if true_adc is not None and len(true_adc):
        k = int(table["position"].max())
        ax.plot(np.arange(1, min(k, len(true_adc)) + 1), list(true_adc)[:k], linestyle="none", marker="*",
                markersize=11, color="#444444", label="true C_i (generator)")
    positions = sorted(table["position"].astype(int).unique())
    ax.set_xticks(positions)
    ax.set_xlabel("position i (1 = top)")
    ax.set_ylabel("attention-decay coefficient C_i")
    ax.set_title("Attention-decay coefficients with %s intervals" % interval_kind)
    ax.axhline(1.0, color="#bbbbbb", linewidth=0.8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


@_literal
def forest_figure(rows: pd.DataFrame, policy_id: str, logging_value: float | None = None,
                  logging_label: str = "logging policy", true_value: float | None = None) -> Figure | None:
    """Forest plot: one row per (estimator, interval kind) with its interval; the logging policy's value as a
    reference line (and the ground truth when known)."""
    if rows is None or not len(rows):
        return None
    rows = rows.reset_index(drop=True)
    labels = [f"{e} ({k})" if isinstance(k, str) and k else str(e)
              for e, k in zip(rows["estimator"], rows.get("interval_kind", [""] * len(rows)))]
    fig = Figure(figsize=(7.5, 0.45 * len(rows) + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(rows))[::-1]
    for i, r in rows.iterrows():
        kind = r.get("interval_kind", "clt")
        color = {"clt": COLORS[0], "el": COLORS[1], "bound": COLORS[3], "bootstrap": COLORS[2]}.get(kind, COLORS[4])
        lo = r["ci_low"] if _finite(r["ci_low"]) else np.nan
        hi = r["ci_high"] if _finite(r["ci_high"]) else np.nan
        ax.errorbar([r["value"]], [y[i]], xerr=_err([r["value"]], [lo], [hi]), fmt="o", capsize=3, color=color)
        if not (_finite(lo) and _finite(hi)) and _finite(r["value"]):       # infinite or undefined: said so
            ax.annotate("no interval", (float(r["value"]), y[i]), xytext=(6, 4), textcoords="offset points",
                        fontsize=7, color="#a33")
    # x range from the point estimates, the CLT/bootstrap intervals and the reference lines; a much wider
    # Theorem 3/4 bound is clipped at the edge and its numbers are written beside it
    core = [float(v) for v in rows["value"] if _finite(v)]
    for _, r in rows.iterrows():
        if r.get("interval_kind", "clt") != "bound":
            core += [float(x) for x in (r["ci_low"], r["ci_high"]) if _finite(x)]
    core += [float(x) for x in (logging_value, true_value) if _finite(x)]
    if core:
        lo_x, hi_x = min(core), max(core)
        pad = 0.15 * (hi_x - lo_x) if hi_x > lo_x else max(abs(hi_x) * 0.1, 0.01)
        ax.set_xlim(lo_x - pad, hi_x + pad)
        for i, r in rows.iterrows():
            if _finite(r["ci_low"]) and _finite(r["ci_high"]) and (r["ci_low"] < lo_x - pad or r["ci_high"] > hi_x + pad):
                ax.annotate(f"[{float(r['ci_low']):.3g}, {float(r['ci_high']):.3g}] (clipped)", (1.0, y[i]),
                            xycoords=("axes fraction", "data"), xytext=(-4, 5), textcoords="offset points",
                            ha="right", fontsize=7, color="#a33")
    if _finite(logging_value):
        ax.axvline(float(logging_value), color="k", linestyle="--", linewidth=1,
                   label=f"{logging_label} = {float(logging_value):.4g}")
    if _finite(true_value):
        ax.axvline(float(true_value), color=COLORS[2], linestyle=":", linewidth=1.5,
                   label=f"true value = {float(true_value):.4g}")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("estimated value per event (expected slate reward)")
    ax.set_title(f"Policy {policy_id}: estimates with intervals")
    ax.grid(True, axis="x", alpha=0.3)
    if _finite(logging_value) or _finite(true_value):
        ax.legend(fontsize=8, loc="best")
    return fig


@_literal
def alpha_figure(alpha: pd.DataFrame) -> Figure | None:
    """alpha_k = E[Y_k^2] - 1 per slot, one group of bars per policy (seed 002: PI++'s weights use them)."""
    if alpha is None or not len(alpha):
        return None
    policies = list(dict.fromkeys(alpha["policy_id"]))
    slots = sorted(alpha["slot"].astype(int).unique())
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(len(policies), 1)
    for j, p in enumerate(policies):
        sub = alpha[alpha["policy_id"] == p].sort_values("slot")
        ax.bar(sub["slot"].astype(float) + (j - (len(policies) - 1) / 2) * width, sub["value"], width=width,
               color=COLORS[j % len(COLORS)], label=str(p))
    ax.set_xticks(slots)
    ax.set_xlabel("slot k")
    ax.set_ylabel("alpha_k = mean(Y_k^2) - 1")
    ax.set_title("PI++ diagnostics: alpha_k per slot")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


@_literal
def variance_reduction_figure(table: pd.DataFrame) -> Figure | None:
    """Predicted (where declared: PI++'s P'(2 Pbar - P') K (M - H)) vs realized (n (SE_base^2 - SE^2)) variance
    reduction of each estimator over the one it improves on."""
    if table is None or not len(table):
        return None
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["predicted"].astype(float), width=0.4, color=COLORS[0], label="predicted")
    ax.bar(x + 0.2, table["realized"].astype(float), width=0.4, color=COLORS[1], label="realized")
    ax.set_xticks(x)
    pairs = (zip(table["estimator"], table["improves_on"]) if {"estimator", "improves_on"} <= set(table.columns)
             else [("", "")] * len(table))
    ax.set_xticklabels([f"{p}\n{e} vs {b}" if e else p for p, (e, b) in zip(table["policy_id"].astype(str), pairs)],
                       fontsize=7, rotation=20)
    ax.set_xlabel("target policy, estimator vs the one it improves on")
    ax.set_ylabel("n x (variance of base - variance of estimator)")
    ax.set_title("variance reduction per event")
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


@_literal
def trend_figure(history: pd.DataFrame, policy_id: str) -> Figure | None:
    """A policy's estimates over the daily runs: value and interval band per estimator (x = run dt)."""
    if history is None or not len(history):
        return None
    sub = history[history["policy_id"] == policy_id]
    if "interval_kind" in sub.columns:  # Theorem 3/4 bounds are far wider than the CLT bands: table only
        sub = sub[sub["interval_kind"] != "bound"]
    if not len(sub):
        return None
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    for j, ((est, kind), g) in enumerate(sub.groupby(["estimator", "interval_kind"], sort=True, dropna=False)):
        g = g.sort_values("run_dt")
        x = pd.to_datetime(g["run_dt"])
        _dated_series(ax, x, g, j, "o", f"{est} ({kind})")
    from matplotlib import dates as mdates

    span = (pd.to_datetime(sub["run_dt"]).max() - pd.to_datetime(sub["run_dt"]).min()).days
    ax.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, span // 8 + 1)))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    return _dated_axes(fig, ax, "run date (end of the trailing window)",
                       f"Policy {policy_id}: estimates over the daily windows")


@_literal
def daily_figure(by_day: pd.DataFrame, policy_id: str) -> Figure | None:
    """A policy's one-day estimates (``evaluate --by-day``): per estimator its value by day and the band of its
    interval where the day has one (Theorem 3/4 bounds left to the table); the y range holds 96% of the points."""
    if by_day is None or not len(by_day):
        return None
    sub = by_day[(by_day["policy_id"] == policy_id) & (by_day["interval_kind"] != "bound")]
    if not len(sub):
        return None
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    for j, (est, g) in enumerate(sub.groupby("estimator", sort=True)):
        g = g.sort_values("dt")
        x = pd.to_datetime(g["dt"].astype(str))
        _dated_series(ax, x, g, j, ".", est)
    pts = np.concatenate([sub[c].astype(float).to_numpy() for c in ("value", "ci_low", "ci_high")])
    pts = pts[np.isfinite(pts)]
    if pts.size:
        lo, hi = np.quantile(pts, [0.02, 0.98])
        pad = 0.1 * (hi - lo) if hi > lo else 0.1
        ax.set_ylim(lo - pad, hi + pad)
    return _dated_axes(fig, ax, "day (each estimated from that day's statistics alone)",
                       f"Policy {policy_id}: daily estimates and their intervals")


def _dated_series(ax, x, g: pd.DataFrame, j: int, marker: str, label: str) -> None:
    """One estimator's values by date and the band of its interval (trend and daily plots)."""
    color = COLORS[j % len(COLORS)]
    ax.plot(x, g["value"].astype(float), marker=marker, color=color, label=label)
    ax.fill_between(x, g["ci_low"].astype(float), g["ci_high"].astype(float), color=color, alpha=0.12)


def _dated_axes(fig: Figure, ax, xlabel: str, title: str) -> Figure:
    """The labels, grid, dated x ticks and legend of a plot of estimates by date (trend and daily plots)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel("estimated value per event")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.autofmt_xdate()
    ax.legend(fontsize=7, loc="best", ncol=2)
    return fig
