"""The ranking family's interval: empirical likelihood (Cressie-Read lambda = -2, as
estimators/intervals.py) for the mean of a per-event term t under the design's moments E_mu[V_j] = 1, from additive
sums, with phantom points that stand for the large weights a day has not shown; one per position, summed.

At position k the events carry the design variables of the position (IIPS: v_k; RIPS: the prefix weight V_k;
Cascade-DR: V_{k-1} and V_k) and the term t of the estimator there (A^I_k, A^R_k, d_k; estimators/ranking_sums.py).
One phantom (V0, t0) joins them (N = n + 1). With p = N q - 1 over the N points,

    D*(v) = min { sum p^2 : sum q = 1, sum q V_j = 1 (each design variable), sum q t = v }
          = D1(V0) + (N v - c)^2 / s        (G the Gram matrix of (1, V, t) over the N points: c and s from it)

with D1(V0) the divergence of the design moments alone. The phantoms are the slates that match the target at the
position (V0 = the largest weights) or not (V0 = 0; Cascade-DR also: matching the prefix above k only), with t0 at
the term's smallest (lower end) and largest (upper end) value there: the interval is
{v : D*(v) <= min over phantoms of D1 + chi2_1(level)}, each end the outermost over the phantoms (as ``el_interval``
takes the outermost over w0 in {wmin, wmax}), clipped to the range of the position's value. The value's interval is
the sum of the K' positions' intervals at level 1 - (1 - level) / K' (Bonferroni; K' = positions with a usable
row), so it needs no cross moment between positions.

Why neither a plain mean's interval nor one likelihood over all positions: on 3/20/60 slots at 2,000 events a day a
deterministic target's prefix weight at position 3 is 3,600 on one event in 3,600, so most days show no match there
and the per-event variance misses the position's value (CLT: 64-70% coverage of RIPS over 100 cascade days); an
unconstrained empirical likelihood with a phantom at the term's bound (3,663) moves the upper end by 3,663 / 2,001 =
1.8 plus as much again; one likelihood with the moments of every position together let the quadratic divergence
(negative q allowed) reach the value's bound (median width 2.6-2.8 of the range 3, 3.0 for Cascade-DR). Per
position, the moment E[V_3] = 1 caps the phantom's mass at 1/3,600: 100% coverage, median width 1.3-1.5 (RIPS and
Cascade-DR; the data hold about one match at position 3 a day, so its interval stays near [0, 1]).
"""
from __future__ import annotations

import math

import numpy as np

from .distributions import chi2_ppf


def _parts(S: np.ndarray, G: np.ndarray, n: float, z0: np.ndarray):
    """(N, D1, s, c) of the closed form with phantom z0 = (1, V0, T0) added to the sums S and Gram G of (1, V, T)."""
    m = len(S) - 2
    N = n + 1.0
    Sn, Gn = S + z0, G + np.outer(z0, z0)
    spread = np.array([Gn[1 + j, 1 + j] - Sn[1 + j] ** 2 / N for j in range(m)])
    keep = [1 + j for j in range(m) if spread[j] > 1e-9 * N]
    idx = [0, *keep]
    inv = np.linalg.pinv(Gn[np.ix_(idx, idx)])
    d1 = np.array([0.0, *(N - Sn[i] for i in keep)])
    g12, g22 = Gn[idx, m + 1], Gn[m + 1, m + 1]
    return N, float(d1 @ inv @ d1), float(g22 - g12 @ inv @ g12), float(Sn[m + 1] + g12 @ inv @ d1)


def design_el_interval(S, G, n: float, phantoms, value_range, level: float = 0.95) -> tuple[float, float]:
    """(lo, hi): the interval of the module docstring. ``S``, ``G``: sums and Gram matrix over the events of
    (1, V_1..V_m, T); ``phantoms``: [(V0, T0_low, T0_high)], V0 of length m; ``value_range``: (low, high) the clip.
    NaN when fewer than two events or a sum is not finite."""
    S, G = np.asarray(S, float), np.asarray(G, float)
    if n < 2 or not (np.all(np.isfinite(S)) and np.all(np.isfinite(G))):
        return math.nan, math.nan
    m = len(S) - 2
    fixed = [j for j in range(m) if not G[1 + j, 1 + j] - S[1 + j] ** 2 / n > 1e-9 * n]
    chi2 = chi2_ppf(level, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        cands = []
        for v0, t_lo, t_hi in phantoms:
            v0 = np.array(v0, dtype=float)[:m]
            for j in fixed:             # a design variable that never varies (no weight at k): the phantom's too
                v0[j] = S[1 + j] / n
            cands.append((v0, t_lo, t_hi, _parts(S, G, n, np.concatenate([[1.0], v0, [0.0]]))[1]))
        finite = [c[3] for c in cands if math.isfinite(c[3])]
        if not finite:
            return math.nan, math.nan
        threshold = min(finite) + chi2
        lo, hi = [], []
        for v0, t_lo, t_hi, _ in cands:
            for t0, sign, out in ((t_lo, -1, lo), (t_hi, 1, hi)):
                N, d1, s, c = _parts(S, G, n, np.concatenate([[1.0], v0, [t0]]))
                rhs = threshold - d1
                if not (math.isfinite(s) and math.isfinite(c)) or rhs < 0 or s < 0:
                    continue
                out.append((c + sign * math.sqrt(s * rhs)) / N)
    low, high = value_range
    a = min(lo) if lo else low
    b = max(hi) if hi else high
    return min(max(a, low), high), max(min(b, high), low)
