"""The algebra every slate estimator of :mod:`.slate` shares (seed 002; MATH.md "Slate OPE").

Every linear estimator is the mean of a per-event term T = a0 r + sum_k a_k r Y_k + b0 + sum_k b_k Y_k, so with the
basis u = (r, rY_1..rY_K, 1, Y_1..Y_K) the sums give sum T = c.m and sum T^2 = c' S c exactly, where m and the Gram
matrix S = sum u u' are read off the slate moments (:func:`_basis`). std_error is that of the mean: sqrt(s^2 / n)
with the sample variance s^2 = (sum T^2 - (sum T)^2 / n) / (n - 1). A ratio sum(A)/sum(B) uses the delta method:
s^2 = sum (A - R B)^2 / (n - 1) / mean(B)^2. Intervals here are normal (``interval_kind = "clt"``): value -/+
z_{(1+level)/2} std_error.
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
