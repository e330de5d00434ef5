"""The ranking family (issue 58): IIPS, RIPS, their self-normalized forms and Cascade-DR from additive per-day sums
equal Open Bandit Pipeline's formulas (helpers/ranking.py, copied from its source) on random partial slates; the
one pass's statements (statistics/sql/ranking_tables.py) equal the numpy reference on DuckDB (and Spark); the
cascade click model of the generator has the exact truth it writes; over 100 generated cascade days the intervals
of RIPS and Cascade-DR hold their level (slow)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers.ranking import (
    obp_values,
    random_events,
    ranking_tables,
    reference_sums,
    scan_to_joined,
)
from helpers.reference import build_random, with_unknown_slot_rewards, write_parquet
from scavenger.errors import UsageError
from scavenger.estimators import ranking as R
from scavenger.estimators import ranking_sums as RS
from scavenger.estimators.ranking_interval import design_el_interval

REL = 1e-9


def _sums(held, mu, pi, r, ql, ep, cut=None) -> R.Sums:
    """The sums of two 'days' (events before and after ``cut``) as the store would hold them, summed."""
    cut = len(held) // 2 if cut is None else cut
    parts = [slice(0, cut), slice(cut, len(held))]
    long = pd.concat([RS.sums_from_events(held[p], mu[p], pi[p], r[p]) for p in parts])
    dr = pd.concat([RS.dr_sums_from_events(held[p], mu[p], pi[p], r[p], ql[p], ep[p]) for p in parts])
    return R.Sums(long, dr)


# ---- (a) sums -> estimates == obp's formulas ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_estimates_equal_obp_formulas_on_partial_slates(seed):
    rng = np.random.default_rng(seed)
    n, K = int(rng.integers(30, 300)), int(rng.integers(1, 12))       # K beyond CROSS_CAP now and then
    held, mu, pi, r, ql, ep = random_events(rng, n, K)
    for policy in range(3):                                           # several targets of the same logs
        pi_p = pi if policy == 0 else np.where(rng.random((n, K)) < 0.5, rng.uniform(0, 1, (n, K)), 0.0)
        s = _sums(held, mu, pi_p, r, ql, ep)
        est = R.estimates(s, ymax=1.0 / np.nanmin(np.where(held, mu, np.nan), axis=0), reward_bounds=(0.0, 1.0))
        ref = obp_values(held, mu, pi_p, r, ql, ep)
        assert set(est) == set(ref) == set(R.NAMES)
        for name, want in ref.items():
            e = est[name]
            if not math.isfinite(want):                               # obp's 0/0 at a position: not identified
                assert not e.identified and "0/0" in e.reason, name
                continue
            assert e.identified, (name, e.reason)
            assert math.isclose(e.value, want, rel_tol=REL, abs_tol=1e-12), (seed, policy, name, e.value, want)
            # each interval holds its own estimate (the self-normalized forms' too)
            assert e.ci_low <= e.value <= e.ci_high and e.interval_kind == "el", name
            assert e.n_events == n


def test_two_days_of_sums_equal_one_pass_over_both():
    held, mu, pi, r, ql, ep = random_events(np.random.default_rng(3), 240, 5)
    day = [slice(0, 100), slice(100, 240)]
    both = RS.sums_from_events(held, mu, pi, r).set_index(["k", "l"]).sort_index()
    merged = (pd.concat([RS.sums_from_events(held[d], mu[d], pi[d], r[d]) for d in day])
              .groupby(["k", "l"]).sum().sort_index())
    np.testing.assert_allclose(merged.to_numpy(), both.to_numpy(), rtol=1e-12, atol=1e-12)
    dr_both = RS.dr_sums_from_events(held, mu, pi, r, ql, ep).set_index("k")
    dr_merged = pd.concat([RS.dr_sums_from_events(held[d], mu[d], pi[d], r[d], ql[d], ep[d]) for d in day]) \
        .groupby("k").sum()
    np.testing.assert_allclose(dr_merged.to_numpy(), dr_both.to_numpy(), rtol=1e-12, atol=1e-12)


def test_cascade_dr_with_a_zero_model_is_rips():
    held, mu, pi, r, _, _ = random_events(np.random.default_rng(4), 200, 4)
    zero = np.zeros_like(mu)
    est = R.estimates(_sums(held, mu, pi, r, zero, zero), ymax=[20.0] * 4)
    dr, rips = est["slate_cascade_dr"], est["slate_rips"]
    assert dr.value == pytest.approx(rips.value, rel=1e-12)
    assert dr.std_error == pytest.approx(rips.std_error, rel=1e-9)


def _influence_se(held, mu, pi, r, fam: str) -> float:
    """The self-normalized form's delta-method standard error from the per-event terms themselves."""
    s = RS.event_symbols(held, mu, pi, r)
    A, B, U = s[f"A{fam}"], s[f"B{fam}"], s[f"U{fam}"]
    N, SA, SB = U.sum(0), A.sum(0), B.sum(0)
    alpha = np.where(N > 0, N / np.where(SB > 0, SB, 1.0), 0.0)
    R_ = np.where(SB > 0, SA / np.where(SB > 0, SB, 1.0), 0.0)
    phi = ((A - R_ * B) * alpha).sum(1)
    n = len(phi)
    return math.sqrt((phi * phi).sum() / (n - 1) / n)


@pytest.mark.parametrize("K", [3, 8, 11])
def test_standard_errors(K):
    """Plain forms: the sample standard error of T; SN forms: the delta method, exact up to CROSS_CAP positions and
    an upper bound (Cauchy-Schwarz) beyond."""
    rng = np.random.default_rng(K)
    n = 400
    held, mu, pi, r, ql, ep = random_events(rng, n, K)
    held[:, 0] = True
    mu = np.where(np.isfinite(mu), mu, 0.5)
    pi = np.where(pi > 0, pi, 0.3)                                     # every position has positive weights
    s = _sums(held, mu, pi, r, ql, ep)
    sym = RS.event_symbols(held, mu, pi, r)
    for name, T in (("slate_iips", sym["TI"]), ("slate_rips", sym["TR"])):
        want = np.std(T, ddof=1) / math.sqrt(n)
        assert getattr(R, name.split("_")[1])(s).std_error == pytest.approx(want, rel=REL)
    for fn, fam in ((R.sniips, "I"), (R.snrips, "R")):
        got, exact = fn(s).std_error, _influence_se(held, mu, pi, r, fam)
        if K <= RS.CROSS_CAP:
            assert got == pytest.approx(exact, rel=REL)
        else:
            assert got >= exact * (1 - 1e-12)


def test_no_interval_with_rows_beyond_the_wide_positions():
    held, mu, pi, r, _, _ = random_events(np.random.default_rng(5), 100, 3)
    long = RS.sums_from_events(held, mu, pi, r)
    long.loc[(long["k"] == 0) & (long["l"] == 0), "n_beyond"] = 2.0
    e = R.rips(R.Sums(long), ymax=[20.0] * 3)
    assert e.identified and math.isfinite(e.value) and e.interval_kind == "none" and "beyond" in e.reason
    assert not R.snrips(R.Sums(long)).identified


def test_design_interval_ends_sit_on_the_threshold():
    """At each end the divergence of the weights that reach it (the minimum-norm p with sum p = 0, sum p V =
    N - sum V, sum p t = N v - sum t over the events and the phantom) equals min D1 + chi2 (brute force)."""
    from scavenger.estimators.distributions import chi2_ppf

    rng = np.random.default_rng(9)
    n = 500
    V = np.where(rng.random(n) < 0.05, 20.0, 0.0)
    t = V * (rng.random(n) < 0.4)
    U = np.column_stack([np.ones(n), V, t])
    phantoms = [(np.array([0.0]), 0.0, 0.0), (np.array([20.0]), 0.0, 20.0)]
    lo, hi = design_el_interval(U.sum(0), U.T @ U, n, phantoms, (-100.0, 100.0), 0.95)

    def divergence(v0, t0, value=None):
        X = np.vstack([U, [1.0, v0, t0]])
        N = n + 1
        M, d = X[:, :2].T, np.array([0.0, N - X[:, 1].sum()])
        if value is not None:
            M, d = X.T, np.append(d, N * value - X[:, 2].sum())
        p = np.linalg.lstsq(M, d, rcond=None)[0]
        return float(p @ p)

    threshold = min(divergence(0.0, 0.0), divergence(20.0, 0.0)) + chi2_ppf(0.95, 1)
    assert divergence(20.0, 0.0, lo) == pytest.approx(threshold, rel=1e-6) or \
        divergence(0.0, 0.0, lo) == pytest.approx(threshold, rel=1e-6)
    assert divergence(20.0, 20.0, hi) == pytest.approx(threshold, rel=1e-6)
    assert lo < t.mean() < hi


def test_reward_model_is_cross_fitted_and_shrunk():
    rtg = pd.DataFrame({"dt": ["2026-01-01"] * 5, "fold": [0, 0, 1, 1, 1], "position": [1, 1, 1, 1, 2],
                        "ad_id": ["a", "b", "a", "c", "a"], "m": [10, 30, 5, 15, 4],
                        "s_rtg": [4.0, 6.0, 3.0, 3.0, 2.0]})
    q = R.reward_model(rtg, pseudo=20.0).set_index(["fold", "position", "ad_id"], drop=False)
    c, m1 = 20.0, (3.0 + 3.0) / 20          # fold 1's mean at position 1: applied to fold 0's events
    assert q.loc[(0, 1, "a"), "q"] == pytest.approx((3.0 + c * m1) / (5 + c))
    assert q.loc[(0, 1, "c"), "q"] == pytest.approx((3.0 + c * m1) / (15 + c))
    assert ("b" not in set(q[q["fold"] == 0]["ad_id"].dropna()))     # fold 0's own ads are not its model
    m0 = 10.0 / 40
    assert q.loc[(1, 1, "b"), "q"] == pytest.approx((6.0 + c * m0) / (30 + c))
    default = q[q["ad_id"].isna()].set_index(["fold", "position"])["q"]
    assert default[(0, 1)] == pytest.approx(m1) and default[(1, 1)] == pytest.approx(m0)
    assert default[(1, 2)] == 0.0 and default[(0, 2)] == pytest.approx(0.5)   # fold 0 holds no position 2


# ---- (b) the statements == the numpy reference ------------------------------------------------------------------
def test_statements_translate():
    from scavenger.engines.dialect import to_duckdb
    from scavenger.statistics.sql import ranking_tables as RT

    for Kw in (0, 1, 3, 9):
        for fn in (RT.ranking_sums, RT.reward_to_go, RT.cascade_dr):
            assert to_duckdb(fn(Kw), f"{fn.__name__} Kw={Kw}")


def _compare(sums, dr, ref, ref_dr, Kw):
    assert len(ref) and len(sums)
    for (pid, day, lp, fold), want in ref.items():
        key = (sums.policy_id == pid) & (sums.dt == day) & (sums.logging_policy == lp) & (sums.fold == fold)
        got = sums[key].set_index(["k", "l"])
        for row in want[(want.k <= Kw) & (want.l <= Kw)].itertuples(index=False):
            for c in RS.COLUMNS:
                if c != "n_beyond":
                    assert math.isclose(got.loc[(row.k, row.l), c], getattr(row, c), rel_tol=REL, abs_tol=1e-9), \
                        (pid, day, row.k, row.l, c)
        key = (dr.policy_id == pid) & (dr.dt == day) & (dr.logging_policy == lp) & (dr.fold == fold)
        got = dr[key].set_index("k")
        for row in ref_dr[(pid, day, lp, fold)].itertuples(index=False):
            if row.k <= Kw:
                for c in RS.DR_SCALARS + RS.DR_PER_POSITION:
                    assert math.isclose(got.loc[row.k, c], getattr(row, c), rel_tol=REL, abs_tol=1e-9), (pid, c)


@pytest.mark.parametrize("shape", ["full", "partial", "unknown_rewards"])
def test_statements_equal_the_reference_on_duckdb(tmp_path, shape):
    from scavenger.engines.duck import DuckDBEngine

    data = {"full": lambda: build_random(seed=3, K=3, days=(0, 1), per_day=80),
            "partial": lambda: build_random(seed=5, K=3, days=(0, 1), per_day=80, odd_shapes=True),
            "unknown_rewards": lambda: with_unknown_slot_rewards(build_random(seed=8, K=3, days=(0, 1), per_day=80),
                                                                 0.3, 8)}[shape]()
    write_parquet(data, str(tmp_path))
    eng, res = scan_to_joined(DuckDBEngine, str(tmp_path))
    try:
        rtg, q, sums, dr = ranking_tables(eng, res.Kw)
    finally:
        eng.close()
    ref, ref_dr = reference_sums(data, q)
    _compare(sums, dr, ref, ref_dr, res.Kw)
    if shape == "partial":                          # rows holding an extra slot at K + 1 beyond the wide ones
        assert res.K > res.Kw or sums.loc[sums.k == 0, "n_beyond"].sum() == 0
    # the log side: per (dt, fold, position, ad) the slots and their reward-to-go
    from helpers.ranking import fold_of
    from helpers.reference import clean

    want: dict = {}
    for ev in clean(data)[0]:
        for s in ev["slots"]:
            rest = sum(o["reward"] or 0.0 for o in ev["slots"] if o["position"] >= s["position"])
            key = (ev["dt"].isoformat(), fold_of(ev["event_id"]), s["position"], s["ad_id"])
            m, t = want.get(key, (0, 0.0))
            want[key] = (m + 1, t + rest)
    got = {(str(r.dt), int(r.fold), int(r.position), r.ad_id): (int(r.m), float(r.s_rtg)) for r in rtg.itertuples()}
    assert got.keys() == want.keys()
    for key, (m, t) in want.items():
        assert got[key][0] == m and math.isclose(got[key][1], t, rel_tol=REL, abs_tol=1e-12)


def test_statements_equal_between_engines(spark, tmp_path):
    """The three statements on Spark and DuckDB over the same logs (partial slates, unknown rewards): equal sums
    (1e-12), although each engine keys its events by its own uuid()."""
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.engines.spark import SparkEngine

    data = with_unknown_slot_rewards(build_random(seed=5, K=3, days=(0, 1), per_day=60, odd_shapes=True), 0.3, 2)
    write_parquet(data, str(tmp_path))
    out = []
    for cls, sp in ((DuckDBEngine, None), (SparkEngine, spark)):
        eng, res = scan_to_joined(cls, str(tmp_path), spark=sp)
        try:
            out.append(ranking_tables(eng, res.Kw))
        finally:
            eng.close()
    keys = {0: ["dt", "fold", "position", "ad_id"], 1: ["dt", "fold", "position", "ad_id"],
            2: ["dt", "policy_id", "logging_policy", "fold", "k", "l"], 3: ["dt", "policy_id", "logging_policy",
                                                                           "fold", "k"]}
    for i, cols in keys.items():
        a, b = (t[i].assign(dt=t[i]["dt"].astype(str)).sort_values(cols, na_position="first").reset_index(drop=True)
                for t in out)
        assert len(a) == len(b) and len(a) > 0
        for c in a.columns:
            if c in cols or a[c].dtype == object:
                assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), (i, c)
            else:
                np.testing.assert_allclose(a[c].to_numpy(float), b[c].to_numpy(float), rtol=1e-12, atol=1e-12)


# ---- the cascade click model of the generator ----------------------------------------------------------------------
def _cascade_config(**kw):
    from scavenger.simulation.generator import GeneratorConfig

    base = {"layout": "slotted", "n_positions": 3, "slot_sizes": [3, 20, 60], "click_model": "cascade",
            "n_contexts": 20}
    return GeneratorConfig(**{**base, **kw})


def test_cascade_click_model_and_its_truth(tmp_path):
    from scavenger.simulation.generator import generate

    truth = generate(None, _cascade_config(events_per_day=20000, days=2, seed=4, base_ctr=0.3), str(tmp_path))
    assert truth["click_model"] == "cascade" and truth["config"]["click_model"] == "cascade"
    logs = pd.read_parquet(tmp_path / "logs")
    r = np.array([[s["reward"] for s in sorted(sl, key=lambda s: s["position"])] for sl in logs["slots"]])
    assert r.sum(1).max() == 1.0 and r.sum() > 1000                 # the scan stops at the first click
    assert (r[:, 2] > 0).sum() > 100                                 # ... which can be anywhere
    # the logging policy's value per day against the logged mean reward
    for day, g in logs.assign(v=r.sum(1)).groupby(logs["dt"].astype(str)):
        want = truth["logging_policy"]["per_day"][day]["realized_value"]
        assert abs(g["v"].mean() - want) < 4 * g["v"].std() / math.sqrt(len(g)), day
    # every target's value from the truth tables: v_c = sum_k m_k prod_{j<k} (1 - m_j)
    rates = pd.read_parquet(tmp_path / "truth" / "click_rates")
    adc = pd.read_parquet(tmp_path / "truth" / "adc").sort_values("position")["coefficient"].to_numpy()
    P = rates.pivot_table(index="context_id", columns="slot", values="p", aggfunc=list)
    w = rates.groupby("context_id")["context_weight"].first().loc[P.index].to_numpy()

    def value(m):
        return float(w @ (m[:, 0] + (1 - m[:, 0]) * m[:, 1] + (1 - m[:, 0]) * (1 - m[:, 1]) * m[:, 2]))

    best = np.array([[adc[k] * max(P.loc[c, k + 1]) for k in range(3)] for c in P.index])
    mean = np.array([[adc[k] * np.mean(P.loc[c, k + 1]) for k in range(3)] for c in P.index])
    assert truth["policies"]["oracle"]["value"] == pytest.approx(value(best), rel=1e-12)
    assert truth["policies"]["uniform_random"]["value"] == pytest.approx(value(mean), rel=1e-12)
    assert truth["logging_policy"]["value"] == pytest.approx(value(mean), rel=1e-12)


def test_cascade_click_model_needs_slotted_logs():
    with pytest.raises(UsageError, match="slotted"):
        _cascade_config(layout="ranked", slot_sizes=None).resolved()
    with pytest.raises(UsageError, match="click model"):
        _cascade_config(click_model="dbn").resolved()
    from scavenger.simulation.generator import GeneratorConfig

    assert GeneratorConfig().resolved().click_model == "additive"


# ---- (c) coverage over 100 cascade days ----------------------------------------------------------------------------
@pytest.mark.slow
def test_intervals_hold_their_level_over_100_cascade_days(tmp_path):
    """3/20/60 slots, uniform logging, cascade clicks, 100 independent days of 2,000 events, four targets: the
    RIPS and Cascade-DR intervals cover each day's realized truth (measured: 100% for both; CLT 64-70% and 83-89%),
    Cascade-DR's daily spread is no wider than RIPS's (5% slack for 100 days' sampling error), SN-RIPS's covers on
    the days it is identified, and IIPS (additive slots assumed) is off for the targets whose ads interact."""
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.simulation.generator import generate

    truth = generate(None, _cascade_config(events_per_day=2000, days=100, seed=11, n_contexts=60), str(tmp_path))
    eng, res = scan_to_joined(DuckDBEngine, str(tmp_path))
    try:
        _, _, sums, dr = ranking_tables(eng, res.Kw)
    finally:
        eng.close()
    rows = []
    for (day, pid), g in sums.groupby(["dt", "policy_id"]):
        s = R.Sums(g, dr[(dr.dt == day) & (dr.policy_id == pid)])
        want = truth["policies"][pid]["per_day"][day]
        for name, e in R.estimates(s, ymax=[3.0, 20.0, 60.0], reward_bounds=(0.0, 1.0)).items():
            rows.append({"pid": pid, "est": name, "v": e.value, "ok": e.identified, "err": e.value - want,
                         "cover": e.ci_low <= want <= e.ci_high, "width": e.ci_high - e.ci_low})
    df = pd.DataFrame(rows)
    table = df[df["ok"]].groupby(["est", "pid"]).agg(days=("v", "size"), cover=("cover", "mean"),
                                                     err=("err", "mean"), sd=("v", "std"), width=("width", "median"))
    print(table.to_string())
    for pid in truth["policies"]:
        for name in ("slate_rips", "slate_cascade_dr"):
            assert table.loc[(name, pid), "days"] == 100 and table.loc[(name, pid), "cover"] >= 0.93, (name, pid)
        assert table.loc[("slate_cascade_dr", pid), "sd"] <= 1.05 * table.loc[("slate_rips", pid), "sd"], pid
        assert table.loc[("slate_snrips", pid), "days"] >= 40, pid
        assert table.loc[("slate_snrips", pid), "cover"] >= 0.93, pid
    assert table.loc[("slate_iips", "oracle"), "err"] > 0.05          # the cascade's interaction: IIPS is off
