"""The ranking family (Open Bandit Pipeline 0.5's estimators_slate.py, restated in docs/ranking.md):
independent IPS, reward-interaction (cascade) IPS, their self-normalized forms and Cascade-DR (Kiyohara et al., WSDM
2022), each a pure function of the additive sums of :mod:`.ranking_sums` (notation there: y_k, v_k, V_k, A_k, B_k).

    slate_iips        (1/n) sum_i sum_k u_ik y_ik r_ik                       = s_ti / n
    slate_sniips      (1/n) sum_k N_k sum_i A^I_ik / sum_i B^I_ik           N_k = n_ui[k]
    slate_rips        (1/n) sum_i sum_k g_ik V_ik r_ik                       = s_tr / n
    slate_snrips      (1/n) sum_k N_k sum_i A^R_ik / sum_i B^R_ik           N_k = n_ur[k]
    slate_cascade_dr  (1/n) sum_i D_i,  D_i = T^R_i + sum_k g'_ik (V_i,k-1 sum_a pi_k(a|x_i) q_k(a) - V_ik q_k(a_ik))
                      with V_i0 = 1 and q_k(a) the reward-to-go model of :func:`reward_model` (cross-fitted)

n: every event the policy has a (clean) decision for, as obp's n = the number of slates: an event whose slots give
no term (a partial slate lacking position 1 has no cascade prefix; a slot without a propensity) counts in n with 0,
so each value is the expected sum of the slot rewards per logged event over the slots (IIPS) or the prefix (RIPS,
Cascade-DR) the events hold. On full slates with every propensity, N_k = n and these are obp's formulas (equal to
obp 0.5 to 6e-15 on generated cascade logs, tests/test_estimators_ranking.py); with partial slates, obp given
every event's usable rows as its slate gives the same, except that obp counts only slates with at least one row (an
event without any usable slot is in our n, in none of obp's). The item-position estimators are unbiased only when
the slots' rewards do not interact (check f); RIPS and Cascade-DR need the cascade's weaker assumption (the reward
at k depends on the ads at 1..k only), SIPS none.

Cascade-DR's model: q_k(a) = the mean reward-to-go r_k + ... + r_K over the logged events of the
SAME day and the OTHER md5 half of event_id (as pi_beta and the folds), shrunk toward that half's mean at position k
with PSEUDO_EVENTS = 20 pseudo-events: q_k(a) = (s_k(a) + 20 mbar_k) / (m_k(a) + 20); an ad never logged there
gets mbar_k. A per-(position, ad) mean is the richest model the per-day sums support without a context; it targets
the logging policy's reward-to-go (obp's SlateRegressionModel fits the target's), which changes the variance only:
the estimate is unbiased under the cascade for any q fixed before the fold it is applied to. A day's model reads
that day alone, so the day's sums are its own and days merge. Measured on 100 cascade days of 2,000 events (3/20/60
slots, seed 11): the daily spread of Cascade-DR was 0.370 / 0.505 / 0.311 / 0.263 against RIPS's 0.407 / 0.549 /
0.334 / 0.261 (most_clicked, oracle, oracle_mix, uniform_random); 5 pseudo-events gave 0.373 / 0.494 / 0.308 /
0.272, 100 gave 0.374 / 0.516 / 0.316 / 0.258: most of the spread is the reward noise of the one match a day at
position 3 (weight 3,600), which no model of the mean removes.

Intervals: each estimator's own, holding its own point estimate: the sum over positions of the design
empirical-likelihood intervals of :mod:`.ranking_interval` of the estimator's per-position term (IIPS: A^I_k under
E[v_k] = 1; RIPS: A^R_k under E[V_k] = 1; Cascade-DR: d_k under E[V_{k-1}] = E[V_k] = 1), extended to the point
estimate where it lies outside (``extra["extended_to_estimate"]``: the estimator's own value is not the likelihood's
centre). The self-normalized forms take the same likelihood interval: under E[V_k] = 1 its centre at position k is
near the ratio sum A_k / sum B_k, so it is theirs as the slate likelihood is SNIPS's (a delta-method interval of the
ratio does not hold its level on these heavy-tailed weights). Measured over 100 cascade days
of 2,000 events (the four targets): CLT coverage 64-70% (RIPS), 83-89% (Cascade-DR); this interval 100% for both,
median width 1.28-1.46 (RIPS) and 1.32-1.52 (Cascade-DR) of the value range 3 (ranking_interval says why it is
wide at that size). SN-RIPS is not identified on 54% of those days for the deterministic targets (no logged prefix
matches at position 3: 0/0, as obp's nan). std_error: the sample standard error of the mean term (plain forms,
Cascade-DR), the delta method for the self-normalized forms (the ratios' weights N_k / sum B_k held fixed;
positions beyond ranking_sums.CROSS_CAP enter through a Cauchy-Schwarz bound on their covariances). No interval
where rows hold slots beyond the pass's wide positions (n_beyond: their per-position sums are not kept).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .ranking_interval import design_el_interval
from .ranking_sums import CROSS_CAP, PSEUDO_EVENTS, reward_model  # noqa: F401 - re-exported
from .slate_basis import SlateEstimate

NAMES = ("slate_iips", "slate_sniips", "slate_rips", "slate_snrips", "slate_cascade_dr")


# one estimator's answer: the slate family's (value, standard error, interval, events, kind, why), its interval an
# empirical-likelihood one where it has one (estimators/ranking_interval.py)
RankingEstimate = SlateEstimate


class Sums:
    """One policy's sums: ``long`` = rows of ranking_sums.to_long (its days, folds and logging policies, summed
    here), ``dr`` = those of the Cascade-DR table; ``get(column, k, l)``, ``dr(column, k)``."""

    def __init__(self, long: pd.DataFrame, dr: pd.DataFrame | None = None):
        self._v = {}
        for rec in long.to_dict("records"):
            for c, x in rec.items():
                if c not in ("k", "l", "dt", "policy_id", "logging_policy", "fold") and isinstance(x, (int, float)):
                    key = (c, int(rec["k"]), int(rec.get("l", 0)))
                    self._v[key] = self._v.get(key, 0.0) + float(x)
        self.K = int(long["k"].max()) if len(long) else 0
        self.n = self.get("n")
        self._dr = {}
        for rec in ([] if dr is None else dr.to_dict("records")):
            for c in ("n", "s_d", "s_d2", "s_dk", "s_d2k", "s_vd", "s_vpd"):
                if c in rec:
                    key = (c, int(rec["k"]))
                    self._dr[key] = self._dr.get(key, 0.0) + float(rec[c])

    def get(self, column: str, k: int = 0, l: int = 0) -> float:
        return self._v.get((column, k, l), 0.0)

    def dr(self, column: str, k: int = 0) -> float:
        return self._dr.get((column, k), 0.0)

    @property
    def has_dr(self) -> bool:
        return bool(self._dr)


def _missing(name: str, n: float, reason: str, extra=None) -> RankingEstimate:
    nan = math.nan
    return RankingEstimate(name, nan, nan, nan, nan, int(n), "none", dict(extra or {}), False, reason)


def _counts(s: Sums) -> dict:
    return {c: int(s.get(c)) for c in ("n_missing_propensity", "n_no_prefix", "n_broken_prefix", "n_beyond")}


def _vmax(fam: str, ymax, K: int) -> np.ndarray:
    """The largest weight at each position: ymax_k = 1 / min mu_k (IIPS), its running product (RIPS)."""
    y = np.ones(K) if ymax is None else np.asarray(ymax, float)[:K]
    y = np.concatenate([y, np.full(K - len(y), y.max() if len(y) else 1.0)])
    return y if fam == "i" else np.cumprod(y)


def _gram(cols: list) -> tuple[np.ndarray, np.ndarray]:
    """(S, G) from the sums: ``cols`` = [[sum x_a x_b for b] for a], x_0 = 1 (so row 0 holds n and the sums)."""
    G = np.array(cols, dtype=float)
    return G[0].copy(), G


def _position_ends(s: Sums, fam: str, k: int, vmax, rb, level: float) -> tuple[float, float]:
    """The design EL interval of E[A_k] under E[v_k] = 1 (IIPS) or E[V_k] = 1 (RIPS)."""
    n, v, a = s.n, s.get(f"s_v{fam}", k), s.get(f"s_a{fam}", k)
    vv, va, aa = s.get(f"s_vv{fam}", k), s.get(f"s_va{fam}", k), s.get(f"s_aa{fam}", k, k)
    S, G = _gram([[n, v, a], [v, vv, va], [a, va, aa]])
    lo_r, hi_r = min(rb[0], 0.0), max(rb[1], 0.0)
    w = vmax[k - 1]
    phantoms = [(np.array([0.0]), 0.0, 0.0), (np.array([w]), w * lo_r, w * hi_r)]
    return design_el_interval(S, G, n, phantoms, (lo_r, hi_r), level)


def _dr_position_ends(s: Sums, k: int, vmax, rb, level: float) -> tuple[float, float]:
    """The design EL interval of E[d_k] under E[V_{k-1}] = E[V_k] = 1 (V_0 = 1: the one moment at k = 1). The
    phantoms match the target through k, through k - 1 only, or not at all; q_k lies in the range of a sum of the
    K - k + 1 slot rewards from k on."""
    n, K = s.n, s.K
    lo_r, hi_r = min(rb[0], 0.0), max(rb[1], 0.0)
    q_lo, q_hi = (K - k + 1) * lo_r, (K - k + 1) * hi_r
    w, wp = vmax[k - 1], (vmax[k - 2] if k > 1 else 1.0)
    d, dd, vd, vpd = (s.dr(c, k) for c in ("s_dk", "s_d2k", "s_vd", "s_vpd"))
    v, vv = s.get("s_vr", k), s.get("s_vvr", k)
    match = (w * (lo_r - q_hi) + wp * q_lo, w * (hi_r - q_lo) + wp * q_hi)
    if k == 1:
        S, G = _gram([[n, v, d], [v, vv, vd], [d, vd, dd]])
        phantoms = [(np.array([w]), *match), (np.array([0.0]), q_lo, q_hi)]
    else:
        p, pp, pv = s.get("s_vr", k - 1), s.get("s_vvr", k - 1), s.get("s_vpr", k)
        S, G = _gram([[n, p, v, d], [p, pp, pv, vpd], [v, pv, vv, vd], [d, vpd, vd, dd]])
        phantoms = [(np.array([wp, w]), *match), (np.array([wp, 0.0]), wp * q_lo, wp * q_hi),
                    (np.zeros(2), 0.0, 0.0)]
    return design_el_interval(S, G, n, phantoms, (lo_r, hi_r), level)


def _interval(s: Sums, fam: str, ymax, rb, level: float, dr: bool = False) -> tuple[float, float, str | None]:
    """(lo, hi, why none): the sum over the positions with a usable row of their intervals at level
    1 - (1 - level) / K', clipped to the value's range (ranking_interval)."""
    nan = math.nan
    if s.get("n_beyond") > 0:
        return nan, nan, (f"no interval: {int(s.get('n_beyond'))} event(s) hold slots beyond the pass's wide "
                          f"positions, whose per-position sums the interval needs")
    K = s.K
    used = [k for k in range(1, K + 1) if s.get(f"n_u{'r' if dr else fam}", k) > 0]
    if s.n < 2 or not used:
        return nan, nan, "no interval: fewer than two events, or no slot with a usable term"
    vmax = _vmax("r" if dr else fam, ymax, K)
    each = 1.0 - (1.0 - level) / len(used)
    with np.errstate(over="ignore", invalid="ignore"):
        ends = [_dr_position_ends(s, k, vmax, rb, each) if dr else _position_ends(s, fam, k, vmax, rb, each)
                for k in used]
    lo, hi = sum(e[0] for e in ends), sum(e[1] for e in ends)
    if not (np.all(np.isfinite(vmax)) and math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return nan, nan, ("no interval: the weights or their sums leave double precision (a propensity of about "
                          "1e-155 or less), or the events show no variation")
    return max(lo, K * min(rb[0], 0.0)), min(hi, K * max(rb[1], 0.0)), None


def _finish(name: str, s: Sums, value: float, se: float, interval, extra=None) -> RankingEstimate:
    lo, hi, why = interval
    extra = {**_counts(s), **(extra or {})}
    if not math.isfinite(value):
        return _missing(name, s.n, "the estimate is not finite: the weights' sums overflow double precision "
                                   "(a propensity of about 1e-155 or less)", extra)
    if why:
        return RankingEstimate(name, value, se, math.nan, math.nan, int(s.n), "none", extra, True, why)
    if not lo <= value <= hi:
        extra["extended_to_estimate"] = True
        lo, hi = min(lo, value), max(hi, value)
    return RankingEstimate(name, value, se, lo, hi, int(s.n), "el", extra)


def _plain(name: str, s: Sums, fam: str, ymax, rb, level) -> RankingEstimate:
    n = s.n
    if n < 1:
        return _missing(name, n, "the policy decides no event")
    st, st2 = s.get(f"s_t{fam}"), s.get(f"s_t{fam}2")
    se = math.sqrt(max(st2 - st * st / n, 0.0) / (n - 1) / n) if n > 1 else math.nan
    return _finish(name, s, st / n, se, _interval(s, fam, ymax, rb, level))


def _self_normalized(name: str, s: Sums, fam: str, ymax, rb, level) -> RankingEstimate:
    n, K = s.n, s.K
    if n < 1:
        return _missing(name, n, "the policy decides no event")
    N = np.array([s.get(f"n_u{fam}", k) for k in range(1, K + 1)])
    SA = np.array([s.get(f"s_a{fam}", k) for k in range(1, K + 1)])
    SB = np.array([s.get(f"s_b{fam}", k) for k in range(1, K + 1)])
    empty = (N > 0) & ~(SB > 0)
    if empty.any():
        where = ", ".join(str(k + 1) for k in np.flatnonzero(empty))
        return _missing(name, n, f"no usable row at position(s) {where} carries a positive weight (the target never "
                                 f"shows the logged ad there{' after the logged prefix' if fam == 'r' else ''}): "
                                 f"the self-normalized ratio is 0/0 there (obp gives nan)", _counts(s))
    if s.get("n_beyond") > 0:
        return _missing(name, n, f"{int(s.get('n_beyond'))} event(s) hold positions beyond the pass's wide columns, "
                                 f"whose per-position sums the pass does not keep: the self-normalized ratios of "
                                 f"those positions are unknown (the plain forms count them)", _counts(s))
    used = N > 0
    R = np.where(used, SA / np.where(used, SB, 1.0), 0.0)
    value = float((N * R).sum() / n)
    se = _delta_se(s, fam, N, SB, R, used)
    return _finish(name, s, value, se, _interval(s, fam, ymax, rb, level), {"positions_used": int(used.sum())})


def _delta_se(s: Sums, fam: str, N, SB, R, used) -> float:
    """sqrt(sum_i phi_i^2 / (n (n - 1))), phi_i = sum_k (N_k / sum B_k) (A_ik - R_k B_ik); pairs beyond the cap
    bounded by Cauchy-Schwarz."""
    n, K = s.n, s.K
    if n < 2:
        return math.nan
    alpha = np.where(used, N / np.where(used, SB, 1.0), 0.0)

    def c(k, l):            # sum_i (A_k - R_k B_k)(A_l - R_l B_l), k <= l stored
        a, b = R[k - 1], R[l - 1]
        return (s.get(f"s_aa{fam}", k, l) - b * s.get(f"s_ab{fam}", k, l) - a * s.get(f"s_ba{fam}", k, l)
                + a * b * s.get(f"s_bb{fam}", k, l))

    diag = np.array([max(c(k, k), 0.0) for k in range(1, K + 1)])
    m = min(K, CROSS_CAP)
    total = 0.0
    for k in range(1, K + 1):
        for l in range(k, K + 1):
            if l <= m:
                ckl = c(k, l)
            else:
                ckl = math.sqrt(diag[k - 1] * diag[l - 1])
            total += alpha[k - 1] * alpha[l - 1] * ckl * (1.0 if k == l else 2.0)
    return math.sqrt(max(total, 0.0) / (n - 1) / n)


def iips(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> RankingEstimate:
    """Independent IPS (1/n) sum_i sum_k y_ik r_ik (obp SlateIndependentIPS)."""
    return _plain("slate_iips", s, "i", ymax, reward_bounds, level)


def sniips(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> RankingEstimate:
    """(1/n) sum_k N_k sum A^I_k / sum B^I_k (obp SelfNormalizedSlateIndependentIPS)."""
    return _self_normalized("slate_sniips", s, "i", ymax, reward_bounds, level)


def rips(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> RankingEstimate:
    """Reward-interaction IPS (1/n) sum_i sum_k V_ik r_ik (obp SlateRewardInteractionIPS)."""
    return _plain("slate_rips", s, "r", ymax, reward_bounds, level)


def snrips(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> RankingEstimate:
    """(1/n) sum_k N_k sum A^R_k / sum B^R_k (obp SelfNormalizedSlateRewardInteractionIPS)."""
    return _self_normalized("slate_snrips", s, "r", ymax, reward_bounds, level)


def cascade_dr(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> RankingEstimate:
    """Cascade-DR (1/n) sum_i D_i (obp SlateCascadeDoublyRobust with q_hat = the cross-fitted reward_model)."""
    name, n = "slate_cascade_dr", s.n
    if not s.has_dr:
        return _missing(name, n, "no Cascade-DR sums (the reward model's table was not made)")
    if s.dr("n") != n:
        return _missing(name, n, f"the Cascade-DR sums hold {int(s.dr('n'))} events, the ranking sums {int(n)}: "
                                 f"they must come from the same pass")
    if n < 1:
        return _missing(name, n, "the policy decides no event")
    sd, sd2 = s.dr("s_d"), s.dr("s_d2")
    se = math.sqrt(max(sd2 - sd * sd / n, 0.0) / (n - 1) / n) if n > 1 else math.nan
    return _finish(name, s, sd / n, se, _interval(s, "r", ymax, reward_bounds, level, dr=True))


def estimates(s: Sums, ymax=None, reward_bounds=(0.0, 1.0), level: float = 0.95) -> dict:
    """{name: RankingEstimate} of the five."""
    out = [fn(s, ymax, reward_bounds, level) for fn in (iips, sniips, rips, snrips, cascade_dr)]
    return {e.estimator: e for e in out}
