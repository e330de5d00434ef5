"""Confidence sequences of the ranking family (estimators/ranking_sequences.py; issue 59): each day's blocks read
from the stored ranking tables equal the per-event terms of IIPS, RIPS and Cascade-DR (1e-12), every term lies in
the range the sequence assumes, and over simulated 20-day sequences of cascade clicks with known truth the band
excludes the truth on some day at most at rate alpha (fast: few sequences at a loose bound; slow: an exact binomial
test at P = 0.001). Self-normalized forms and rows beyond the wide positions: null with the reason."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from scavenger.estimators import confidence_sequences as CS
from scavenger.estimators import ranking_sequences as RQ
from scavenger.estimators import ranking_sums as RS

NAMES = ("slate_iips", "slate_rips", "slate_cascade_dr")


class _Opts(SimpleNamespace):
    def shared(self, key, fn):
        return fn()


def _world(sizes, seed=0):
    """Click rates p[k][context, ad] and the soft target pi[k][context, ad] (4 contexts, uniform)."""
    g = np.random.default_rng(100 + seed)
    p = [g.beta(1.0, 5.0, (4, s)) for s in sizes]
    pi = [np.exp(8.0 * q) / np.exp(8.0 * q).sum(1, keepdims=True) for q in p]
    return p, pi


def _truths(sizes, seed=0) -> dict:
    """The exact values: RIPS and Cascade-DR estimate V = E_pi[sum_k prod_{j<k}(1 - p_j) p_k] (cascade clicks);
    IIPS sum_k E[prod_{j<k}(1 - p_j) under the logger] E_pi[p_k] (it assumes the slots do not interact)."""
    p, pi = _world(sizes, seed)
    v = iips = 0.0
    for c in range(4):
        for ads in itertools.product(*[range(s) for s in sizes]):
            w = np.prod([pi[k][c, a] for k, a in enumerate(ads)])
            stay = 1.0
            for k, a in enumerate(ads):
                v += 0.25 * w * stay * p[k][c, a]
                stay *= 1.0 - p[k][c, a]
        above = 1.0
        for k in range(len(sizes)):
            iips += 0.25 * above * (pi[k][c] * p[k][c]).sum()
            above *= 1.0 - p[k][c].mean()
    return {"slate_iips": iips, "slate_rips": v, "slate_cascade_dr": v}


def _day(rng, n, sizes, seed=0):
    """One day of n events: (ctx, ads, held, mu, pi of the logged ads, r, fold)."""
    p, pi = _world(sizes, seed)
    K = len(sizes)
    ctx = rng.integers(0, 4, n)
    ads = np.column_stack([rng.integers(0, s, n) for s in sizes])
    click = np.column_stack([rng.random(n) < p[k][ctx, ads[:, k]] for k in range(K)])
    first = np.where(click.any(1), click.argmax(1), K)
    r = (np.arange(K)[None, :] == first[:, None]).astype(float)           # the scan stops at the first click
    mu = np.column_stack([np.full(n, 1.0 / s) for s in sizes])
    pil = np.column_stack([pi[k][ctx, ads[:, k]] for k in range(K)])
    return ctx, ads, np.ones((n, K), bool), mu, pil, r, rng.integers(0, 2, n)


def _model_terms(day, sizes, seed=0):
    """(q of the logged ads, E_pi q) per event: the day's cross-fitted reward-to-go model (ranking_sums)."""
    ctx, ads, held, mu, pil, r, fold = day
    _, pi = _world(sizes, seed)
    K = len(sizes)
    togo = np.cumsum(r[:, ::-1], axis=1)[:, ::-1]
    rtg = pd.DataFrame([{"dt": "d", "fold": int(f), "position": k + 1, "ad_id": str(a), "m": 1.0, "s_rtg": t}
                        for f, a_row, t_row in zip(fold, ads, togo) for k, (a, t) in enumerate(zip(a_row, t_row))])
    q = RS.reward_model(rtg)
    table = {(int(x.fold), int(x.position), x.ad_id): float(x.q) for x in q.itertuples()}
    ql, ep = np.zeros(r.shape), np.zeros(r.shape)
    for f in (0, 1):
        at = fold == f
        for k in range(K):
            qk = np.array([table.get((f, k + 1, str(a)), table[(f, k + 1, None)]) for a in range(sizes[k])])
            ql[at, k] = qk[ads[at, k]]
            ep[at, k] = pi[k][ctx[at]] @ qk
    return ql, ep


def _terms(day, sizes, seed=0, dr=True) -> dict:
    """{name: per-event term} of the three estimators (ranking_sums.event_symbols, the reference)."""
    ctx, ads, held, mu, pil, r, fold = day
    s = RS.event_symbols(held, mu, pil, r)
    out = {"slate_iips": s["TI"], "slate_rips": s["TR"]}
    if dr:
        ql, ep = _model_terms(day, sizes, seed)
        out["slate_cascade_dr"] = (s["AR"] + s["VP"] * ep - s["VR"] * ql).sum(1)
    return out


def _tables(day, label, sizes, seed=0):
    """The day's stored ranking_sums and ranking_dr (long, by fold) of one policy, from the numpy reference."""
    ctx, ads, held, mu, pil, r, fold = day
    ql, ep = _model_terms(day, sizes, seed)
    sums, dr = [], []
    for f in (0, 1):
        at = fold == f
        keys = {"dt": label, "policy_id": "soft", "logging_policy": "uniform", "fold": f}
        sums.append(RS.sums_from_events(held[at], mu[at], pil[at], r[at]).assign(**keys))
        dr.append(RS.dr_sums_from_events(held[at], mu[at], pil[at], r[at], ql[at], ep[at]).assign(**keys))
    return pd.concat(sums, ignore_index=True), pd.concat(dr, ignore_index=True)


def test_blocks_from_the_stored_tables_equal_the_per_event_terms():
    sizes = (3, 5, 8)
    rng = np.random.default_rng(4)
    days = [_day(rng, 300, sizes) for _ in range(3)]
    per_day = {}
    for i, day in enumerate(days):
        s, d = _tables(day, f"d{i}", sizes)
        per_day[f"d{i}"] = {"ranking_sums": s, "ranking_dr": d}
    stats = SimpleNamespace(per_day=per_day, dates=list(per_day))
    ymax = np.array(sizes, dtype=float)
    for name in NAMES:
        got = RQ.blocks(stats, "soft", name, _Opts())
        want = []
        for i, day in enumerate(days):
            x, fold = _terms(day, sizes)[name], day[-1]
            want += [((f"d{i}", f), (float((fold == f).sum()), x[fold == f].sum(), (x[fold == f] ** 2).sum(), 0.0))
                     for f in (0, 1)]
        assert [b[0] for b in got] == [w[0] for w in want]
        assert np.allclose([b[1] for b in got], [w[1] for w in want], rtol=1e-12, atol=1e-12), name
        low, high = RQ.term_range(name, ymax, 3, (0.0, 1.0))
        x = np.concatenate([_terms(day, sizes)[name] for day in days])
        assert low <= x.min() and x.max() <= high, (name, low, high, x.min(), x.max())
    # the window's band is the last day's: one over every block (IIPS, RIPS), one per fold intersected (DR)
    opts = _Opts(level=0.95)
    for name in NAMES:
        cols = RQ.estimate_columns(stats, "soft", name, opts, ymax, 3, (0.0, 1.0))
        assert cols["cs_reason"] is None or "too few" in cols["cs_reason"], (name, cols)
    assert "ratio" in RQ.estimate_columns(stats, "soft", "slate_snrips", opts, ymax, 3, (0.0, 1.0))["cs_reason"]
    per_day["d0"]["ranking_sums"].loc[per_day["d0"]["ranking_sums"]["k"] == 0, "n_beyond"] = 1.0
    assert "beyond" in RQ.estimate_columns(stats, "soft", "slate_rips", opts, ymax, 3, (0.0, 1.0))["cs_reason"]


def test_term_range_is_the_box_of_each_term():
    """Against brute force over the positions' weight and reward corners (rewards in [-1, 2])."""
    ymax, K, rb = np.array([2.0, 4.0, 3.0]), 3, (-1.0, 2.0)
    v = np.cumprod(ymax)
    vp = np.concatenate([[1.0], v[:-1]])
    lo, hi = RQ.term_range("slate_rips", ymax, K, rb)
    assert (lo, hi) == pytest.approx((v.sum() * -1.0, v.sum() * 2.0))
    assert RQ.term_range("slate_iips", ymax, K, rb) == pytest.approx((ymax.sum() * -1.0, ymax.sum() * 2.0))
    lows, highs = [], []
    for k in range(K):      # d_k = V_k (r - q) + V_{k-1} e over V_k in [0, v_k], V_{k-1} in [0, vp_k], q, e in range
        togo = K - k
        vals = [V * (r - q) + P * e for V in (0.0, v[k]) for P in (0.0, vp[k]) for r in rb
                for q in (-togo, 2.0 * togo) for e in (-togo, 2.0 * togo)]
        lows.append(min(vals))
        highs.append(max(vals))
    assert RQ.term_range("slate_cascade_dr", ymax, K, rb) == pytest.approx((sum(lows), sum(highs)))


def _misses(sequences: int, per_day: int, days: int, sizes, seed: int = 0, dr: bool = True) -> dict:
    """{estimator: sequences whose band excluded the truth after some day} (the band after each day's blocks, as
    estimate_columns forms it: every block for IIPS and RIPS, each fold at level 1 - alpha/2 for Cascade-DR)."""
    rng = np.random.default_rng(seed)
    truth = _truths(sizes)
    K, ymax = len(sizes), np.array(sizes, dtype=float)
    out = {n: 0 for n in (NAMES if dr else NAMES[:2])}
    for _ in range(sequences):
        rows = {n: [] for n in out}
        for i in range(days):
            day = _day(rng, per_day, sizes)
            for name, x in _terms(day, sizes, dr=dr).items():
                rows[name] += [(f, len(x[day[-1] == f]), x[day[-1] == f].sum(), (x[day[-1] == f] ** 2).sum())
                               for f in (0, 1)]
        for name, r in rows.items():
            low, high = RQ.term_range(name, ymax, K, (0.0, 1.0))
            if name != "slate_cascade_dr":
                lo, hi = CS.band(CS.Blocks.of([(n, s, s2, low, high) for _, n, s, s2 in r]), 0.95, 0.0, K)
            else:
                ends = [CS.band(CS.Blocks.of([(n, s, s2, low, high) for f, n, s, s2 in r if f == g]), 0.975, 0.0, K)
                        for g in (0, 1)]
                lo, hi = np.maximum(ends[0][0], ends[1][0]), np.minimum(ends[0][1], ends[1][1])
            out[name] += int(np.any((lo > truth[name]) | (hi < truth[name])))
    return out


def test_coverage_fast():
    misses = _misses(sequences=10, per_day=300, days=15, sizes=(3, 5, 8))
    assert max(misses.values()) <= binom.ppf(0.999, 10, 0.05), misses


@pytest.mark.slow
def test_coverage_over_many_sequences():
    n = 50
    misses = _misses(sequences=n, per_day=1000, days=15, sizes=(3, 5, 8), seed=1)
    assert max(misses.values()) <= binom.ppf(0.999, n, 0.05), misses
