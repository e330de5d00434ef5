"""Exploration scavenging for deterministic targets (seed 001 section 3; MATH.md "Exploration scavenging").

Pure functions of the statistics tables. An *action* is the whole logged slate (direct approach, section 4.1; for
a one-slot layout the slate is the ad), or the base (logging) policy that served the event (section 3.3).

Per target h and action a, the statistics give T_a (events whose logged action is a), n_target(a) (events where
h chooses a), and over the matching events (logged action = h's action) S_a = sum r_t, Q_a = sum r_t^2. Then

    V(h) = sum_t r_t 1[h(x_t) = a_t] / T_{a_t} = sum_a S_a / T_a                                   (Theorem 3)
    bound: |V - V_D| <= R sum_{a used by h} sqrt(2 ln(2 k T / delta) / T_a)       (rewards in [0, R]; k actions)
    uniform logging (Theorem 4): V = (k/T) sum_a S_a, bound R k sqrt(2 ln(2k/delta) / T)
    CLT: V = sum_a mean over the T_a events of x_t = r_t 1[match]; with T_a fixed the terms are independent:
         Var = sum_a s2_a / T_a, s2_a = (Q_a - S_a^2/T_a)/(T_a - 1) (for T_a = 1: Q_a, a bound for x^2)
    unsupported share = sum_{a: T_a = 0} n_target(a) / n_events: the target's mass on never-logged actions,
         for which V is undefined; it is reported, and the bound is infinite when it is positive.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import gammaln
from .distributions import normal_ppf

ROW_COLUMNS = ["policy_id", "estimator", "value", "std_error", "ci_low", "ci_high", "interval_kind", "n_events",
               "supported_share", "unsupported_share", "n_matched", "actions_used", "n_actions", "level", "note"]


def log_n_slates(n_ads: int, K: int) -> float:
    """ln of the number of ordered slates of K distinct ads out of n_ads: ln(n!/(n-K)!)."""
    if n_ads < K:
        return -math.inf
    return float(gammaln(n_ads + 1) - gammaln(n_ads - K + 1))


def log_n_layout_slates(ad_position: pd.DataFrame, K: int, max_work: int = 2_000_000) -> float:
    """ln k for the direct approach without a catalogue size: k = the number of slates of distinct ads over the
    positions the logs hold (1..K; a position no row holds is not part of the layout) in which each position shows
    an ad logged at that position (ad_position's (ad_id, position) pairs). A ranked layout (every ad at every
    position) gives n!/(n-K)!, a slotted one (each position its own ads) prod_k n_k: 27 slates, not 9*8*7 = 504,
    for 3 positions of 3 ads each. Counted exactly by ads grouped by the positions they appear at (a dynamic
    programme over the filled positions); where that would cost more than ``max_work`` steps, the smaller of the two
    upper bounds prod_k n_k and n!/(n-K)!. At least 1 (ln k >= 0) where any ad is logged: the bounds' ln(2kT/delta)
    needs k >= 1; -inf without any."""
    if K < 1 or not len(ad_position):
        return -math.inf
    pos = pd.to_numeric(ad_position["position"], errors="coerce").to_numpy(float)
    held = (pos >= 1) & (pos <= K)
    if not held.any():
        return -math.inf
    # each (ad, position) once, ads with a null id left out (but their positions held): positions in order
    positions, at = np.unique(pos[held], return_inverse=True)
    ads, _ = pd.factorize(ad_position["ad_id"].to_numpy()[held])
    pairs = np.unique(ads[ads >= 0].astype(np.int64) * len(positions) + at[ads >= 0])
    pair_ad, pair_pos = pairs // len(positions), pairs % len(positions)
    per_pos = np.bincount(pair_pos, minlength=len(positions))          # distinct ads per position
    P, n = len(positions), int(len(np.unique(pair_ad)))
    if P <= 62:      # an ad's mask: the sum of its positions' bits (int64)
        masks = np.zeros(int(pair_ad.max()) + 1 if len(pair_ad) else 0, dtype=np.int64)
        np.add.at(masks, pair_ad, np.left_shift(np.int64(1), pair_pos.astype(np.int64)))
        masks = masks[np.bincount(pair_ad, minlength=len(masks)) > 0]
        values, counts = np.unique(masks, return_counts=True)
        classes = list(zip(values.tolist(), counts.tolist()))
    else:            # Python ints: no overflow at K = 64
        by_ad: dict = {}
        for a, k in zip(pair_ad.tolist(), pair_pos.tolist()):
            by_ad[a] = by_ad.get(a, 0) + (1 << k)
        classes = list(pd.Series(list(by_ad.values()), dtype=object).value_counts().items())
    with np.errstate(divide="ignore"):
        upper = min(float(np.sum(np.log(per_pos.astype(float)))), log_n_slates(n, P))
    if len(classes) * 3 ** min(P, 40) > max_work:
        return max(upper, 0.0)
    dp = {0: 1}
    for mask, m in classes:
        mask, m = int(mask), int(m)
        new = dict(dp)
        for state, ways in dp.items():
            free = mask & ~state
            sub = free
            while sub:
                c = bin(sub).count("1")
                if c <= m:
                    new[state | sub] = new.get(state | sub, 0) + ways * math.perm(m, c)
                sub = (sub - 1) & free
        dp = new
    return math.log(max(dp.get((1 << P) - 1, 0), 1))


def theorem3_halfwidth(T_used: np.ndarray, T_total: float, log_k: float, delta: float, reward_range: float = 1.0):
    """R sum_a sqrt(2 ln(2 k T / delta) / T_a) over the actions the target uses (T_a > 0)."""
    T_used = np.asarray(T_used, dtype=float)
    if T_used.size == 0:
        return math.inf
    log_term = math.log(2.0) + log_k + math.log(T_total) - math.log(delta)
    return float(reward_range * np.sum(np.sqrt(2.0 * log_term / T_used)))


def theorem4_halfwidth(T_total: float, log_k: float, delta: float, reward_range: float = 1.0) -> float:
    """R k sqrt(2 ln(2k/delta) / T) (inf where k or T says nothing: no slate, no event)."""
    if not math.isfinite(log_k) or not T_total > 0:
        return math.inf
    k = math.exp(min(log_k, 700.0))
    return float(reward_range * k * math.sqrt(2.0 * (math.log(2.0) + log_k - math.log(delta)) / T_total))


def scavenging_estimate(actions: pd.DataFrame, targets: pd.DataFrame, n_events: float, log_k: float,
                        delta: float = 0.05, level: float = 0.95, reward_range: float = 1.0,
                        uniform: bool = False) -> dict:
    """One target's estimate from ``actions`` (key, t) and its ``targets`` rows (key, n_target, n_match, s_r, s_r2).

    Returns value, CLT std_error, Theorem 3 (or 4 with ``uniform``) half-width, supported/unsupported share.
    With fewer than 2 matched events the CLT std_error and interval are NaN (and ``clt_value`` too when none
    matched): a CLT interval needs a variance.
    """
    T_by = dict(zip(actions["key"], actions["t"].astype(float)))
    key = targets["key"].to_numpy()
    T = np.array([T_by.get(k, 0.0) for k in key], dtype=float)
    n_target = targets["n_target"].to_numpy(dtype=float)
    S = targets["s_r"].to_numpy(dtype=float)
    Q = targets["s_r2"].to_numpy(dtype=float)
    n_match = targets["n_match"].to_numpy(dtype=float)
    sup = T > 0
    unsupported = float(n_target[~sup].sum() / n_events) if n_events > 0 else math.nan
    T_total = float(actions["t"].sum())
    if uniform:
        k = math.exp(min(log_k, 700.0))
        value = k / T_total * float(S.sum())
        # x_t = k r_t 1[match] over all T events
        mean = value
        var_x = (k * k * float(Q.sum()) - T_total * mean * mean) / (T_total - 1) if T_total > 1 else math.nan
        se = math.sqrt(max(var_x, 0.0) / T_total) if T_total > 1 else math.nan
        half = theorem4_halfwidth(T_total, log_k, delta, reward_range)
    else:
        Ts = T[sup]
        value = float(np.sum(S[sup] / Ts))
        s2 = np.where(Ts > 1, (Q[sup] - S[sup] ** 2 / Ts) / np.maximum(Ts - 1, 1), Q[sup])
        se = math.sqrt(float(np.sum(np.maximum(s2, 0.0) / Ts)))
        half = theorem3_halfwidth(Ts, T_total, log_k, delta, reward_range) if unsupported == 0 else math.inf
    z = normal_ppf(0.5 + level / 2)
    clt = (value - z * se, value + z * se)
    matched = float(n_match.sum())
    if matched < 2:
        # Fewer than two logged events agree with the target: there is no variance to speak of, so no CLT
        # interval (a zero-width one would claim certainty; with none matched there is no value either). The
        # Theorem 3/4 bound still says what is known.
        se, clt = math.nan, (math.nan, math.nan)
        clt_value = math.nan if matched == 0 else value
    else:
        clt_value = value
    return {"value": value, "clt_value": clt_value, "std_error": se, "clt": clt,
            "bound": (value - half, value + half), "halfwidth": half,
            "supported_share": 1.0 - unsupported, "unsupported_share": unsupported,
            "n_matched": matched, "actions_used": int(sup.sum()), "T_total": T_total}


def _rows(policy_id, estimator, est, n_events, n_actions, level, delta, note=""):
    out = []
    for kind in ("clt", "bound"):
        lo, hi = est[kind]
        value = est.get("clt_value", est["value"]) if kind == "clt" else est["value"]
        out.append({"policy_id": policy_id, "estimator": estimator, "value": value,
                    "std_error": est["std_error"], "ci_low": lo, "ci_high": hi, "interval_kind": kind,
                    "n_events": n_events, "supported_share": est["supported_share"],
                    "unsupported_share": est["unsupported_share"], "n_matched": est["n_matched"],
                    "actions_used": est["actions_used"], "n_actions": n_actions,
                    "level": level if kind == "clt" else 1 - delta, "note": note})
    return out


def _reward_range(log_summary: pd.DataFrame) -> float:
    """The range [min(0, r_min), max(1, r_max)] of the logged rewards: a click range at least, never 0 (logs
    without a click gave R = 1e-300 and a Theorem 3 bound of width 0)."""
    if not len(log_summary) or "r_max" not in log_summary:
        return 1.0
    hi = max(float(log_summary["r_max"].max()), 1.0)
    lo = min(float(log_summary["r_min"].min()), 0.0)
    return hi - lo


def naming_a_base(pe: pd.DataFrame) -> pd.DataFrame:
    """policy_events' rows of the targets whose decisions name a base (logging) policy on every event."""
    return pe[~(pe["n_with_base"] < pe["n_events"]) & ~(pe["n_events"] == 0)]


def base_policy_estimates(stats, policies=None, delta: float = 0.05, level: float = 0.95,
                          uniform: bool = False, reward_range: float | None = None) -> pd.DataFrame:
    """Action = base (logging) policy; targets whose decisions carry ``base_policy`` on every event.
    ``reward_range``: R of the Theorem 3/4 bounds, the range a slate reward can take (the pipeline passes that of
    estimators/rows.weight_and_reward_bounds: the held slots times their declared maximum); default the logged
    rewards' range, at least [0, 1]."""
    ls = stats.table("log_summary")
    pe = stats.table("policy_events")
    if not len(ls) or not len(pe):
        return pd.DataFrame(columns=ROW_COLUMNS)
    named = naming_a_base(pe)
    if policies:
        named = named[named["policy_id"].isin(list(policies))]
    if not len(named):                     # no target to estimate: base_targets is not read (nor merged)
        return pd.DataFrame(columns=ROW_COLUMNS)
    targets = stats.table("base_targets").rename(columns={"base_policy": "key"})
    n_actions = len(ls)          # k: the logging (base) policies of the window
    log_k = math.log(n_actions)
    rr = _reward_range(ls) if reward_range is None else float(reward_range)
    rows = []
    for p in named.sort_values("policy_id").to_dict("records"):
        pid = p["policy_id"]
        n = float(p["n_events"])
        tg = targets[targets["policy_id"] == pid]
        # T_a among the events this policy decides (base_targets' t), not among every logged event
        actions = tg.loc[tg["t"] > 0, ["key", "t"]]
        est = scavenging_estimate(actions, tg, n, log_k, delta, level, rr)
        rows += _rows(pid, "scavenging_base", est, int(n), n_actions, level, delta)
        if uniform:
            est4 = scavenging_estimate(actions, tg, n, log_k, delta, level, rr, uniform=True)
            rows += _rows(pid, "scavenging_base_uniform", est4, int(n), n_actions, level, delta)
    return pd.DataFrame(rows, columns=ROW_COLUMNS)
