"""Slate estimators from additive moments == plain numpy row-level computations (seed 002; MATH.md Slate OPE)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from scavenger import registry
from scavenger.estimators import slate as S
from helpers.estimates import all_slate_estimates

RTOL = 1e-9


def _random_data(seed, n=None, K=None, continuous=False, zeros=True):
    rng = np.random.default_rng(seed)
    K = K or int(rng.integers(1, 6))
    n = n or int(rng.integers(50, 400))
    Y = rng.gamma(2.0, 1.0, size=(n, K))
    if zeros:
        Y *= rng.random((n, K)) < 0.6  # many zero slot weights, as with a deterministic target
    r = rng.random(n) * 3.0 if continuous else (rng.random(n) < 0.3).astype(float)
    return r, Y


def _se(T):
    return np.std(T, ddof=1) / np.sqrt(len(T))


def _ratio_se(A, B):
    R = A.sum() / B.sum()
    return np.sqrt(np.sum((A - R * B) ** 2) / (len(A) - 1) / np.mean(B) ** 2 / len(A))


def _check(est, value, se, level=0.95):
    z = norm.ppf(0.5 + level / 2)
    np.testing.assert_allclose(est.value, value, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(est.std_error, se, rtol=RTOL)
    np.testing.assert_allclose(est.ci_low, value - z * se, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(est.ci_high, value + z * se, rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("continuous", [False, True])
def test_estimators_equal_numpy(seed, continuous):
    r, Y = _random_data(seed, continuous=continuous)
    n, K = Y.shape
    m = S.SlateMoments.from_arrays(r, Y)
    W = Y.prod(1)
    G = 1 - K + Y.sum(1)

    _check(S.ips(m), np.mean(r * W), _se(r * W))
    _check(S.snips(m), (r * W).sum() / W.sum(), _ratio_se(r * W, W))
    _check(S.pi(m), np.mean(r * G), _se(r * G))
    _check(S.wpi(m), (r * G).sum() / G.sum(), _ratio_se(r * G, G))

    # PI++ with the logged mean reward as prior and estimated alpha
    alpha = np.mean(Y ** 2, axis=0) - 1
    used = alpha > 0
    H = used.sum() / np.sum(1 / alpha[used])
    P = r.mean()
    w = np.where(used, P * (1 - H / np.where(used, alpha, 1)), 0.0)
    T = r * G - Y @ w
    est = S.pi_plus_plus(m)
    _check(est, T.mean(), _se(T))
    assert est.extra["prior_source"] == "logged_mean_reward"
    np.testing.assert_allclose(est.extra["prior_mean"], P, rtol=RTOL)
    np.testing.assert_allclose(est.extra["H"], H, rtol=RTOL)
    np.testing.assert_allclose(est.extra["M"], alpha[used].mean(), rtol=RTOL)

    # PI++ with a given prior and given exact alpha, one slot with alpha = 0 left out
    alpha_g = np.linspace(0.5, 7.0, K)
    alpha_g[0] = 0.0
    usedg = alpha_g > 0
    Hg = usedg.sum() / np.sum(1 / alpha_g[usedg]) if usedg.any() else np.nan
    wg = np.where(usedg, 0.2 * (1 - Hg / np.where(usedg, alpha_g, 1)), 0.0)
    Tg = r * G - Y @ wg
    est = S.pi_plus_plus(m, prior_mean=0.2, alpha=alpha_g)
    _check(est, Tg.mean(), _se(Tg))
    assert est.extra["prior_source"] == "given" and est.extra["slots_used"] == K - 1

    # data-driven beta
    Z = Y - 1
    beta = (r * G) @ Z / np.sum(Z ** 2, axis=0)
    Tb = r * G - Z @ beta
    est = S.pi_beta(m)
    np.testing.assert_allclose(est.extra["beta"], beta, rtol=RTOL)
    _check(est, Tb.mean(), _se(Tb))

    # level parameter
    _check(S.pi(m, level=0.8), np.mean(r * G), _se(r * G), level=0.8)


@pytest.mark.parametrize("seed", range(4))
def test_diagnostics_equal_numpy(seed):
    r, Y = _random_data(100 + seed, K=4)
    n, K = Y.shape
    m = S.SlateMoments.from_arrays(r, Y)
    W = Y.prod(1)
    G = 1 - K + Y.sum(1)
    d = S.diagnostics(m, prior_mean=0.1)
    alpha = np.mean(Y ** 2, 0) - 1
    used = alpha > 0
    M, H = alpha[used].mean(), used.sum() / np.sum(1 / alpha[used])
    np.testing.assert_allclose(d["alpha"], alpha, rtol=RTOL)
    np.testing.assert_allclose([d["M"], d["H"]], [M, H], rtol=RTOL)
    np.testing.assert_allclose(d["predicted_nmse_reduction"], 0.1 * (2 * r.mean() - 0.1) * used.sum() * (M - H),
                               rtol=RTOL)
    np.testing.assert_allclose(d["ess_W"], W.sum() ** 2 / np.sum(W ** 2), rtol=RTOL)
    np.testing.assert_allclose(d["ess_G"], G.sum() ** 2 / np.sum(G ** 2), rtol=RTOL)
    np.testing.assert_allclose(d["max_W"], W.max(), rtol=RTOL)
    np.testing.assert_allclose(d["share_W_nonzero"], np.mean(W > 0), rtol=RTOL)
    np.testing.assert_allclose(d["share_Y_nonzero"], np.mean(Y > 0, 0), rtol=RTOL)
    frame = S.diagnostics_frame(m, "p1")
    assert set(frame.loc[frame["metric"] == "alpha", "slot"]) == {1, 2, 3, 4}
    np.testing.assert_allclose(frame.loc[frame["metric"] == "alpha", "value"].to_numpy(), alpha, rtol=RTOL)


def test_moments_add_and_flat_roundtrip():
    r, Y = _random_data(7, n=300, K=3, continuous=True)
    Y[5, 1] = np.nan  # missing propensity
    m_all = S.SlateMoments.from_arrays(r, Y)
    m_sum = S.SlateMoments.from_arrays(r[:120], Y[:120]) + S.SlateMoments.from_arrays(r[120:], Y[120:])
    assert m_all.n == 299 and m_all.n_missing_propensity == 1 and m_sum.n_missing_propensity == 1
    a, b = m_all.to_flat(), m_sum.to_flat()
    assert list(a) == S.flat_columns(3)
    np.testing.assert_allclose([b[k] for k in a], [a[k] for k in a], rtol=RTOL)
    back = S.SlateMoments.from_flat(a, 3)
    np.testing.assert_allclose(back.s_rYY, m_all.s_rYY, rtol=RTOL)
    for e1, e2 in zip(all_slate_estimates(m_all), all_slate_estimates(back)):
        np.testing.assert_allclose([e1.value, e1.std_error], [e2.value, e2.std_error], rtol=RTOL)
    ests = all_slate_estimates(m_all, prior_mean=0.3)
    assert [e.estimator for e in ests] == list(registry.GROUPS["slate"])
    assert all(e.n_events == 299 for e in ests) and m_all.n_missing_propensity == 1


def test_equal_slot_sizes_pi_plus_plus_equals_pi():
    """M = H when all alpha_k are equal, so w_k = 0 and PI++ coincides with PI (seed 002, discussion of eq. 40)."""
    rng = np.random.default_rng(3)
    n, K, d = 500, 3, 7
    A = rng.integers(0, d, size=(n, K))
    Y = np.where(A == 0, float(d), 0.0)
    r = (rng.random(n) < 0.25).astype(float)
    m = S.SlateMoments.from_arrays(r, Y)
    exact = S.pi_plus_plus(m, prior_mean=0.25, alpha=np.full(K, d - 1.0))
    base = S.pi(m)
    assert exact.extra["weights"] == [0.0] * K
    np.testing.assert_allclose([exact.value, exact.std_error], [base.value, base.std_error], rtol=RTOL)


def test_alpha_exact_uniform_deterministic():
    for d in (2, 10, 800):
        pi_k = np.zeros(d)
        pi_k[0] = 1
        assert S.alpha_exact(pi_k, np.full(d, 1 / d)) == pytest.approx(d - 1, rel=1e-12)


def test_moment_terms_reproduce_flat_moments():
    """Evaluating each (alias, agg, factors) of moment_terms row-wise in numpy gives SlateMoments.to_flat."""
    r, Y = _random_data(21, n=250, K=3, continuous=True)
    Y[[3, 17], [0, 2]] = np.nan
    flat = S.SlateMoments.from_arrays(r, Y).to_flat()
    ok = np.all(np.isfinite(Y), axis=1)
    cols = {"1": np.ones(ok.sum()), "r": r[ok], "W": Y[ok].prod(1)}
    cols.update({f"Y{k + 1}": Y[ok, k] for k in range(3)})
    terms = S.moment_terms(3)
    assert [t[0] for t in terms] == S.flat_columns(3)
    for alias, agg, factors in terms:
        if alias == "n_missing_propensity":
            got = float((~ok).sum())
        else:
            prod = np.prod([cols[f] for f in factors], axis=0)
            got = {"sum": prod.sum(), "max": prod.max(), "count_pos": float((prod > 0).sum())}[agg]
        np.testing.assert_allclose(got, flat[alias], rtol=RTOL, err_msg=alias)


@pytest.mark.parametrize("tiny", [1e-155, 5e-324])
def test_tiny_propensity_estimates_finite_or_not_identified(tiny, tmp_path):
    """One event logs a propensity of 1e-155 (its weight 1/mu = 1e155 squares beyond double precision) or 5e-324
    (1/mu = inf): no estimator, interval or diagnostic raises, and every estimate is a finite number or not
    identified with a reason; on the row-level moments the statistics form and end to end on DuckDB."""
    import math

    from scavenger import api
    from helpers.estimates import interval_of
    from helpers.reference import build_random, write_parquet

    # moments as the statistics' SQL forms them: products left to right (0 * inf = NaN), a NaN sum stored as 0
    r, Y = _random_data(41, n=300, K=3)
    Y[0] = [1.0 / tiny, 2.0, 0.0]
    Y[1] = [1.0 / tiny, 3.0, 1.5]
    r[0] = r[1] = 0.0
    with np.errstate(all="ignore"):
        cols = {"1": np.ones(len(r)), "r": r, "W": Y.prod(1), "missing": np.zeros(len(r))}
        cols.update({f"Y{k + 1}": Y[:, k] for k in range(3)})
        flat = {}
        for alias, agg, factors in S.moment_terms(3):
            prod = np.ones(len(r))
            for f in factors:
                prod = prod * cols[f]
            got = {"sum": prod.sum(), "max": prod.max(), "count_pos": float((prod > 0).sum())}[agg]
            flat[alias] = 0.0 if agg == "sum" and math.isnan(got) else float(got)
        moments = (S.SlateMoments.from_flat(flat, 3), S.SlateMoments.from_arrays(r, Y))
    ymax = np.array([1.0 / tiny, 4.0, 4.0])
    wmax = float(np.prod(ymax))
    for m in moments:
        ests = all_slate_estimates(m)
        for est in ests:
            if getattr(est, "identified", True):
                assert math.isfinite(est.value) and math.isfinite(est.std_error), est
            else:
                assert math.isnan(est.value) and "overflow double precision" in est.reason, est
            lo, hi, kind, why = interval_of(est.estimator)(est, m, wmax, ymax, 0.0, 3.0, 0.95)
            assert (kind == "el" and math.isfinite(lo) and math.isfinite(hi)) or (kind == "none" and why), est
        S.diagnostics_frame(m, "p")
    flagged = {e.estimator for e in all_slate_estimates(S.SlateMoments.from_flat(flat, 3))
               if not getattr(e, "identified", True)}
    # 1/mu = inf: every sum with a zero factor on those events is undefined; 1e155 (rewards 0 there): the sums of
    # squared weights overflow, which only SNIPS and wPI need
    assert flagged == (set(registry.GROUPS["slate"]) if tiny < 1e-300 else {"slate_snips", "slate_wpi"}), flagged

    # end to end: one logged slate the deterministic target shows exactly, its first slot's propensity tiny
    data = build_random(seed=7, K=3, n_ads=6, days=(0, 1), per_day=60, with_nulls=False)
    det = {d["event_id"]: [s["ad_id"] for s in d["slots"]] for d in data["decisions"] if d["policy_id"] == "det"}
    ev = next(e for e in data["logs"]
              if [s["ad_id"] for s in sorted(e["slots"], key=lambda s: s["position"])] == det[e["event_id"]])
    min(ev["slots"], key=lambda s: s["position"])["propensity"] = tiny
    logs, decs = write_parquet(data, str(tmp_path))
    est = api.evaluate(logs, decs, gate="off", engine="duckdb").pandas
    for _, row in est.iterrows():
        if row["identified"]:
            assert math.isfinite(row["value"]) and not math.isinf(row["std_error"]), row.to_dict()
            assert (row["interval_kind"] != "none" and math.isfinite(row["ci_low"]) and math.isfinite(row["ci_high"])
                    ) or row["reason"], row.to_dict()
        else:
            assert row["reason"], row.to_dict()
    det_slate = est[(est["policy_id"] == "det") & est["estimator"].str.startswith("slate_")]
    # a subnormal propensity (5e-324: 1/mu overflows) is quarantined as ZERO_PROPENSITY, so its estimates are
    # those of the other events; 1e-155 stays, and the sums its weight enters overflow
    assert len(det_slate) and (tiny < 2.2250738585072014e-308
                               or det_slate["reason"].str.contains("overflow double precision").any())


def test_supported_share_is_the_targets_mass_on_logged_pairs():
    """supported_share of the IPS/PI family: the share of the target's mass sum_t pi_k(a|x_t) on (position, ad)
    pairs the logs show (check c's measure), unsupported_share the rest. It was the share of events whose logged
    slate matched the target's (W > 0): about 1/12 for a target that a uniform logger over 3 x 4 slates fully
    supports (and no unsupported_share); the direct approach of the same target said 1."""
    import datetime as dt

    import pandas as pd

    from scavenger import api
    from helpers.reference import arrow_tables

    rng = np.random.default_rng(3)
    day = dt.date(2026, 3, 1)
    logs, decs = [], []
    for i in range(1200):
        a, b = f"a{rng.integers(3)}", f"b{rng.integers(4)}"
        eid = f"e{i}"
        logs.append({"event_id": eid, "event_time": dt.datetime(2026, 3, 1, 12), "context_id": "c",
                     "context": {"f": "v"}, "logging_policy": "uniform", "slate_reward": None, "dt": day,
                     "slots": [{"position": 1, "ad_id": a, "propensity": 1 / 3, "reward": float(rng.random() < .3)},
                               {"position": 2, "ad_id": b, "propensity": 1 / 4, "reward": float(rng.random() < .2)}]})
        for pid, first in (("det", "a0"), ("never", "never logged" if i % 4 == 0 else "a0")):
            decs.append({"policy_id": pid, "event_id": eid, "dt": day, "base_policy": None,
                         "slots": [{"position": 1, "ad_id": first, "probability": 1.0},
                                   {"position": 2, "ad_id": "b1", "probability": 1.0}]})
    est = api.evaluate(*arrow_tables({"logs": logs, "decisions": decs}), estimators=["ips", "pi"], gate="off",
                       engine="duckdb").to_pandas()
    est = est.set_index(["policy_id", "estimator"])
    # 'never': 300 of its 1,200 events put an ad never logged at position 1, a quarter of the mass there, an
    # eighth of its mass over the two positions
    for pid, unsupported in (("det", 0.0), ("never", 300 / 2400)):
        for e in ("slate_ips", "slate_pi"):
            assert est.loc[(pid, e), "identified"]
            assert abs(est.loc[(pid, e), "unsupported_share"] - unsupported) < 1e-12, (pid, e)
            assert abs(est.loc[(pid, e), "supported_share"] - (1 - unsupported)) < 1e-12, (pid, e)
    assert pd.notna(est.loc[("det", "slate_ips"), "value"])


def test_intervals_and_bounds_take_the_declared_reward_range():
    """A declared --reward-max (revenue: slot rewards up to 4, none above 1 logged) widens the range a slate reward
    can take to 2 x 4: the Theorem 3 bound's half-width is R sqrt(...) (seed 001), so 4 times the default's, and the
    EL intervals of IPS and PI widen; the point estimates do not move (before: R and the EL range came from the
    logged rewards and the [0, 1] default, whatever the declared range)."""
    import datetime as dt

    from scavenger import api
    from scavenger.checks.rules import RuleConfig
    from helpers.reference import arrow_tables

    rng = np.random.default_rng(5)
    day = dt.date(2026, 3, 1)
    logs, decs = [], []
    for i in range(1200):
        eid = f"e{i}"
        logs.append({"event_id": eid, "event_time": dt.datetime(2026, 3, 1, 12), "context_id": "c",
                     "context": {"f": "v"}, "logging_policy": "uniform", "slate_reward": None, "dt": day,
                     "slots": [{"position": 1, "ad_id": f"a{rng.integers(3)}", "propensity": 1 / 3,
                                "reward": float(rng.random() < .3)},
                               {"position": 2, "ad_id": f"b{rng.integers(4)}", "propensity": 1 / 4,
                                "reward": float(rng.random() < .2)}]})
        decs.append({"policy_id": "det", "event_id": eid, "dt": day, "base_policy": None,
                     "slots": [{"position": 1, "ad_id": "a0", "probability": 1.0},
                               {"position": 2, "ad_id": "b1", "probability": 1.0}]})
    out = {}
    for r_max in (1.0, 4.0):
        est = api.evaluate(*arrow_tables({"logs": logs, "decisions": decs}), gate="off", engine="duckdb",
                           estimators=["scavenging_slate", "ips", "pi"],
                           rules=RuleConfig(reward_max=r_max)).to_pandas()
        out[r_max] = est.set_index(["estimator", "interval_kind"])
    bound = [out[r].loc[("scavenging_slate", "bound")] for r in (1.0, 4.0)]
    assert bound[0]["value"] == bound[1]["value"]
    np.testing.assert_allclose(bound[1]["ci_high"] - bound[1]["value"], 4 * (bound[0]["ci_high"] - bound[0]["value"]),
                               rtol=1e-12)
    one, four = (out[r].xs("slate_ips", level="estimator").reset_index().iloc[0] for r in (1.0, 4.0))
    assert one["interval_kind"].startswith("el") and four["interval_kind"].startswith("el")
    assert one["value"] == four["value"] and four["ci_high"] > one["ci_high"] + 0.05, (one, four)
    # PI's interval rests on its own standard error (a t interval): the declared range does not move it
    one, four = (out[r].loc[("slate_pi", "t")] for r in (1.0, 4.0))
    assert one["value"] == four["value"] and one["ci_high"] == four["ci_high"]
