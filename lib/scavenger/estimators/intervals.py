"""Intervals that hold their level on heavy-tailed importance weights, and the rules for giving none (issue 30).

Empirical likelihood, Cressie-Read family with lambda = -2 (Karampatziakis, Mineiro & Ramdas, "Empirical
likelihood for contextual bandits", NeurIPS 2020; vw-estimators' ``cressieread``). Events t = 1..n carry a weight
w_t in [wmin, wmax] with E[w] = 1 (an importance weight) and a reward r_t in [rmin, rmax]; the estimand is
V = E[w r]. One phantom point (w0, r0), w0 in {wmin, wmax}, stands for the weights the sample has not shown, so
N = n + 1. For a distribution q over the N points the divergence is D(q) = sum_i (N q_i - 1)^2, and

    D*(v) = min { D(q) : sum q = 1, sum q w = 1, sum q w r = v }
    D1    = min { D(q) : sum q = 1, sum q w = 1 }               (w0 = wmax if sum w < n, else wmin)
    interval = { v : D*(v) <= D1 + chi2_1(level) }: lower end with r0 = rmin, upper with r0 = rmax, each the
               outermost over w0 in {wmin, wmax}, clipped to [rmin, rmax].

With p = N q - 1, D*(v) = d' G^-1 d for the Gram matrix G of (1, w, w r) over the N points and
d = (0, N - sum w, N v - sum w r). Splitting G into the (1, w) block G11, its column g12 and corner g22:
D*(v) = D1(w0) + (N v - c)^2 / s with c = sum w r + g12' G11^-1 d1 and s = g22 - g12' G11^-1 g12, so each end is
v = (c -/+ sqrt(s (D1(w_unc) + chi2 - D1(w0)))) / N (``el_interval``). Six additive sums (n, sum w, w^2, w r,
w^2 r, w^2 r^2) and the bounds give it, so days merge. Zero matching events is not identified; the phantom covers
the mass the matching events did not show, so one matching event already gives an honest (wide) interval: the
stated minimum is MIN_MATCHING = 1. Slate IPS and SNIPS (w = W = prod_k Y_k) and the direct approach (w = t_s/T_a)
use it.

The PI family (``el_cv_interval``): the same likelihood with the K moments E[Y_k] = 1 of a factorized logger
(Y_k in [0, 1/min mu_k]) in place of E[w] = 1 and T = r G in place of w r; the phantom has Y_k = ymax_k where
sum Y_k < n (else 0). Under those moments E[G] = 1 and every control variate has mean 0, so PI, wPI, PI++ and
pi_beta share one interval of the value; the sums are the slate moments'. Stated minimum: the design's effective
sample size n / (1 + sum_k (1/min mu_k - 1)) >= MIN_EFFECTIVE_EVENTS = 16 (``design_ess``; a property of the logger,
not of the events drawn, so the rule selects no lucky days): on 3/20/60 slots, 2,000 events a day (24.7) get one,
300 (3.7) do not (there the interval held its level but was 1.4-1.8 x 3.92 x the estimates' daily spread).

Rules. No CLT interval for an importance-weighted estimate: its per-event terms rest on the few events with a large
weight, whose count drives both the estimate and its sample variance. Ratio estimators (SNIPS, wPI) in particular:
a rule on their denominator's estimated relative standard error selects the days whose large weights came out few
(on 3/20/60 slots it lowered wPI's coverage), so they get the empirical-likelihood interval or none. No interval of
width 0 for an estimated quantity (``clt_or_none`` for the CLT intervals that remain: factored, re-ordering).
No interval where the weights leave double precision (a logged propensity of about 1e-155 or less: a weight bound or
a sum of squared weights beyond 1.8e308): a sum, Gram entry or product the closed forms need is not finite, and the
reason says so (``el_interval``/``el_cv_interval`` give NaN; nothing raises).
"""
from __future__ import annotations

import math

import numpy as np
from .distributions import chi2_ppf

from .empirical_likelihood import (  # noqa: F401 - the closed forms re-exported
    WeightSums,
    _el_cv_interval,
    _el_interval,
    _Overflow,
    cv_sums,
    divergence,
    el_cv_interval,
    el_interval,
)
from .slate_basis import nonfinite_sums

MIN_MATCHING = 1
MIN_EFFECTIVE_EVENTS = 16.0


def design_ess(n: float, ymax) -> float:
    """n / (1 + sum_k (ymax_k - 1)): the effective sample size of G = 1 - K + sum_k Y_k that the logger's design
    guarantees (Var Y_k = E_pi[Y_k] - 1 <= 1/min mu_k - 1, slots independent), whatever the events turned out;
    16 is a relative standard error of mean(G) of 1/4."""
    y = np.asarray(ymax, dtype=float)   # 1/min mu_k beyond double precision (+inf): no effective sample (0)
    return float(n) / (1.0 + float(np.sum(np.maximum(y[~np.isnan(y)] - 1.0, 0.0))))


OFF_DESIGN_Z = 5.0


def off_interval_reason(value: float, lo: float, hi: float, n: float, s_w: float, s_ww: float,
                        expected_w: float = 1.0) -> str | None:
    """Why an importance-weighted estimate's EL interval is withdrawn: the estimate lies outside it AND the
    weights' mean is more than OFF_DESIGN_Z standard errors from what the design gives (E[w] = 1 for IPS; 1 minus
    the unsupported share for the direct approach). Then the design the weights rest on does not hold (the
    exploration depends on the context: check a; the propensities are wrong: check e) and neither the estimate nor
    an interval means anything. With few large weights an estimate may fall outside a valid interval by chance
    (the mean weight of the day is off by a few standard errors): the interval stays."""
    if not (math.isfinite(value) and math.isfinite(lo) and math.isfinite(hi)) or lo <= value <= hi or n < 2:
        return None
    mean_w = s_w / n
    se_w = math.sqrt(max(s_ww / n - mean_w * mean_w, 0.0) / n)
    z = abs(mean_w - expected_w) / se_w if se_w > 0 else math.inf
    if z <= OFF_DESIGN_Z:
        return None
    return (f"the estimate {value:.4g} lies outside its interval [{lo:.4g}, {hi:.4g}] and the weights average "
            f"{mean_w:.4g} per event where the design gives {expected_w:.4g} ({z:.3g} standard errors off): the "
            f"logging does not match the assumptions the weights rest on (checks a, e), so no interval is given")


def weight_bound(min_propensity) -> float:
    """wmax = prod_k 1 / min_a mu_k(a): no target probability exceeds 1, so no W = prod_k pi_k/mu_k exceeds it
    (positions a row does not hold have Y_k = 1 <= 1/mu)."""
    p = np.asarray(min_propensity, dtype=float)
    p = p[np.isfinite(p) & (p > 0)]
    with np.errstate(over="ignore", divide="ignore"):     # beyond double precision: +inf (slate_interval says so)
        return float(np.prod(1.0 / np.minimum(p, 1.0))) if p.size else math.inf


def clt_or_none(value: float, se: float, level: float):
    """(ci_low, ci_high, kind, reason): value -/+ z se, or no interval when se is 0 or not finite."""
    if not (math.isfinite(value) and math.isfinite(se)):
        if math.isinf(value) or math.isinf(se):
            return math.nan, math.nan, "none", ("the estimate or its standard error overflows double precision "
                                                "(terms beyond 1.8e308)")
        return math.nan, math.nan, "none", "no standard error (fewer than two events with a term)"
    if se <= 0:
        return math.nan, math.nan, "none", ("every per-event term is equal: no variation to build an interval "
                                            "from (an interval of width 0 would claim certainty)")
    z = chi2_ppf(level, 1) ** 0.5
    return value - z * se, value + z * se, "clt", None


def slate_interval(name: str, est, m, wmax: float, ymax, rmin: float, rmax: float, level: float):
    """(ci_low, ci_high, kind, reason) of a slate estimate (estimators/slate.py), all empirical likelihood:
    IPS and SNIPS the interval of E[r W] with E[W] = 1, W = prod_k Y_k in [0, wmax] (``el_interval``);
    PI, wPI, PI++ and pi_beta the interval of E[r G] with E[Y_k] = 1 for every slot, Y_k in [0, ymax_k]
    (``el_cv_interval``): under those moments E[G] = 1 and every control variate has mean 0, so the four share
    it. No CLT interval: the per-event terms rest on the few events with a large Y_k, whose count drives both the
    estimate and its sample variance (measured on 3/20/60 slots, 2,000 events a day: 88-94% coverage, misses on
    the low side; 300 a day: pi_beta 80-85%), and a rule on a ratio's estimated denominator error selects exactly
    the days whose large weights came out few (it lowered wPI's coverage)."""
    from .slate import _rg_coef

    if m.n < 2:
        return math.nan, math.nan, "none", "fewer than two events with every propensity"
    if name in ("slate_ips", "slate_snips"):
        if m.n_W_pos < MIN_MATCHING:
            return math.nan, math.nan, "none", "no logged slate matches the target's (W = 0 on every event)"
        if math.isinf(wmax) and not np.any(np.asarray(ymax, dtype=float) > 1.0):
            return math.nan, math.nan, "none", "no weight bound from the logged propensities"
        try:
            lo, hi = _el_interval(WeightSums.from_moments(m), 0.0, wmax, rmin, rmax, level)
        except _Overflow:
            return math.nan, math.nan, "none", overflow_interval_reason(m, wmax=wmax)
        why = off_interval_reason(est.value, lo, hi, m.n, m.s_W, m.s_W2)
        if why:
            return math.nan, math.nan, "none", why
    else:
        ess = design_ess(m.n, ymax)
        if ess < MIN_EFFECTIVE_EVENTS:
            return math.nan, math.nan, "none", (f"effective sample size n/(1 + sum_k (1/min mu_k - 1)) = {ess:.3g} "
                                                f"< {MIN_EFFECTIVE_EVENTS:g}: too few events for the logger's "
                                                f"largest weights to give an interval of useful width")
        try:
            lo, hi = _el_cv_interval(m, _rg_coef(m.K), ymax, rmin, rmax, level)
        except _Overflow:
            return math.nan, math.nan, "none", overflow_interval_reason(m, ymax=ymax)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan, math.nan, "none", "no weight bound from the logged propensities"
    if hi <= lo:
        return math.nan, math.nan, "none", "no variation in the events: an interval of width 0 claims certainty"
    return lo, hi, "el", None


def overflow_interval_reason(m, wmax: float | None = None, ymax=None) -> str:
    """Why no interval: the weights' bound or sums are beyond double precision."""
    what = [f"the sums {', '.join(bad)} are not finite"] if (bad := nonfinite_sums(m)) else []
    if wmax is not None:
        what.append(f"the weight bound prod_k 1/min mu_k is {wmax:.3g}")
    if ymax is not None and len(y := np.asarray(ymax, dtype=float)):
        what.append(f"the largest 1/min mu_k is {float(np.nanmax(y)):.3g}")
    return (f"the importance weights overflow double precision ({'; '.join(what)}): some logged "
            f"propensity is so small (about 1e-155 or less) that the squared weights the interval needs exceed "
            f"1.8e308; correct or quarantine the rows with such propensities (check e)")


