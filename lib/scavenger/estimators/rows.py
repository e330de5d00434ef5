"""What every estimator family's rows share: the row of the estimates table, and the
bounds of the window's weights and rewards that the empirical-likelihood intervals take."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd



def estimate_columns() -> list:
    """The estimates table's columns, in order (schemas/estimates.schema.json, the single source)."""
    global _COLUMNS
    if _COLUMNS is None:
        from ..contract import load_contract

        _COLUMNS = [f["name"] for f in load_contract("estimates").fields]
    return _COLUMNS


_COLUMNS = None


OVERFLOW_REASON = ("the estimate overflows double precision: its terms exceed 1.8e308 (a weight 1/mu or 1/C_i of a "
                   "tiny positive propensity or attention coefficient), so no number can be given")


def _infinite(x) -> bool:
    try:
        return math.isinf(float(x))
    except (TypeError, ValueError):
        return False


def row(policy_id, estimator, value=math.nan, se=math.nan, lo=math.nan, hi=math.nan, kind="none", n=0,
        level=None, identified=True, reason=None, **extra) -> dict:
    """One row of the estimates table; an infinite value (terms beyond double precision) is not identified, an
    infinite standard error none (NaN): no number the sums cannot give is printed."""
    if identified and _infinite(value):
        identified, reason = False, OVERFLOW_REASON
    if _infinite(se):
        se = math.nan
    out = {c: None for c in estimate_columns()}
    out.update({"policy_id": policy_id, "estimator": estimator, "value": value, "std_error": se, "ci_low": lo,
                "ci_high": hi, "interval_kind": kind, "n_events": int(n), "level": level,
                "identified": bool(identified), "reason": reason, "n_unused": 0})
    out.update(extra)
    if not identified:
        out.update({"value": math.nan, "std_error": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                    "interval_kind": "none"})
    return out


def not_identified(policy_id, estimator, reason, n=0, level=None, **extra) -> dict:
    return row(policy_id, estimator, n=n, level=level, identified=False, reason=reason, **extra)


def derived(stats, key, fn):
    """``fn()`` computed once per window's statistics (statistics.window.WindowStats.memo; computed each call for
    statistics without it)."""
    memo = getattr(stats, "memo", None)
    return memo(key, fn) if callable(memo) else fn()


def _policy_events(stats, policy_id: str, column: str) -> int:
    """The sum of policy_events' ``column`` over the policy's days (0 where the stored days lack the column)."""
    def sums():             # {column: {policy: sum}}: a group-by of policy, in numpy (read ~80 times a window)
        pe = stats.table("policy_events")
        if not len(pe):
            return {}
        at, ids = pd.factorize(pe["policy_id"])             # -1: a null policy id, left out as by a group-by
        keep = at >= 0
        numeric = [c for c in pe.columns if c != "policy_id" and pd.api.types.is_numeric_dtype(pe[c])]
        out = {}
        for c in numeric:
            v = pe[c].to_numpy(float)[keep]
            total = np.bincount(at[keep], weights=np.where(np.isnan(v), 0.0, v), minlength=len(ids))
            out[c] = dict(zip(ids, total.tolist()))
        return out

    value = derived(stats, "policy_events_sums", sums).get(column, {}).get(policy_id)
    return 0 if value is None else int(value)


def reorders_logged_slate(stats, policy_id: str) -> bool:
    """The target shows exactly the logged ads (in any order) on every event it decides (policy_events'
    n_reorder): its choice is a function of the logged slate, not of the context alone."""
    n = _policy_events(stats, policy_id, "n_events")
    return n > 0 and _policy_events(stats, policy_id, "n_reorder") == n


def short_events(stats, policy_id: str) -> int:
    """Events on which the target lists no ad at a position the logged row holds (policy_events' n_short)."""
    return _policy_events(stats, policy_id, "n_short")


def short_reason(n_short: int, n: int, what: str) -> str:
    """Why ``what`` is not identified for a target that leaves a held position empty on ``n_short`` events."""
    return (f"the target lists no ad at a position the logs hold on {n_short} of {n} events: its slate leaves that "
            f"position empty, which the logger never does, so {what} cannot estimate its value; give the target a "
            f"distribution at every position the logs hold (factored and reorder value an ad left out at 0)")


def reorder_reason(what: str) -> str:
    """Why ``what`` (the direct approach, the importance weights) is not identified for a target that re-orders the
    logged slate on every event."""
    return (f"the target shows exactly the logged ads on every event (it re-orders the logged slate): its choice "
            f"depends on the slate the logger drew at random, not on the context alone, so {what} cannot estimate "
            f"its value (see reorder)")


def reward_range(stats) -> tuple[float, float]:
    ls = stats.table("log_summary")
    if not len(ls):
        return 0.0, 1.0
    return float(min(0.0, ls["r_min"].min())), float(max(1.0, ls["r_max"].max()))


def weight_and_reward_bounds(stats, declared: tuple | None = None) -> tuple[float, np.ndarray, float, float]:
    """See :func:`_weight_and_reward_bounds`; computed once per window and declared range (ymax read-only)."""
    return derived(stats, ("weight_and_reward_bounds", None if declared is None else tuple(declared)),
                   lambda: _read_only(_weight_and_reward_bounds(stats, declared)))


def _read_only(bounds: tuple) -> tuple:
    ymax = np.array(bounds[1], dtype=float)
    ymax.setflags(write=False)
    return (bounds[0], ymax, *bounds[2:])


def _weight_and_reward_bounds(stats, declared: tuple | None = None) -> tuple[float, np.ndarray, float, float]:
    """(wmax, ymax, rmin, rmax), the bounds the slate intervals of estimators/intervals.py take (ymax: ``slot_weight_bounds``)
    of the empirical-likelihood intervals: wmax = prod_k 1/min mu_k over the window's logged
    propensities (estimators/intervals.weight_bound), over the m positions with the smallest min mu_k when no row
    holds more than m slots (partial slates); rewards in [min(0, r_min, m d_min), max(r_max, m d_max)] (a row's
    reward sums at most m <= K slot rewards, each within the declared range [d_min, d_max], the rule config's
    --reward-min/--reward-max: a slot reward outside it is quarantined, REWARD_OUT_OF_RANGE; without ``declared``,
    [0, 1] widened to the largest slot reward logged): the range a slate reward can take, not the one the window
    happened to show. m, r_min and r_max are those of the clean rows: a quarantined row's slots and rewards (a
    reward of 8 beside a declared maximum of 3) are in no estimate, so they widen no interval."""
    from .intervals import weight_bound

    ap, lc = stats.table("ad_position"), stats.table("log_counts")
    # partial slates: a row holds at most `held` slots (Y_k = 1 elsewhere), so W is at most the product of the
    # `held` largest 1/min mu_k, and its reward the sum of `held` slot rewards (one-slot OBD rows: 1/mu, one click)
    held = int(lc["max_slots"].max()) if len(lc) and "max_slots" in lc and lc["max_slots"].notna().any() else 0
    min_p = np.array(list(_min_p_by_position(stats).values()), dtype=float)
    min_p = np.sort(min_p[np.isfinite(min_p) & (min_p > 0)])
    wmax = weight_bound(min_p[:held] if 0 < held < len(min_p) else min_p) if len(ap) else math.inf
    lo, hi = reward_range(stats)
    k_held = max(min(held, stats.K) if held > 0 else stats.K, 1)
    if declared is None:        # no rule range: the largest slot reward logged (log_counts: every row) widens [0, 1]
        seen = float(lc["max_reward"].max()) if len(lc) and lc["max_reward"].notna().any() else 1.0
        declared = (0.0, max(1.0, seen))
    d_min, d_max = declared
    return (wmax, slot_weight_bounds(stats), min(lo, k_held * min(float(d_min), 0.0)),
            max(hi, k_held * float(d_max)))


def pair_support(stats, policy_id) -> float:
    """The share of the target's mass sum_t pi_k(a | x_t) that lies on (position, ad) pairs its events' logging
    policy showed (with a positive propensity, or none logged): check c's measure, as the IPS/PI family's
    supported_share. NaN where the target places no mass."""
    from ..checks.check_c import unsupported

    tp, ap = stats.table("target_placements"), stats.table("ad_position")
    if not len(tp):
        return math.nan

    def by_policy():            # every policy's placements beside what the logs showed: once per window
        shown, n, max_p = _pairs_shown(ap, tp)
        mass = np.nan_to_num(tp["s_p"].to_numpy(float))         # a sum over no rows counts 0, as pandas' sum
        supported = np.where(unsupported(pd.DataFrame({"n": np.where(shown, n, np.nan), "max_p": max_p})).to_numpy(),
                             0.0, mass)
        codes, ids = pd.factorize(tp["policy_id"])             # -1: a null policy id, left out as by a group-by
        keep = codes >= 0
        total = np.bincount(codes[keep], weights=mass[keep], minlength=len(ids))
        held = np.bincount(codes[keep], weights=supported[keep], minlength=len(ids))
        return dict(zip(ids, zip(total, held)))

    total, supported = derived(stats, "pair_support_sums", by_policy).get(policy_id, (0.0, 0.0))
    if not total > 0:
        return math.nan
    return float(supported) / float(total)


def _pairs_shown(ap: pd.DataFrame, tp: pd.DataFrame) -> tuple:
    """For each target placement (row of ``tp``): whether its (logging policy, position, ad) was shown (a row of
    ``ap``; a null in any key matches nothing), the times shown (sum m) and the largest logged propensity (max_p,
    NaN where none was logged), summed over folds: ap grouped by the pair, left-joined to tp, in numpy."""
    keys = (("logging_policy", "logging_policy"), ("position", "pos_j"), ("ad_id", "ad_id"))
    code, ok = np.zeros(len(ap) + len(tp), dtype=np.int64), np.ones(len(ap) + len(tp), dtype=bool)
    for a, t in keys:
        c, uniq = pd.factorize(np.concatenate([ap[a].to_numpy(), tp[t].to_numpy()]))
        ok &= c >= 0
        code = code * (len(uniq) + 1) + np.where(c >= 0, c, 0)
    pairs, inv = np.unique(np.where(ok, code, -1), return_inverse=True)
    inv_ap, inv_tp = inv[:len(ap)], inv[len(ap):]
    real = ok[:len(ap)]
    n = np.bincount(inv_ap[real], weights=ap["m"].to_numpy(float)[real], minlength=len(pairs))
    seen = np.bincount(inv_ap[real], minlength=len(pairs)) > 0
    max_p = np.full(len(pairs), np.nan)
    np.fmax.at(max_p, inv_ap[real], ap["max_p"].to_numpy(float)[real])
    shown = seen[inv_tp] & ok[len(ap):]
    return shown, n[inv_tp], np.where(shown, max_p[inv_tp], np.nan)


def _min_p_by_position(stats) -> dict:
    """{position: the smallest logged propensity there (NaN where none was logged)} of ad_position (its group-by
    of position, in numpy: once per window)."""
    def make():
        ap = stats.table("ad_position")
        if not len(ap):
            return {}
        at, positions = pd.factorize(ap["position"], sort=True)
        low = np.full(len(positions), np.nan)
        np.fmin.at(low, at[at >= 0], pd.to_numeric(ap["min_p"], errors="coerce").to_numpy(float)[at >= 0])
        return dict(zip(np.asarray(positions).tolist(), low.tolist()))
    return derived(stats, "min_p_by_position", make)


def slot_weight_bounds(stats) -> np.ndarray:
    """ymax_k = 1/min mu_k over the window's logged propensities at position k (no Y_k = pi_k/mu_k exceeds it; 1
    where no propensity was logged): the phantom of the PI family's empirical-likelihood interval."""
    low, K = _min_p_by_position(stats), max(stats.K, 1)
    p = np.array([float(low.get(k, math.nan)) for k in range(1, K + 1)])
    with np.errstate(over="ignore", divide="ignore"):  # 1/mu beyond double precision: +inf (no interval, and why)
        return np.where(np.isfinite(p) & (p > 0), 1.0 / np.minimum(np.where(p > 0, p, 1.0), 1.0), 1.0)
