"""Factored estimator under the factoring assumption (seed 001 section 4.2; MATH.md "Factoring assumption").

P(click | x, ad a at i) = C_i P(x, a). A logged slot (ad a at position i, reward r) gives r' = r / C_i; the target
puts a at position j with probability pi(a at j | x) (deterministic: one j or none; C_0 = 0), so its expected
coefficient is c = sum_j pi(a at j | x) C_j. With T_a = impressions of a at any position:

    V(h) = sum_t sum_i r'_{t,i} c_{t,i} / T_{a_{t,i}} = sum_a S_a / T_a,
    S_a = sum_{i,j} F(a,i,j) C_j / C_i,   F(a,i,j) = sum of r pi(a at j) over logged slots (a, i)   [table factored]

so a new ADC vector is applied to the stored F without a rescan. A slot whose reward is null (its row carries a
slate_reward) is unknown: it is in neither F nor T_a (policy_ads' m_r).

Interval (CLT, impression level). V = sum_a mean over the T_a impressions of a of x = r c / C_i. Treating T_a
as fixed and impressions as independent (slots of one event are assumed conditionally independent given x, as in
the factoring model), Var V = sum_a s2_a / T_a with s2_a = (Q_a - S_a^2 / T_a) / (T_a - 1) and
    Q_a = sum x^2 = sum_{i,j,j2} G(a,i,j,j2) C_j C_j2 / C_i^2,  G = sum r^2 pi(a at j) pi(a at j2)  [factored_sq]
which is exact for any C (deterministic targets: G(a,i,j,j) = sum r^2 over slots the target places at j).
The ADC vector is treated as known here; estimators/propagate.py adds its uncertainty (joint delta method).

Eligibility strata: where a context key partitions the ads (each ad shown under one value only, e.g. OBD's
campaigns), the logged ad of stratum s is independent of x only within s, and sum_{a in s} S_a / T_a estimates
the value given s. Then V = sum_s (T_s / T) sum_{a in s} S_a / T_a with T_s the events of stratum s
(``stratum_weights``: kappa_a = w_a / T_a, w_a = T_s(a) / T), and Var V = sum_a w_a^2 s2_a / T_a. T_s and T are
counted among the events the policy decides, as T_a is (policy_ads).

Unsupported mass: the target's expected attention on ads never logged (T_a = 0) is
sum_{a: T_a = 0} sum_j P(a, j) C_j / sum_{a, j} P(a, j) C_j with P(a, j) = sum_t pi(a at j | x_t) [target_placements].
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from .attention_decay import rewarded
from .distributions import normal_ppf


def _coef(C: np.ndarray, pos) -> np.ndarray:
    """C_pos for 1-based positions (C_0 = 0; positions beyond len(C) -> nan)."""
    C0 = np.concatenate([[0.0], np.asarray(C, dtype=float)])
    pos = np.asarray(pos, dtype=int)
    out = np.full(pos.shape, np.nan)
    ok = (pos >= 0) & (pos < C0.size)
    out[ok] = C0[pos[ok]]
    return out


def ad_impressions(ad_position: pd.DataFrame) -> pd.Series:
    """T_a: impressions of each ad at any position whose reward is known (m_r, adc.rewarded: the impressions S_a
    sums over), summed over logging policies."""
    return rewarded(ad_position).groupby("ad_id")["m"].sum().astype(float)


def stratum_weights(ad_position: pd.DataFrame, min_per_ad: float = 20.0) -> pd.Series | None:
    """w_a = T_s(a) / T per ad when the calibration key partitions the ads over the whole window (>= 2 values, every
    ad under one value, >= 2 ads per value, >= ``min_per_ad`` impressions per ad on average: the rule of check a
    and e, checks.calibration.partition_strata); T_s = sum over the ads of s of ev (every logged event; a policy's
    decided events: :func:`strata_shares` of its policy_ads rows). None otherwise."""
    strata = ad_strata(ad_position, min_per_ad)
    return None if strata is None else strata_shares(strata, ad_position)


def ad_strata(ad_position: pd.DataFrame, min_per_ad: float = 20.0) -> pd.Series | None:
    """ad_id -> its eligibility stratum when the calibration key partitions the ads over the whole window (see
    :func:`stratum_weights`), None otherwise."""
    from ..checks.calibration import partition_strata

    if not len(ad_position) or "ev" not in ad_position.columns or "stratum_min" not in ad_position.columns:
        return None
    lo, hi = ad_position["stratum_min"], ad_position["stratum_max"]
    if (lo.notna() & hi.notna() & (lo != hi)).any():
        # a row shows its ad under two values: that ad is split, so no partition (as partition_strata finds, in a
        # fraction of its time: every by-day window and running/ prefix asks)
        return None
    slot = ad_position.assign(logging_policy="*", n=ad_position["m"])
    return partition_strata(slot, min_per_ad).get("*")


def strata_shares(strata: pd.Series, events: pd.DataFrame) -> pd.Series:
    """w_a = T_s(a) / T with T_s = sum of ev over the rows of the ads of s in ``events`` (0 for a stratum without
    any) and T = sum of ev over all its rows."""
    ev = events.groupby("ad_id")["ev"].sum().astype(float) if len(events) else pd.Series(dtype=float)
    total = float(ev.sum())
    share = ev.groupby(strata.reindex(ev.index)).sum() / total if total > 0 else pd.Series(dtype=float)
    weights = strata.map(share).fillna(0.0).astype(float)
    weights.attrs["strata"] = int(strata.nunique())
    return weights


def kappa(T_a: pd.Series, weights: pd.Series | None = None) -> pd.Series:
    """kappa_a = w_a / T_a (w_a = 1 without eligibility strata): V = sum_a kappa_a S_a."""
    k = 1.0 / T_a.where(T_a > 0)
    return (k if weights is None else k * weights.reindex(T_a.index)).fillna(0.0)


def per_ad_sums(factored: pd.DataFrame, factored_sq: pd.DataFrame, C: np.ndarray) -> pd.DataFrame:
    """S_a = sum F C_j / C_i and Q_a = sum G C_j C_j2 / C_i^2 per ad (one policy's rows)."""
    f, g = factored, factored_sq
    S = Q = pd.Series(dtype=float)      # no clicked row for this policy (an empty day's table has no columns)
    if len(f):
        s = f["s_rp"].to_numpy(float) * _coef(C, f["pos_j"]) / _coef(C, f["pos_i"])
        S = pd.Series(s, index=f["ad_id"].to_numpy()).groupby(level=0).sum()
    if len(g):
        q = g["s_r2pp"].to_numpy(float) * _coef(C, g["pos_j"]) * _coef(C, g["pos_j2"]) / _coef(C, g["pos_i"]) ** 2
        Q = pd.Series(q, index=g["ad_id"].to_numpy()).groupby(level=0).sum()
    out = pd.DataFrame({"S": S, "Q": Q}).fillna(0.0)
    out.index.name = "ad_id"
    return out


def uncovered_positions(factored: pd.DataFrame, factored_sq: pd.DataFrame, C: np.ndarray,
                        placements: pd.DataFrame | None = None) -> list[int]:
    """Positions j >= 1 holding mass of the target (pos_j, pos_j2; placements' s_p > 0) or a logged click (pos_i)
    where the ADC vector has no coefficient (j > len(C), or C_j not a number): _coef gives NaN there, which the sums
    would drop as if C_j were 0."""
    cols = [(factored, ("pos_i", "pos_j"), "s_rp"), (factored_sq, ("pos_i", "pos_j", "pos_j2"), "s_r2pp"),
            (placements, ("pos_j",), "s_p")]
    out: set[int] = set()
    for t, names, mass in cols:
        if t is None or not len(t) or mass not in t.columns:
            continue
        t = t[t[mass].to_numpy(float) != 0]
        for c in names:
            pos = t[c].to_numpy(int) if c in t.columns else np.zeros(0, dtype=int)
            pos = pos[pos >= 1]
            out.update(int(j) for j in pos[~np.isfinite(_coef(C, pos))])
    return sorted(out)


def uncovered_reason(positions: list[int], C: np.ndarray) -> str:
    """Why the factored estimate is not identified when the ADC vector lacks positions the target uses."""
    where = ", ".join(map(str, positions))
    return (f"the ADC vector (C_1..C_{len(C)}) has no coefficient at position(s) {where}, where the target places ads "
            f"(or the logs show clicks): the estimate would count that attention as C = 0; pass --adc with an ADC "
            f"table covering position(s) {where}, or evaluate a target that uses positions 1..{len(C)} only")


def factored_estimate(factored: pd.DataFrame, factored_sq: pd.DataFrame, T_a: pd.Series, C: np.ndarray,
                      placements: pd.DataFrame | None = None, level: float = 0.95,
                      weights: pd.Series | None = None) -> dict:
    """One policy's factored estimate from its rows of the factored tables, T_a and the ADC vector C_1..C_K;
    ``weights``: w_a of eligibility strata (``stratum_weights``), else 1. Not identified (``identified`` False, NaN,
    ``reason``) when the target or a logged click uses a position without a coefficient
    (:func:`uncovered_positions`)."""
    if missing := uncovered_positions(factored, factored_sq, C, placements):
        nan = math.nan
        return {"value": nan, "std_error": nan, "ci_low": nan, "ci_high": nan, "unsupported_share": nan,
                "supported_share": nan, "identified": False, "reason": uncovered_reason(missing, C)}
    sums = per_ad_sums(factored, factored_sq, C)
    T = T_a.reindex(sums.index).fillna(0.0).to_numpy(float)
    w = np.ones(len(T)) if weights is None else weights.reindex(sums.index).fillna(0.0).to_numpy(float)
    S, Q = sums["S"].to_numpy(float), sums["Q"].to_numpy(float)
    ok = T > 0  # a clicked logged slot always has T_a >= 1
    value = float(np.sum(w[ok] * S[ok] / T[ok]))
    s2 = np.where(T[ok] > 1, (Q[ok] - S[ok] ** 2 / T[ok]) / np.maximum(T[ok] - 1, 1), Q[ok])
    se = math.sqrt(float(np.sum(w[ok] ** 2 * np.maximum(s2, 0.0) / T[ok])))
    z = normal_ppf(0.5 + level / 2)
    unsupported = math.nan
    if placements is not None and len(placements):
        w = placements["s_p"].to_numpy(float) * _coef(C, placements["pos_j"])
        logged = placements["ad_id"].map(T_a).fillna(0.0).to_numpy(float) > 0
        tot = float(np.nansum(w))
        unsupported = float(np.nansum(w[~logged]) / tot) if tot > 0 else 0.0
    if unsupported == 1.0:
        nan = math.nan
        return {"value": nan, "std_error": nan, "ci_low": nan, "ci_high": nan, "unsupported_share": 1.0,
                "supported_share": 0.0, "identified": False,
                "reason": "no ad the target shows has a logged impression with a known slot reward (T_a = 0 for "
                          "every one: never logged, or logged only in rows with a slate_reward and null slot "
                          "rewards), so the factored estimate sum_a S_a/T_a has nothing to average"}
    return {"value": value, "std_error": se, "ci_low": value - z * se, "ci_high": value + z * se,
            "unsupported_share": unsupported,
            "supported_share": 1.0 - unsupported if unsupported == unsupported else math.nan,
            "identified": True, "reason": None}
