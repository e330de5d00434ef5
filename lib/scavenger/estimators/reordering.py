"""Re-ordering estimator (seed 001 section 4.2-4.4; MATH.md "Re-ordering estimator").

A target h_pi keeps the logged ads and re-orders them, deterministically or at random; j' = the new position of
the ad logged at i (at random: F weighs each of its positions by its probability). From the ``factored`` table
(F(a,i,j) = sum of r pi(a at j) over logged slots (a, i)):

    V(h_pi) = sum_t sum_i r'_{t,i} C_{j'} = sum_{a,i,j} F(a,i,j) C_j / C_i          (unnormalized: total clicks)
    per event: V(h_pi) / n_events
    lift = V(h_pi) / (total logged clicks)   (expected clicks under the new order per click under the old)

Intervals (CLT over EVENTS; ADC treated as known here, estimators/propagate.py adds its uncertainty). The slots of
an event share its user, context and decision, so the independent units are the n events, not the impressions. V is
a sum over events of X_t = sum over the event's slots i of x_i = r_i c_i / C_i: Var = sum_t X_t^2 - (sum X)^2 / n with
sum_t X_t^2 = sum P(i,j,k,j2) C_j C_j2 / (C_i C_k) over ``reorder_pairs`` (P = sums over events of r_i q_ij r_k q_kj2
over pairs of the event's slots, i = k included). The lift A/B (A = sum X, B = sum R, R_t the event's logged clicks)
uses the delta method: Var = sum_t (X_t - L R_t)^2 / B^2 = (sum X^2 - 2L sum X R + L^2 sum R^2) / B^2, sum X R and
sum R^2 from the same table (pos_j2 = 0; pos_j = pos_j2 = 0). Tables made without ``reorder_pairs``: the
impression-level sums (factored_sq, s_r2p, ad_position.c2), which leave out the within-event cross products.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from .distributions import normal_ppf

from .attention_decay import rewarded
from .factored import _coef


def event_sums(pairs: pd.DataFrame, C: np.ndarray) -> tuple[float, float, float]:
    """(sum_t X_t^2, sum_t X_t R_t, sum_t R_t^2) over events from one policy's ``reorder_pairs`` rows."""
    if pairs is None or not len(pairs):
        return 0.0, 0.0, 0.0
    j, j2 = pairs["pos_j"].to_numpy(int), pairs["pos_j2"].to_numpy(int)
    v = pairs["s_v"].to_numpy(float)
    ci, ck = _coef(C, pairs["pos_i"]), _coef(C, pairs["pos_k"])
    xx, xr, rr = (j > 0) & (j2 > 0), (j > 0) & (j2 == 0), (j == 0) & (j2 == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        X2 = float(np.sum(v[xx] * _coef(C, j[xx]) * _coef(C, j2[xx]) / (ci[xx] * ck[xx])))
        XR = float(np.sum(v[xr] * _coef(C, j[xr]) / ci[xr]))
    return X2, XR, float(np.sum(v[rr]))


def reorder_estimate(factored: pd.DataFrame, factored_sq: pd.DataFrame, ad_position: pd.DataFrame, C: np.ndarray,
                     n_events: float, level: float = 0.95, pairs: pd.DataFrame | None = None) -> dict:
    """V(h_pi) (total and per event) and the lift, with CLT/delta intervals over events (``pairs``: the policy's
    ``reorder_pairs`` rows; None: the impression-level sums of tables made without them), for one policy's
    factored rows."""
    ratio_i = 1.0 / _coef(C, factored["pos_i"])
    cj = _coef(C, factored["pos_j"])
    A = float(np.sum(factored["s_rp"].to_numpy(float) * cj * ratio_i))
    N = float(rewarded(ad_position)["m"].sum())   # impressions with a known reward: those B sums
    B = float(ad_position["c"].sum())
    if pairs is not None:
        X2, XR, R2 = event_sums(pairs, C)
        units = float(n_events)
    else:
        XR = float(np.sum(factored["s_r2p"].to_numpy(float) * cj * ratio_i))
        g = factored_sq
        X2 = float(np.sum(g["s_r2pp"].to_numpy(float) * _coef(C, g["pos_j"]) * _coef(C, g["pos_j2"])
                          / _coef(C, g["pos_i"]) ** 2))
        R2 = float(ad_position["c2"].sum())
        units = N
    var_A = max(X2 - A * A / units, 0.0) if units > 0 else math.nan
    z = normal_ppf(0.5 + level / 2)
    per_event = A / n_events if n_events > 0 else math.nan
    se_event = math.sqrt(var_A) / n_events if n_events > 0 else math.nan
    lift = A / B if B > 0 else math.nan
    se_lift = math.sqrt(max(X2 - 2 * lift * XR + lift * lift * R2, 0.0)) / B if B > 0 else math.nan
    return {"total": A, "total_std_error": math.sqrt(var_A), "value": per_event, "std_error": se_event,
            "ci_low": per_event - z * se_event, "ci_high": per_event + z * se_event,
            "lift": lift, "lift_std_error": se_lift, "lift_ci_low": lift - z * se_lift,
            "lift_ci_high": lift + z * se_lift, "clicks": B, "impressions": N}
