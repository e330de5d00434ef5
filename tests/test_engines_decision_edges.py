"""Edges of the decisions' join on both engines: a day whose every log row is quarantined (no clean row: K = 0, no
wide position), and a decision without slots under Spark's ANSI mode off (size(NULL) = -1 there)."""
from __future__ import annotations

import pandas as pd

from helpers.reference import build_random, write_parquet


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


def test_decision_without_slots_quarantined_as_read_with_ansi_off(spark, tmp_path):
    """A decision whose slots are NULL is EMPTY_SLOTS and its quarantined row holds NULL slots, as read, on DuckDB and
    on Spark with spark.sql.ansi.enabled=false, where size(NULL) is -1 and the row passed for a one-entry-per-position
    decision: its entries were rebuilt as an empty list (slots [] instead of NULL)."""
    from scavenger.engines import open_engine
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig
    from scavenger.statistics.window import window_statistics

    data = build_random(seed=8, K=2, n_ads=5, days=(0,), per_day=10, with_nulls=False)
    data["decisions"].append(dict(data["decisions"][0], policy_id="p_null", slots=None))
    write_parquet(data, str(tmp_path))
    before = spark.conf.get("spark.sql.ansi.enabled", None)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        for name in ("duckdb", "spark"):
            eng = open_engine(name, "test", spark=spark if name == "spark" else None)
            inputs = describe_inputs(f"{tmp_path}/logs", f"{tmp_path}/decisions")
            window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(),
                              StatsConfig(), quarantine_dir=str(tmp_path / f"q_{name}"))
            eng.close()
            q = pd.read_parquet(tmp_path / f"q_{name}" / "decisions")
            row = q[q["policy_id"] == "p_null"].iloc[0]
            assert row["slots"] is None and list(row["reason_codes"]) == ["EMPTY_SLOTS"], (name, row["slots"])
    finally:
        if before is None:
            spark.conf.unset("spark.sql.ansi.enabled")
        else:
            spark.conf.set("spark.sql.ansi.enabled", before)
