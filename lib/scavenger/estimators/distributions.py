"""The few distribution functions the intervals and the checks need, from ``scipy.special``: the same ufuncs
``scipy.stats`` evaluates (equal to the last bit, tests/test_estimators_distributions.py) with its boundary rules, without
importing ``scipy.stats`` (0.6 s of CPU on this machine, taken from the engine's two threads during the scan).

    normal_ppf(q)        Phi^-1(q)                  (norm.ppf)
    normal_sf(x)         1 - Phi(x) = Phi(-x)       (norm.sf)
    normal_isf(q)        -Phi^-1(q)                 (norm.isf)
    chi2_ppf(q, df)      2 P^-1(df/2, q)            (chi2.ppf; P the regularized lower incomplete gamma)
    chi2_sf(x, df)       Q(df/2, x/2)               (chi2.sf)
    binom_cdf(k, n, p)   P[X <= k], X ~ Bin(n, p)   (binom.cdf)
    binom_sf(k, n, p)    P[X > k]                   (binom.sf)
    t_ppf(q, df)         Student-t quantile         (t.ppf)
"""
from __future__ import annotations

import numpy as np
import scipy.special as sc

try:                                    # what scipy.stats.binom evaluates (Boost), where this scipy has it
    from scipy.special._ufuncs import _binom_cdf, _binom_sf
except ImportError:                     # pragma: no cover - older scipy: the public route
    _binom_cdf = _binom_sf = None


def _out(values, scalar: bool):
    return float(values) if scalar else values


def normal_ppf(q):
    q = np.asarray(q, dtype=float)
    return _out(np.where((q >= 0) & (q <= 1), sc.ndtri(q), np.nan), q.ndim == 0)


def normal_sf(x):
    x = np.asarray(x, dtype=float)
    return _out(sc.ndtr(-x), x.ndim == 0)


def normal_isf(q):
    q = np.asarray(q, dtype=float)
    return _out(np.where((q >= 0) & (q <= 1), -sc.ndtri(q), np.nan), q.ndim == 0)


def chi2_ppf(q, df):
    q, df = np.broadcast_arrays(np.asarray(q, dtype=float), np.asarray(df, dtype=float))
    ok = (df > 0) & (q >= 0) & (q <= 1)
    with np.errstate(invalid="ignore"):
        return _out(np.where(ok, 2.0 * sc.gammaincinv(df / 2.0, q), np.nan), q.ndim == 0)


def t_ppf(q, df):
    q, df = np.broadcast_arrays(np.asarray(q, dtype=float), np.asarray(df, dtype=float))
    ok = (df > 0) & (q >= 0) & (q <= 1)
    with np.errstate(invalid="ignore"):
        return _out(np.where(ok, sc.stdtrit(np.where(df > 0, df, 1.0), q), np.nan), q.ndim == 0)


def chi2_sf(x, df):
    x, df = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(df, dtype=float))
    with np.errstate(invalid="ignore"):
        val = np.where(x < 0, 1.0, sc.chdtrc(df, np.maximum(x, 0.0)))
    return _out(np.where((df > 0) & ~np.isnan(x), val, np.nan), x.ndim == 0)


def _binom(k, n, p, inside, below: float, above: float):
    k, n, p = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float),
                                  np.asarray(p, dtype=float))
    ok = (n >= 0) & (n == np.floor(n)) & (p >= 0) & (p <= 1) & ~np.isnan(k)
    kk = np.floor(k)
    mid = ok & (kk >= 0) & (kk < n)
    out = np.where(ok, np.where(kk < 0, below, above), np.nan)
    if mid.any():
        out = out.copy()
        out[mid] = inside(kk[mid], n[mid], p[mid])
    return _out(out, k.ndim == 0)


def binom_cdf(k, n, p):
    if _binom_cdf is None:              # pragma: no cover
        from scipy.stats import binom
        return binom.cdf(k, n, p)
    return _binom(k, n, p, _binom_cdf, 0.0, 1.0)


def binom_sf(k, n, p):
    if _binom_sf is None:               # pragma: no cover
        from scipy.stats import binom
        return binom.sf(k, n, p)
    return _binom(k, n, p, _binom_sf, 1.0, 0.0)
