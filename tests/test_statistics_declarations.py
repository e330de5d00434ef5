"""A per-day table is one declaration and its statement (statistics/declarations.py): a throwaway decision-side
table -- per target policy, its decided events and the sum of the slate weights W = prod_k pi_k/mu_k -- declared
here and nowhere else is planned, scanned, merged over days and stored like the built-in ones, and equals a plain
Python computation over the reference logs (1e-9 relative); one pass per day merges to one pass over both days."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from helpers.reference import build_random, clean, write_parquet
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import describe_inputs, window_dates
from scavenger.statistics.declarations import TABLES, Table, declare
from scavenger.statistics.plan import ScanPlan, plan_for
from scavenger.statistics.scan import StatsConfig
from scavenger.statistics.sql.decisions import target_prob, wide_target_prob
from scavenger.statistics.store import Store
from scavenger.statistics.window import window_statistics

NAME = "policy_weights_test"


def policy_weights(Kw: int) -> str:
    """(dt, policy_id): n_events = decided clean events, s_W = sum of W over those with every held propensity."""
    ys = [f"CASE WHEN a_{k} IS NULL THEN 1D ELSE try_divide({wide_target_prob(k)}, mu_{k}) END"
          for k in range(1, Kw + 1)]
    extra = (f"CASE WHEN xs IS NULL THEN 1D ELSE aggregate(xs, 1D, (acc, s) -> acc * "
             f"try_divide({target_prob('s.position', 's.ad_id')}, s.propensity)) END")
    return f"""
SELECT dt, policy_id, count(1) AS n_events, sum(CASE WHEN miss THEN NULL ELSE {' * '.join(ys + [extra])} END) AS s_W
FROM scv_joined WHERE clean GROUP BY dt, policy_id"""


@pytest.fixture
def declared():
    declare(Table(NAME, "decision", keys=("policy_id",), sql=lambda s: policy_weights(s.Kw)))
    try:
        yield TABLES[NAME]
    finally:
        TABLES.pop(NAME)


def reference(data) -> dict:
    """{policy: (decided clean events, sum of W over those with every propensity)}, row by row."""
    events, decisions = clean(data)
    by_id = {ev["event_id"]: ev for ev in events}
    n, s_w = defaultdict(int), defaultdict(float)
    for d in decisions:
        ev = by_id[d["event_id"]]
        n[d["policy_id"]] += 1
        if any(s["propensity"] is None for s in ev["slots"]):
            continue
        w = 1.0
        for s in ev["slots"]:      # W = prod over the held positions (1 at the others)
            pi = sum(x["probability"] for x in d["slots"]
                     if x["position"] == s["position"] and x["ad_id"] == s["ad_id"])
            w *= pi / s["propensity"]
        s_w[d["policy_id"]] += w
    return {p: (n[p], s_w[p]) for p in n}


def window(root, plan, batch_days=0, store=None):
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    eng = DuckDBEngine("test")
    try:
        w = window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), plan, StatsConfig(),
                              Store(store) if store else None, batch_days=batch_days)
        return w.table(NAME), (w.scanned, w.batches)
    finally:
        eng.close()


def test_a_declared_table_is_planned_scanned_merged_and_stored(declared, tmp_path):
    data = build_random(seed=21, K=3, n_ads=6, days=(0, 1), per_day=70)
    write_parquet(data, str(tmp_path))
    assert NAME in plan_for({NAME, "policy_events"}).tables(True, StatsConfig())
    assert NAME not in plan_for({"policy_events"}, tuple("abcde")).tables(True, StatsConfig())
    assert NAME not in ScanPlan().tables(False, StatsConfig())          # a decision-side table: decisions only
    plan = plan_for({NAME, "slate_moments"}, ("a",))
    one, _ = window(tmp_path, plan)                                     # one pass over both days
    ref = reference(data)
    got = one.set_index("policy_id")
    assert set(got.index) == set(ref) and len(got) == len(one) == 5
    for p, (n, s_w) in ref.items():
        assert got.loc[p, "n_events"] == n, p
        assert math.isclose(got.loc[p, "s_W"], s_w, rel_tol=1e-9), p
    by_day, scanned = window(tmp_path, plan, batch_days=1, store=str(tmp_path / "stats"))   # a pass per day
    stored, rescanned = window(tmp_path, plan, store=str(tmp_path / "stats"))               # read back
    assert scanned == (sorted({r["dt"] for r in data["logs"]}), 2) and rescanned == ([], 0)
    assert all(v[1] > 0 for v in ref.values())
    for other in (by_day, stored):
        assert list(other["policy_id"]) == list(one["policy_id"])
        assert np.array_equal(other["n_events"].to_numpy(), one["n_events"].to_numpy())
        assert np.allclose(other["s_W"], one["s_W"], rtol=1e-12, atol=0)
    without, _ = window(tmp_path, plan_for({"slate_moments"}))          # not asked for: not made
    assert len(without) == 0
