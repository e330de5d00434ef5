"""A day whose every log row is quarantined (no clean row: K = 0, no wide position) with decisions: the pass joins
the decisions to no event on both engines (every decision EVENT_QUARANTINED), the counts and the quarantined rows
alike. Spark refused the join's statement: greatest() of one argument (WRONG_NUM_ARGS)."""
from __future__ import annotations

import pandas as pd

from reference import build_random, write_parquet


def test_decisions_of_a_day_without_clean_rows_on_both_engines(spark, tmp_path):
    from scavenger.engines import open_engine
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig
    from scavenger.statistics.window import window_statistics

    data = build_random(seed=7, K=2, n_ads=4, days=(0,), per_day=20, with_nulls=False)
    for row in data["logs"]:
        row["slots"][0]["propensity"] = 1.5                     # PROPENSITY_GT_1: every row quarantined
    write_parquet(data, str(tmp_path))
    got = {}
    for name in ("duckdb", "spark"):
        eng = open_engine(name, "test", spark=spark if name == "spark" else None)
        inputs = describe_inputs(f"{tmp_path}/logs", f"{tmp_path}/decisions")
        w = window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(),
                              StatsConfig(), quarantine_dir=str(tmp_path / f"q_{name}"))
        eng.close()
        assert w.K == 0, name
        counts = w.table("decision_counts")
        q = pd.read_parquet(tmp_path / f"q_{name}" / "decisions")
        got[name] = (int(counts["rows"].sum()), int(counts["quarantined"].sum()), int(counts["EVENT_QUARANTINED"].sum()),
                     sorted((r.policy_id, r.event_id, len(r.slots)) for r in q.itertuples()))
    n = len(data["decisions"])
    assert got["duckdb"][:3] == (n, n, n)
    assert got["spark"] == got["duckdb"]
