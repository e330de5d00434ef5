"""Exploration scavenging: equality with a row-level numpy computation on random logs (the one pass on DuckDB, then
the estimates as the pipeline writes them), agreement with ground truth on generator logs, and CLT coverage over
many seeds (numpy-simulated factoring-model logs turned into statistics tables by hand and fed to the same
estimator code)."""
from __future__ import annotations

import datetime as dt
import itertools
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy.special import gammaln
from scipy.stats import norm

from helpers.reference import arrow_tables, build_random, slate_r
from scavenger import registry
from scavenger.engines.duck import DuckDBEngine
from scavenger.estimators import scavenging as S
from scavenger.pipelines.common import GateConfig, describe_inputs
from scavenger.pipelines.evaluate import EvaluateOptions, evaluate
from scavenger.statistics.window import WindowStats
from scavenger.estimators import scavenging_family as E
from scavenger.estimators.intervals import MIN_MATCHING
from helpers.estimates import estimate_rows

Z95 = float(norm.ppf(0.975))
SIM_DAY = dt.date(2026, 1, 1)


def duck_window(data, plan=None, config=None):
    """The one pass on DuckDB over the in-memory data set (every day it holds): WindowStats, engine kept open."""
    from scavenger.pipelines.common import window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig
    from scavenger.statistics.window import window_statistics

    eng = DuckDBEngine("test")
    inputs = describe_inputs(*arrow_tables(data))
    return window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), plan or ScanPlan(),
                             config or StatsConfig())


def run_evaluate(data, estimators, **options):
    """The evaluate pipeline (gate off) on DuckDB over the in-memory data set: (Evaluation, engine)."""
    eng = DuckDBEngine("test")
    ev = evaluate(eng, describe_inputs(*arrow_tables(data)), EvaluateOptions(estimators=estimators, **options),
                  GateConfig(mode="off", great_expectations=False))
    return ev, eng


def main_row(rows: pd.DataFrame) -> pd.Series:
    """The estimate's own interval row (CLT or empirical likelihood), beside the Theorem 3/4 'bound' rows and the
    'none' rows that say why there is no bound."""
    kinds = [k for k in rows.index if k not in ("bound", "none")]
    if not kinds:   # the interval withdrawn: the estimate lies outside it (estimators/intervals.off_interval_reason)
        own = rows[(rows.index == "none") & rows["reason"].str.contains("outside its interval", na=False)]
        assert len(own) == 1, list(rows.index)
        return own.iloc[0]
    assert len(kinds) == 1 and kinds[0] in ("clt", "el", "el+"), list(rows.index)
    return rows.loc[kinds[0]]


def scavenging_rows(stats, policies, delta=0.05, level=0.95, uniform=False, n_ads=None) -> pd.DataFrame:
    """The direct-approach rows of the pipeline (estimate.py over the engine's reduction of the big tables)."""
    options = EvaluateOptions(delta=delta, level=level, uniform_logging=uniform, n_ads=n_ads)
    return pd.DataFrame(estimate_rows(stats, policies, ["scavenging_slate"], options),
                        columns=list(registry.ESTIMATE_COLUMNS))


# dense: 4 ads, K=2 (12 slates, every slate logged); sparse: 8 ads, K=3 (336 slates): targets show unlogged slates
CASES = {"dense": dict(seed=7, K=2, n_ads=4, days=(0, 2), per_day=80, with_nulls=False),
         "sparse": dict(seed=7, K=3, n_ads=8, days=(0, 2), per_day=60, with_nulls=False)}


@pytest.fixture(scope="module", params=sorted(CASES))
def rand_case(request):
    data = build_random(**CASES[request.param])
    ev, eng = run_evaluate(data, ["scavenging_slate", "scavenging_base"], uniform_logging=True, delta=0.05)
    yield request.param, data, ev
    eng.close()


def _ref_direct(data, policy, kind, delta=0.05, uniform=False, reward_range=None):
    """Row-level: V = sum_t r_t 1[h(x_t) = a_t] / T_{a_t}, CLT variance, Theorem 3/4 half-widths (R =
    ``reward_range``, default the logged rewards' range)."""
    events = {e["event_id"]: e for e in data["logs"]}
    if kind == "slate":
        act = lambda slots, f=lambda s: True: tuple(sorted((s["position"], s["ad_id"]) for s in slots if f(s)))  # noqa
        logged = {e["event_id"]: act(e["slots"]) for e in data["logs"]}
        n_ads = len({s["ad_id"] for e in data["logs"] for s in e["slots"]})
        log_k = gammaln(n_ads + 1) - gammaln(n_ads - data["K"] + 1)
    else:
        logged = {e["event_id"]: e["logging_policy"] for e in data["logs"]}
        log_k = math.log(len(set(logged.values())))
    T = defaultdict(int)
    for a in logged.values():
        T[a] += 1
    xs = defaultdict(list)  # per logged action: x_t = r_t 1[match] over ALL its events
    n, unsup, used = 0, 0, set()
    chosen = {}
    for d in data["decisions"]:
        if d["policy_id"] != policy:
            continue
        n += 1
        a = act(d["slots"], lambda s: s["probability"] > 0) if kind == "slate" else d["base_policy"]
        chosen[d["event_id"]] = a
        if T.get(a, 0) == 0:
            unsup += 1
        else:
            used.add(a)
    for eid, a in logged.items():
        r = slate_r(events[eid])
        xs[a].append(r * (chosen.get(eid) == a))
    value = sum(sum(v) / T[a] for a, v in xs.items())
    var = 0.0
    for a in used:
        x = np.array(xs[a])
        var += (x.var(ddof=1) if x.size > 1 else x[0] ** 2) / x.size
    rs = [slate_r(e) for e in data["logs"]]
    rr = max(max(rs), 0) - min(min(rs), 0) if reward_range is None else reward_range
    Ttot = len(logged)
    half3 = rr * sum(math.sqrt(2 * (math.log(2) + log_k + math.log(Ttot) - math.log(delta)) / T[a]) for a in used)
    if unsup:
        half3 = math.inf
    # the same estimate as a weighted mean over all T events: w_t = T / T_a on matching events, 0 elsewhere
    w = np.array([Ttot / T[a] if chosen.get(eid) == a else 0.0 for eid, a in logged.items()])
    rw = np.array([slate_r(events[eid]) for eid in logged])
    out = {"value": value, "se": math.sqrt(var), "half": half3, "unsup": unsup / n,
           "matched": int((w > 0).sum()), "weight_sums": {"sum_w": w.sum(), "sum_w2": (w * w).sum(),
                                                          "sum_wr": (w * rw).sum(), "sum_w2r": (w * w * rw).sum(),
                                                          "sum_w2r2": (w * w * rw * rw).sum()}}
    if uniform:
        k = math.exp(log_k)
        x = np.array([k * v for a in xs for v in xs[a]])
        out.update(value4=x.mean(), se4=x.std(ddof=1) / math.sqrt(x.size),
                   half4=rr * k * math.sqrt(2 * (math.log(2) + log_k - math.log(delta)) / Ttot))
    return out


def test_slate_scavenging_equals_numpy(rand_case):
    case, data, ev = rand_case
    est = ev.estimates
    assert set(est.columns) == set(registry.ESTIMATE_COLUMNS)
    sums = E.scavenging_sums(ev.stats).set_index("policy_id")
    unsupported_seen = False
    # perm shows the logged ads in a shuffled order on every event: its slate is a copy of the logged one, not a
    # function of the context, and sum_a S_a/T_a then adds the mean rewards of the logged slates (values above the
    # reward range): not identified, with the reason (see reorder)
    perm = est[(est["policy_id"] == "perm") & (est["estimator"] == "scavenging_slate")]
    assert len(perm) == 1 and not perm["identified"].iloc[0] and "re-orders the logged slate" in perm["reason"].iloc[0]
    for policy in ("det", "det0"):
        ref = _ref_direct(data, policy, "slate", uniform=True)
        sub = est[(est["policy_id"] == policy) & (est["estimator"] == "scavenging_slate")]
        assert sub["identified"].all()
        rows = sub.set_index("interval_kind")
        main = main_row(rows)
        assert math.isclose(main["value"], ref["value"], rel_tol=1e-9)
        assert math.isclose(main["std_error"], ref["se"], rel_tol=1e-9)
        assert math.isclose(main["unsupported_share"], ref["unsup"], rel_tol=1e-9, abs_tol=1e-15)
        # build_random's targets copy the logged slate half the time, so matches are more frequent than a
        # context-only target's: the weights t_s/T_a average sum_w/T, not 1 - unsupported. When the estimate falls
        # outside its interval and that mean is > 5 standard errors off, the interval is withdrawn with the reason
        n_ev = len(data["logs"])
        mean_w = ref["weight_sums"]["sum_w"] / n_ev
        z = abs(mean_w - (1 - ref["unsup"])) / math.sqrt((ref["weight_sums"]["sum_w2"] / n_ev - mean_w ** 2) / n_ev)
        if main.name == "el":
            assert math.isfinite(main["ci_low"]) and main["ci_low"] <= main["ci_high"] < math.inf
            assert main["ci_low"] <= main["value"] <= main["ci_high"] or z <= 5
        else:
            assert f"weights average {mean_w:.4g}" in main["reason"] and math.isnan(main["ci_low"]) and z > 5
        # the engine's reduction of the big slate tables: matches and the weight sums of the interval
        assert sums.loc[policy, "n_match"] == ref["matched"]
        for col, want in ref["weight_sums"].items():
            assert math.isclose(sums.loc[policy, col], want, rel_tol=1e-9), (policy, col)
        if math.isinf(ref["half"]):
            # Theorem 3 gives no bound for the mass on never-logged slates: no number, the reason instead
            unsupported_seen = True
            theorem3 = rows[(rows.index == "none") & rows["reason"].str.contains("never logged", na=False)]
            assert "bound" not in rows.index and len(theorem3) == 1 and math.isnan(theorem3["ci_high"].iloc[0])
        else:
            half = rows.loc["bound", "ci_high"] - rows.loc["bound", "value"]
            assert math.isclose(half, ref["half"], rel_tol=1e-9)
        u = est[(est["policy_id"] == policy) & (est["estimator"] == "scavenging_slate_uniform")]
        u = u.set_index("interval_kind")
        assert math.isclose(main_row(u)["value"], ref["value4"], rel_tol=1e-9)
        assert math.isclose(main_row(u)["std_error"], ref["se4"], rel_tol=1e-9)
        assert math.isclose(u.loc["bound", "ci_high"] - u.loc["bound", "value"], ref["half4"], rel_tol=1e-9)
    assert unsupported_seen == (case == "sparse")
    # the stochastic policies are not evaluated by the direct approach: not identified, with the reason
    for policy in ("sto", "dup"):
        sto = est[(est["policy_id"] == policy) & (est["estimator"] == "scavenging_slate")]
        assert len(sto) == 1 and not sto["identified"].iloc[0] and math.isnan(sto["value"].iloc[0])
        assert "stochastic" in sto["reason"].iloc[0]


def test_direct_approach_counts_only_the_events_a_policy_decides():
    """Decisions that cover part of the log: the direct approach averages over the events the policy has a
    decision for, so T, T_s and T_a are counted among them (as IPS's n is). Counted over every logged event, the
    estimate was scaled down by the covered share (0.6 of the events here: 2.389 against 3.954 for 'det')."""
    data = build_random(seed=11, K=2, n_ads=4, days=(0, 2), per_day=150, with_nulls=False)
    keep = {e["event_id"] for i, e in enumerate(data["logs"]) if i % 5 < 3}
    data["decisions"] = [d for d in data["decisions"] if d["policy_id"] in ("det", "det0")
                         and (d["policy_id"] == "det0" or d["event_id"] in keep)]
    ev, eng = run_evaluate(data, ["scavenging_slate", "slate_ips"], delta=0.05)
    try:
        est = ev.estimates
        n_ads = len({s["ad_id"] for e in data["logs"] for s in e["slots"]})
        log_k = gammaln(n_ads + 1) - gammaln(n_ads - 1)
        act = lambda slots: tuple(sorted((s["position"], s["ad_id"]) for s in slots if s.get("probability", 1) > 0))  # noqa
        for policy in ("det", "det0"):
            dec = {d["event_id"]: act(d["slots"]) for d in data["decisions"] if d["policy_id"] == policy}
            events = [e for e in data["logs"] if e["event_id"] in dec]
            logged = [act(e["slots"]) for e in events]
            T_a = defaultdict(int)
            for a in logged:
                T_a[a] += 1
            xs = defaultdict(list)
            for e, a in zip(events, logged):
                xs[a].append(slate_r(e) * (dec[e["event_id"]] == a))
            used = {a for a in set(dec.values()) if T_a.get(a, 0)}
            value = sum(sum(v) / T_a[a] for a, v in xs.items())
            se = math.sqrt(sum(np.var(xs[a], ddof=1) / T_a[a] for a in used))
            rr = max(max(slate_r(e) for e in data["logs"]), 0.0) - min(min(slate_r(e) for e in data["logs"]), 0.0)
            half = rr * sum(math.sqrt(2 * (math.log(2) + log_k + math.log(len(events)) - math.log(0.05)) / T_a[a])
                            for a in used)
            rows = est[(est["policy_id"] == policy) & (est["estimator"] == "scavenging_slate")]
            rows = rows.set_index("interval_kind")
            assert (rows["n_events"] == len(events)).all()
            assert math.isclose(main_row(rows)["value"], value, rel_tol=1e-9), (policy, main_row(rows)["value"], value)
            assert math.isclose(main_row(rows)["std_error"], se, rel_tol=1e-9)
            assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], half, rel_tol=1e-9)
        # the uncovered events hold no information on 'det': its estimate is that of the covered events alone
        sub = {k: v for k, v in data.items()}
        sub["logs"] = [e for e in data["logs"] if e["event_id"] in keep]
        sub["decisions"] = [d for d in data["decisions"] if d["policy_id"] == "det"]
        alone, eng2 = run_evaluate(sub, ["scavenging_slate"], delta=0.05)
        eng2.close()
        a = alone.estimates
        want = main_row(a[(a["policy_id"] == "det") & (a["estimator"] == "scavenging_slate")].set_index("interval_kind"))
        got = main_row(est[(est["policy_id"] == "det") & (est["estimator"] == "scavenging_slate")]
                       .set_index("interval_kind"))
        assert math.isclose(got["value"], want["value"], rel_tol=1e-9)
    finally:
        eng.close()


@pytest.mark.parametrize("clicks", [True, False])
def test_theorem3_bounds_take_the_range_a_slate_reward_can_take(clicks):
    """Slot rewards in [0, 1]: a K-slot slate reward can be anything in [0, K], and Theorem 3/4 need that range, not
    the largest reward logged. Before, R came from the logged rewards: on K = 2 slates with at most one click per
    event R = 1 (every bound half as wide as it must be) and on logs without a click R = 1e-300 (the base policy's
    bound of width 0, claiming certainty). The EL interval of the same rows already took [0, K]."""
    data = build_random(seed=21, K=2, n_ads=3, days=(0,), per_day=300, with_nulls=False)
    for i, e in enumerate(data["logs"]):
        e["slate_reward"] = None
        for s in e["slots"]:
            s["reward"] = float(clicks and s["position"] == 1 and i % 3 == 0)
    data["decisions"] = [d for d in data["decisions"] if d["policy_id"] == "det"]
    ev, eng = run_evaluate(data, ["scavenging_slate", "scavenging_base"], uniform_logging=True, delta=0.05)
    eng.close()
    est = ev.estimates
    for kind, name in (("slate", "scavenging_slate"), ("base", "scavenging_base")):
        ref = _ref_direct(data, "det", kind, delta=0.05, uniform=True, reward_range=2.0)
        assert math.isfinite(ref["half"]) and ref["half"] > 0.1
        rows = est[(est["policy_id"] == "det") & (est["estimator"] == name)].set_index("interval_kind")
        assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], ref["half"], rel_tol=1e-9)
        u = est[(est["policy_id"] == "det") & (est["estimator"] == name + "_uniform")].set_index("interval_kind")
        assert math.isclose(u.loc["bound", "ci_high"] - u.loc["bound", "value"], ref["half4"], rel_tol=1e-9)


def test_base_policy_scavenging_equals_numpy(rand_case):
    case, data, ev = rand_case
    est = S.base_policy_estimates(ev.stats, delta=0.1)
    ref = _ref_direct(data, "det", "base", delta=0.1)
    rows = est[est["policy_id"] == "det"].set_index("interval_kind")
    assert math.isclose(rows.loc["clt", "value"], ref["value"], rel_tol=1e-9)
    assert math.isclose(rows.loc["clt", "std_error"], ref["se"], rel_tol=1e-9)
    assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["clt", "value"], ref["half"], rel_tol=1e-9)
    assert rows.loc["clt", "supported_share"] == 1.0
    assert set(est["policy_id"]) == {"det"}  # only det carries base_policy
    # the pipeline's rows (delta 0.05, Theorem 4 beside): the same numbers; other policies not identified
    ref = _ref_direct(data, "det", "base", delta=0.05, uniform=True)
    pipe = ev.estimates
    rows = pipe[(pipe["policy_id"] == "det") & (pipe["estimator"] == "scavenging_base")].set_index("interval_kind")
    assert math.isclose(main_row(rows)["value"], ref["value"], rel_tol=1e-9)
    assert math.isclose(main_row(rows)["std_error"], ref["se"], rel_tol=1e-9)
    assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], ref["half"], rel_tol=1e-9)
    u = pipe[(pipe["policy_id"] == "det") & (pipe["estimator"] == "scavenging_base_uniform")]
    u = u.set_index("interval_kind")
    assert math.isclose(main_row(u)["value"], ref["value4"], rel_tol=1e-9)
    assert math.isclose(u.loc["bound", "ci_high"] - u.loc["bound", "value"], ref["half4"], rel_tol=1e-9)
    other = pipe[(pipe["policy_id"] != "det") & (pipe["estimator"] == "scavenging_base")]
    assert len(other) == 4 and not other["identified"].any() and other["value"].isna().all()


def test_base_policy_scavenging_counts_only_the_events_a_policy_decides():
    """Decisions covering 60% of the log, three logging policies: T_a (events served by base policy a) and T are
    counted among the events the policy decides. Counted over every logged event, the estimate was scaled down by
    the covered share (0.6909 against 0.9758 on a 3,000-event slotted log with 70% covered)."""
    data = build_random(seed=12, K=2, n_ads=4, days=(0, 2), per_day=150, with_nulls=False,
                        logging_policies=("lp_a", "lp_b", "lp_c"))
    keep = {e["event_id"] for i, e in enumerate(data["logs"]) if i % 5 < 3}
    data["decisions"] = [d for d in data["decisions"] if d["policy_id"] == "det" and d["event_id"] in keep]
    ev, eng = run_evaluate(data, ["scavenging_base"], uniform_logging=True, delta=0.05)
    eng.close()
    events = {e["event_id"]: e for e in data["logs"]}
    dec = [d for d in data["decisions"]]
    lp = np.array([events[d["event_id"]]["logging_policy"] for d in dec])
    r = np.array([slate_r(events[d["event_id"]]) for d in dec])
    x = r * (np.array([d["base_policy"] for d in dec]) == lp)
    T_a = {a: int((lp == a).sum()) for a in sorted(set(lp))}
    value = sum(x[lp == a].sum() / n for a, n in T_a.items())
    se = math.sqrt(sum(x[lp == a].var(ddof=1) / n for a, n in T_a.items()))
    rs = [slate_r(e) for e in data["logs"]]
    rr = max(max(rs), 0.0) - min(min(rs), 0.0)
    T, k = len(dec), 3
    half = rr * sum(math.sqrt(2 * math.log(2 * k * T / 0.05) / n) for n in T_a.values())
    est = ev.estimates
    rows = est[(est["policy_id"] == "det") & (est["estimator"] == "scavenging_base")].set_index("interval_kind")
    assert (rows["n_events"] == T).all() and T < len(data["logs"])
    assert math.isclose(main_row(rows)["value"], value, rel_tol=1e-9), (main_row(rows)["value"], value)
    assert math.isclose(main_row(rows)["std_error"], se, rel_tol=1e-9)
    assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], half, rel_tol=1e-9)
    u = est[(est["policy_id"] == "det") & (est["estimator"] == "scavenging_base_uniform")].set_index("interval_kind")
    assert math.isclose(main_row(u)["value"], k / T * x.sum(), rel_tol=1e-9)
    assert math.isclose(main_row(u)["std_error"], k * x.std(ddof=1) / math.sqrt(T), rel_tol=1e-9)
    assert math.isclose(u.loc["bound", "ci_high"] - u.loc["bound", "value"],
                        rr * k * math.sqrt(2 * math.log(2 * k / 0.05) / T), rel_tol=1e-9)


def test_theorem4_k_counts_the_slates_a_slotted_layout_allows():
    """Slotted slates (each position its own 3 ads, uniform logging): k of Theorems 3/4 is the number of slates,
    3^3 = 27, not the ordered choices of 3 distinct ads out of all 9 (9*8*7 = 504), which put the Theorem 4 value
    at 19.53 where the data say 1.046 (2,124 events of a 3,000-event log)."""
    rng = np.random.default_rng(5)
    K, T = 3, 900
    day = dt.date(2026, 3, 1)
    logs, decs = [], []
    for e in range(T):
        ctx = int(rng.integers(3))
        ads = [f"s{k}_{int(rng.integers(3))}" for k in range(1, K + 1)]
        slots = [{"position": k, "ad_id": a, "propensity": 1 / 3, "reward": float(rng.random() < 0.2 + 0.1 * ctx)}
                 for k, a in enumerate(ads, 1)]
        logs.append({"event_id": f"e{e}", "event_time": dt.datetime(2026, 3, 1, 12), "context_id": f"c{ctx}",
                     "context": {"f": str(ctx)}, "logging_policy": "lp", "slots": slots, "slate_reward": None,
                     "dt": day})
        tgt = [f"s{k}_{(ctx + k) % 3}" for k in range(1, K + 1)]
        decs.append({"policy_id": "det", "event_id": f"e{e}", "dt": day, "base_policy": None,
                     "slots": [{"position": k, "ad_id": a, "probability": 1.0} for k, a in enumerate(tgt, 1)]})
    data = {"K": K, "logs": logs, "decisions": decs}
    ev, eng = run_evaluate(data, ["scavenging_slate"], uniform_logging=True, delta=0.05)
    eng.close()
    k = 27
    r = np.array([slate_r(e) for e in logs])
    match = np.array([[s["ad_id"] for s in e["slots"]] == [s["ad_id"] for s in d["slots"]]
                      for e, d in zip(logs, decs)])
    x = k * r * match
    rr = r.max() - min(r.min(), 0.0)
    est = ev.estimates
    u = est[(est["policy_id"] == "det") & (est["estimator"] == "scavenging_slate_uniform")].set_index("interval_kind")
    assert math.isclose(main_row(u)["value"], x.mean(), rel_tol=1e-9), (main_row(u)["value"], x.mean())
    assert math.isclose(main_row(u)["std_error"], x.std(ddof=1) / math.sqrt(T), rel_tol=1e-9)
    assert math.isclose(u.loc["bound", "ci_high"] - u.loc["bound", "value"],
                        rr * k * math.sqrt(2 * math.log(2 * k / 0.05) / T), rel_tol=1e-9)
    # Theorem 3's ln(2kT/delta) with the same k, summed over the slates the target uses
    acts = [tuple(s["ad_id"] for s in e["slots"]) for e in logs]
    T_a = defaultdict(int)
    for a in acts:
        T_a[a] += 1
    used = {tuple(s["ad_id"] for s in d["slots"]) for d in decs}
    half = rr * sum(math.sqrt(2 * math.log(2 * k * T / 0.05) / T_a[a]) for a in used if T_a[a])
    rows = est[(est["policy_id"] == "det") & (est["estimator"] == "scavenging_slate")].set_index("interval_kind")
    assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], half, rel_tol=1e-9)
    # a ranked layout (every ad at every position) keeps n!/(n-K)!; with --n-ads the catalogue's
    ap = pd.DataFrame([(f"a{j}", p) for p in (1, 2, 3) for j in range(9)], columns=["ad_id", "position"])
    assert math.isclose(math.exp(S.log_n_layout_slates(ap, 3)), 504, rel_tol=1e-12)
    mixed = pd.DataFrame([("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 2)], columns=["ad_id", "position"])
    assert math.isclose(math.exp(S.log_n_layout_slates(mixed, 2)), 4, rel_tol=1e-12)   # ab, ac, ba, bc


def test_theorem_k_of_a_layout_with_a_position_no_row_holds(tmp_path):
    """Rows holding positions 1 and 3 only (K = 3, position 2 never logged): the layout is positions 1 and 3, k =
    3 x 3 = 9 slates (it was k = 0, ln k = -inf, and --uniform-logging ended in a math domain error, exit 1). An ad
    that is the only one of two positions leaves no slate of distinct ads: k is held at 1 (ln k = 0). A 64-position
    ranked layout counts n!/(n-K)! without overflowing a 64-bit mask."""
    from scavenger.cli import main

    ap = pd.DataFrame([(f"{p}{j}", p) for p in (1, 3) for j in range(3)], columns=["ad_id", "position"])
    assert math.isclose(math.exp(S.log_n_layout_slates(ap, 3)), 9, rel_tol=1e-12)
    one = pd.DataFrame([("x", 1), ("x", 2)], columns=["ad_id", "position"])
    assert S.log_n_layout_slates(one, 2) == 0.0
    wide = pd.DataFrame([(f"a{j}", p) for p in range(1, 65) for j in range(70)], columns=["ad_id", "position"])
    assert math.isclose(S.log_n_layout_slates(wide, 64), S.log_n_slates(70, 64), rel_tol=1e-12)
    assert S.theorem4_halfwidth(100.0, -math.inf, 0.05) == math.inf
    from helpers.reference import write_parquet

    day = dt.date(2026, 1, 1)
    logs, decs = [], []
    for i in range(400):
        slots = [{"position": p, "ad_id": f"{p}{(i // (p + 1)) % 3}", "propensity": 1 / 3,
                  "reward": float(i % (p + 2) == 0)} for p in (1, 3)]
        logs.append({"event_id": f"e{i}", "event_time": dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc),
                     "context_id": "c", "context": [("k", "v")], "logging_policy": "lp", "slots": slots,
                     "slate_reward": None, "dt": day})
        decs.append({"policy_id": "t", "event_id": f"e{i}", "base_policy": "lp", "dt": day,
                     "slots": [{"position": 1, "ad_id": "10", "probability": 1.0},
                               {"position": 3, "ad_id": "31", "probability": 1.0}]})
    L, D = write_parquet({"logs": logs, "decisions": decs}, str(tmp_path / "d"))
    code = main(["evaluate", "--logs", L, "--decisions", D, "--out", str(tmp_path / "o"), "--gate", "report",
                 "--uniform-logging", "--engine", "duckdb", "--estimators", "scavenging_slate,scavenging_base"])
    assert code == 0
    est = pd.read_parquet(tmp_path / "o" / "estimates")
    uni = est[est["estimator"] == "scavenging_slate_uniform"]
    assert len(uni) and np.isfinite(uni["value"].astype(float)).all()


def test_n_ads_fewer_than_the_positions_a_slate_fills():
    """--n-ads 1 on K = 3 logs: no slate of 3 distinct ads out of 1 (k = 0, ln k = -inf) put ln(2kT/delta) < 0 into a
    square root (math domain error, exit 1); now the Theorem 3/4 rows say why and the EL row stays. k counts the
    positions the logs hold: rows at positions 2 and 5 only with --n-ads 2 give k = 2 slates, not n!/(n-5)! = 0."""
    data = build_random(seed=3, K=3, n_ads=5, days=(0,), per_day=40, with_nulls=False)
    ev, eng = run_evaluate(data, ["scavenging_slate"], uniform_logging=True, delta=0.05, n_ads=1)
    eng.close()
    est = ev.estimates[ev.estimates["policy_id"] == "det"]
    direct = est[est["estimator"] == "scavenging_slate"]
    assert (direct["interval_kind"] == "el").any() or direct["identified"].any()
    no_k = est[est["reason"].fillna("").str.contains("--n-ads 1 is fewer ads than the 3 positions")]
    assert len(no_k) == 3 and not no_k["identified"].any()       # the Theorem 3 bound, both Theorem 4 rows
    for e in data["logs"]:
        for s, p in zip(sorted(e["slots"], key=lambda s: s["position"])[:2], (2, 5)):
            s["position"] = p
        e["slots"] = [s for s in e["slots"] if s["position"] in (2, 5)]
    for d in data["decisions"]:
        d["slots"] = [dict(s, position={1: 2, 2: 5}[s["position"]]) for s in d["slots"] if s["position"] < 3]
    ev, eng = run_evaluate(data, ["scavenging_slate"], delta=0.05, n_ads=2)
    eng.close()
    est = ev.estimates
    assert est["note"].fillna("").str.endswith(" k=2").any(), est["note"].tolist()
    assert not est["reason"].fillna("").str.contains("--n-ads").any()


# ---- numpy simulation of factoring-model logs -> statistics tables (for coverage over many seeds) --------------
_SIM_NAMES = itertools.count()


def _key(positions, ads) -> str:
    return "|".join(f"{p}:{a}" for p, a in zip(positions, ads))


def simulate_tables(seed: int, T: int = 4000, K: int = 2, n_ads: int = 4, n_ctx: int = 3,
                    C=(1.0, 0.6, 0.45, 0.35), logging: str = "uniform", eps: float = 0.3, engine=None,
                    name=None):
    """Row-level numpy draw of a factoring-model log (clicks ~ Bernoulli(C_i P(x,a))) and its statistics tables,
    in the shapes of statistics/tables.py (one day, one logging policy, full slates).

    logging: 'uniform' (uniform K-permutations) or 'ranked' (x-independent epsilon-greedy around a fixed
    ranking that puts the ads with the best mean P first). Targets: 'oracle' (per-context top-K by P) and
    'fixed' (one slate for every context). With ``engine`` (DuckDB) the big slate tables are registered with it
    (as ``name``: a loop reuses one name, so the engine's statement is translated once), so the pipeline's direct
    approach runs. Returns (WindowStats, truth per policy, P, C)."""
    rng = np.random.default_rng(seed)
    C = np.asarray(C[:K], dtype=float)
    w = rng.dirichlet(np.ones(n_ctx) * 3)
    P = rng.uniform(0.05, 0.6, size=(n_ctx, n_ads))
    x = rng.choice(n_ctx, size=T, p=w)
    perm = np.argsort(rng.random((T, n_ads)), axis=1)[:, :K]
    if logging == "ranked":
        best = np.argsort(-(w @ P))[:K]
        greedy = rng.random(T) >= eps
        perm[greedy] = best
    clicks = (rng.random((T, K)) < C[None, :] * P[x[:, None], perm]).astype(float)
    r = clicks.sum(1)
    oracle = np.argsort(-P, axis=1)[:, :K]
    fixed = np.argsort(-(w @ P))[::-1][:K]  # deliberately a poor slate
    targets = {"oracle": oracle[x], "fixed": np.broadcast_to(fixed, (T, K))}
    truth = {"oracle": float(np.sum(w[:, None] * C[None, :] * np.take_along_axis(P, oracle, 1))),
             "fixed": float(np.sum(w[:, None] * C[None, :] * P[:, fixed]))}
    ad = np.array([f"ad{i}" for i in range(n_ads)])
    positions = list(range(1, K + 1))
    held = ",".join(map(str, positions))
    code = lambda s: np.asarray(s) @ (n_ads ** np.arange(K))  # noqa: E731  (a slate as one integer)
    key = lambda c: _key(positions, ad[(c // n_ads ** np.arange(K)) % n_ads])  # noqa: E731
    logged_codes = code(perm)
    tables = {}
    tables["log_summary"] = pd.DataFrame({"logging_policy": ["lp"], "n_events": [T], "n_slots": [T * K],
                                          "s_r": [r.sum()], "s_r2": [(r * r).sum()], "n_missing_propensity": [0],
                                          "n_null_reward": [0], "n_partial": [0], "k_max": [K], "r_max": [r.max()],
                                          "r_min": [r.min()]})
    # the marginal logging propensity of ad a at position i (uniform: 1/n_ads; ranked: the greedy ad gets 1 - eps more)
    mu = np.full((K, n_ads), (eps if logging == "ranked" else 1.0) / n_ads)
    if logging == "ranked":
        mu[np.arange(K), best] += 1 - eps
    fold = rng.integers(0, 2, size=T)          # the pass's fair coin per event (cross-fitting)
    rows = []
    for i in range(K):
        for a in range(n_ads):
            for f in (0, 1):
                sel = (perm[:, i] == a) & (fold == f)
                if sel.any():
                    rows.append(("lp", f, ad[a], i + 1, int(sel.sum()), clicks[sel, i].sum(), clicks[sel, i].sum(),
                                 mu[i, a], mu[i, a]))
    tables["ad_position"] = pd.DataFrame(rows, columns=["logging_policy", "fold", "ad_id", "position", "m", "c",
                                                        "c2", "min_p", "max_p"])
    u, cnt = np.unique(logged_codes, return_counts=True)
    actions = pd.DataFrame({"dt": SIM_DAY, "held": held, "slate_key": [key(c) for c in u], "t": cnt})
    st, pe, fac, fsq, tp = [], [], [], [], []
    for name, tg in targets.items():
        tcodes = code(tg)
        match = tcodes == logged_codes
        df = pd.DataFrame({"code": tcodes, "m": match, "r": r * match, "r2": (r * r) * match})
        g = df.groupby("code").agg(n_target=("m", "size"), n_match=("m", "sum"), s_r=("r", "sum"),
                                   s_r2=("r2", "sum")).reset_index()
        g.insert(0, "slate_key", [key(c) for c in g.pop("code")])
        g.insert(0, "held", held)
        g.insert(0, "policy_id", name)
        g.insert(0, "dt", SIM_DAY)
        st.append(g)
        pe.append((name, T, T, 0, int((np.sort(tg, 1) == np.sort(perm, 1)).all(1).sum()), 0, 0))
        # target position of the logged ad at i (0 = not shown)
        for i in range(K):
            j = np.zeros(T, dtype=int)
            for jj in range(K):
                j[tg[:, jj] == perm[:, i]] = jj + 1
            sel = (clicks[:, i] > 0) & (j > 0)
            if sel.any():
                d = pd.DataFrame({"ad_id": ad[perm[sel, i]], "pos_j": j[sel], "v": clicks[sel, i]})
                for (a, jj), v in d.groupby(["ad_id", "pos_j"])["v"].sum().items():
                    fac.append((name, a, i + 1, jj, v, v))
                    fsq.append((name, a, i + 1, jj, jj, v))
        for jj in range(K):
            for a, v in zip(*np.unique(tg[:, jj], return_counts=True)):
                tp.append((name, "lp", ad[a], jj + 1, float(v)))
    targets_table = pd.concat(st, ignore_index=True).astype({"n_match": "int64"})
    tables["policy_events"] = pd.DataFrame(pe, columns=["policy_id", "n_events", "n_deterministic", "n_with_base",
                                                        "n_reorder", "n_partial", "n_missing_propensity"])
    tables["factored"] = pd.DataFrame(fac, columns=["policy_id", "ad_id", "pos_i", "pos_j", "s_rp", "s_r2p"])
    tables["factored_sq"] = pd.DataFrame(fsq, columns=["policy_id", "ad_id", "pos_i", "pos_j", "pos_j2", "s_r2pp"])
    tables["target_placements"] = pd.DataFrame(tp, columns=["policy_id", "logging_policy", "ad_id", "pos_j", "s_p"])
    stats = WindowStats(tables=tables, per_day={SIM_DAY: tables}, dates=[SIM_DAY], K=K)
    if engine is not None:
        register_big(stats, engine, actions, targets_table, name)
    return stats, truth, P, C


def register_big(stats: WindowStats, engine, actions: pd.DataFrame, targets: pd.DataFrame, name=None) -> None:
    """The big slate tables: the logged slates ``actions`` (dt, held, slate_key, t) as each policy's slate_covered,
    and ``targets`` (dt, policy_id, held, slate_key, n_target, n_match, s_r, s_r2), as engine relations of
    ``stats`` (named ``name``, replacing an earlier one, or new names). Every target
    decides every event here, so each policy's slate_covered counts are the logged ones."""
    n = next(_SIM_NAMES) if name is None else name
    stats.big = {"slate_targets": f"sim_targets_{n}", "slate_covered": f"sim_covered_{n}"}
    covered = pd.concat([actions.assign(policy_id=p) for p in sorted(targets["policy_id"].unique())],
                        ignore_index=True)
    engine.register_frame(stats.big["slate_targets"], targets)
    engine.register_frame(stats.big["slate_covered"], covered)
    stats.engine = engine


@pytest.fixture(scope="module")
def duck():
    eng = DuckDBEngine("test")
    yield eng
    eng.close()


@pytest.mark.slow
def test_clt_coverage_and_theorem3_bound_over_seeds(duck):
    """Over 300 seeds of uniform logs (K=2, 4 ads -> 12 slates), the 95% CLT interval of the direct scavenging
    estimate (value +- z std_error) covers the truth 90-99% of the time (binomial sd at 300 seeds: 1.3%), the
    interval the row reports (empirical likelihood) at least 90% of the time, and the Theorem 3 bound always
    holds."""
    hits, reported, bound_ok, n = 0, 0, 0, 0
    for seed in range(300):
        stats, truth, _, _ = simulate_tables(seed, T=3000, engine=duck, name="coverage")
        est = scavenging_rows(stats, sorted(truth), delta=0.05)
        for pid, v in truth.items():
            rows = est[(est["policy_id"] == pid) & est["identified"]].set_index("interval_kind")
            if not len(rows) or main_row(rows)["unsupported_share"] > 0:
                continue
            n += 1
            main = main_row(rows)
            hits += abs(main["value"] - v) <= Z95 * main["std_error"]
            reported += main["ci_low"] <= v <= main["ci_high"]
            bound_ok += rows.loc["bound", "ci_low"] <= v <= rows.loc["bound", "ci_high"]
    assert n >= 550
    assert 0.90 <= hits / n <= 0.99, hits / n
    assert reported / n >= 0.90, reported / n
    assert bound_ok == n


def test_simulated_tables_direct_approach_equals_pure_function(duck):
    """The pipeline's direct approach (SQL reduction + estimate.py) on hand-made tables equals the pure
    scavenging_estimate of estimators/scavenging.py (V, CLT std error, Theorem 3 and 4 half-widths)."""
    stats, truth, _, _ = simulate_tables(5, T=2000, engine=duck)
    est = scavenging_rows(stats, sorted(truth), delta=0.05, uniform=True)
    targets = duck.fetch(f"SELECT * FROM {stats.big['slate_targets']}").rename(columns={"slate_key": "key"})
    log_k = S.log_n_slates(4, 2)
    ls = stats.table("log_summary")
    rr = max(float(ls["r_max"].max()), 1.0)
    covered = duck.fetch(f"SELECT policy_id, slate_key AS key, t FROM {stats.big['slate_covered']}")
    for pid in truth:
        tg = targets[targets["policy_id"] == pid]
        actions = covered[covered["policy_id"] == pid][["key", "t"]]
        for uniform, name in ((False, "scavenging_slate"), (True, "scavenging_slate_uniform")):
            want = S.scavenging_estimate(actions, tg, 2000, log_k, 0.05, 0.95, rr, uniform=uniform)
            rows = est[(est["policy_id"] == pid) & (est["estimator"] == name)].set_index("interval_kind")
            assert math.isclose(main_row(rows)["value"], want["value"], rel_tol=1e-9), (pid, name)
            assert math.isclose(main_row(rows)["std_error"], want["std_error"], rel_tol=1e-9), (pid, name)
            assert math.isclose(rows.loc["bound", "ci_high"] - rows.loc["bound", "value"], want["halfwidth"],
                                rel_tol=1e-9), (pid, name)


@pytest.mark.slow
def test_generator_uniform_logs_within_intervals(tmp_path):
    """Generator logs (uniform, K=2, 5 ads): every deterministic target's scavenging estimate lies within its CLT
    interval (3 sd) and its Theorem 3 bound of the realized-context true value."""
    import json

    from scavenger import api
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = str(tmp_path / "gen")
    truth = generate("duckdb", GeneratorConfig(logging="uniform", n_positions=2, n_ads=5, days=1,
                                            events_per_day=20000, seed=3), out)
    ev = api.evaluate(f"{out}/logs", f"{out}/decisions", estimators=["scavenging_slate", "factored"],
                      policies=["oracle", "most_clicked"], uniform_logging=True, gate="off", engine="duckdb")
    est = ev.pandas
    checked = 0
    for pid in ("oracle", "most_clicked"):
        v = truth["policies"][pid]["realized_value"]
        for name in ("scavenging_slate", "scavenging_slate_uniform", "factored"):
            rows = est[(est["policy_id"] == pid) & (est["estimator"] == name)].set_index("interval_kind")
            assert abs(main_row(rows)["value"] - v) <= 3 * main_row(rows)["std_error"], (pid, name)
            if "bound" in rows.index:
                assert rows.loc["bound", "ci_low"] <= v <= rows.loc["bound", "ci_high"]
            checked += 1
    assert checked == 6
    print(json.dumps(est[["policy_id", "estimator", "interval_kind", "value", "ci_low", "ci_high"]]
                     .to_dict("records"), default=str)[:2000])


@pytest.mark.slow
def test_generator_multi_base_policy(tmp_path):
    """Generator 'multi' logs (3 base policies rotated independently of x): the target that follows, per context,
    the best base policy is evaluated with action = base policy; within 3 sd and within the Theorem 3 bound."""
    from scavenger import api
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = str(tmp_path / "gen")
    truth = generate("duckdb", GeneratorConfig(logging="multi", n_positions=3, n_ads=10, days=1,
                                            events_per_day=20000, seed=4), out)
    ev = api.evaluate(f"{out}/logs", f"{out}/decisions", estimators=["scavenging_base"], policies=["best_base"],
                      gate="off", engine="duckdb")
    est = ev.pandas
    rows = est[est["policy_id"] == "best_base"].set_index("interval_kind")
    v = truth["policies"]["best_base"]["realized_value"]
    print(rows[["value", "std_error", "ci_low", "ci_high", "supported_share"]], v)
    assert main_row(rows)["supported_share"] == 1.0
    assert abs(main_row(rows)["value"] - v) <= 3 * main_row(rows)["std_error"]
    assert rows.loc["bound", "ci_low"] <= v <= rows.loc["bound", "ci_high"]


@pytest.mark.parametrize("n_match", [0, 1, 2])
def test_clt_needs_two_matched_events(n_match, duck):
    """Seed 001 scavenging, the pure function (base-policy scavenging): with fewer than 2 matched events there is
    no CLT interval (NaN, not zero width); the Theorem 3 bound row is still given. With 2 it is the plain numpy
    value. The pipeline's direct approach: no matching event is not identified; with one or more, the value, its
    standard error and the Theorem 3 bound are the numpy ones, and its interval (empirical likelihood: honest from
    one matching event) is finite."""
    actions = pd.DataFrame({"key": [1, 2], "t": [5, 7]})
    targets = pd.DataFrame({"key": [1], "n_target": [4], "n_match": [n_match], "s_r": [float(n_match > 0) * 1.0],
                            "s_r2": [float(n_match > 0) * 1.0]})
    est = S.scavenging_estimate(actions, targets, n_events=12, log_k=math.log(10), delta=0.05)
    assert math.isclose(est["value"], (1.0 if n_match else 0.0) / 5, rel_tol=1e-12)
    assert math.isfinite(est["bound"][1])
    rows = pd.DataFrame(S._rows("p", "scavenging_slate", est, 12, 10.0, 0.95, 0.05)).set_index("interval_kind")
    x = np.array([1.0, 0.0, 0.0, 0.0, 0.0])      # one click among the 5 events of action 1
    se = math.sqrt(x.var(ddof=1) / 5)
    if n_match < 2:
        assert math.isnan(est["std_error"]) and all(math.isnan(x) for x in est["clt"])
        assert math.isnan(rows.loc["clt", "ci_low"]) and math.isnan(rows.loc["clt", "ci_high"])
        assert math.isnan(rows.loc["clt", "value"]) == (n_match == 0)
        assert rows.loc["bound", "value"] == est["value"]
    else:
        assert math.isclose(est["std_error"], se, rel_tol=1e-9)
    # the same counts as big slate tables (K = 1: action = ad; 10 ads in the catalogue)
    stats = WindowStats(tables={"log_summary": pd.DataFrame({"logging_policy": ["lp"], "n_events": [12],
                                                             "r_max": [1.0], "r_min": [0.0], "k_max": [1]}),
                                "policy_events": pd.DataFrame({"policy_id": ["p"], "n_events": [12],
                                                               "n_deterministic": [12]})},
                        per_day={}, dates=[SIM_DAY], K=1)
    register_big(stats, duck,
                 pd.DataFrame({"dt": SIM_DAY, "held": "1", "slate_key": ["1:a", "1:b"], "t": [5, 7]}),
                 targets.assign(dt=SIM_DAY, policy_id="p", held="1", slate_key="1:a").drop(columns="key"))
    got = scavenging_rows(stats, ["p"], n_ads=10).set_index("interval_kind")
    assert (got["estimator"] == "scavenging_ad").all()
    if n_match == 0:
        assert len(got) == 1 and not got.loc["none", "identified"] and math.isnan(got.loc["none", "value"])
        assert "no logged slate equals" in got.loc["none", "reason"]
    elif n_match < MIN_MATCHING:    # identified from MIN_MATCHING matching events on (estimators/intervals.py)
        assert len(got) == 1 and not got.loc["none", "identified"] and math.isnan(got.loc["none", "value"])
        assert f"only {n_match} logged event(s) match" in got.loc["none", "reason"]
    else:
        assert math.isclose(got.loc["bound", "ci_high"] - got.loc["bound", "value"], est["halfwidth"], rel_tol=1e-12)
        main = main_row(got)
        assert main["identified"] and math.isclose(main["value"], 0.2, rel_tol=1e-12)
        assert math.isclose(main["std_error"], se, rel_tol=1e-9)
        assert math.isfinite(main["ci_low"]) and main["ci_low"] < 0.2 < main["ci_high"] < math.inf
        if main.name == "clt":
            assert math.isclose(main["ci_high"], 0.2 + Z95 * se, rel_tol=1e-9)


def test_prefix_sums_in_one_statement_equal_each_prefix_window(rand_case):
    """running/'s prefixes read the direct approach's sums of every prefix window from one statement: each equals
    the reduction over that prefix's days alone (the window's days 0 and 2: a day without logs between)."""
    case, data, ev = rand_case
    stats = ev.stats
    days = sorted(stats.dates)
    assert len(days) == 2
    every = E.scavenging_sums(stats, prefixes=days)
    keys = ["policy_id", "held"]
    for d in days:
        want = E.scavenging_sums(stats.prefix(d)).sort_values(keys).reset_index(drop=True)
        got = every[every["dt"] == d].drop(columns=["dt"]).sort_values(keys).reset_index(drop=True)
        assert len(want) and list(got.columns) == list(want.columns)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, rtol=1e-12, atol=0)


def test_prefix_sums_on_spark_over_stored_and_scanned_days(spark, tmp_path):
    """The one statement of every prefix on Spark, its big tables a union of a stored day's files and the days this
    run scans (the daily DAG's evaluate: Spark's planner lost dt in a join there): equal to DuckDB's, whose every
    prefix equals the reduction over that prefix's days alone."""
    from scavenger.engines import open_engine
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import StatsConfig
    from scavenger.statistics.store import Store
    from scavenger.statistics.window import window_statistics

    from helpers.reference import write_parquet

    write_parquet(build_random(seed=5, K=2, n_ads=4, days=(0, 1), per_day=120, with_nulls=False), str(tmp_path))
    keys = ["dt", "policy_id", "held"]
    got = {}
    for name in ("spark", "duckdb"):
        eng = open_engine(name, "test", spark=spark if name == "spark" else None)
        inputs = describe_inputs(f"{tmp_path}/logs", f"{tmp_path}/decisions")
        days = window_dates(eng, inputs)
        store = Store(str(tmp_path / f"store_{name}"))
        plan = registry.plan_for(["scavenging_slate"])           # the direct approach's tables only
        window_statistics(eng, inputs.logs, inputs.decisions, days[-1:], plan, StatsConfig(), store=store)
        w = window_statistics(eng, inputs.logs, inputs.decisions, days, plan, StatsConfig(), store=store)
        assert w.loaded == days[-1:] and w.scanned == days[:-1]
        every = E.scavenging_sums(w, prefixes=days).sort_values(keys).reset_index(drop=True)
        for d in days if name == "duckdb" else ():        # each prefix alone (on Spark: one query each, slow)
            want = E.scavenging_sums(w.prefix(d)).sort_values(keys[1:]).reset_index(drop=True)
            mine = every[every["dt"] == d].drop(columns=["dt"]).reset_index(drop=True)
            pd.testing.assert_frame_equal(mine, want, check_dtype=False, rtol=1e-12, atol=0)
        got[name] = every
        eng.close()
    pd.testing.assert_frame_equal(got["spark"], got["duckdb"], check_dtype=False, rtol=1e-12, atol=1e-15)
