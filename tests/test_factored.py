"""Factored and re-ordering estimators: equality with row-level numpy on random logs (deterministic, stochastic
and re-ordering targets; any ADC vector applied to the stored tables without a rescan), CLT coverage over seeds,
and the built-in re-orderings (random, CTR fitted on an earlier window, user score tables)."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from scavenger.estimators import factored as FA
from scavenger.estimators import reordering as RO
from scavenger.statistics import StatsConfig, merge, scan
from test_scavenging import simulate_tables, window
from test_statistics import build_random, frames

Z95 = float(norm.ppf(0.975))


@pytest.fixture(scope="module")
def case(spark):
    data = build_random(seed=13, K=3, n_ads=6, days=(0, 1), per_day=120)
    L, D = frames(spark, data)
    return data, window(scan(L, D, StatsConfig(slate_actions=False)))


def _ref_factored(data, policy, C):
    """Row-level: x = r / C_i * sum_j pi(a at j) C_j per logged impression; V = sum_a mean_a(x)."""
    C0 = np.concatenate([[0.0], C])
    dec = {d["event_id"]: d for d in data["decisions"] if d["policy_id"] == policy}
    xs = defaultdict(list)
    for ev in data["logs"]:
        d = dec[ev["event_id"]]
        for s in ev["slots"]:
            r = s["reward"] or 0.0
            c = sum(x["probability"] * C0[x["position"]] for x in d["slots"] if x["ad_id"] == s["ad_id"])
            xs[s["ad_id"]].append(r * c / C0[s["position"]])
    value = sum(np.mean(v) for v in xs.values())
    var = sum(np.var(v, ddof=1) / len(v) if len(v) > 1 else v[0] ** 2 for v in xs.values())
    # unsupported attention: target placements of ads never logged
    logged = set(xs)
    tot = uns = 0.0
    for d in dec.values():
        for x in d["slots"]:
            w = x["probability"] * C0[x["position"]]
            tot += w
            uns += w * (x["ad_id"] not in logged)
    return value, math.sqrt(var), uns / tot


@pytest.mark.parametrize("C", [(1.0, 0.613, 0.527), (1.0, 0.9, 0.2)])
def test_factored_equals_row_level(case, C):
    data, stats = case
    C = np.array(C)
    T_a = FA.ad_impressions(stats.table("ad_position"))
    fac, fsq, tp = stats.table("factored"), stats.table("factored_sq"), stats.table("target_placements")
    for p in ("det", "sto", "perm"):
        est = FA.factored_estimate(fac[fac.policy_id == p], fsq[fsq.policy_id == p], T_a, C, tp[tp.policy_id == p])
        v, se, uns = _ref_factored(data, p, C)
        assert math.isclose(est["value"], v, rel_tol=1e-9), p
        assert math.isclose(est["std_error"], se, rel_tol=1e-9), p
        assert math.isclose(est["unsupported_share"], uns, rel_tol=1e-9, abs_tol=1e-15), p
        assert math.isclose(est["ci_high"], v + Z95 * se, rel_tol=1e-9)


def test_reorder_equals_row_level(case):
    data, stats = case
    C = np.array([1.0, 0.6, 0.45])
    C0 = np.concatenate([[0.0], C])
    dec = {d["event_id"]: d for d in data["decisions"] if d["policy_id"] == "perm"}
    x, rr = [], []
    for ev in data["logs"]:
        newpos = {s["ad_id"]: s["position"] for s in dec[ev["event_id"]]["slots"]}
        for s in ev["slots"]:
            r = s["reward"] or 0.0
            x.append(r * C0[newpos[s["ad_id"]]] / C0[s["position"]])
            rr.append(r)
    x, rr = np.array(x), np.array(rr)
    n = len(data["logs"])
    fac, fsq = stats.table("factored"), stats.table("factored_sq")
    est = RO.reorder_estimate(fac[fac.policy_id == "perm"], fsq[fsq.policy_id == "perm"], stats.table("ad_position"),
                              C, n)
    assert math.isclose(est["total"], x.sum(), rel_tol=1e-9)
    assert math.isclose(est["value"], x.sum() / n, rel_tol=1e-9)
    assert math.isclose(est["total_std_error"], math.sqrt(x.size * x.var()), rel_tol=1e-9)
    R = x.sum() / rr.sum()
    assert math.isclose(est["lift"], R, rel_tol=1e-9)
    assert math.isclose(est["lift_std_error"], math.sqrt(((x - R * rr) ** 2).sum()) / rr.sum(), rel_tol=1e-9)


@pytest.mark.slow
def test_factored_clt_coverage_over_seeds():
    """95% CLT intervals of the factored estimator (true ADC) cover the truth 90-99% of the time
    (2 targets x 200 seeds of uniform factoring-model logs)."""
    hits = n = 0
    for seed in range(200):
        stats, truth, _, C = simulate_tables(1000 + seed, T=3000, K=3, n_ads=6, n_ctx=3)
        T_a = FA.ad_impressions(stats.table("ad_position"))
        fac, fsq = stats.table("factored"), stats.table("factored_sq")
        for p, v in truth.items():
            est = FA.factored_estimate(fac[fac.policy_id == p], fsq[fsq.policy_id == p], T_a, C)
            hits += est["ci_low"] <= v <= est["ci_high"]
            n += 1
    assert 0.90 <= hits / n <= 0.99, hits / n


def test_builtin_reorderings(spark):
    """random (seeded, a permutation of the logged ads), CTR scores and (context_id, ad_id, score) tables sort the
    logged slate by descending score."""
    from pyspark.sql import functions as F

    from scavenger.statistics import reorder as R

    data = build_random(seed=17, K=3, n_ads=5, days=(0,), per_day=30, with_nulls=False)
    L, _ = frames(spark, data)
    rnd = R.random_reorder(L, "reorder_random_1", seed=1).orderBy("event_id").collect()
    rnd2 = R.random_reorder(L, "reorder_random_1", seed=1).orderBy("event_id").collect()
    assert [r["slots"] for r in rnd] == [r["slots"] for r in rnd2]
    logged = {e["event_id"]: sorted(s["ad_id"] for s in e["slots"]) for e in data["logs"]}
    for r in rnd:
        assert sorted(s["ad_id"] for s in r["slots"]) == logged[r["event_id"]]
        assert [s["position"] for s in r["slots"]] == [1, 2, 3]
    # score table by ad; one ad unscored goes last
    ads = data["ads"]
    scores = pd.DataFrame({"ad_id": ads[:-1], "score": np.arange(len(ads) - 1, dtype=float)})
    got = R.score_reorder(spark, L, scores, "reorder_scores").collect()
    sc = dict(zip(scores["ad_id"], scores["score"]))
    for r in got:
        want = sorted(logged[r["event_id"]], key=lambda a: -sc.get(a, -np.inf))
        assert [s["ad_id"] for s in r["slots"]] == want
    # per-context scores
    ctx = pd.DataFrame([(c, a, float(hash((c, a)) % 97)) for c in ("c0", "c1", "c2") for a in ads],
                       columns=["context_id", "ad_id", "score"])
    got = R.score_reorder(spark, L, ctx, "reorder_scores").collect()
    sc = {(c, a): s for c, a, s in ctx.itertuples(index=False)}
    events = {e["event_id"]: e for e in data["logs"]}
    for r in got:
        c = events[r["event_id"]]["context_id"]
        want = sorted([s["ad_id"] for s in sorted(events[r["event_id"]]["slots"], key=lambda s: s["position"])],
                      key=lambda a: -sc[(c, a)])
        assert [s["ad_id"] for s in r["slots"]] == want
    # CTR scores from ad_position statistics (plain and ADC-normalised)
    ap = pd.DataFrame({"logging_policy": "x", "ad_id": ["a", "a", "b"], "position": [1, 2, 1], "m": [10, 10, 5],
                       "c": [3, 1, 2], "c2": [3, 1, 2]})
    s = R.ctr_scores(ap).set_index("ad_id")["score"]
    assert math.isclose(s["a"], 4 / 20) and math.isclose(s["b"], 2 / 5)
    s = R.ctr_scores(ap, np.array([1.0, 0.5])).set_index("ad_id")["score"]
    assert math.isclose(s["a"], 4 / 15)
    assert F is not None
