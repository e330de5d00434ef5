"""estimators/distributions.py equals scipy.stats to the last bit (the same ufuncs, the same boundary rules), on
grids that hold the edges: p in {0, 1}, n = 0, k < 0 and k >= n, x < 0, NaN, df = 0."""
from __future__ import annotations

import numpy as np
from scipy import stats

from scavenger.estimators import distributions as D


def _same(a, b) -> None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])


def test_normal_and_chi2_equal_scipy_stats():
    rng = np.random.default_rng(1)
    q = np.r_[0.0, 1.0, 0.5, 0.975, 1e-300, 1 - 1e-16, -0.1, 1.1, np.nan, rng.random(500)]
    x = np.r_[0.0, -3.0, 40.0, -40.0, np.inf, -np.inf, np.nan, rng.normal(size=500) * 6]
    _same(D.normal_ppf(q), stats.norm.ppf(q))
    _same(D.normal_isf(q), stats.norm.isf(q))
    _same(D.normal_sf(x), stats.norm.sf(x))
    df = np.r_[0.0, 1.0, 2.0, 7.0, rng.integers(1, 400, x.size - 4)].astype(float)
    xs = np.abs(x) * 10
    xs[:3] = [-1.0, 0.0, np.nan]
    _same(D.chi2_sf(xs, df), stats.chi2.sf(xs, df))
    for level in (0.5, 0.9, 0.95, 0.99, 0.999999):
        assert D.chi2_ppf(level, 1) == stats.chi2.ppf(level, 1)
        assert D.normal_ppf(0.5 + level / 2) == stats.norm.ppf(0.5 + level / 2)
    assert isinstance(D.chi2_ppf(0.95, 1), float) and isinstance(D.normal_sf(1.0), float)


def test_binomial_equals_scipy_stats():
    rng = np.random.default_rng(2)
    n = np.r_[0, 0, 1, 5, 5, 5, 5, 10, rng.integers(0, 5000, 3000)].astype(float)
    p = np.r_[0.3, 1.0, 0.0, 1.0, 0.0, 0.5, 0.5, 0.1, rng.random(3000)]
    k = np.r_[0, -1, 0, 5, 0, -1, 6, 3.5, np.floor(rng.random(3000) * (n[8:] + 3)) - 1]
    _same(D.binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
    _same(D.binom_sf(k, n, p), stats.binom.sf(k, n, p))
    _same(D.binom_sf(k - 1, n, p), stats.binom.sf(k - 1, n, p))
    assert np.isnan(D.binom_cdf(1, 5, 1.5)) and np.isnan(stats.binom.cdf(1, 5, 1.5))
