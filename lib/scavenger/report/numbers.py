"""The report's numbers that are not read straight from a table: the true value of a window (generated logs), the
policy-level diagnostics, PI vs PI++ variance reduction (seed 002 eq. 41), alpha_k per slot, result.json counts."""
from __future__ import annotations

import datetime as _dt

import numpy as np
import pandas as pd

# the ratio row earlier versions wrote into the estimates table (re-ordering's lift, now in the reorder row's note):
# an old output's rows are listed in its tables and left out of its plots
OFF_SCALE = ("reorder_lift",)


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
    """Per policy and per estimator that declares the one it improves on (registry ``improves_on``, e.g. PI++ over
    PI): the realized n*MSE reduction on this window, n (SE_base^2 - SE^2) with SE the estimators' standard errors
    of the mean (n SE^2 is the per-event sample variance), and the predicted one where the declaration names a
    diagnostics metric for it (PI++: P'(2 Pbar - P') K (M - H), seed 002 section 5, eq. 41)."""
    from .. import registry

    cols = ["policy_id", "estimator", "improves_on", "n_events", "M", "H", "prior_mean", "predicted", "realized",
            "se_base", "se"]
    if estimates is None or not len(estimates):
        return pd.DataFrame(columns=cols)
    pairs = [e for e in registry.ESTIMATORS.values() if e.improves_on]
    rows = []
    for p in dict.fromkeys(estimates["policy_id"]):
        e = estimates[estimates["policy_id"] == p]
        for spec in pairs:
            base_row, own = e[e["estimator"] == spec.improves_on], e[e["estimator"] == spec.name]
            if not len(base_row) or not len(own):
                continue
            n = float(base_row["n_events"].iloc[0])
            se_base, se = float(base_row["std_error"].iloc[0]), float(own["std_error"].iloc[0])
            predicted = diag_value(diagnostics, p, spec.predicted_reduction) if spec.predicted_reduction else None
            rows.append({"policy_id": p, "estimator": spec.name, "improves_on": spec.improves_on, "n_events": n,
                         "M": diag_value(diagnostics, p, "M"), "H": diag_value(diagnostics, p, "H"),
                         "prior_mean": diag_value(diagnostics, p, "prior_mean"), "predicted": predicted,
                         "realized": n * (se_base ** 2 - se ** 2), "se_base": se_base, "se": se})
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
        elif is_num(val):
            out.append((name, val))
    return out


def is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
