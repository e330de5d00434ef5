"""Intervals that hold their level (issue 30): the empirical-likelihood intervals (IPS/SNIPS; the PI family's with
its control-variate moments) against a numerical optimum of the same likelihood, coverage of IPS on rare matches,
the rules for giving no interval, cross-fitted pi_beta. The ADC side: test_estimators_intervals_adc.py. Hand-made tables and
numpy; no JVM."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq, minimize
from scipy.stats import chi2, norm

from scavenger.estimators import intervals as I
from scavenger.estimators import slate as S
from helpers.estimates import interval_of

Z95 = float(norm.ppf(0.975))
YMAX = np.array([3.0, 20.0, 60.0])


# ---- the empirical-likelihood interval against scipy ------------------------------------------------------------
def _divergence_numeric(w, r, w0, r0, v=None, q_out=None) -> float:
    """min sum (N q - 1)^2 over q with sum q = 1, sum q w = 1 (and sum q w r = v), by SLSQP (the optimal q into
    ``q_out``)."""
    W, R = np.append(w, w0), np.append(r, r0)
    N = len(W)
    cons = [{"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones(N)},
            {"type": "eq", "fun": lambda q: q @ W - 1.0, "jac": lambda q: W}]
    if v is not None:
        cons.append({"type": "eq", "fun": lambda q: q @ (W * R) - v, "jac": lambda q: W * R})
    res = minimize(lambda q: float(((N * q - 1.0) ** 2).sum()), np.full(N, 1.0 / N),
                   jac=lambda q: 2.0 * N * (N * q - 1.0), constraints=cons, method="SLSQP",
                   options={"ftol": 1e-15, "maxiter": 500})
    if q_out is not None:
        q_out[:] = res.x
    return float(res.fun)


def _interval_numeric(w, r, wmin, wmax, rmin, rmax, level):
    """The interval's definition solved numerically: per end and phantom, the root of D*(v) = D0 + chi2 beside
    the unconstrained optimum, the outermost over the phantoms, clipped to [rmin, rmax]."""
    n = len(w)
    thr = _divergence_numeric(w, r, wmax if w.sum() < n else wmin, 0.0) + chi2.ppf(level, 1)
    ends = []
    for r0, sign in ((rmin, -1), (rmax, 1)):
        cands = []
        for w0 in (wmin, wmax):
            W, Rr = np.append(w, w0), np.append(r, r0)
            q = np.empty(len(W))      # the v where D* is least: E_q[w r] under the optimum of E[w] = 1 alone
            _divergence_numeric(w, r, w0, r0, q_out=q)
            v_star = float(q @ (W * Rr))
            f = lambda v: _divergence_numeric(w, r, w0, r0, v) - thr  # noqa: E731
            if f(v_star) > 0:
                continue
            far = v_star + sign * 1.0
            while f(far) < 0:
                far = v_star + 2 * (far - v_star)
            cands.append(brentq(f, *sorted((v_star, far)), xtol=1e-12))
        v = (min(cands) if sign < 0 else max(cands)) if cands else (rmin if sign < 0 else rmax)
        ends.append(min(max(v, rmin), rmax))
    return tuple(ends)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_el_interval_equals_numerical_optimum(seed):
    rng = np.random.default_rng(seed)
    n, wmax = int(rng.integers(15, 40)), float(rng.choice([4.0, 12.0, 60.0]))
    w = np.where(rng.random(n) < 0.3, rng.uniform(0.5, wmax, n), 0.0)
    r = np.where(rng.random(n) < 0.6, rng.random(n), 0.0)
    s = I.WeightSums(n, w.sum(), (w * w).sum(), (w * r).sum(), (w * w * r).sum(), (w * w * r * r).sum())
    got = I.el_interval(s, 0.0, wmax, 0.0, 1.0, 0.95)
    ref = _interval_numeric(w, r, 0.0, wmax, 0.0, 1.0, 0.95)
    np.testing.assert_allclose(got, ref, atol=1e-6)
    for w0, r0, v in ((wmax, 1.0, 0.3), (0.0, 0.0, 0.5)):
        assert math.isclose(I.divergence(s, w0, r0, v), _divergence_numeric(w, r, w0, r0, v), rel_tol=1e-6)


def test_el_interval_basic_properties():
    # no phantom needed: weights average 1 exactly, dense matches; the interval holds the IPS value
    rng = np.random.default_rng(4)
    w = rng.choice([0.0, 2.0], 4000)
    r = (rng.random(4000) < 0.3).astype(float)
    s = I.WeightSums(4000, w.sum(), (w * w).sum(), (w * r).sum(), (w * w * r).sum(), (w * w * r * r).sum())
    lo, hi = I.el_interval(s, 0.0, 2.0, 0.0, 1.0)
    ips, se = (w * r).mean(), (w * r).std(ddof=1) / math.sqrt(4000)
    assert lo < ips < hi and 0.6 < (hi - lo) / (2 * Z95 * se) < 1.1
    # one match among many events: honest, wide, inside [rmin, rmax]
    w1 = np.zeros(2000)
    w1[0] = 3600.0
    s1 = I.WeightSums(2000, 3600.0, 3600.0 ** 2, 3600.0, 3600.0 ** 2, 3600.0 ** 2)
    lo, hi = I.el_interval(s1, 0.0, 3600.0, 0.0, 3.0)
    assert 0.0 <= lo < 1.0 < hi <= 3.0


# ---- coverage on rare matches (slate IPS) -----------------------------------------------------------------------
def _slotted_day(rng, n, d=(3, 20, 60), p=(0.3, 0.2, 0.15)):
    """One day of uniform slotted logs and a deterministic target: Y_k = d_k where the logged ad is the target's,
    rewards on the target's slate with slot click rates p (truth sum(p))."""
    d = np.asarray(d, dtype=float)
    match = rng.random((n, len(d))) < 1.0 / d
    Y = np.where(match, d, 0.0)
    r = (rng.random((n, len(d))) < np.asarray(p)).sum(1).astype(float)
    return S.SlateMoments.from_arrays(r, Y), float(np.prod(d)), float(sum(p))


@pytest.mark.slow
def test_ips_el_coverage_on_rare_matches():
    """Slotted 3/20/60 uniform logs, a greedy target: 300 days of 20,000 events (about 5.6 matching slates a
    day). Below the stated minimum of 5 matching events there is no interval, with the reason; above it the
    empirical-likelihood interval covers >= 85% of the days; the CLT one, over every day, does not."""
    rng = np.random.default_rng(30)
    hit = clt = n = few = 0
    for _ in range(300):
        m, wmax, truth = _slotted_day(rng, 20_000)
        if m.n_W_pos == 0:
            continue
        est = S.ips(m)
        lo, hi, kind, why = interval_of("slate_ips")(est, m, wmax, YMAX, 0.0, 3.0, 0.95)
        clt += est.ci_low <= truth <= est.ci_high
        if kind == "none":          # fewer matching events than the stated minimum: no interval, and the reason
            assert "match" in why and math.isnan(lo), why
            few += 1
            continue
        assert kind in ("el", "el+"), kind
        n += 1
        hit += lo <= truth <= hi
    print(f"{n} days with an interval, {few} below the minimum, coverage {hit / n:.3f}, CLT {clt / (n + few):.3f}")
    assert n + few >= 280 and n >= 150 and hit / n >= 0.85, (hit, n, few)
    assert clt / (n + few) < 0.85       # the CLT over every day with a match: why the minimum and the EL exist


def test_no_match_not_identified_and_no_zero_width():
    Y = np.zeros((300, 3))
    Y[:, 0] = 3.0
    m = S.SlateMoments.from_arrays(np.zeros(300), Y)              # no event matches every slot; all rewards 0
    lo, hi, kind, why = interval_of("slate_ips")(S.ips(m), m, 3600.0, YMAX, 0.0, 3.0, 0.95)
    assert kind == "none" and math.isnan(lo) and "match the target" in why
    # every reward 0 and no variation in Y: the CLT would give PI = 0 with [0, 0]; the interval is not [0, 0]
    lo, hi, kind, why = interval_of("slate_pi")(S.pi(m), m, 3600.0, YMAX, 0.0, 3.0, 0.95)
    assert S.pi(m).ci_low == S.pi(m).ci_high == 0.0 and (kind == "none" or hi > lo)
    assert I.clt_or_none(0.0, 0.0, 0.95)[2] == "none" and I.clt_or_none(0.1, 0.01, 0.95)[2] == "clt"


def _cv_numeric(Y, T, y0, t0, v=None) -> float:
    """min sum (N q - 1)^2 with sum q = 1, sum q Y_k = 1 (each column), and sum q T = v, by SLSQP."""
    Yp, Tp = np.vstack([Y, y0]), np.append(T, t0)
    N = len(Tp)
    cons = [{"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones(N)}]
    cons += [{"type": "eq", "fun": lambda q, k=k: q @ Yp[:, k] - 1.0, "jac": lambda q, k=k: Yp[:, k]}
             for k in range(Y.shape[1])]
    if v is not None:
        cons.append({"type": "eq", "fun": lambda q: q @ Tp - v, "jac": lambda q: Tp})
    res = minimize(lambda q: float(((N * q - 1.0) ** 2).sum()), np.full(N, 1.0 / N),
                   jac=lambda q: 2.0 * N * (N * q - 1.0), constraints=cons, method="SLSQP",
                   options={"ftol": 1e-15, "maxiter": 500})
    return float(res.fun)


@pytest.mark.parametrize("seed", [0, 1])
def test_el_cv_interval_equals_numerical_optimum(seed):
    """PI's interval: the same likelihood with E[Y_k] = 1 per slot and T = r G, solved by scipy, to 1e-6."""
    rng = np.random.default_rng(10 + seed)
    n, d = 30, np.array([2.0, 5.0])
    Y = np.where(rng.random((n, 2)) < 1 / d, d, 0.0)
    r = (rng.random((n, 2)) < 0.4).sum(1).astype(float)
    G = 1 - 2 + Y.sum(1)
    m = S.SlateMoments.from_arrays(r, Y)
    got = I.el_cv_interval(m, S._rg_coef(2), d, 0.0, 2.0, 0.95)
    y0 = np.where(Y.sum(0) < n, d, 0.0)
    ref = []
    for r0, sign in ((0.0, -1), (2.0, 1)):
        t0 = r0 * (1 - 2 + y0.sum())
        thr = _cv_numeric(Y, r * G, y0, t0) + chi2.ppf(0.95, 1)
        f = lambda v: _cv_numeric(Y, r * G, y0, t0, v) - thr  # noqa: E731
        centre = minimize(lambda v: _cv_numeric(Y, r * G, y0, t0, v[0]), [float((r * G).mean())],
                          method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12}).x[0]
        far = centre + sign
        while f(far) < 0:
            far = centre + 2 * (far - centre)
        ref.append(brentq(f, *sorted((centre, far)), xtol=1e-12))
    np.testing.assert_allclose(got, ref, atol=1e-6)


def test_pi_family_each_its_own_t_interval():
    """PI, wPI, PI++ and pi_beta: value -/+ t_{0.975, n_eff - 1} std_error, each from its own estimate and standard
    error (numpy), so each holds its estimate and PI++ is narrower than PI exactly as its standard error is."""
    from scipy.stats import t as student

    rng = np.random.default_rng(2)
    m, wmax, truth = _slotted_day(rng, 2000)
    ymax = np.array([3.0, 20.0, 60.0])
    q = student.ppf(0.975, 2000 / (1 + 2 + 19 + 59) - 1)
    for e, f in (("slate_pi", S.pi), ("slate_wpi", S.wpi), ("slate_pi_plus_plus", S.pi_plus_plus),
                 ("slate_pi_beta", S.pi_beta)):
        est = f(m)
        lo, hi, kind, why = interval_of(e)(est, m, wmax, ymax, 0.0, 3.0, 0.95)
        assert kind == "t" and why is None and lo < est.value < hi
        np.testing.assert_allclose([lo, hi], [est.value - q * est.std_error, est.value + q * est.std_error],
                                   rtol=1e-12)
    pi, pp = S.pi(m), S.pi_plus_plus(m)
    w = {e.estimator: interval_of(e.estimator)(e, m, wmax, ymax, 0.0, 3.0, 0.95) for e in (pi, pp)}
    assert (w["slate_pi_plus_plus"][1] - w["slate_pi_plus_plus"][0]) / (w["slate_pi"][1] - w["slate_pi"][0]) == \
        pytest.approx(pp.std_error / pi.std_error, rel=1e-12)
    m300, _, _ = _slotted_day(rng, 300)
    assert I.design_ess(300, ymax) < I.MIN_EFFECTIVE_EVENTS <= I.design_ess(2000, ymax)
    assert interval_of("slate_pi")(S.pi(m300), m300, wmax, ymax, 0.0, 3.0, 0.95)[2] == "none"


def test_weight_bound():
    assert I.weight_bound([1 / 3, 1 / 20, 1 / 60]) == pytest.approx(3600.0)
    assert I.weight_bound([np.nan, 0.5]) == pytest.approx(2.0)


# ---- cross-fitted pi_beta ---------------------------------------------------------------------------------------
def test_pi_beta_crossfit_equals_numpy():
    rng = np.random.default_rng(3)
    n, d = 900, np.array([3.0, 8.0])
    Y = np.where(rng.random((n, 2)) < 1 / d, d, 0.0)
    r = (rng.random((n, 2)) < 0.3).sum(1).astype(float)
    fold = rng.integers(0, 2, n)
    G = 1 - 2 + Y.sum(1)

    def beta(sel):
        Z = Y[sel] - 1.0
        return (r[sel] * G[sel]) @ Z / (Z * Z).sum(0)

    terms = np.empty(n)
    for f in (0, 1):
        b = beta(fold == 1 - f)
        sel = fold == f
        terms[sel] = r[sel] * G[sel] - (Y[sel] - 1.0) @ b
    var = sum((fold == f).sum() * terms[fold == f].var(ddof=1) for f in (0, 1)) / n ** 2
    folds = tuple(S.SlateMoments.from_arrays(r[fold == f], Y[fold == f]) for f in (0, 1))
    est = S.pi_beta(S.SlateMoments.from_arrays(r, Y), 0.95, folds=folds)
    assert math.isclose(est.value, terms.mean(), rel_tol=1e-10)
    assert math.isclose(est.std_error, math.sqrt(var), rel_tol=1e-10)
    assert est.extra["crossfit"] is True
    plain = S.pi_beta(S.SlateMoments.from_arrays(r, Y), 0.95)      # without folds: fitted in sample, as before
    assert "crossfit" not in plain.extra


def test_ips_interval_withdrawn_when_the_estimate_lies_outside_it():
    """Weights that average far from E[W] = 1 (propensities logged too small: every W = 5) put the IPS estimate
    outside its own EL interval: no interval, and the reason states the weights' mean."""
    from scavenger.estimators import slate as S
    from scavenger.estimators.intervals import off_interval_reason

    rng = np.random.default_rng(3)
    r = (rng.random(400) < 0.4).astype(float)
    m = S.SlateMoments.from_arrays(r, np.full((400, 1), 5.0))
    est = S.ips(m)
    assert abs(est.value - 5.0 * r.mean()) < 1e-12
    lo, hi, kind, why = interval_of("slate_ips")(est, m, 10.0, [10.0], 0.0, 1.0, 0.95)
    assert kind == "none" and np.isnan(lo) and np.isnan(hi) and "weights average 5 per event" in why
    # inside its interval nothing is withdrawn; outside it, only when the weights' mean is > 5 SE off the design's
    assert off_interval_reason(0.5, 0.4, 0.6, 100, 100.0, 400.0) is None
    assert off_interval_reason(0.7, 0.4, 0.6, 100, 130.0, 400.0) is None        # mean 1.3, se 0.16: 1.9 SE
    assert "standard errors off" in off_interval_reason(0.7, 0.4, 0.6, 100, 300.0, 1000.0)   # mean 3, se .1
