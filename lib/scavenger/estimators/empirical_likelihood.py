"""The closed forms of the empirical-likelihood intervals (Cressie-Read lambda = -2; the derivation is in the
docstring of :mod:`.intervals`, which says when they are given): ``el_interval`` for E[w r] with E[w] = 1 from six
additive sums, ``el_cv_interval`` for E[T] under the K moments E[Y_k] = 1 of a factorized logger, ``divergence``
for the tests; a sum or product beyond double precision raises ``_Overflow`` inside and gives NaN outside."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .distributions import chi2_ppf
from .slate_basis import _sq


@dataclass(frozen=True)
class WeightSums:
    """The six additive sums of the empirical-likelihood interval (over all n events, w = 0 where no match)."""

    n: float
    s_w: float
    s_ww: float
    s_wr: float
    s_wwr: float
    s_wwrr: float

    @classmethod
    def from_moments(cls, m) -> "WeightSums":
        """Slate IPS weights W = prod_k Y_k from :class:`~scavenger.estimators.slate.SlateMoments`."""
        return cls(m.n, m.s_W, m.s_W2, m.s_rW, m.s_rW2, m.s_r2W2)


class _Overflow(ArithmeticError):
    """A sum, Gram entry or product of an interval's closed form is beyond double precision."""


def _finite(*xs):
    if not all(math.isfinite(x) for x in xs):
        raise _Overflow
    return xs


def _gram(s: WeightSums, w0: float, r0: float):
    """(N, sum w, sum w^2, sum w r, sum w^2 r, sum w^2 r^2) with the phantom (w0, r0) added; _Overflow when one is
    not finite."""
    return _finite(s.n + 1.0, s.s_w + w0, s.s_ww + w0 * w0, s.s_wr + w0 * r0, s.s_wwr + w0 * w0 * r0,
                   s.s_wwrr + w0 * w0 * r0 * r0)


def _d1(s: WeightSums, w0: float) -> float:
    """D1 = (N - sum w)^2 / (sum w^2 - (sum w)^2 / N): the divergence needed for E[w] = 1 alone."""
    N, a, b = _finite(s.n + 1.0, s.s_w + w0, s.s_ww + w0 * w0)
    den = b - _finite(a * a)[0] / N
    return _finite(_sq(N - a))[0] / den if den > 0 else math.inf


def _end(s: WeightSums, w0: float, r0: float, threshold: float, sign: int) -> float | None:
    """The end (sign -1 lower, +1 upper) of {v : D*(v) <= threshold} for one phantom, None when empty."""
    N, a, b, g1, g2, g3 = _gram(s, w0, r0)
    det = N * b - a * a
    if not math.isfinite(det):
        raise _Overflow
    if det <= 0:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        inv = np.array([[b, -a], [-a, N]]) / det
        d1, g12 = np.array([0.0, N - a]), np.array([g1, g2])
        schur = g3 - float(g12 @ inv @ g12)
        rhs = threshold - float(d1 @ inv @ d1)
        _finite(schur)
        if rhs < 0 or schur < 0:
            return None
        c = _finite(g1 + float(g12 @ inv @ d1))[0]
    return (c + sign * math.sqrt(max(schur, 0.0) * rhs)) / N


def el_interval(s: WeightSums, wmin: float, wmax: float, rmin: float, rmax: float, level: float = 0.95
                ) -> tuple[float, float]:
    """Cressie-Read (lambda = -2) empirical-likelihood interval for E[w r] with E[w] = 1 (module docstring); NaN
    when no weight bound or too few events, or when the weights or their sums leave double precision."""
    try:
        return _el_interval(s, wmin, wmax, rmin, rmax, level)
    except _Overflow:
        return math.nan, math.nan


def _el_interval(s: WeightSums, wmin: float, wmax: float, rmin: float, rmax: float, level: float = 0.95
                 ) -> tuple[float, float]:
    """``el_interval``; raises _Overflow where a sum or product it needs is not finite."""
    if not (wmin < 1.0 < wmax) or s.n < 1:
        return math.nan, math.nan
    threshold = _d1(s, wmax if s.s_w < s.n else wmin) + chi2_ppf(level, 1)
    ends = []
    for r0, sign in ((rmin, -1), (rmax, 1)):
        cands = [v for w0 in (wmin, wmax) if (v := _end(s, w0, r0, threshold, sign)) is not None]
        v = (min(cands) if sign < 0 else max(cands)) if cands else (rmin if sign < 0 else rmax)
        ends.append(min(max(v, rmin), rmax))
    return ends[0], ends[1]


def divergence(s: WeightSums, w0: float, r0: float, v: float) -> float:
    """D*(v) for one phantom (closed form; the tests compare it with a numerical optimum)."""
    N, a, b, g1, g2, g3 = _gram(s, w0, r0)
    G = np.array([[N, a, g1], [a, b, g2], [g1, g2, g3]])
    d = np.array([0.0, N - a, N * v - g1])
    return float(d @ np.linalg.solve(G, d))


def cv_sums(m, coef: np.ndarray):
    """(s, G): sums and Gram matrix over the n events of z = (1, Y_1..Y_K, T), T = coef . u in the slate basis u =
    (r, r Y_1..r Y_K, 1, Y_1..Y_K) of estimators/slate._basis (T = r G for PI)."""
    from .slate import _basis

    K = m.K
    mvec, S = _basis(m)
    E = np.zeros((K + 2, 2 * K + 2))
    E[0, K + 1] = 1.0
    E[1:K + 1, K + 2:] = np.eye(K)
    E[K + 1] = coef
    return E @ mvec, E @ S @ E.T


def el_cv_interval(m, coef: np.ndarray, ymax, rmin: float, rmax: float, level: float = 0.95):
    """Empirical-likelihood interval (Cressie-Read lambda = -2) for E[T] under the K known moments E[Y_k] = 1 of a
    factorized logger (the control variates of seed 002): D*(v) = min sum (N q - 1)^2 subject to sum q = 1,
    sum q Y_k = 1 (every slot whose Y_k varies), sum q T = v, over the events and one phantom with Y_k = ymax_k
    where sum Y_k < n (else 0) and r = rmin (lower end) or rmax (upper end); interval {v : D*(v) <= D1 + chi2_1}
    with D1 the divergence of the Y constraints alone. Closed form as in ``el_interval`` (module docstring). NaN
    when the sums or the phantom's weights leave double precision."""
    try:
        return _el_cv_interval(m, coef, ymax, rmin, rmax, level)
    except _Overflow:
        return math.nan, math.nan


def _el_cv_interval(m, coef: np.ndarray, ymax, rmin: float, rmax: float, level: float = 0.95):
    """``el_cv_interval``; raises _Overflow where a sum, the phantom or the Gram matrix is not finite (a non-finite
    matrix would make the SVD of the pseudo-inverse fail)."""
    K, n = m.K, float(m.n)
    if n < 2:
        return math.nan, math.nan
    with np.errstate(over="ignore", invalid="ignore"):
        s, G = cv_sums(m, np.asarray(coef, dtype=float))
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(G))):
        raise _Overflow
    with np.errstate(over="ignore", invalid="ignore"):
        spread = [float(G[1 + k, 1 + k] - s[1 + k] ** 2 / n) for k in range(K)]
    keep = [1 + k for k in range(K) if _finite(spread[k])[0] > 1e-9 * n]
    idx, N = [0, *keep], n + 1.0
    y0 = np.where(s[1:K + 1] < n, np.asarray(ymax, dtype=float), 0.0)
    for k in range(K):          # a slot whose Y_k never varies (e.g. a position no row holds: Y_k = 1) keeps it
        if 1 + k not in keep:
            y0[k] = s[1 + k] / n
    ends = []
    for r0, sign in ((rmin, -1), (rmax, 1)):
        with np.errstate(over="ignore", invalid="ignore"):
            z0 = np.concatenate([[1.0], y0, [float(coef @ np.concatenate([[r0], r0 * y0, [1.0], y0]))]])
            sN, GN = s + z0, G + np.outer(z0, z0)
        if not (np.all(np.isfinite(sN)) and np.all(np.isfinite(GN))):
            raise _Overflow
        inv = np.linalg.pinv(GN[np.ix_(idx, idx)])
        d1 = np.array([0.0, *(N - sN[i] for i in keep)])
        g12, g22 = GN[idx, K + 1], GN[K + 1, K + 1]
        schur = g22 - float(g12 @ inv @ g12)
        c = sN[K + 1] + float(g12 @ inv @ d1)
        ends.append((c + sign * math.sqrt(max(schur, 0.0) * chi2_ppf(level, 1))) / N)
    return _finite(*ends)

