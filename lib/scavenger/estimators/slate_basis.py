"""The algebra every slate estimator of :mod:`.slate` shares (seed 002; MATH.md "Slate OPE").

Every linear estimator is the mean of a per-event term T = a0 r + sum_k a_k r Y_k + b0 + sum_k b_k Y_k, so with the
basis u = (r, rY_1..rY_K, 1, Y_1..Y_K) the sums give sum T = c.m and sum T^2 = c' S c exactly, where m and the Gram
matrix S = sum u u' are read off the slate moments (:func:`_basis`). std_error is that of the mean: sqrt(s^2 / n)
with the sample variance s^2 = (sum T^2 - (sum T)^2 / n) / (n - 1). A ratio sum(A)/sum(B) uses the delta method:
s^2 = sum (A - R B)^2 / (n - 1) / mean(B)^2. Intervals here are normal (``interval_kind = "clt"``): value -/+
z_{(1+level)/2} std_error.

Weights beyond double precision (a logged propensity of about 1e-155 or less: 1/mu, its square or a product of
weights exceeds 1.8e308): a stored sum is +inf. Terms an estimator does not use are left out (0 * inf would be NaN,
``_dot``/``_quad``); an estimate whose own value or variance is not finite is not identified (``identified`` False,
``reason`` says why) instead of printing a number the sums cannot give, and no Python float operation raises.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from .slate_moments import SlateMoments


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
    identified: bool = True
    reason: str | None = None


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


def _sq(x: float) -> float:
    """x ** 2, +inf where it exceeds double precision (a Python float's ** raises OverflowError there)."""
    try:
        with np.errstate(over="ignore"):       # a numpy scalar gives inf with a warning
            return x ** 2
    except OverflowError:
        return math.inf


def _dot(c: np.ndarray, v: np.ndarray) -> float:
    """c . v; where v holds a non-finite sum, over the nonzero coefficients only (0 * inf is NaN, not 0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = float(c @ v)
        if math.isfinite(out) or np.all(np.isfinite(v)):
            return out
        used = c != 0
        return float(c[used] @ v[used])


def _quad(a: np.ndarray, S: np.ndarray, b: np.ndarray) -> float:
    """a' S b; where S holds a non-finite sum, over the nonzero coefficients only (see ``_dot``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = float(a @ S @ b)
        if math.isfinite(out) or np.all(np.isfinite(S)):
            return out
        ia, ib = a != 0, b != 0
        return float(a[ia] @ S[np.ix_(ia, ib)] @ b[ib])


def nonfinite_sums(m: SlateMoments) -> list[str]:
    """Names of the slate moments' sums that are not finite (weights beyond double precision)."""
    from .slate_moments import _MATRICES, _SCALARS, _VECTORS

    return [name for name in _SCALARS + _VECTORS + _MATRICES
            if not np.all(np.isfinite(np.asarray(getattr(m, name), dtype=float)))
            and not (name == "s_r2W" and math.isnan(m.s_r2W))]      # optional (slate_moments), not an overflow


def overflow_reason(m: SlateMoments | None, what: str = "the estimate or its variance") -> str:
    """Why an estimate whose sums left double precision is not identified."""
    bad = nonfinite_sums(m) if m is not None else []
    sums = f" (the sums {', '.join(bad)} are not finite)" if bad else ""
    return (f"the importance weights overflow double precision{sums}: some logged propensity is so small (about "
            f"1e-155 or less) that its weight 1/mu, the weight's square or a product of weights exceeds 1.8e308, so "
            f"{what} cannot be computed and one event would decide it; correct or quarantine the rows with such "
            f"propensities (check e)")


def _not_identified(name: str, n: float, level: float, reason: str, extra=None) -> SlateEstimate:
    _z(level)
    nan = float("nan")
    return SlateEstimate(name, nan, nan, nan, nan, int(n), interval_kind="none", extra=dict(extra or {}),
                         identified=False, reason=reason)


NO_EVENTS = ("no event logs every propensity of the slots it holds: the estimator has no event to average; the "
             "IPS/PI family needs logged propensities")


def _checked(name: str, value: float, var_sample: float, n: float, level: float, extra=None,
             m: SlateMoments | None = None) -> SlateEstimate:
    """``_finish``, or not identified when the value or (n > 1) the sample variance is not finite: with n > 0
    events and finite sums neither can be, so the weights overflowed double precision."""
    if not math.isfinite(value) or (n > 1 and not math.isfinite(var_sample)):
        return _not_identified(name, n, level, overflow_reason(m), extra)
    return _finish(name, value, var_sample, n, level, extra)


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
        return _not_identified(name, 0, level, NO_EVENTS, extra)
    sT = _dot(c, mvec)
    sT2 = _quad(c, S, c)
    var = (sT2 - sT * sT / n) / (n - 1) if n > 1 else float("nan")
    return _checked(name, sT / n, var, n, level, extra, m)


def _ratio(name: str, n: float, sA: float, sB: float, sAA: float, sAB: float, sBB: float, level: float,
           extra=None, m: SlateMoments | None = None, no_denominator: str = "") -> SlateEstimate:
    """Delta method for R = sum A / sum B: s^2 = sum (A - R B)^2 / (n - 1) / mean(B)^2.

    Not identified (``m`` names the sums in the reason) when R or s^2 is not finite (weights beyond double
    precision); a mean(B)^2 that under- or overflows alone is divided out one factor at a time. Not identified
    either without events, or when sum B <= 0 (``no_denominator`` says why: a self-normalized estimate divides by
    the sum of the weights, which must be positive)."""
    if n <= 0:
        return _not_identified(name, 0, level, NO_EVENTS, extra)
    if sB <= 0:
        return _not_identified(name, n, level, no_denominator or f"the weights sum to {sB:.6g} <= 0 over the "
                                                                  f"{int(n)} events: no denominator", extra)
    R = sA / sB
    resid2 = sAA - 2.0 * R * sAB + R * R * sBB
    var = float("nan")
    if n > 1:
        mean_b = sB / n
        den = _sq(mean_b)
        var = resid2 / (n - 1) / den if 0.0 < den < math.inf else resid2 / (n - 1) / mean_b / mean_b
    return _checked(name, R, var, n, level, extra, m)
