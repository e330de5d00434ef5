"""Slate off-policy estimators under a factorized logging policy (seed 002; MATH.md "Slate OPE").

Everything here is a pure numpy/pandas function of :class:`SlateMoments`, a small additive table of sums that
the statistics layer produces in ONE pass with built-in Spark SQL aggregates (``F.sum``, ``F.count``,
``F.max``) over per-event columns. Per event (events with every slot propensity present):

    Y_k = pi_k(a_k|x) / mu_k(a_k|x)   (k = 1..K)        W = prod_k Y_k        G = 1 - K + sum_k Y_k

Sums kept (flat column names of :func:`flat_columns` in brackets; j <= k for the symmetric K x K ones):

    n                      count of events with all propensities      [n]
    n_missing_propensity   count of events missing some propensity    [n_missing_propensity]
    s_r, s_r2              sum r, sum r^2                             [s_r, s_r2]
    s_Y[k], s_rY[k], s_r2Y[k]        sum Y_k, r Y_k, r^2 Y_k           [s_Y_k, s_rY_k, s_r2Y_k]
    s_YY[j,k], s_rYY[j,k], s_r2YY[j,k]  sum Y_j Y_k, r Y_j Y_k, r^2 Y_j Y_k   [s_YY_j_k, s_rYY_j_k, s_r2YY_j_k]
    s_W, s_rW, s_W2, s_rW2, s_r2W2   sum W, r W, W^2, r W^2, r^2 W^2   [same names]
    n_W_pos                count of events with W > 0                  [n_W_pos]
    max_W, max_Y[k]        max W, max Y_k                              [max_W, max_Y_k]
    n_Y_pos[k]             count of events with Y_k > 0                [n_Y_pos_k]

Two windows (days) combine by :meth:`SlateMoments.add` (sums and counts add, maxima take the max).

Which sums each estimator uses (value and variance):

    slate_ips     mean(r W)                    n, s_rW, s_r2W2
    slate_snips   sum(r W) / sum(W)            n, s_rW, s_W, s_r2W2, s_rW2, s_W2            (delta method)
    slate_pi      mean(r G)                    n, s_r, s_rY, s_r2, s_r2Y, s_r2YY
    slate_wpi     sum(r G) / sum(G)            pi's sums + s_Y, s_YY, s_rYY                 (delta method)
    slate_pi_plus_plus  mean(r G) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k)
                                               pi's sums + s_Y, s_YY (alpha_k = s_YY[k,k]/n - 1), s_rYY
    slate_pi_beta mean(r G) - sum_k beta_k mean(Y_k - 1),
                  beta_k = sum r G (Y_k - 1) / sum (Y_k - 1)^2   same sums as PI++

Variances. Every linear estimator is the mean of a per-event term T = a0 r + sum_k a_k r Y_k + b0 + sum_k b_k Y_k,
so with the basis u = (r, rY_1..rY_K, 1, Y_1..Y_K) the sums give sum T = c.m and sum T^2 = c' S c exactly, where m
and the Gram matrix S = sum u u' are read off the sums above (:func:`_basis`). std_error is that of the mean:
sqrt(s^2 / n) with the sample variance s^2 = (sum T^2 - (sum T)^2 / n) / (n - 1). A ratio sum(A)/sum(B) uses the
delta method: s^2 = sum (A - R B)^2 / (n - 1) / mean(B)^2. For PI++ and the beta estimator the data-dependent
weights (w_k, beta_k, and P' or alpha_k when estimated) are treated as fixed: the reported variance is the exact
sample variance of the per-event term r G - sum_k w_k Y_k (resp. r G - sum_k beta_k (Y_k - 1)) at the fitted
weights. Intervals here are normal (``interval_kind = "clt"``): value -/+ z_{(1+level)/2} std_error; the estimates
table gives the empirical-likelihood intervals of estimators/intervals.py instead (issue 30: these did not hold their
level on heavy-tailed weights). pi_beta with ``folds`` is cross-fitted (see its docstring).
"""
from __future__ import annotations

import math
from statistics import NormalDist
from dataclasses import dataclass, field, fields
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

ESTIMATORS = ("slate_ips", "slate_snips", "slate_pi", "slate_wpi", "slate_pi_plus_plus", "slate_pi_beta")
ALPHA_TOL = 1e-12

_SCALARS = ("n", "n_missing_propensity", "s_r", "s_r2", "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2", "n_W_pos")
_VECTORS = ("s_Y", "s_rY", "s_r2Y", "n_Y_pos")
_MATRICES = ("s_YY", "s_rYY", "s_r2YY")
_MAX_SCALARS = ("max_W",)
_MAX_VECTORS = ("max_Y",)


@dataclass(eq=False)
class SlateMoments:
    """Additive sums for one (policy, window); see the module docstring for every field."""

    K: int
    n: float = 0.0
    n_missing_propensity: float = 0.0
    s_r: float = 0.0
    s_r2: float = 0.0
    s_Y: np.ndarray = None
    s_rY: np.ndarray = None
    s_r2Y: np.ndarray = None
    s_YY: np.ndarray = None
    s_rYY: np.ndarray = None
    s_r2YY: np.ndarray = None
    s_W: float = 0.0
    s_rW: float = 0.0
    s_W2: float = 0.0
    s_rW2: float = 0.0
    s_r2W2: float = 0.0
    n_W_pos: float = 0.0
    max_W: float = 0.0
    max_Y: np.ndarray = None
    n_Y_pos: np.ndarray = None

    def __post_init__(self):
        K = int(self.K)
        if K < 1:
            raise ValueError(f"K must be >= 1, got {K}")
        self.K = K
        for name in _VECTORS + _MAX_VECTORS:
            val = getattr(self, name)
            arr = np.zeros(K) if val is None else np.asarray(val, dtype=float).reshape(K)
            setattr(self, name, arr)
        for name in _MATRICES:
            val = getattr(self, name)
            arr = np.zeros((K, K)) if val is None else np.asarray(val, dtype=float).reshape(K, K)
            setattr(self, name, arr)

    # ---- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, r, Y, n_missing_propensity: int = 0) -> "SlateMoments":
        """Row-level numpy reference: r shape (n,), Y shape (n, K) of Y_k = pi_k/mu_k.

        Rows whose Y has a non-finite entry (missing propensity) are counted in n_missing_propensity and
        left out of every sum.
        """
        r = np.asarray(r, dtype=float).reshape(-1)
        Y = np.asarray(Y, dtype=float)
        if Y.ndim != 2 or Y.shape[0] != r.shape[0]:
            raise ValueError("Y must have shape (len(r), K)")
        ok = np.all(np.isfinite(Y), axis=1)
        r, Y = r[ok], Y[ok]
        W = np.prod(Y, axis=1)
        r2 = r * r
        return cls(
            K=Y.shape[1], n=float(r.shape[0]), n_missing_propensity=float(n_missing_propensity + (~ok).sum()),
            s_r=r.sum(), s_r2=r2.sum(),
            s_Y=Y.sum(0), s_rY=(r[:, None] * Y).sum(0), s_r2Y=(r2[:, None] * Y).sum(0),
            s_YY=Y.T @ Y, s_rYY=(Y * r[:, None]).T @ Y, s_r2YY=(Y * r2[:, None]).T @ Y,
            s_W=W.sum(), s_rW=(r * W).sum(), s_W2=(W * W).sum(), s_rW2=(r * W * W).sum(),
            s_r2W2=(r2 * W * W).sum(), n_W_pos=float((W > 0).sum()),
            max_W=float(W.max()) if W.size else 0.0,
            max_Y=Y.max(0) if W.size else np.zeros(Y.shape[1]),
            n_Y_pos=(Y > 0).sum(0).astype(float),
        )

    def add(self, other: "SlateMoments") -> "SlateMoments":
        """Moments of the union of two disjoint sets of events (e.g. two days)."""
        if other.K != self.K:
            raise ValueError(f"cannot add moments with K={self.K} and K={other.K}")
        kw = {"K": self.K}
        for name in _SCALARS + _VECTORS + _MATRICES:
            kw[name] = getattr(self, name) + getattr(other, name)
        for name in _MAX_SCALARS:
            kw[name] = max(getattr(self, name), getattr(other, name))
        for name in _MAX_VECTORS:
            kw[name] = np.maximum(getattr(self, name), getattr(other, name))
        return SlateMoments(**kw)

    __add__ = add

    def to_flat(self) -> dict:
        """Flat {column: value} record with the names of :func:`flat_columns`."""
        out = {name: float(getattr(self, name)) for name in _SCALARS + _MAX_SCALARS}
        for name in _VECTORS + _MAX_VECTORS:
            for k in range(self.K):
                out[f"{name}_{k + 1}"] = float(getattr(self, name)[k])
        for name in _MATRICES:
            mat = getattr(self, name)
            for j in range(self.K):
                for k in range(j, self.K):
                    out[f"{name}_{j + 1}_{k + 1}"] = float(mat[j, k])
        return out

    @classmethod
    def from_flat(cls, record: Mapping, K: int) -> "SlateMoments":
        """Inverse of :meth:`to_flat` (e.g. one row of the statistics table); null sums read as 0."""
        def get(key):
            val = record[key]
            return 0.0 if val is None or (isinstance(val, float) and math.isnan(val)) else float(val)

        kw = {"K": K}
        for name in _SCALARS + _MAX_SCALARS:
            kw[name] = get(name)
        for name in _VECTORS + _MAX_VECTORS:
            kw[name] = np.array([get(f"{name}_{k + 1}") for k in range(K)])
        for name in _MATRICES:
            mat = np.zeros((K, K))
            for j in range(K):
                for k in range(j, K):
                    mat[j, k] = mat[k, j] = get(f"{name}_{j + 1}_{k + 1}")
            kw[name] = mat
        return cls(**kw)


def flat_columns(K: int) -> list[str]:
    """Column names of the flat moments record for K slots (the statistics layer's aggregate aliases)."""
    return list(SlateMoments(K=K).to_flat().keys())


def moment_terms(K: int) -> list[tuple[str, str, tuple]]:
    """How to aggregate each flat column in one Spark pass: (alias, agg, factors), in flat_columns order.

    agg is "sum" (F.sum of the product of the factors), "count_pos" (F.sum of 1 if the product > 0 else 0) or
    "max" (F.max of the product). Factors are symbols: "1" (the constant 1), "r", "W" (= prod_k Y_k) and
    "Y1".."YK". Aggregate over events with all propensities present, except ``n_missing_propensity``, which
    counts (agg "sum" of the factor "missing" = 1 if some Y_k is null else 0) over all events.
    """
    terms = {
        "n": ("sum", ("1",)), "n_missing_propensity": ("sum", ("missing",)),
        "s_r": ("sum", ("r",)), "s_r2": ("sum", ("r", "r")), "s_W": ("sum", ("W",)), "s_rW": ("sum", ("r", "W")),
        "s_W2": ("sum", ("W", "W")), "s_rW2": ("sum", ("r", "W", "W")), "s_r2W2": ("sum", ("r", "r", "W", "W")),
        "n_W_pos": ("count_pos", ("W",)), "max_W": ("max", ("W",)),
    }
    pre = {"s_Y": ("sum", ()), "s_rY": ("sum", ("r",)), "s_r2Y": ("sum", ("r", "r")),
           "n_Y_pos": ("count_pos", ()), "max_Y": ("max", ())}
    out = []
    for alias in flat_columns(K):
        if alias in terms:
            agg, factors = terms[alias]
        else:
            name, *idx = alias.rsplit("_", 2) if alias.startswith(_MATRICES) else alias.rsplit("_", 1)
            if name in pre:
                agg, factors = pre[name][0], pre[name][1] + (f"Y{idx[0]}",)
            else:  # s_YY / s_rYY / s_r2YY
                r_part = {"s_YY": (), "s_rYY": ("r",), "s_r2YY": ("r", "r")}[name]
                agg, factors = "sum", r_part + (f"Y{idx[0]}", f"Y{idx[1]}")
        out.append((alias, agg, factors))
    return out


@dataclass(frozen=True)
class SlateEstimate:
    """One estimator's value, standard error of the mean and normal interval."""

    estimator: str
    value: float
    std_error: float
    ci_low: float
    ci_high: float
    n_events: int
    interval_kind: str = "clt"
    extra: dict = field(default_factory=dict)


# ---- helpers ----------------------------------------------------------------------------------------------
def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(NormalDist().inv_cdf(0.5 + level / 2.0))


def _finish(name: str, value: float, var_sample: float, n: float, level: float, extra=None) -> SlateEstimate:
    """Standard error of the mean sqrt(s^2/n) and the normal interval value -/+ z se."""
    if n > 1 and math.isfinite(var_sample):
        se = math.sqrt(max(var_sample, 0.0) / n)
    else:
        se = float("nan")
    z = _z(level)
    return SlateEstimate(name, float(value), se, float(value - z * se), float(value + z * se), int(n),
                         extra=dict(extra or {}))


def _basis(m: SlateMoments) -> tuple[np.ndarray, np.ndarray]:
    """Sum vector and Gram matrix of the per-event basis u = (r, rY_1..rY_K, 1, Y_1..Y_K).

    Returns (mvec, S) with mvec = sum_t u_t and S = sum_t u_t u_t' built from the stored sums only.
    """
    K = m.K
    d = 2 * K + 2
    S = np.empty((d, d))
    R, RY, ONE, Yi = 0, slice(1, K + 1), K + 1, slice(K + 2, 2 * K + 2)
    S[R, R] = m.s_r2
    S[R, RY] = S[RY, R] = m.s_r2Y
    S[RY, RY] = m.s_r2YY
    S[R, ONE] = S[ONE, R] = m.s_r
    S[R, Yi] = S[Yi, R] = m.s_rY
    S[RY, ONE] = S[ONE, RY] = m.s_rY
    S[RY, Yi] = m.s_rYY
    S[Yi, RY] = m.s_rYY.T
    S[ONE, ONE] = m.n
    S[ONE, Yi] = S[Yi, ONE] = m.s_Y
    S[Yi, Yi] = m.s_YY
    mvec = np.concatenate([[m.s_r], m.s_rY, [m.n], m.s_Y])
    return mvec, S


def _coef(K: int, a0=0.0, a=None, b0=0.0, b=None) -> np.ndarray:
    """Coefficients of T = a0 r + sum a_k r Y_k + b0 + sum b_k Y_k in the basis of :func:`_basis`."""
    c = np.zeros(2 * K + 2)
    c[0] = a0
    c[1:K + 1] = 0.0 if a is None else a
    c[K + 1] = b0
    c[K + 2:] = 0.0 if b is None else b
    return c


def _rg_coef(K: int) -> np.ndarray:
    """r G = (1 - K) r + sum_k r Y_k."""
    return _coef(K, a0=1.0 - K, a=np.ones(K))


def _g_coef(K: int) -> np.ndarray:
    """G = (1 - K) + sum_k Y_k."""
    return _coef(K, b0=1.0 - K, b=np.ones(K))


def _linear(name: str, m: SlateMoments, c: np.ndarray, level: float, extra=None) -> SlateEstimate:
    """mean(T) and the sample variance of T from sum T = c.m and sum T^2 = c'Sc."""
    mvec, S = _basis(m)
    n = m.n
    if n <= 0:
        return _finish(name, float("nan"), float("nan"), 0, level, extra)
    sT = float(c @ mvec)
    sT2 = float(c @ S @ c)
    var = (sT2 - sT * sT / n) / (n - 1) if n > 1 else float("nan")
    return _finish(name, sT / n, var, n, level, extra)


def _ratio(name: str, n: float, sA: float, sB: float, sAA: float, sAB: float, sBB: float, level: float,
           extra=None) -> SlateEstimate:
    """Delta method for R = sum A / sum B: s^2 = sum (A - R B)^2 / (n - 1) / mean(B)^2."""
    if n <= 0 or sB == 0:
        return _finish(name, float("nan"), float("nan"), n, level, extra)
    R = sA / sB
    resid2 = sAA - 2.0 * R * sAB + R * R * sBB
    var = resid2 / (n - 1) / (sB / n) ** 2 if n > 1 else float("nan")
    return _finish(name, R, var, n, level, extra)


# ---- estimators -------------------------------------------------------------------------------------------
def ips(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Slate IPS: mean(r W), W = prod_k Y_k (seed 002 eq. 2)."""
    n = m.n
    if n <= 0:
        return _finish("slate_ips", float("nan"), float("nan"), 0, level)
    var = (m.s_r2W2 - m.s_rW ** 2 / n) / (n - 1) if n > 1 else float("nan")
    return _finish("slate_ips", m.s_rW / n, var, n, level)


def snips(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Self-normalized slate IPS: sum(r W) / sum(W) (MATH.md Slate OPE); delta-method variance."""
    return _ratio("slate_snips", m.n, m.s_rW, m.s_W, m.s_r2W2, m.s_rW2, m.s_W2, level)


def pi(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Pseudoinverse: mean(r G), G = 1 - K + sum_k Y_k (seed 002 eq. 4)."""
    return _linear("slate_pi", m, _rg_coef(m.K), level)


def wpi(m: SlateMoments, level: float = 0.95) -> SlateEstimate:
    """Weighted PI: sum(r G) / sum(G) (MATH.md Slate OPE); delta-method variance."""
    mvec, S = _basis(m)
    a, b = _rg_coef(m.K), _g_coef(m.K)
    return _ratio("slate_wpi", m.n, float(a @ mvec), float(b @ mvec), float(a @ S @ a), float(a @ S @ b),
                  float(b @ S @ b), level)


def estimated_alpha(m: SlateMoments) -> np.ndarray:
    """alpha_k = mean(Y_k^2) - 1 (seed 002 eq. 24, plug-in)."""
    if m.n <= 0:
        return np.full(m.K, np.nan)
    return np.diag(m.s_YY) / m.n - 1.0


def alpha_exact(pi_k: np.ndarray, mu_k: np.ndarray) -> float:
    """alpha_k = E_pi[Y_k] - 1 = sum_a pi_k(a)^2 / mu_k(a) - 1 for known slot distributions (seed 002 eq. 24)."""
    pi_k = np.asarray(pi_k, dtype=float)
    mu_k = np.asarray(mu_k, dtype=float)
    sup = pi_k > 0
    return float(np.sum(pi_k[sup] ** 2 / mu_k[sup]) - 1.0)


def pi_plus_plus_weights(alpha: np.ndarray, prior_mean: float, tol: float = ALPHA_TOL):
    """w_k = P'(1 - H/alpha_k) over the slots with alpha_k > tol (others get w_k = 0) (seed 002 eq. 39).

    Returns (w, used, M, H): used is the boolean mask of kept slots, M and H their arithmetic and harmonic
    means. With fewer than one kept slot M = H = nan and w = 0 (PI++ = PI).
    """
    alpha = np.asarray(alpha, dtype=float)
    used = np.isfinite(alpha) & (alpha > tol)
    w = np.zeros(alpha.shape)
    if used.sum() == 0:
        return w, used, float("nan"), float("nan")
    a = alpha[used]
    M = float(a.mean())
    H = float(len(a) / np.sum(1.0 / a)) if np.ptp(a) > 0 else M  # equal alphas: H = M exactly, w = 0
    w[used] = prior_mean * (1.0 - H / a)
    return w, used, M, H


def _prior(m: SlateMoments, prior_mean):
    if prior_mean is None:
        return (m.s_r / m.n if m.n > 0 else float("nan")), "logged_mean_reward"
    return float(prior_mean), "given"


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
    c = _rg_coef(m.K) + _coef(m.K, b=-w)
    return _linear("slate_pi_plus_plus", m, c, level, extra)


def beta_weights(m: SlateMoments) -> np.ndarray:
    """beta_k = sum r G (Y_k - 1) / sum (Y_k - 1)^2 (follow-up paper; MATH.md); 0 where the denominator is 0."""
    mvec, S = _basis(m)
    K = m.K
    rg = _rg_coef(K)
    beta = np.zeros(K)
    for k in range(K):
        e = np.zeros(K)
        e[k] = 1.0
        z = _coef(K, b0=-1.0, b=e)  # Z_k = Y_k - 1
        den = float(z @ S @ z)
        if den > 0:
            beta[k] = float(rg @ S @ z) / den
    return beta


def _beta_coef(K: int, beta: np.ndarray) -> np.ndarray:
    """T = r G - sum_k beta_k (Y_k - 1)."""
    return _rg_coef(K) + _coef(K, b0=float(beta.sum()), b=-beta)


def pi_beta(m: SlateMoments, level: float = 0.95, folds=None) -> SlateEstimate:
    """PI with data-driven control variates: mean(r G) - sum_k beta_k mean(Y_k - 1).

    Without ``folds``: beta fitted on all events, variance the sample variance of T = r G - sum_k beta_k (Y_k - 1)
    at the fitted beta (treated as fixed). With ``folds`` = (moments of fold 0, of fold 1), the events' fair coin
    (cross-fitting, Chernozhukov et al. 2018): beta^(f) fitted on fold f is applied to the other fold, so
    value = sum_f sum_{t in f} T_t(beta^(1-f)) / n and, the folds independent given the betas,
    Var = sum_f n_f s_f^2 / n^2 with s_f^2 the sample variance of T(beta^(1-f)) over fold f.
    """
    f0, f1 = folds if folds is not None else (None, None)
    if f0 is None or f1 is None or min(f0.n, f1.n) < 2 or f0.K != m.K or f1.K != m.K:
        beta = beta_weights(m)
        return _linear("slate_pi_beta", m, _beta_coef(m.K, beta), level, {"beta": beta.tolist()})
    betas = (beta_weights(f1), beta_weights(f0))      # applied to fold 0, to fold 1
    total, var_sum = 0.0, 0.0
    for fold, beta in zip((f0, f1), betas):
        mvec, S = _basis(fold)
        c = _beta_coef(m.K, beta)
        sT, sT2 = float(c @ mvec), float(c @ S @ c)
        total += sT
        var_sum += (sT2 - sT * sT / fold.n) / (fold.n - 1) * fold.n
    n = f0.n + f1.n
    est = _finish("slate_pi_beta", total / n, var_sum / n, n, level,
                  {"beta": [b.tolist() for b in betas], "crossfit": True})
    return est


def all_estimates(m: SlateMoments, level: float = 0.95, prior_mean: float | None = None, alpha=None,
                  estimators: Iterable[str] = ESTIMATORS) -> list[SlateEstimate]:
    fns = {
        "slate_ips": lambda: ips(m, level),
        "slate_snips": lambda: snips(m, level),
        "slate_pi": lambda: pi(m, level),
        "slate_wpi": lambda: wpi(m, level),
        "slate_pi_plus_plus": lambda: pi_plus_plus(m, prior_mean, alpha, level),
        "slate_pi_beta": lambda: pi_beta(m, level),
    }
    unknown = set(estimators) - set(fns)
    if unknown:
        raise ValueError(f"unknown slate estimators: {sorted(unknown)}")
    return [fns[name]() for name in estimators]


ESTIMATE_COLUMNS = ["policy_id", "estimator", "value", "std_error", "ci_low", "ci_high", "interval_kind",
                    "n_events", "n_missing_propensity", "level", "prior_mean", "prior_source"]


def estimate_frame(m: SlateMoments, policy_id: str, level: float = 0.95, prior_mean: float | None = None,
                   alpha=None, estimators: Iterable[str] = ESTIMATORS) -> pd.DataFrame:
    """Tidy rows (one per estimator) for the ``estimates`` table of ``scavenger evaluate``."""
    rows = []
    for est in all_estimates(m, level, prior_mean, alpha, estimators):
        rows.append({
            "policy_id": policy_id, "estimator": est.estimator, "value": est.value, "std_error": est.std_error,
            "ci_low": est.ci_low, "ci_high": est.ci_high, "interval_kind": est.interval_kind,
            "n_events": est.n_events, "n_missing_propensity": int(m.n_missing_propensity), "level": level,
            "prior_mean": est.extra.get("prior_mean"), "prior_source": est.extra.get("prior_source"),
        })
    return pd.DataFrame(rows, columns=ESTIMATE_COLUMNS)


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
    sG, sG2 = float(g @ mvec), float(g @ S @ g)
    total = n + m.n_missing_propensity
    return {
        "K": m.K, "n_events": n, "n_missing_propensity": m.n_missing_propensity,
        "missing_propensity_share": m.n_missing_propensity / total if total > 0 else float("nan"),
        "alpha": a.tolist(), "alpha_source": "estimated" if alpha is None else "given",
        "slots_used": k_used, "M": M, "H": H, "prior_mean": P, "prior_source": source,
        "pbar_hat": pbar_hat, "predicted_nmse_reduction": pred,
        "ess_W": m.s_W ** 2 / m.s_W2 if m.s_W2 > 0 else 0.0,
        "ess_G": sG ** 2 / sG2 if sG2 > 0 else 0.0,
        "max_W": m.max_W, "share_W_nonzero": m.n_W_pos / n if n > 0 else float("nan"),
        "max_Y": m.max_Y.tolist(),
        "share_Y_nonzero": (m.n_Y_pos / n).tolist() if n > 0 else [float("nan")] * m.K,
    }


DIAGNOSTIC_COLUMNS = ["policy_id", "metric", "slot", "value"]
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
    out = pd.DataFrame(rows, columns=DIAGNOSTIC_COLUMNS)
    out["slot"] = out["slot"].astype("Int64")
    return out


__all__ = [
    "ESTIMATORS", "SlateMoments", "SlateEstimate", "flat_columns", "moment_terms", "ips", "snips", "pi", "wpi", "pi_plus_plus",
    "pi_beta", "beta_weights", "pi_plus_plus_weights", "estimated_alpha", "alpha_exact", "all_estimates",
    "estimate_frame", "diagnostics", "diagnostics_frame",
]

# Keep dataclass field order discoverable for the statistics layer.
MOMENT_FIELDS = [f.name for f in fields(SlateMoments)]
