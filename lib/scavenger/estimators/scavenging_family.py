"""Exploration scavenging (seed 001 section 3): the direct approach (action = the logged slate, Theorem 3; Theorem 4
with uniform logging) and the base-policy action (section 3.3). The direct approach's sums come from the one
reduction of the big slate tables (:func:`scavenging_sums`), run by the engine that holds them."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .declaration import Estimator
from .rows import (_policy_events, derived, not_identified, reorder_reason, reorders_logged_slate, row,
                   weight_and_reward_bounds)

EL_SUMS = ("sum_w", "sum_w2", "sum_wr", "sum_w2r", "sum_w2r2")


def scavenging_sums(stats, by_dt: bool = False, prefixes: tuple = ()) -> pd.DataFrame:
    """Per (policy, held positions[, dt]): the direct approach reduced by the engine from the big slate tables:
    t_s (logged events holding those positions), n_target, n_unsupported (target events whose slate was never
    logged), n_match, actions_used, v = sum_a S_a/T_a, var_clt = sum_a s2_a/T_a, inv_sqrt_t = sum over used
    actions of T_a^(-1/2), and the weighted sums of w = t_s/T_a over matched events (for the EL interval);
    ``prefixes``: those of each prefix window through each of these days (dt: its last day), in one statement."""
    from ..statistics.sql.reduce import scavenging

    if "slate_covered" not in stats.big or "slate_targets" not in stats.big:
        return pd.DataFrame()
    return stats.engine.fetch(scavenging(stats.big["slate_covered"], stats.big["slate_targets"],
                                         stats.big_where(), by_dt, tuple(prefixes)), "scavenging_sums")


@dataclass(frozen=True)
class _Direct:
    """What the direct approach's rows of every policy share: the estimator's name, T (set per policy: the events
    it has a decision for), ln k (k slates), and the range a slate reward can take: the EL intervals' and the
    Theorem 3/4 bounds' (R = r_hi - r_lo)."""

    name: str
    T: float
    log_k: float
    r_lo: float
    r_hi: float
    k_why: str | None = None


def _window_sums(stats, options) -> pd.DataFrame:
    """The direct approach's sums of the window, of the day or of the prefix window through ``options.upto``
    (--by-day: one reduction by dt for every day of the run and one for every prefix of running/, shared, instead
    of one per day and one per prefix)."""
    whole = options.window_stats
    if whole is None or (options.day is None and options.upto is None):
        prefixes = options.shared_value(_BY_PREFIX) if stats.dates else None
        if prefixes is not None and len(prefixes):     # --by-day ran it (_windows): the last prefix is the window
            return _on(prefixes, max(stats.dates))
        return scavenging_sums(stats)
    if options.upto is not None:
        return _on(_sums_by_prefix(whole, options), options.upto)
    return _on(_sums_by_dt(whole, options), options.day)


_BY_PREFIX = "scavenging_sums_by_prefix"


def _sums_by_prefix(whole, options) -> pd.DataFrame:
    """Every prefix window's sums (dt: its last day), one statement a run."""
    return options.shared(_BY_PREFIX, lambda: scavenging_sums(whole, prefixes=sorted(whole.dates)))


def _sums_by_dt(whole, options) -> pd.DataFrame:
    """Every day's sums, one statement a run."""
    return options.shared("scavenging_sums_by_dt", lambda: scavenging_sums(whole, by_dt=True))


def _on(sums: pd.DataFrame, day) -> pd.DataFrame:
    """The rows of ``sums`` (by dt) of ``day``, without dt."""
    if not len(sums):
        return sums
    return sums[sums["dt"] == day].drop(columns=["dt"]).reset_index(drop=True)


def _windows(stats, options, kind: str) -> None:
    """Before --by-day's windows (``kind`` "by_day") or running/'s prefixes ("running") run in workers without the
    engine: the one reduction of the big tables they read (:func:`_window_sums`), into the run's shared cache."""
    if kind == "running":
        _sums_by_prefix(stats, options)
    elif kind == "by_day":
        _sums_by_dt(stats, options)


def _direct(stats, options) -> dict:
    """What the direct approach's rows of every policy share (cached per window): policy events, the sums, the
    number of slates k, the reward range and the eligibility strata."""
    from .factored import ad_strata
    from .scavenging import log_n_layout_slates, log_n_slates

    pe = stats.table("policy_events").set_index("policy_id") if len(stats.table("policy_events")) else None
    ls = stats.table("log_summary")
    ap = stats.table("ad_position")
    # k = the number of slates: with --n-ads, every catalogue ad at every position (n!/(n-K)!); else the slates
    # the logged layout allows (each position its logged ads, distinct ads): prod_k n_k for slotted slates
    K = max(stats.K, 1)
    # the positions the logs hold (positions 2 and 5 only: slates of 2 ads), as log_n_layout_slates counts them
    held = int(ap.loc[ap["position"].between(1, K), "position"].nunique()) if len(ap) else 0
    log_k = log_n_slates(options.n_ads, max(held, 1)) if options.n_ads else log_n_layout_slates(ap, K)
    k_why = None
    if not math.isfinite(log_k):
        k_why = (f"--n-ads {options.n_ads} is fewer ads than the {held} positions a logged slate fills: no slate of "
                 f"distinct ads fits that catalogue (k = 0), so Theorems 3/4 give no bound" if options.n_ads else
                 "no ad is logged at any position: k, the number of slates of Theorems 3/4, is 0")
    # one reward range for the EL interval and the Theorem 3/4 bounds: the range a slate reward CAN take (the held
    # slots' declared maximum), not the largest one observed (on K = 5 slots of clicks, no event with 5 clicks gave
    # R = 4 and a bound 20% too narrow)
    _, _, r_lo, r_hi = weight_and_reward_bounds(stats, getattr(options, "reward_bounds", None))
    d = _Direct("scavenging_ad" if stats.K == 1 else "scavenging_slate",
                float(ls["n_events"].sum()) if len(ls) else 0.0, log_k, r_lo, r_hi, k_why)
    return {"pe": pe, "d": d, "strata": derived(stats, "ad_strata", lambda: ad_strata(ap)),
            "sums": _window_sums(stats, options)}


def scavenging_slate(stats, p: str, options) -> list[dict]:
    """The direct approach for a deterministic target (seed 001 Theorem 3; Theorem 4 rows with
    --uniform-logging). V = sum_s (t_s/T) V_s over the strata of held positions (one stratum for full slates),
    = (1/T) sum_t w_t r_t with w_t = t_s/T_a on matching events: its interval is the empirical-likelihood one of
    estimators/intervals.py over those weights (w in [0, max t_s]); the Theorem 3 bound beside it."""
    c = options.cached("scavenging_direct", lambda: _direct(stats, options))
    pe, d, strata, sums = c["pe"], c["d"], c["strata"], c["sums"]
    if pe is None or p not in pe.index:
        return []
    n = int(pe.loc[p, "n_events"])
    det = int(pe.loc[p, "n_deterministic"])
    if strata is not None and det == n:
        # the events that logged a slate all come from its ads' stratum, so sum_a S_a/T_a adds the strata's
        # values instead of averaging them (seed 001 Theorem 1 needs exploration independent of x)
        return [not_identified(p, d.name, f"the calibration key partitions the ads into {strata.nunique()} "
                                          f"eligibility strata (each ad shown under one value only): the direct "
                                          f"approach compares whole slates across them; evaluate one stratum at a "
                                          f"time (factored weights the strata)", n, options.level)]
    if reorders_logged_slate(stats, p) and d.log_k > 0:
        # more than one slate was possible: the target's slate equals the logged one because it copies it
        return [not_identified(p, d.name, reorder_reason("the direct approach sum_a S_a/T_a (it needs a target "
                                                         "that is a function of the context)"), n, options.level)]
    if det < n:
        return [not_identified(p, d.name, f"the target is stochastic on {n - det} of {n} events: the direct "
                                          f"approach needs a deterministic slate per event", n, options.level)]
    # T = the events the policy has a decision for: its T_s and T_a are counted among them too (slate_covered), so
    # a target whose decisions cover part of the log is not scaled down by that share
    return _direct_rows(p, n, sums[sums["policy_id"] == p] if len(sums) else sums, replace(d, T=float(n)), options)


def _direct_rows(p, n: int, g: pd.DataFrame, d: _Direct, opts) -> list[dict]:
    """One deterministic target's rows from its sums ``g``: the EL interval, the Theorem 3 bound (none when some
    of its slates were never logged) and, with uniform logging over full slates, the Theorem 4 rows."""
    from .intervals import MIN_MATCHING, WeightSums, el_interval, holding, matching_reason, off_interval_reason

    n_match = int(g["n_match"].sum()) if len(g) else 0
    unsupported = float(g["n_unsupported"].sum()) / n if n and len(g) else 1.0
    if n_match == 0:
        return [not_identified(p, d.name, "no logged slate equals the target's on any event: the direct "
                                          "approach has no matching event to average", n, opts.level,
                               supported_share=1 - unsupported, unsupported_share=unsupported)]
    if n_match < MIN_MATCHING:
        return [not_identified(p, d.name, matching_reason(n_match), n, opts.level,
                               supported_share=1 - unsupported, unsupported_share=unsupported,
                               note=f"matched={n_match}")]
    share = g["t_s"].to_numpy(float) / d.T
    value = float(np.sum(share * g["v"].to_numpy(float)))
    se = float(math.sqrt(np.sum(share ** 2 * g["var_clt"].to_numpy(float))))
    extra = {"supported_share": 1 - unsupported, "unsupported_share": unsupported,
             "note": f"matched={n_match} actions_used={int(g['actions_used'].sum())} "
                     f"k={math.exp(min(d.log_k, 700)):.6g}"}
    lo, hi = el_interval(WeightSums(d.T, *(float(g[c].sum()) for c in EL_SUMS)), 0.0,
                         max(float(g["t_s"].max()), 1.0 + 1e-9), d.r_lo, d.r_hi, opts.level)
    why = off_interval_reason(value, lo, hi, d.T, float(g["sum_w"].sum()), float(g["sum_w2"].sum()),
                              1.0 - unsupported)
    lo, hi, kind, why = (math.nan, math.nan, "none", why) if why else holding(value, lo, hi, "el", None)
    out = [row(p, d.name, value, se, lo, hi, kind, n, opts.level, reason=why, **extra)]
    if d.k_why:
        out.append(not_identified(p, d.name, d.k_why, n, 1 - opts.delta, **extra))
    elif unsupported == 0:
        log_term = math.log(2.0) + d.log_k + math.log(d.T) - math.log(opts.delta)
        half = (d.r_hi - d.r_lo) * float(np.sum(share * math.sqrt(2.0 * log_term) * g["inv_sqrt_t"].to_numpy(float)))
        out.append(row(p, d.name, value, se, value - half, value + half, "bound", n, 1 - opts.delta, **extra))
    else:
        out.append(row(p, d.name, value, se, math.nan, math.nan, "none", n, 1 - opts.delta,
                       reason=f"{unsupported:.2%} of the target's events show a slate never logged: Theorem 3 "
                              f"gives no bound for that mass", **extra))
    if opts.uniform_logging and len(g) == 1:
        out += ([not_identified(p, d.name + "_uniform", d.k_why, n, lv, **extra) for lv in (opts.level, 1 - opts.delta)]
                if d.k_why else _theorem4_rows(p, n, g, d, opts, extra))
    return out


def _theorem4_rows(p, n: int, g: pd.DataFrame, d: _Direct, opts, extra: dict) -> list[dict]:
    """Uniform logging (seed 001 Theorem 4): V = (k/T) sum of the matched rewards (w = k on matching events), its
    EL interval and the bound R k sqrt(2 ln(2k/delta) / T)."""
    from .intervals import WeightSums, el_interval, holding, off_interval_reason
    from .scavenging import theorem4_halfwidth

    T = d.T
    k = math.exp(min(d.log_k, 700.0))
    v4 = k / T * float(g["s_match_r"].sum())
    var4 = (k * k * float(g["s_match_r2"].sum()) - T * v4 * v4) / (T - 1) if T > 1 else math.nan
    se4 = math.sqrt(max(var4, 0.0) / T) if T > 1 else math.nan
    h4 = theorem4_halfwidth(T, d.log_k, opts.delta, d.r_hi - d.r_lo)
    nm, sr, sr2 = float(g["n_match"].sum()), float(g["s_match_r"].sum()), float(g["s_match_r2"].sum())
    lo4, hi4 = el_interval(WeightSums(T, k * nm, k * k * nm, k * sr, k * k * sr, k * k * sr2), 0.0,
                           max(k, 1.0 + 1e-9), d.r_lo, d.r_hi, opts.level)   # w = k on matching events
    why4 = off_interval_reason(v4, lo4, hi4, T, k * nm, k * k * nm)
    lo4, hi4, kind4, why4 = (math.nan, math.nan, "none", why4) if why4 else holding(v4, lo4, hi4, "el", None)
    return [row(p, d.name + "_uniform", v4, se4, lo4, hi4, kind4, n, opts.level, reason=why4, **extra),
            row(p, d.name + "_uniform", v4, se4, v4 - h4, v4 + h4, "bound", n, 1 - opts.delta, **extra)]


def scavenging_base(stats, p: str, options) -> list[dict]:
    """Action = the base (logging) policy that served the event (seed 001 section 3.3)."""
    from . import scavenging as sc

    sub = []
    if p in derived(stats, "base_named", lambda: _naming_a_base(stats)):
        # the range a slate reward can take (as the direct approach)
        _, _, r_lo, r_hi = weight_and_reward_bounds(stats, getattr(options, "reward_bounds", None))
        df = sc.base_policy_estimates(stats, [p], options.delta, options.level, options.uniform_logging,
                                      r_hi - r_lo)
        sub = df[df["policy_id"] == p] if len(df) else df
    if not len(sub):
        return [not_identified(p, "scavenging_base", "the target does not name a base (logging) policy on every "
                                                     "event (decisions' base_policy column)",
                               _policy_events(stats, p, "n_events"), options.level)]
    out = []
    for r in sub.to_dict("records"):
        ok = r["n_matched"] > 0
        kind = r["interval_kind"] if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"]) else "none"
        if kind == "clt" and not r["ci_high"] > r["ci_low"]:      # width 0: never for an estimated value
            r["ci_low"] = r["ci_high"] = math.nan
            kind = "none"
        out.append(row(p, r["estimator"], r["value"], r["std_error"], r["ci_low"], r["ci_high"], kind,
                       r["n_events"], r["level"], identified=ok,
                       reason=None if ok else "no event was served by the base policy the target names",
                       supported_share=r["supported_share"], unsupported_share=r["unsupported_share"],
                       note=f"matched={int(r['n_matched'])} actions_used={int(r['actions_used'])}"))
    return out


def _naming_a_base(stats) -> frozenset:
    """The targets whose decisions name a base policy on every event (once per window)."""
    from .scavenging import naming_a_base

    pe = stats.table("policy_events")
    return frozenset(naming_a_base(pe)["policy_id"]) if len(pe) else frozenset()


_CHECKS = ("a", "b")
ESTIMATORS = (
    Estimator(name="scavenging_slate",
              summary="V = sum_s (T_s/T) sum_{a in s} S_a / T_a, action = the logged (partial) slate (seed 001 "
                      "sec. 3, 4.1)", estimate=scavenging_slate, aliases=("direct",), family="scavenging",
              checks=_CHECKS, tables=("slate_targets", "slate_covered", "policy_events"),
              identification="every slate the target shows was logged (T_a > 0) for some event", recommend_rank=8,
              outputs=("scavenging_ad", "scavenging_slate_uniform", "scavenging_ad_uniform"), windows=_windows),
    Estimator(name="scavenging_base",
              summary="V = sum_a S_a / T_a, action = the base (logging) policy that served the event (seed 001 "
                      "sec. 3.3)", estimate=scavenging_base, family="scavenging", checks=_CHECKS,
              tables=("log_summary", "base_targets", "policy_events"),
              identification="the target names a logged base policy on every event", recommend_rank=9,
              outputs=("scavenging_base_uniform",)),
)
