"""A window scanned in several passes (batch_days, or the memory budget's automatic batches) flags the same repeated
event ids as one pass: a repeat of an earlier pass's event is DUPLICATE_EVENT_ID whether or not the days are kept
in a statistics store. On DuckDB."""
from __future__ import annotations

import numpy as np

from helpers.reference import build_random, write_parquet
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import describe_inputs
from scavenger.statistics.scan import ScanPlan, StatsConfig
from scavenger.statistics.store import Store
from scavenger.statistics.window import window_statistics


def test_repeats_across_passes_are_flagged_with_or_without_a_store(tmp_path):
    """Three days, the third repeating two event ids of the first (one of them twice): one pass flags 3 rows of the
    third day. One day per pass flagged none of them without a store (each pass saw only its own day's ids)."""
    data = build_random(seed=31, K=2, n_ads=5, days=(0, 1, 2), per_day=50, with_nulls=False)
    days = sorted({r["dt"] for r in data["logs"]})
    first = [ev["event_id"] for ev in data["logs"] if ev["dt"] == days[0]][:2]
    third = [ev for ev in data["logs"] if ev["dt"] == days[2]]
    for ev, eid in zip(third[:3], [first[0], first[1], first[1]]):
        ev["event_id"] = eid
    root = tmp_path / "in"
    write_parquet(data, str(root))
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    got = {}
    for name, batch, store in (("one pass", 0, None), ("per day", 1, None),
                               ("per day, stored", 1, Store(str(tmp_path / "store")))):
        eng = DuckDBEngine("test")
        w = window_statistics(eng, inputs.logs, inputs.decisions, days, ScanPlan(), StatsConfig(), store=store,
                              batch_days=batch)
        assert w.batches == (1 if batch == 0 else 3), name
        got[name] = (w.table("log_counts").sort_values("dt")["DUPLICATE_EVENT_ID"].tolist(),
                     w.table("log_summary"), w.table("policy_events"))
        eng.close()
    for name, (dups, ls, pe) in got.items():
        assert dups == [0, 0, 3], name
        for a, b in ((ls, got["one pass"][1]), (pe, got["one pass"][2])):
            a, b = (x.sort_values(list(x.columns[:2])).reset_index(drop=True) for x in (a, b))
            num = [c for c in a.columns if a[c].dtype.kind in "fi"]
            assert np.allclose(a[num].to_numpy(float), b[num].to_numpy(float), rtol=1e-12, equal_nan=True), name
