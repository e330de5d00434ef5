"""Anytime-valid confidence sequences from per-day sums: a band [cs_low, cs_high] at ``level`` that holds
the estimand on every day one looks, simultaneously, computed from the same additive per-day tables as the
estimates (no event order, no raw rows, no second scan).

Route (empirical Bernstein with a predictable centre; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Thm. 4; Waudby-Smith & Ramdas 2023). Each estimator is the mean
of a per-event term x with a known range [low, high] (its estimand m = E[x]). The events of the window are taken
in blocks b = 1, 2, ...: each day's fold-0 events, then its fold-1 events (the pass's fair coin, a hash of the
event id, so the order owes nothing to the values), day after day. Before block b, from the blocks before it only
(predictable): a centre h_b (the mean of x so far, clipped into the estimand's range and above ``low``; the
middle of the range for the first block) and the scale c_b = h_b - low > 0. With xi = (x - h_b) / c_b >= -1,

    exp(lambda xi - psi_E(lambda) xi^2) <= 1 + lambda xi,   psi_E(lambda) = -log(1 - lambda) - lambda,  0 <= lambda < 1

(Fan, Grama & Liu 2015), so E[exp(lambda (x - m)/c_b - psi_E(lambda) xi^2) | past] <= (1 + lambda (m - h_b)/c_b)
exp(-lambda (m - h_b)/c_b) <= 1: over the events in any order fixed in advance,

    M_t(m) = mean over the grid LAMBDAS of exp(lambda S_t(m) - psi_E(lambda) V_t),
    S_t(m) = sum_b (sum_{i in b} x_i - n_b m) / c_b,   V_t = sum_b sum_{i in b} (x_i - h_b)^2 / c_b^2

is a nonnegative supermartingale with M_0 = 1 at the true m (a mixture of such over a fixed grid is one too), and
by Ville's inequality P(exists t: M_t(m) >= 2/alpha) <= alpha/2. S and V need per block only n_b, sum x and sum x^2
(V_t = sum_b (sum x^2 - 2 h_b sum x + n_b h_b^2) / c_b^2): the power sums of every day and fold, which the
estimators' tables hold as quadratic forms of the stored moments (estimators/slate_sequences.py). M_t(m) decreases
in m (S_t is linear in m, V_t does not depend on it), so {m : M_t(m) < 2/alpha} is a half-line [l_t, inf) with l_t
one root (Newton's method on a convex function). The upper end is the same for -x (range [-high, -low]). The
band after block t is the running intersection over the blocks so far, clipped to the estimand's range [lo, hi]:
every set intersected holds m on the event of probability >= 1 - alpha, so the intersection does too, however often
and whenever one looks.

Against the issue's route (c = m - low, V_t centred at m): the same inequality, but a predictable centre makes V_t
free of m, so the band is one interval found by one root (centred at m, M_t(m) is not monotone in m: as m falls to
``low`` the scale m - low shrinks and V_t blows up, leaving values near ``low`` unrejected). The upper end mirrors
the lower one with the term's upper bound (the complement (rmax - r) W, whose lower bound is 0, was measured too:
its variance rmax^2 Var(W) made the band twice as wide on day 20). Measured on slotted 3/20/60 logs, 1,500 events a
day (benchmarks/sequences.py, 60 held-out sequences): no band excluded the truth on any day (the naive daily
intervals did in 17-30% of sequences); PI's band is finite from day 1 and on day 20 1.94-2.06 x its t interval's
width (PI++ 2.01-2.13, pi_beta 2.12-2.33: their fixed-horizon intervals use the window's own weights); the grid (24
bets, 0.95 down to 3.4e-4 at ratio sqrt(2)) is within 3% of the narrowest of the grids tried and keeps shrinking the
band up to ~1e8 events.

What must hold: the term's range (the box of the window's weight and reward bounds, rows.weight_and_reward_bounds:
the logger's smallest logged propensity per position and the declared reward range) is the design's, known before
any block: the smallest propensity a window shows is the logger's (a logger whose smallest propensity only shows
after some days makes the earlier days' sequence one of a narrower range, which is recomputed with the wider one
on every look, not proven valid for the looks before); PI++'s w_k and pi_beta's beta_k are fixed before the block
they weigh (fitted on the blocks before: slate_sequences.py); the events are independent draws of the logged
process and E[Y_k] = 1 where control variates are used (as for every interval here). Where neither side excludes
any value of the estimand's range yet (too few events for the term's range), or the range is beyond double
precision, no band is given, with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LAMBDAS = 0.95 * 2.0 ** (-np.arange(24) / 2.0)    # the fixed grid of bets, 0.95 down to 3.4e-4, ratio sqrt(2)
NEWTON_STEPS = 100
NEWTON_TOL = 1e-15
CENTRE_FLOOR = 1e-3     # the centre h_b stays this share of the estimand's range above the term's lower bound


@dataclass(frozen=True)
class Blocks:
    """The per-event term x of one estimator over the blocks of a window, in order: events n_b, sums of x and x^2,
    and x's range [low_b, high_b] (fixed before the block: the bounds and weights known then)."""

    n: np.ndarray
    s: np.ndarray
    s2: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, rows) -> "Blocks":
        """From (n, sum x, sum x^2, low, high) per block."""
        a = np.asarray(list(rows), dtype=float).reshape(-1, 5)
        return cls(*(a[:, i].copy() for i in range(5)))

    def mirrored(self) -> "Blocks":
        """The blocks of -x (the upper end of the band is minus the lower end of -x's)."""
        return Blocks(self.n, -self.s, self.s2, -self.high, -self.low)


def psi_e(lam):
    """psi_E(lambda) = -log(1 - lambda) - lambda (Howard et al. 2021, the sub-exponential psi of Fan et al.)."""
    lam = np.asarray(lam, dtype=float)
    return -np.log1p(-lam) - lam


_PSI = psi_e(LAMBDAS)


def centres(b: Blocks, lo: float, hi: float) -> np.ndarray:
    """The predictable centre h_b of each block: the mean of x over the blocks before (the range's middle for the
    first), clipped into [lo, hi] and at least CENTRE_FLOOR x (hi - lo) above low_b."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _centres(b.n, b.s, b.low, lo, hi)


def _centres(n, s, low, lo, hi) -> np.ndarray:
    """:func:`centres` of the blocks along the last axis (``s``, ``low``, ``lo``, ``hi``: one row per side)."""
    before_n = np.concatenate([[0.0], np.cumsum(n)[:-1]])
    before_s = np.concatenate([np.zeros(s.shape[:-1] + (1,)), np.cumsum(s, axis=-1)[..., :-1]], axis=-1)
    h = np.where(before_n > 0, before_s / np.where(before_n > 0, before_n, 1.0), 0.5 * (lo + hi))
    h = np.minimum(np.maximum(h, lo), hi)
    return np.maximum(h, low + CENTRE_FLOOR * np.maximum(hi - lo, 1e-12))


def running_sums(b: Blocks, lo: float, hi: float) -> tuple:
    """(P_t, N_t, V_t) after each block: S_t(m) = P_t - m N_t, V_t as in the module docstring."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # a range near double precision's end
        return _running_sums(b.n, b.s, b.s2, b.low, lo, hi)


def _running_sums(n, s, s2, low, lo, hi) -> tuple:
    """:func:`running_sums` of the blocks along the last axis (one row per side; ``n`` and ``s2`` shared)."""
    h = _centres(n, s, low, lo, hi)
    c = h - low
    q = np.maximum(s2 - 2.0 * h * s + n * h * h, 0.0)     # sum (x - h_b)^2, >= 0 up to rounding
    return np.cumsum(s / c, axis=-1), np.cumsum(n / c, axis=-1), np.cumsum(q / c / c, axis=-1)


def log_process(b: Blocks, m: float, lo: float, hi: float, lambdas=LAMBDAS) -> np.ndarray:
    """log M_t(m) after each block (the mixture over ``lambdas``)."""
    P, N, V = running_sums(b, lo, hi)
    z = lambdas[None, :] * (P - m * N)[:, None] - psi_e(lambdas)[None, :] * V[:, None]
    top = z.max(axis=1)
    return top + np.log(np.mean(np.exp(z - top[:, None]), axis=1))


def lower_ends(b: Blocks, alpha: float, lo: float, hi: float, lambdas=LAMBDAS) -> np.ndarray:
    """l_t = inf {m : M_t(m) < 1/alpha} after each block (not yet intersected, not clipped): see :func:`_roots`."""
    return _roots(*running_sums(b, lo, hi), alpha, lambdas)


def _roots(P: np.ndarray, N: np.ndarray, V: np.ndarray, alpha: float, lambdas=LAMBDAS) -> np.ndarray:
    """(P - y) / N at the root in y = S_t(m) of g(y) = log mean_lambda exp(lambda y - psi_E(lambda) V_t) =
    log(1/alpha), for each (P_t, N_t, V_t). g is convex and increasing, so Newton's steps from y0 = min_lambda
    (log(1/alpha) + log(grid size) + psi V)/lambda, where g(y0) >= log(1/alpha), fall to the root from above
    without passing it (each root on its own: one that has converged stays put while the others go on)."""
    thr = math.log(1.0 / alpha)
    lam, psi = (LAMBDAS, _PSI) if lambdas is LAMBDAS else (np.asarray(lambdas, dtype=float), psi_e(lambdas))
    pv = psi[None, :] * V[:, None]
    y = np.min((thr + math.log(len(lam)) + pv) / lam[None, :], axis=1)
    for _ in range(NEWTON_STEPS):
        w = lam[None, :] * y[:, None] - pv
        top = w.max(axis=1)
        w -= top[:, None]
        np.exp(w, out=w)
        total = w.sum(axis=1)
        g = top + np.log(total / len(lam))
        step = (g - thr) / ((w * lam[None, :]).sum(axis=1) / total)
        y = y - np.maximum(step, 0.0)
        if np.all(step <= NEWTON_TOL * np.maximum(np.abs(y), 1.0)):
            break
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(N > 0, (P - y) / np.where(N > 0, N, 1.0), -np.inf)


def band(b: Blocks, level: float, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(cs_low, cs_high) after each block: alpha/2 per side (the upper end minus the lower end of -x's), the
    running intersection, clipped to [lo, hi]; both sides' roots in one Newton run."""
    alpha = 1.0 - level
    t = len(b.n)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # x's side, then -x's (b.mirrored())
        P, N, V = _running_sums(b.n, np.stack([b.s, -b.s]), b.s2, np.stack([b.low, -b.high]),
                                np.array([[lo], [-hi]]), np.array([[hi], [-lo]]))
    ends = _roots(P.ravel(), N.ravel(), V.ravel(), alpha / 2.0)
    low, high = ends[:t], -ends[t:]
    low = np.maximum.accumulate(np.maximum(np.where(np.isfinite(low), low, lo), lo))
    high = np.minimum.accumulate(np.minimum(np.where(np.isfinite(high), high, hi), hi))
    return low, high


def columns(b: Blocks | None, level: float, lo: float, hi: float, why: str | None = None) -> dict:
    """{cs_low, cs_high, cs_reason} of the window (the band after its last block), or null ends with the reason:
    ``why`` (given), no block, a range beyond double precision, a band that excludes no value on either side (too
    few events for the bound), or an empty band (the data contradict the range: the design's bounds are wrong)."""
    none = {"cs_low": math.nan, "cs_high": math.nan}
    if why:
        return {**none, "cs_reason": why}
    if b is None or not len(b.n) or b.n.sum() < 2:
        return {**none, "cs_reason": "fewer than two events: no confidence sequence"}
    if not np.isfinite(np.concatenate([b.low, b.high, b.s, b.s2])).all():
        return {**none, "cs_reason": ("the per-event term's range or sums are beyond double precision (a weight "
                                      "bound 1/mu of a tiny propensity): no confidence sequence")}
    low, high = band(b, level, lo, hi)
    l, h = float(low[-1]), float(high[-1])
    if l > h:
        return {**none, "cs_reason": (f"the confidence sequence is empty ([{l:.4g}, {h:.4g}]): the events contradict "
                                      f"the range the weights and rewards were assumed to have (checks a, e)")}
    span = hi - lo
    if l <= lo + 1e-12 * span and h >= hi - 1e-12 * span:
        return {**none, "cs_reason": (f"too few events for a confidence sequence: after {int(b.n.sum())} events it "
                                      f"excludes no value of [{lo:.4g}, {hi:.4g}], the range the term's bounds "
                                      f"allow (the weights' bound 1/min mu makes each side's scale large); "
                                      f"it narrows as days are added")}
    return {"cs_low": l, "cs_high": h, "cs_reason": None}


def box_range(c: np.ndarray, J: int, rmin: float, rmax: float, zmax) -> tuple[float, float]:
    """(min, max) of the term x = a0 r + sum_j a_j r Z_j + b0 + sum_j b_j Z_j (coefficients ``c`` in the layout
    (r, r Z_1..J, 1, Z_1..J) of estimators/slate_basis._basis) over r in [rmin, rmax], Z_j in [0, zmax_j]: for a
    fixed r, x is linear in each Z_j (its extremes at 0 or zmax_j); over r, the minimum of these is concave and the
    maximum convex, so both are reached at r = rmin or rmax."""
    c = np.asarray(c, dtype=float)
    z = np.asarray(zmax, dtype=float).reshape(J)
    a0, a, b0, bz = c[0], c[1:J + 1], c[J + 1], c[J + 2:2 * J + 2]
    lows, highs = [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for r in (rmin, rmax):
            slope = a * r + bz
            used = slope != 0                       # a slot no term weighs: its bound (even +inf) does not count
            ends = slope[used] * z[used]
            lows.append(a0 * r + b0 + float(np.sum(np.minimum(ends, 0.0))))
            highs.append(a0 * r + b0 + float(np.sum(np.maximum(ends, 0.0))))
    return min(lows), max(highs)
