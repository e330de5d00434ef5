"""The diagnostics table of an evaluation: per policy its decided events, coverage, shares of deterministic,
re-ordering and partial-slate events, the logged value; run-level notes (pipelines/evaluate.py)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import registry


def _partial_events(policy_events: pd.DataFrame, log_counts: pd.DataFrame) -> dict:
    """Per policy, its decided events whose row does not hold every position 1..K of the window (K = the largest
    k_max of its days). A day's n_partial counts against the K of the pass that scanned it, which lies between the
    day's k_max and the window's: every row of a day whose k_max is below the window's K is partial, else the
    pass's count holds. So the share does not depend on how the days were batched or stored."""
    pe = policy_events[[c for c in ("dt", "policy_id", "n_events", "n_partial") if c in policy_events.columns]]
    if not len(pe) or "n_partial" not in pe.columns:
        return {}
    if "dt" not in pe.columns or not len(log_counts) or "k_max" not in log_counts.columns:
        return pe.groupby("policy_id")["n_partial"].sum().astype(float).to_dict()
    k_day = pd.to_numeric(log_counts["k_max"], errors="coerce").groupby(log_counts["dt"]).max()
    short = pe["dt"].map(k_day).fillna(0).to_numpy(float) < float(k_day.max())
    n = np.where(short, pe["n_events"].to_numpy(float), pe["n_partial"].to_numpy(float))
    return pd.Series(n, index=pe["policy_id"].to_numpy()).groupby(level=0).sum().to_dict()


def diagnostics(stats, policies, family_rows: list, notes: list) -> pd.DataFrame:
    """``family_rows``: the rows the estimator families wrote (EstimateOptions.side["diagnostics"])."""
    ls = stats.table("log_summary")
    pe = stats.table("policy_events")
    n_logged = float(ls["n_events"].sum()) if len(ls) else 0.0
    rows = list(family_rows)
    logged = float(ls["s_r"].sum()) / n_logged if n_logged else np.nan
    logged_se = (np.sqrt(max(float(ls["s_r2"].sum()) / n_logged - logged ** 2, 0.0) / n_logged)
                 if n_logged > 1 else np.nan)
    partial = _partial_events(pe, stats.table("log_counts"))
    for p in policies:
        rec = pe[pe["policy_id"] == p].iloc[0]
        n = float(rec["n_events"])
        for metric, value in (("n_events_logged", n_logged), ("n_events_decided", n),
                              ("decision_coverage", n / n_logged if n_logged else np.nan),
                              ("deterministic_share", rec["n_deterministic"] / n if n else np.nan),
                              ("base_policy_share", rec["n_with_base"] / n if n else np.nan),
                              ("reorder_share", rec["n_reorder"] / n if n else np.nan),
                              ("partial_slate_share", partial.get(p, 0.0) / n if n else np.nan),
                              ("logged_value", logged), ("logged_value_se", logged_se)):
            rows.append({"policy_id": p, "metric": metric, "slot": None, "value": float(value)})
    unknown = int(ls["n_null_reward"].sum()) if len(ls) and "n_null_reward" in ls else 0
    if unknown:   # slots with a null reward beside a slate_reward: not in the ADC, factored or re-ordering sums
        rows.append({"policy_id": None, "metric": "slot_rewards_unknown", "slot": None, "value": float(unknown)})
    for n in notes:
        rows.append({"policy_id": None, "metric": "gate_note: " + n, "slot": None, "value": 1.0})
    diag = pd.DataFrame(rows, columns=list(registry.DIAGNOSTIC_COLUMNS))
    diag["slot"] = diag["slot"].astype("Int64")
    diag["value"] = diag["value"].astype(float)
    return diag
