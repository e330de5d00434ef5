"""Intervals that hold their level on heavy-tailed importance weights, and the rules for giving none.

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
w^2 r, w^2 r^2) and the bounds give it, so days merge. Slate IPS and SNIPS (w = W = prod_k Y_k) and the direct
approach (w = t_s/T_a) use it; IPS's and the direct approach's own estimates (means of w r, not the likelihood's
centre under E[w] = 1) are held by widening the interval to them where they fall outside (``holding``).
Stated minimum: MIN_MATCHING = 5 matching events. With fewer, the interval still covers (slotted 3/5/8, 150 days at
200-4,000 events: 99-100% in every bucket of 0-2, 3-4, 5-9, 10-19, 20-49 matches) but spans 93-99% of the whole
reward range (width 2.8-3.0 of 3) and the estimate rests on one to four events; from 5 matches the width falls to
about half the range: so fewer than 5 is "not identified", with the count.

The PI family (``design_t_interval``): each estimator its own interval, value -/+ t std_error with the design's
effective sample size n / (1 + sum_k (1/min mu_k - 1)) - 1 degrees of freedom. Stated minimum: that effective sample
size >= MIN_EFFECTIVE_EVENTS = 16 (``design_ess``; a property of the logger, not of the events drawn, so the rule
selects no lucky days): on 3/20/60 slots, 2,000 events a day (24.7) get one, 300 (3.7) do not. Where fewer than
MIN_REWARD_TERMS = 10 events carry the estimate (sparse clicks: a week of OBD-shaped logs whose matching events
hold no click or one or two), a standard error is no guide and the four take IPS's empirical-likelihood interval
of the same value (E[r W] under E[W] = 1, no assumption on the slots), widened to hold each estimate. The
likelihood with the K moments E[Y_k] = 1 (``el_cv_interval``, kept for the tests of its closed form) was 1.7-2x as
wide as the t interval where clicks are many, and covered 87% where they are rare.

Rules. No interval of width 0 for an estimated quantity (``clt_or_none`` for the CLT intervals: factored,
re-ordering, the pipeline's default for an estimator that gives a standard error). No interval where the weights
leave double precision (a logged propensity of about 1e-155 or less: a weight bound or a sum of squared weights
beyond 1.8e308): a sum, Gram entry or product the closed forms need is not finite, and the reason says so
(``el_interval``/``el_cv_interval`` give NaN; nothing raises). No estimate outside its own interval.
"""
from __future__ import annotations

import math

import numpy as np
from .distributions import chi2_ppf, t_ppf

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

MIN_MATCHING = 5
MIN_EFFECTIVE_EVENTS = 16.0
MIN_REWARD_TERMS = 10.0


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
    with np.errstate(over="ignore", divide="ignore"):     # beyond double precision: +inf (the interval says so)
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


def weight_interval(est, m, wmax: float, ymax, rmin: float, rmax: float, level: float):
    """(ci_low, ci_high, kind, reason) of slate IPS and SNIPS: the empirical-likelihood interval of E[r W] under
    E[W] = 1, W = prod_k Y_k in [0, wmax] (``el_interval``). No CLT interval: the per-event terms rest on the few
    events with a large W, whose count drives both the estimate and its sample variance. Under E[W] = 1 the
    likelihood centres near the self-normalized estimate sum(r W) / sum(W); where IPS's own estimate mean(r W) lies
    outside it (a day whose weights averaged away from 1, with no sign that the design fails: off_interval_reason),
    the interval is widened to hold it (``kind`` "el+"), so that no estimate lies outside its own interval. Fewer
    than MIN_MATCHING matching events: no interval (the estimate is not identified, estimators/slate_family)."""
    if m.n < 2:
        return math.nan, math.nan, "none", "fewer than two events with every propensity"
    if m.n_W_pos < MIN_MATCHING:
        return math.nan, math.nan, "none", matching_reason(int(m.n_W_pos))
    if math.isinf(wmax) and not np.any(np.asarray(ymax, dtype=float) > 1.0):
        return math.nan, math.nan, "none", "no weight bound from the logged propensities"
    try:
        lo, hi = _el_interval(WeightSums.from_moments(m), 0.0, wmax, rmin, rmax, level)
    except _Overflow:
        return math.nan, math.nan, "none", overflow_interval_reason(m, wmax=wmax)
    why = off_interval_reason(est.value, lo, hi, m.n, m.s_W, m.s_W2)
    if why:
        return math.nan, math.nan, "none", why
    return holding(est.value, *_checked_ends(lo, hi))


def holding(value: float, lo: float, hi: float, kind: str, reason):
    """The interval widened to hold its own estimate (kind + "+"): a valid interval of the same quantity that does
    not contain the estimate (empirical likelihood under moment constraints centres elsewhere) stays valid when
    widened, and an estimate outside its own interval reads as an error."""
    if kind == "none" or not math.isfinite(value) or lo <= value <= hi:
        return lo, hi, kind, reason
    return min(lo, value), max(hi, value), kind + "+", reason


def matching_reason(n_match: int) -> str:
    return (f"only {n_match} logged event(s) match the target's slate, fewer than the stated minimum of "
            f"{MIN_MATCHING}: with so few the interval spans nearly the whole reward range and the estimate rests on "
            f"{n_match} event(s) (docs/estimators.md); use a longer window or a target closer to the logger")


def design_t_interval(est, m, wmax: float, ymax, rmin: float, rmax: float, level: float):
    """(ci_low, ci_high, kind, reason) of PI, wPI, PI++ and pi_beta, each its own: value -/+ t_{q, d} std_error,
    the estimator's own standard error (its per-event sample variance; delta method for wPI; cross-fitted for
    pi_beta) and the Student-t quantile with d = n_eff - 1 degrees of freedom, n_eff = n / (1 + sum_k (1/min mu_k -
    1)) the effective sample size the logger's design guarantees (``design_ess``). The heavy right tail of Y_k makes
    the sample variance low on days whose large weights came out few, so intervals miss on the low side; t with
    the design's degrees of freedom widens them by what that uncertainty costs. Measured on slotted 3/20/60 logs with
    uniform logging per position, 2,000 events a day (n_eff 24.7), 400 days, two click-rate ranges: CLT 0.907-0.955
    coverage, this interval 0.920-0.968 at 1.0-1.08 x 3.92 daily standard deviations; the empirical-likelihood
    interval with E[Y_k] = 1 (the last release's) 0.97 at up to 2x the width, shared by the four estimators and
    not always holding their estimates. Variance-reducing estimators (PI++, pi_beta) are narrower than PI exactly
    as their standard errors are. n_eff < MIN_EFFECTIVE_EVENTS: no interval. Fewer than MIN_REWARD_TERMS events
    carrying the estimate (``reward_carrying_events``): IPS's empirical-likelihood interval instead (``el``/``el+``)."""
    if m.n < 2:
        return math.nan, math.nan, "none", "fewer than two events with every propensity"
    ess = design_ess(m.n, ymax)
    if ess < MIN_EFFECTIVE_EVENTS:
        return math.nan, math.nan, "none", (f"effective sample size n/(1 + sum_k (1/min mu_k - 1)) = {ess:.3g} "
                                            f"< {MIN_EFFECTIVE_EVENTS:g}: too few events for the logger's "
                                            f"largest weights to give an interval of useful width")
    value, se = float(est.value), float(est.std_error)
    if reward_carrying_events(m) < MIN_REWARD_TERMS:
        # a sparse-click week whose matching events hold no click, or one or two: a standard error from so few terms
        # is no guide (PI's is 0 with no click; PI++'s control variates still vary and give a narrow interval around
        # 0 that misses). IPS's likelihood interval of the same value (no assumption on the slots), held to the
        # estimate, covers there; the K-moment likelihood (el_cv_interval) covered 87% for a target matching the
        # logger about once a week (benchmarks/README.md, OBD-shaped weeks)
        return weight_interval(est, m, wmax, ymax, rmin, rmax, level)
    if not (math.isfinite(value) and math.isfinite(se)):
        return math.nan, math.nan, "none", "no finite standard error (the weights' sums overflow or too few events)"
    if se <= 0:
        return math.nan, math.nan, "none", ("every per-event term is equal: no variation to build an interval "
                                            "from (an interval of width 0 would claim certainty)")
    q = float(t_ppf(0.5 + level / 2.0, ess - 1.0))
    return value - q * se, value + q * se, "t", None


def reward_carrying_events(m) -> float:
    """(sum_t r_t G_t)^2 / sum_t (r_t G_t)^2, G = 1 - K + sum_k Y_k: the effective number of events that carry
    PI's estimate (Kish's count of its per-event terms; the rewarded events that match the target where clicks are
    rare). +inf where the moments are not at hand (a paired difference's terms)."""
    if not hasattr(m, "s_r2YY"):
        return math.inf
    from .slate_basis import _basis, _rg_coef

    mvec, S = _basis(m)
    c = _rg_coef(m.K)
    with np.errstate(over="ignore", invalid="ignore"):
        total, square = float(c @ mvec), float(c @ S @ c)
    if not (math.isfinite(total) and math.isfinite(square)):
        return math.inf             # overflow: the t interval's own checks give the reason
    return total * total / square if square > 0 else 0.0


def _checked_ends(lo: float, hi: float):
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


