"""Quarantined rows come back as read on both engines: the flagged events hold the context as its JSON text (read
back as the map), and a one-entry-per-position decision travels the join as columns (its entries rebuilt)."""
from __future__ import annotations

import pandas as pd

from helpers.reference import build_random, write_parquet
from test_engines import ODD_CONTEXTS


def quarantine_on_both(spark, root, data, side: str) -> dict:
    """{engine: the quarantined rows of ``side`` (logs or decisions)} after one pass of each engine over ``data``."""
    from scavenger.engines import open_engine
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig
    from scavenger.statistics.window import window_statistics

    write_parquet(data, str(root))
    out = {}
    for name in ("duckdb", "spark"):
        eng = open_engine(name, "test", spark=spark if name == "spark" else None)
        inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
        window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(), StatsConfig(),
                          quarantine_dir=str(root / f"q_{name}"))
        eng.close()
        out[name] = pd.read_parquet(root / f"q_{name}" / side)
    return out


REPEATED_KEYS = [[("k", "v1"), ("k", "v2")], [("a", "1"), ("b", "2"), ("a", "3")],
                 [("a", "1"), ("b", "2"), ("c", "3"), ("b", "4")],
                 [(f"f{i}", str(i)) for i in range(5)] + [("f1", "x")]]               # beyond the pairwise four


LONG = [("CONTEXT_TOO_LONG", lambda r: {"context": {"f": "\u00e9" * 1001}}),
        ("CONTEXT_TOO_LONG", lambda r: {"context": {"\u4e2d" * 1001: "v", "g": None}}),
        ("ID_TOO_LONG", lambda r: {"slots": [dict(r["slots"][0], ad_id="\u00e9" * 1001)] + r["slots"][1:]}),
        ("ID_TOO_LONG", lambda r: {"context_id": "\u4e2d" * 1001}),
        (None, lambda r: {"context": {"\u00e9" * 1000: "\u4e2d" * 1000},                    # at the limit: clean
                          "slots": [dict(r["slots"][0], ad_id="\u4e2d" * 1000)] + r["slots"][1:]})]


def test_quarantined_rows_keep_their_context_map(spark, tmp_path):
    """Null and empty maps, null values, quotes, backslashes, markup, key order: the map exactly as read. A Parquet
    map that holds a key twice (pyarrow writes one; a dict cannot) is quarantined as CONTEXT_DUPLICATE_KEY on both
    engines, its context null and its other columns as read; the other maps stay clean (before: DuckDB stopped the
    whole job at the first statement that rebuilt the map, and Spark counted both values in check a). Ids and
    context texts of 1,001 two- or three-byte characters are ID_TOO_LONG and CONTEXT_TOO_LONG on both engines
    (both count characters), their rows as read; 1,000 such characters are valid."""
    n = 2 * len(ODD_CONTEXTS)
    data = build_random(seed=6, K=2, n_ads=5, days=(0,), per_day=n + 8 + len(LONG), with_nulls=False)
    want, repeated, long = {}, {}, {}
    for i, row in enumerate(data["logs"]):
        if i >= n + 8:                                   # the last rows: an id or a context text too long
            code, change = LONG[i - n - 8]
            row.update(change(row))
            long[row["event_id"]] = (code, row["context"], row["slots"])
            continue
        if i >= n:                                       # the eight rows before them: a key twice
            row["context"] = REPEATED_KEYS[i % len(REPEATED_KEYS)]
            repeated[row["event_id"]] = row["slots"]
            continue
        row["context"] = ODD_CONTEXTS[i % len(ODD_CONTEXTS)]
        if i % 2 == 0:                                   # half the rows quarantined (a propensity above 1)
            row["slots"][0]["propensity"] = 1.5
            want[row["event_id"]] = row["context"]
    for name, q in quarantine_on_both(spark, tmp_path, data, "logs").items():
        too = q[q["event_id"].isin(long)]
        got = {r.event_id: ([*r.reason_codes], None if r.context is None else dict(r.context),
                            [dict(s) for s in r.slots]) for r in too.itertuples()}
        assert got == {e: ([c], ctx, slots) for e, (c, ctx, slots) in long.items() if c}, name
        q = q[~q["event_id"].isin(long)]
        dup = q[q["event_id"].isin(repeated)]
        assert len(dup) == len(repeated) and dup["context"].isna().all(), name
        assert all(list(c) == ["CONTEXT_DUPLICATE_KEY"] for c in dup["reason_codes"]), name
        assert all([dict(s) for s in r.slots] == repeated[r.event_id] for r in dup.itertuples()), name
        q = q[~q["event_id"].isin(repeated)]
        got = {r.event_id: (None if r.context is None else dict(r.context)) for r in q.itertuples()}
        assert got == want, name
        ordered = {r.event_id: None if r.context is None else [k for k, _ in r.context] for r in q.itertuples()}
        assert all(ordered[e] == (None if c is None else list(c)) for e, c in want.items()), name


def test_quarantined_decisions_keep_their_entries(spark, tmp_path):
    """Simple (quarantined for a probability), partial with a null ad, out-of-order decisions, and one whose ad id
    is too long (ID_TOO_LONG): their entries as read, sorted by position (a null position, then a null ad, first on
    both engines)."""
    data = build_random(seed=8, K=3, n_ads=6, days=(0,), per_day=40, with_nulls=False)
    want = {}
    for i, d in enumerate(x for x in data["decisions"] if x["policy_id"] == "det"):
        if i % 4 == 0:
            d["slots"][1]["probability"] = 1.5                  # simple, quarantined
        elif i % 4 == 1:
            d["slots"] = [dict(d["slots"][0], ad_id=None), d["slots"][1]]   # simple, partial, a null ad
        elif i % 4 == 2:
            d["slots"] = [d["slots"][2], dict(d["slots"][0], probability=-1.0), d["slots"][1]]  # out of order
        elif i % 8 == 7:        # an ad id of 1,001 two-byte characters: ID_TOO_LONG on both engines
            d["slots"] = [dict(d["slots"][0], ad_id="\u00e9" * 1001)] + d["slots"][1:]
        elif i % 8 == 3:        # a null position and a null ad: a null field first (DuckDB listed it last)
            d["slots"] = [d["slots"][1], dict(d["slots"][2], ad_id=None), dict(d["slots"][0], position=None),
                          dict(d["slots"][1], ad_id=None)]
        else:
            continue
        want[d["event_id"]] = sorted(d["slots"], key=lambda x: (x["position"] is not None, x["position"] or 0,
                                                                x["ad_id"] is not None, x["ad_id"] or ""))
    for name, q in quarantine_on_both(spark, tmp_path, data, "decisions").items():
        q = q[q["policy_id"] == "det"]
        assert {r.event_id: [dict(x) for x in r.slots] for r in q.itertuples()} == want, name

