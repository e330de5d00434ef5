"""Slate off-policy estimators under a factorized logging policy (seed 002; MATH.md "Slate OPE").

Everything here is a pure numpy/pandas function of the additive slate moments (:mod:`.slate_moments`: per event
Y_k = pi_k(a_k|x) / mu_k(a_k|x), W = prod_k Y_k, G = 1 - K + sum_k Y_k, and their sums); the variances use the
per-event basis of :mod:`.slate_basis`.

Which sums each estimator uses (value and variance):

    slate_ips     mean(r W)                    n, s_rW, s_r2W2
    slate_snips   sum(r W) / sum(W)            n, s_rW, s_W, s_r2W2, s_rW2, s_W2            (delta method)
    slate_pi      mean(r G)                    n, s_r, s_rY, s_r2, s_r2Y, s_r2YY
    slate_wpi     sum(r G) / sum(G)            pi's sums + s_Y, s_YY, s_rYY                 (delta method)
    slate_pi_plus_plus  mean(r G) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k)
                                               pi's sums + s_Y, s_YY (alpha_k = s_YY[k,k]/n - 1), s_rYY
    slate_pi_beta mean(r G) - sum_k beta_k mean(Y_k - 1),
                  beta_k = sum r G (Y_k - 1) / sum (Y_k - 1)^2   same sums as PI++

For PI++ and the beta estimator the data-dependent weights (w_k, beta_k, and P' or alpha_k when estimated) are
treated as fixed: the reported variance is the exact sample variance of the per-event term r G - sum_k w_k Y_k
(resp. r G - sum_k beta_k (Y_k - 1)) at the fitted weights. Intervals here are normal; the estimates table gives the
empirical-likelihood intervals of estimators/intervals.py instead (issue 30: these did not hold their level on
heavy-tailed weights). pi_beta with ``folds`` is cross-fitted (see its docstring).

A logged propensity so small that the weights leave double precision (about 1e-155 or less) makes some sums +inf:
each estimator then uses only the sums its terms hold, and is not identified (``SlateEstimate.identified``,
``reason``) where its own value or variance is not finite; a control variate whose slot's sums overflow gets
weight 0 (PI++ leaves out a slot whose alpha_k is not finite, pi_beta sets beta_k = 0). Where a weight itself is
infinite (max_Y_k = inf: 1/mu beyond 1.8e308), or for IPS/SNIPS where W = prod_k Y_k may be (prod_k max_Y_k beyond
it), an event's products with a zero factor are 0 * inf, undefined, so no sum holding them can be trusted: every
estimator resting on them is not identified (``_infinite_weights``).
"""
from __future__ import annotations

import math
import numpy as np
import pandas as pd

from .slate_basis import (NO_EVENTS, SlateEstimate, _basis, _checked, _coef, _dot, _g_coef, _linear,
                          _not_identified, _quad, _ratio, _rg_coef, _sq)
from .slate_moments import SlateMoments, flat_columns, moment_terms  # noqa: F401
from .slate_weights import (
    ALPHA_TOL,
    _beta_coef,
    _overflowing_slots,
    _prior,
    alpha_exact,
    beta_weights,
    estimated_alpha,
    pi_plus_plus_weights,
)

def _infinite_weights(m: SlateMoments, uses_w: bool) -> str | None:
    """Why the sums cannot be trusted, or None: some Y_k is infinite (max_Y_k = inf, a propensity below ~5.6e-309
    for a target probability of 1) or, for the estimators of W (``uses_w``), W = prod_k Y_k may be (prod_k max_Y_k
    or max_W beyond double precision). On such an event r Y_k, r W, W (a slot with Y = 0) are 0 * inf = NaN, which no
    sum represents."""
    y = np.asarray(m.max_Y, dtype=float)
    if np.any(np.isposinf(y)):
        what = (f"the weight Y_k = pi_k/mu_k is infinite at slot(s) "
                f"{', '.join(str(k + 1) for k in np.flatnonzero(np.isposinf(y)))}")
    elif uses_w:
        with np.errstate(over="ignore", invalid="ignore"):
            bound = float(np.prod(y))
        if math.isfinite(bound) and math.isfinite(m.max_W):
            return None
        what = f"the slate weight W = prod_k Y_k can exceed it (prod_k max Y_k = {bound:.3g})"
    else:
        return None
    return (f"the importance weights overflow double precision: {what}, a logged propensity being so small (about "
            f"1e-155 or less) that 1/mu or a product of weights exceeds 1.8e308; an event's products with a zero "
            f"reward or weight are then undefined (0 x inf), so no sum this estimator needs can be trusted; correct or "
            f"quarantine the rows with such propensities (check e)")


def _undefined(name: str, m: SlateMoments, level: float, uses_w: bool, extra=None) -> SlateEstimate | None:
    why = _infinite_weights(m, uses_w) if m.n > 0 else None
    return _not_identified(name, m.n, level, why, extra) if why else None


# ---- estimators -------------------------------------------------------------------------------------------
def ips(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Slate IPS: mean(r W), W = prod_k Y_k (seed 002 eq. 2)."""
    n = m.n
    if (bad := _undefined("slate_ips", m, level, True)) is not None:
        return bad
    if n <= 0:
        return _not_identified("slate_ips", 0, level, NO_EVENTS)
    var = (m.s_r2W2 - _sq(m.s_rW) / n) / (n - 1) if n > 1 else float("nan")
    return _checked("slate_ips", m.s_rW / n, var, n, level, m=m)


def snips(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Self-normalized slate IPS: sum(r W) / sum(W) (MATH.md Slate OPE); delta-method variance."""
    if (bad := _undefined("slate_snips", m, level, True)) is not None:
        return bad
    return _ratio("slate_snips", m.n, m.s_rW, m.s_W, m.s_r2W2, m.s_rW2, m.s_W2, level, m=m, no_denominator=(
        f"no logged slate matches the target's (sum W = {m.s_W:.6g} over the {int(m.n)} events): the self-normalized "
        f"IPS sum(r W) / sum(W) has no denominator; IPS and the PI family do not need one"))


def pi(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Pseudoinverse: mean(r G), G = 1 - K + sum_k Y_k (seed 002 eq. 4)."""
    if (bad := _undefined("slate_pi", m, level, False)) is not None:
        return bad
    return _linear("slate_pi", m, _rg_coef(m.K), level)


def wpi(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Weighted PI: sum(r G) / sum(G) (MATH.md Slate OPE); delta-method variance."""
    if (bad := _undefined("slate_wpi", m, level, False)) is not None:
        return bad
    mvec, S = _basis(m)
    a, b = _rg_coef(m.K), _g_coef(m.K)
    sG = _dot(b, mvec)
    why = (f"the target's pseudoinverse weights G = 1 - K + sum_k Y_k sum to {sG:.6g} <= 0 over the {int(m.n)} "
           f"events (few events match the target's slots), so the self-normalized PI sum(r G) / sum(G) has no "
           f"denominator; use slate_pi or slate_pi_plus_plus (not self-normalized), or a longer window")
    return _ratio("slate_wpi", m.n, _dot(a, mvec), sG, _quad(a, S, a), _quad(a, S, b), _quad(b, S, b), level, m=m,
                  no_denominator=why)


def pi_plus_plus(m: SlateMoments, prior_mean: float | None = None, alpha=None, level: float = 0.95,
                 tol: float = ALPHA_TOL) -> SlateEstimate:
    """PI++: mean(r G) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k) (seed 002 eqs. 25-26, 39).

    P' = ``prior_mean`` if given, else the logged mean reward s_r/n (``extra["prior_source"]`` says which);
    alpha_k = ``alpha`` if given (exact, policies known) else mean(Y_k^2) - 1. Slots with alpha_k <= tol are
    left out. Variance: sample variance of T = r G - sum_k w_k Y_k at the fitted w (w treated as fixed).
    """
    P, source = _prior(m, prior_mean)
    a = estimated_alpha(m) if alpha is None else np.asarray(alpha, dtype=float).reshape(m.K)
    w, used, M, H = pi_plus_plus_weights(a, P if math.isfinite(P) else 0.0, tol)
    extra = {"prior_mean": P, "prior_source": source,
             "alpha_source": "estimated" if alpha is None else "given",
             "weights": w.tolist(), "slots_used": int(used.sum()), "M": M, "H": H}
    if (bad := _undefined("slate_pi_plus_plus", m, level, False, extra)) is not None:
        return bad
    c = _rg_coef(m.K) + _coef(m.K, b=-w)
    return _linear("slate_pi_plus_plus", m, c, level, extra)


def pi_beta(m: SlateMoments, level: float = 0.95, folds=None) -> SlateEstimate:
    """PI with data-driven control variates: mean(r G) - sum_k beta_k mean(Y_k - 1).

    Without ``folds``: beta fitted on all events, variance the sample variance of T = r G - sum_k beta_k (Y_k - 1)
    at the fitted beta (treated as fixed). With ``folds`` = (moments of fold 0, of fold 1), the events' fair coin
    (cross-fitting, Chernozhukov et al. 2018): beta^(f) fitted on fold f is applied to the other fold, so
    value = sum_f sum_{t in f} T_t(beta^(1-f)) / n and, the folds independent given the betas,
    Var = sum_f n_f s_f^2 / n^2 with s_f^2 the sample variance of T(beta^(1-f)) over fold f.
    A slot whose control-variate sums overflow double precision (in either fold) gets beta_k = 0.
    """
    if (bad := _undefined("slate_pi_beta", m, level, False)) is not None:
        return bad
    f0, f1 = folds if folds is not None else (None, None)
    if f0 is None or f1 is None or min(f0.n, f1.n) < 2 or f0.K != m.K or f1.K != m.K:
        beta = beta_weights(m)
        if (over := _overflowing_slots(m)).any():
            beta = np.where(over, 0.0, beta)
        return _linear("slate_pi_beta", m, _beta_coef(m.K, beta), level, {"beta": beta.tolist()})
    betas = (beta_weights(f1), beta_weights(f0))      # applied to fold 0, to fold 1
    if (over := _overflowing_slots(f0) | _overflowing_slots(f1)).any():
        betas = tuple(np.where(over, 0.0, b) for b in betas)
    total, var_sum = 0.0, 0.0
    for fold, beta in zip((f0, f1), betas):
        mvec, S = _basis(fold)
        c = _beta_coef(m.K, beta)
        sT, sT2 = _dot(c, mvec), _quad(c, S, c)
        total += sT
        var_sum += (sT2 - sT * sT / fold.n) / (fold.n - 1) * fold.n
    n = f0.n + f1.n
    est = _checked("slate_pi_beta", total / n, var_sum / n, n, level,
                   {"beta": [b.tolist() for b in betas], "crossfit": True}, m)
    return est


def diagnostics(m: SlateMoments, prior_mean: float | None = None, alpha=None, tol: float = ALPHA_TOL) -> dict:
    """Per (policy, window) diagnostics of seed 002 (MATH.md Slate OPE).

    alpha_k per slot; M, H over the kept slots (alpha_k > tol); predicted n*MSE reduction of PI++ over PI
    P'(2 Pbar - P') K (M - H) (eq. 41) with Pbar estimated by the logged mean reward and K = kept slots;
    effective sample sizes (sum W)^2 / sum W^2 and (sum G)^2 / sum G^2; max W; share of events with W > 0.
    """
    n = m.n
    P, source = _prior(m, prior_mean)
    a = estimated_alpha(m) if alpha is None else np.asarray(alpha, dtype=float).reshape(m.K)
    _, used, M, H = pi_plus_plus_weights(a, 0.0, tol)
    k_used = int(used.sum())
    pbar_hat = m.s_r / n if n > 0 else float("nan")
    pred = P * (2.0 * pbar_hat - P) * k_used * (M - H) if k_used > 0 else 0.0
    mvec, S = _basis(m)
    g = _g_coef(m.K)
    sG, sG2 = _dot(g, mvec), _quad(g, S, g)
    total = n + m.n_missing_propensity
    return {
        "K": m.K, "n_events": n, "n_missing_propensity": m.n_missing_propensity,
        "missing_propensity_share": m.n_missing_propensity / total if total > 0 else float("nan"),
        "alpha": a.tolist(), "alpha_source": "estimated" if alpha is None else "given",
        "slots_used": k_used, "M": M, "H": H, "prior_mean": P, "prior_source": source,
        "pbar_hat": pbar_hat, "predicted_nmse_reduction": pred,
        "ess_W": _ess(m.s_W, m.s_W2),
        "ess_G": _ess(sG, sG2),
        "max_W": m.max_W, "share_W_nonzero": m.n_W_pos / n if n > 0 else float("nan"),
        "max_Y": m.max_Y.tolist(),
        "share_Y_nonzero": (m.n_Y_pos / n).tolist() if n > 0 else [float("nan")] * m.K,
    }


def _ess(s: float, s2: float) -> float:
    """(sum w)^2 / sum w^2, 0 when sum w^2 is 0; NaN when the weights' sums are not finite (beyond double
    precision: no effective sample size can be computed from them)."""
    if not (math.isfinite(s) and math.isfinite(s2)):
        return float("nan")
    if not s2 > 0:
        return 0.0
    out = _sq(s) / s2
    return out if math.isfinite(out) else float("nan")


_PER_SLOT = ("alpha", "max_Y", "share_Y_nonzero")
_POLICY_LEVEL = ("K", "n_events", "n_missing_propensity", "missing_propensity_share", "slots_used", "M", "H",
                 "prior_mean", "pbar_hat", "predicted_nmse_reduction", "ess_W", "ess_G", "max_W",
                 "share_W_nonzero")


def diagnostics_frame(m: SlateMoments, policy_id: str, prior_mean: float | None = None, alpha=None
                      ) -> pd.DataFrame:
    """Long tidy diagnostics: (policy_id, metric, slot, value); slot is 1..K for per-slot metrics, else null.

    Text facts (prior_source, alpha_source) are metrics named ``prior_source=<x>`` / ``alpha_source=<x>``
    with value 1.0 so the value column stays numeric.
    """
    d = diagnostics(m, prior_mean, alpha)
    rows = [{"policy_id": policy_id, "metric": key, "slot": None, "value": float(d[key])} for key in _POLICY_LEVEL]
    for key in _PER_SLOT:
        for k, v in enumerate(d[key]):
            rows.append({"policy_id": policy_id, "metric": key, "slot": k + 1, "value": float(v)})
    for key in ("prior_source", "alpha_source"):
        rows.append({"policy_id": policy_id, "metric": f"{key}={d[key]}", "slot": None, "value": 1.0})
    out = pd.DataFrame(rows)            # the diagnostics contract's columns: policy_id, metric, slot, value
    out["slot"] = out["slot"].astype("Int64")
    return out


__all__ = [
    "SlateMoments", "SlateEstimate", "flat_columns", "moment_terms", "ips", "snips", "pi", "wpi",
    "pi_plus_plus", "pi_beta", "beta_weights", "pi_plus_plus_weights", "estimated_alpha", "alpha_exact",
    "diagnostics", "diagnostics_frame",
]
