"""Re-ordering estimator (seed 001 section 4.2-4.4; MATH.md "Re-ordering estimator").

A target h_pi keeps the logged ads and re-orders them; j' = the new position of the ad logged at i. From the
``factored`` table (F(a,i,j) = sum of r pi(a at j) over logged slots (a, i)):

    V(h_pi) = sum_t sum_i r'_{t,i} C_{j'} = sum_{a,i,j} F(a,i,j) C_j / C_i          (unnormalized: total clicks)
    per event: V(h_pi) / n_events
    lift = V(h_pi) / (total logged clicks)   (expected clicks under the new order per click under the old)

Intervals (CLT, impression level; ADC treated as known here, estimators/propagate.py adds its uncertainty). V is a sum over the N logged impressions of
x = r c / C_i: Var = sum x^2 - (sum x)^2 / N with sum x^2 = sum G(a,i,j,j2) C_j C_j2 / C_i^2 (factored_sq).
The lift A/B (A = sum x, B = sum r) uses the delta method: Var = sum (x - R r)^2 / B^2 =
(sum x^2 - 2R sum x r + R^2 sum r^2) / B^2 with sum x r = sum H(a,i,j) C_j / C_i (H = sum r^2 pi, ``s_r2p``) and
sum r^2 from ``ad_position.c2``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from .distributions import normal_ppf

from .factored import _coef


def reorder_estimate(factored: pd.DataFrame, factored_sq: pd.DataFrame, ad_position: pd.DataFrame, C: np.ndarray,
                     n_events: float, level: float = 0.95) -> dict:
    """V(h_pi) (total and per event) and the lift, with CLT/delta intervals, for one policy's factored rows."""
    ratio_i = 1.0 / _coef(C, factored["pos_i"])
    cj = _coef(C, factored["pos_j"])
    A = float(np.sum(factored["s_rp"].to_numpy(float) * cj * ratio_i))
    XR = float(np.sum(factored["s_r2p"].to_numpy(float) * cj * ratio_i))
    g = factored_sq
    X2 = float(np.sum(g["s_r2pp"].to_numpy(float) * _coef(C, g["pos_j"]) * _coef(C, g["pos_j2"])
                      / _coef(C, g["pos_i"]) ** 2))
    N = float(ad_position["m"].sum())
    B = float(ad_position["c"].sum())
    R2 = float(ad_position["c2"].sum())
    var_A = max(X2 - A * A / N, 0.0) if N > 0 else math.nan
    z = normal_ppf(0.5 + level / 2)
    per_event = A / n_events if n_events > 0 else math.nan
    se_event = math.sqrt(var_A) / n_events if n_events > 0 else math.nan
    lift = A / B if B > 0 else math.nan
    se_lift = math.sqrt(max(X2 - 2 * lift * XR + lift * lift * R2, 0.0)) / B if B > 0 else math.nan
    return {"total": A, "total_std_error": math.sqrt(var_A), "value": per_event, "std_error": se_event,
            "ci_low": per_event - z * se_event, "ci_high": per_event + z * se_event,
            "lift": lift, "lift_std_error": se_lift, "lift_ci_low": lift - z * se_lift,
            "lift_ci_high": lift + z * se_lift, "clicks": B, "impressions": N}
