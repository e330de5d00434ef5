"""A slot's reward may be null while its row carries a slate_reward (the contract allows it: MISSING_REWARD only when
both are null). That slot's reward is unknown, not a 0 click: the per-slot statistics count it in m (impressions)
but not in m_r (impressions with a known reward), and c, c2, the factored and re-ordering sums leave it out, so a
CTR is c / m_r and the factored T_a is m_r. The ADC table and evaluate's diagnostics say how many were left out.
All on DuckDB (tests/test_engines.py: the same tables on Spark)."""
from __future__ import annotations

import datetime as dt
import math

import numpy as np

from helpers.reference import build_random, clean, with_unknown_slot_rewards
from scavenger.estimators import attention_decay as A
from scavenger.statistics.scan import ScanPlan, StatsConfig
from scavenger.estimators import adc_family as E
from test_estimators_attention_decay import _ref_estimates
from test_estimators_factored import _pipeline_rows
from test_estimators_scavenging import duck_window, run_evaluate

DAY = dt.date(2026, 3, 1)


def _four_events():
    """4 one-slot events of ad a at position 1, each with slate_reward 1; two hold slot reward 1, two a null one.
    The target shows a or b at position 1, each with probability 1/2."""
    logs, decisions = [], []
    for i, w in enumerate((1.0, None, 1.0, None)):
        logs.append({"event_id": f"e{i}", "event_time": dt.datetime(2026, 3, 1, 12), "context_id": "c",
                     "context": {"f": "v"}, "logging_policy": "lp", "slate_reward": 1.0, "dt": DAY,
                     "slots": [{"position": 1, "ad_id": "a", "propensity": 0.5, "reward": w}]})
        decisions.append({"policy_id": "half_a", "event_id": f"e{i}", "dt": DAY, "base_policy": None,
                          "slots": [{"position": 1, "ad_id": "a", "probability": 0.5},
                                    {"position": 1, "ad_id": "b", "probability": 0.5}]})
    return {"K": 1, "ads": ["a"], "logs": logs, "decisions": decisions}


def test_four_events_ctr_over_the_known_rewards():
    """m = 4 impressions, m_r = 2 known rewards, c = 2 clicks: CTR 2/2 = 1 (it was c / m = 0.5), and the factored
    value of the target is S_a / T_a = (2 x 1/2) / 2 = 1/2 (it was 1/4: T_a = 4)."""
    stats = duck_window(_four_events(), ScanPlan(slate_targets=False))
    try:
        ap = stats.table("ad_position")
        assert len(ap) == 1 and ap["m"].sum() == 4 and ap["m_r"].sum() == 2
        assert ap["c"].sum() == 2.0 and ap["c2"].sum() == 2.0
        _, _, M, C, _ = A.matrices(ap)
        assert M[0, 0] == 2.0 and C[0, 0] / M[0, 0] == 1.0
        pa = stats.table("policy_ads").iloc[0]
        assert (pa["m"], pa["m_r"], pa["c"], pa["c2"]) == (4, 2, 2.0, 2.0)
        assert stats.table("log_summary")["n_null_reward"].sum() == 2
        assert A.unknown_rewards(ap) == 2
        row = _pipeline_rows(stats, ["half_a"], [1.0]).iloc[0]
        assert row["identified"] and row["value"] == 0.5
    finally:
        stats.engine.close()


def _unknown_data():
    """K = 3 random logs, 40% of the events with a slate_reward and about half their slot rewards null."""
    data = with_unknown_slot_rewards(build_random(seed=31, K=3, n_ads=6, days=(0, 1), per_day=200,
                                                  with_nulls=False), share=0.4, seed=3)
    n = sum(s["reward"] is None for ev in clean(data)[0] for s in ev["slots"])
    assert n > 200
    return data, n


def test_adc_equals_numpy_over_the_known_rewards():
    """Every method's coefficient and delta std error equal the row-level reference over the slots with a known
    reward (test_adc._ref_estimates, 1e-9 relative); the table's note says how many impressions were left out."""
    data, n_unknown = _unknown_data()
    stats = duck_window(data, ScanPlan(False, False, False), StatsConfig())
    try:
        ap = stats.table("ad_position")
        assert int(ap["m"].sum() - ap["m_r"].sum()) == n_unknown
        table = A.adc_table(ap, level=0.9, bootstrap=False)
        ref = _ref_estimates(data, 3)
        for (method, i), (coef, var) in ref.items():
            row = table[(table["method"] == method) & (table["position"] == i)].iloc[0]
            assert math.isclose(row["coefficient"], coef, rel_tol=1e-9), (method, i)
            assert math.isclose(row["std_error"], math.sqrt(var), rel_tol=1e-9), (method, i)
        rows = E.adc_rows(stats, A.METHODS, 0.9, 2.0, 1.0)
        left = f"{n_unknown} slot impression(s) with a null reward (the row has a slate_reward) left out"
        assert rows["note"].str.endswith(left).all()
        assert np.allclose(rows["coefficient"], A.adc_table(ap, level=0.9)["coefficient"], rtol=0, atol=0)
    finally:
        stats.engine.close()


def test_evaluate_reports_the_slots_left_out():
    """evaluate's diagnostics: one row slot_rewards_unknown = the clean slots with a null reward (log_summary's
    n_null_reward); its ADC table carries the note. Without such slots, no row."""
    data, n_unknown = _unknown_data()
    ev, eng = run_evaluate(data, ["factored"])
    try:
        d = ev.diagnostics[ev.diagnostics["metric"] == "slot_rewards_unknown"]
        assert len(d) == 1 and d["value"].iloc[0] == n_unknown and d["policy_id"].isna().all()
        assert ev.adc["note"].str.contains(f"{n_unknown} slot impression").all()
    finally:
        eng.close()
    ev, eng = run_evaluate(build_random(seed=31, K=3, n_ads=6, days=(0,), per_day=60, with_nulls=False),
                           ["factored"])
    try:
        assert not (ev.diagnostics["metric"] == "slot_rewards_unknown").any()
    finally:
        eng.close()


def test_no_known_slot_reward_identifies_no_factored_or_reorder():
    """Every row carries a slate_reward and no slot reward (ranked K = 2, ADCs given): no T_a > 0 for any ad the
    targets show, so factored is not identified (it printed 0, identified, supported_share 0), and re-ordering moves
    no known reward (it stopped the job: KeyError 's_rp' on the empty factored table)."""
    data = build_random(seed=5, K=2, n_ads=4, days=(0,), per_day=40, with_nulls=False)
    for ev in data["logs"]:
        ev["slate_reward"] = float(sum(s["reward"] for s in ev["slots"]))
        ev["slots"] = [dict(s, reward=None) for s in ev["slots"]]
    stats = duck_window(data, ScanPlan(slate_targets=False, context_cells=False, pair_strata=False))
    try:
        rows = _pipeline_rows(stats, ["det", "perm"], [1.0, 0.5], wanted=("factored", "reorder"))
        fac = rows[(rows["policy_id"] == "det") & (rows["estimator"] == "factored")].iloc[0]
        assert not fac["identified"] and math.isnan(fac["value"]) and "known slot reward" in fac["reason"]
        ro = rows[rows["policy_id"] == "perm"].set_index("estimator")
        assert set(ro.index) == {"factored", "reorder"}
        assert not ro.loc[["reorder"], "identified"].any()
        assert ro.loc["reorder", "reason"].startswith("no slot reward is known")
        # the estimated ADCs' reason: the ads did move between positions, their slot rewards are unknown (it said
        # "no ad was shown at more than one position" and suggested ranked logs, which these are)
        assert "no slot reward is known" in E.adc_identification(stats.table("ad_position"))[2]
    finally:
        stats.engine.close()
