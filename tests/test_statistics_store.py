"""A window read partly from the statistics store equals the same window scanned cold: a day's own K, a backfilled
day that repeats later days' event ids, quarantine_all across passes, one-slot logs reused, inputs without a file
signature never reused, and one run's write never removing another's staging (DuckDB, small data)."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pandas as pd
import pytest

from helpers.reference import build_random, joined, write_parquet
from scavenger.cli import main

D0 = dt.date(2026, 3, 1)
GATE = ["--engine", "duckdb", "--gate", "report", "--max-quarantine-share", "1", "--no-great-expectations"]


def _run(root, out, *extra, stats=None):
    args = ["evaluate", "--logs", f"{root}/logs", "--decisions", f"{root}/decisions", *GATE, "--out", str(out)]
    assert main(args + (["--stats-dir", str(stats)] if stats else []) + list(extra)) in (0, 3)
    res = json.loads((out / "result.json").read_text())
    est = pd.read_parquet(out / "estimates") if (out / "estimates").exists() else pd.DataFrame()
    return res, est


def _values(est) -> dict:
    ok = est[est["identified"]] if len(est) else est
    return {(r.policy_id, r.estimator): r.value for r in ok.itertuples()}


def _same(a: dict, b: dict):
    assert a.keys() == b.keys()
    assert all(abs(a[k] - b[k]) <= 1e-12 * max(1.0, abs(b[k])) for k in a), [(k, a[k], b[k]) for k in a]


def _set_id(data, day: int, i: int, new: str) -> None:
    """Row i of day ``day`` (and its decisions) takes event id ``new``."""
    rows = [r for r in data["logs"] if r["dt"] == D0 + dt.timedelta(day)]
    old, rows[i]["event_id"] = rows[i]["event_id"], new
    for d in data["decisions"]:
        if d["event_id"] == old and d["dt"] == rows[i]["dt"]:
            d["event_id"] = new


def _k3_days_then_k2() -> dict:
    """Two days of K = 3 (2026-03-01, 02) and one of K = 2 (03) over the same ads."""
    return joined(build_random(5, K=3, n_ads=6, days=(0, 1), per_day=80, with_nulls=False),
                  build_random(105, K=2, n_ads=6, days=(2,), per_day=80, with_nulls=False))


def test_a_stored_day_keeps_its_own_K(tmp_path):
    """Days of K = 3 and one of K = 2 scanned in one pass and stored; that day alone read back from the store has
    K = 2 and the cold estimates (before: the pass's K = 3, so factored lacked C_3 and was not identified)."""
    write_parquet(_k3_days_then_k2(), str(tmp_path))
    _run(tmp_path, tmp_path / "all", stats=tmp_path / "s")
    day = ["--from", "2026-03-03", "--to", "2026-03-03"]
    warm, west = _run(tmp_path, tmp_path / "warm", *day, stats=tmp_path / "s")
    cold, cest = _run(tmp_path, tmp_path / "cold", *day)
    assert warm["counts"]["days_scanned"] == 0 and warm["counts"]["K"] == cold["counts"]["K"] == 2
    assert ("det", "factored") in _values(cest)
    _same(_values(west), _values(cest))


@pytest.mark.parametrize("case", ["backfill", "redelivery"])
def test_a_day_read_now_that_repeats_ids_of_later_stored_days(tmp_path, case):
    """Backfill: days 2-3 stored, then day 1 arrives holding an id of day 2. Re-delivery: day 2 re-written with an
    id of stored day 3. The later copy is flagged as in one cold scan (before: 0 quarantined, 180 events)."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    root, store = tmp_path / "d", tmp_path / "s"
    if case == "backfill":
        _set_id(data, 0, 0, [r for r in data["logs"] if r["dt"] == D0 + dt.timedelta(1)][0]["event_id"])
        write_parquet(data, str(root), days={D0 + dt.timedelta(1), D0 + dt.timedelta(2)})
        _run(root, tmp_path / "first", stats=store)
        write_parquet(data, str(root), days={D0})
    else:
        write_parquet(data, str(root))
        _run(root, tmp_path / "first", stats=store)
        _set_id(data, 1, 0, [r for r in data["logs"] if r["dt"] == D0 + dt.timedelta(2)][0]["event_id"])
        write_parquet(data, str(root), days={D0 + dt.timedelta(1)})
    warm, west = _run(root, tmp_path / "warm", stats=store)
    cold, cest = _run(root, tmp_path / "cold")
    assert warm["counts"]["logs"]["by_reason"] == cold["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 1}
    assert warm["counts"]["logs"]["by_dt"] == cold["counts"]["logs"]["by_dt"]
    # the day read now and the later day read again both count as read
    assert (warm["counts"]["days_scanned"], warm["counts"]["days_loaded"]) == (2, 1)
    _same(_values(west), _values(cest))


def test_quarantine_all_catches_a_later_copy_of_an_id_repeated_within_a_day(tmp_path):
    """quarantine_all flags every copy of an id repeated within day 1, and day 2's copy too, whether the days are
    scanned in one pass or one a pass (before: day 2's copy was missed across passes, since the stored ids of day
    1 left out every flagged copy)."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    x = [r for r in data["logs"] if r["dt"] == D0][0]["event_id"]
    _set_id(data, 1, 0, x)
    _set_id(data, 0, 1, x)
    write_parquet(data, str(tmp_path))
    mode = ["--duplicates", "quarantine_all"]
    one, oest = _run(tmp_path, tmp_path / "one", *mode)
    split, sest = _run(tmp_path, tmp_path / "split", *mode, "--batch-days", "1")
    assert one["counts"]["logs"]["by_reason"] == split["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 3}
    _same(_values(sest), _values(oest))


@pytest.mark.parametrize("case", ["one_a_pass", "new_day", "backfill"])
def test_quarantine_all_flags_the_earlier_copy_across_days(tmp_path, case):
    """quarantine_all: day 1 and day 2 hold one copy each of an id; both are flagged, as in one cold pass, when
    the days are scanned one a pass, when day 2 arrives after day 1 was stored (day 1 is read again), and when day
    1 is backfilled after days 2-3 were stored (before: only the copy of the day scanned second, 1 of 2)."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    _set_id(data, 1, 0, [r for r in data["logs"] if r["dt"] == D0][0]["event_id"])
    root, store, mode = tmp_path / "d", tmp_path / "s", ["--duplicates", "quarantine_all"]
    write_parquet(data, str(root))
    cold, cest = _run(root, tmp_path / "cold", *mode)
    assert cold["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 2}
    if case == "one_a_pass":
        warm, west = _run(root, tmp_path / "warm", *mode, "--batch-days", "1")
    else:
        first = ["--to", "2026-03-01"] if case == "new_day" else ["--from", "2026-03-02"]
        _run(root, tmp_path / "first", *mode, *first, stats=store)
        warm, west = _run(root, tmp_path / "warm", *mode, stats=store)
        assert (warm["counts"]["days_scanned"], warm["counts"]["days_loaded"]) == (3, 0) if case == "new_day" \
            else (2, 1)
    assert warm["counts"]["logs"]["by_reason"] == cold["counts"]["logs"]["by_reason"]
    assert warm["counts"]["logs"]["by_dt"] == cold["counts"]["logs"]["by_dt"]
    _same(_values(west), _values(cest))


def test_quarantine_all_a_new_day_alone_makes_the_stored_copy_stale(tmp_path):
    """The scheduled shape: days 1-2 stored, then day 3 alone (its window) holds an id of day 1. Day 3's copy is
    flagged against day 1's stored ids; day 1, outside that window, is no longer reused, and the next window over
    all three days scans it again and flags its copy too, as a cold scan does."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    _set_id(data, 2, 0, [r for r in data["logs"] if r["dt"] == D0][0]["event_id"])
    root, store, mode = tmp_path / "d", tmp_path / "s", ["--duplicates", "quarantine_all"]
    write_parquet(data, str(root))
    _run(root, tmp_path / "first", *mode, "--to", "2026-03-02", stats=store)
    alone, _ = _run(root, tmp_path / "alone", *mode, "--from", "2026-03-03", stats=store)
    assert alone["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 1}
    warm, west = _run(root, tmp_path / "warm", *mode, stats=store)
    cold, cest = _run(root, tmp_path / "cold", *mode)
    assert (warm["counts"]["days_scanned"], warm["counts"]["days_loaded"]) == (1, 2)
    assert warm["counts"]["logs"]["by_reason"] == cold["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 2}
    _same(_values(west), _values(cest))


@pytest.mark.parametrize("mode", ["keep_first", "quarantine_all"])
def test_a_redelivered_day_that_drops_a_copy_unflags_the_other(tmp_path, mode):
    """Days 1 and 2 share an id and are stored; day N is re-delivered without it (N = 1 for keep_first, whose
    flag is on day 2's copy; N = 2 for quarantine_all, which flags both). The other day is scanned again and its
    copy is used, as in a cold scan (before: it stayed quarantined, 1 row)."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    root, store, args = tmp_path / "d", tmp_path / "s", ["--duplicates", mode]
    x = [r for r in data["logs"] if r["dt"] == D0][0]["event_id"]
    _set_id(data, 1, 0, x)
    write_parquet(data, str(root))
    first, _ = _run(root, tmp_path / "first", *args, stats=store)
    assert first["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 1 if mode == "keep_first" else 2}
    day = 0 if mode == "keep_first" else 1
    _set_id(data, day, 0, "re-delivered")
    write_parquet(data, str(root), days={D0 + dt.timedelta(day)})
    warm, west = _run(root, tmp_path / "warm", *args, stats=store)
    cold, cest = _run(root, tmp_path / "cold", *args)
    assert warm["counts"]["logs"]["by_reason"] == cold["counts"]["logs"]["by_reason"] == {}
    assert (warm["counts"]["days_scanned"], warm["counts"]["days_loaded"]) == (2, 1)
    _same(_values(west), _values(cest))


def test_one_slot_logs_are_reused_from_the_store(tmp_path):
    """K = 1: check d's table is empty but made, so the second run reads every day from the store (before: every
    day scanned again on every run)."""
    write_parquet(build_random(51, K=1, n_ads=4, days=(0, 1, 2), per_day=60), str(tmp_path))
    first, _ = _run(tmp_path, tmp_path / "a", stats=tmp_path / "s")
    second, _ = _run(tmp_path, tmp_path / "b", stats=tmp_path / "s")
    assert (first["counts"]["days_scanned"], second["counts"]["days_scanned"]) == (3, 0)
    assert second["counts"]["rows_read"] == 0


def test_a_dataframe_input_is_scanned_again_every_run(tmp_path):
    """A DataFrame has no file signature: its stored days are never reused, so a change shows (before: the old
    days were loaded and the old value returned)."""
    from helpers.reference import arrow_tables
    from scavenger import api

    data = build_random(9, K=2, n_ads=5, days=(0, 1), per_day=60, with_nulls=False)
    logs, decs = (t.to_pandas() for t in arrow_tables(data)[:2])
    kw = dict(engine="duckdb", gate="report", stats_dir=str(tmp_path / "s"), estimators=["slate_ips"],
              policies=["det", "sto"], max_quarantine_share=1.0)   # perm re-orders the logged slate: no IPS
    before = api.evaluate(logs, decs, **kw).pandas
    flipped = logs.copy()
    flipped["slots"] = [[{**s, "reward": 1.0 - (s["reward"] or 0.0)} for s in slots] for slots in flipped["slots"]]
    after = api.evaluate(flipped, decs, **kw).pandas
    cold = api.evaluate(flipped, decs, **{**kw, "stats_dir": None}).pandas
    assert _values(after) == pytest.approx(_values(cold), rel=1e-12)
    assert _values(after) != pytest.approx(_values(before), rel=1e-3)


def test_a_write_removes_its_own_staging_only(tmp_path):
    """Two runs writing one table: each removes its own staging directory, never the other's (before: the whole
    _staging went, and the other run's commit found nothing and deleted its day)."""
    from scavenger.io import fs

    mine, theirs = tmp_path / "_staging" / "a", tmp_path / "_staging" / "b"
    os.makedirs(mine / "dt=2026-03-01")
    os.makedirs(theirs / "dt=2026-03-02")
    fs.delete_own(str(mine))
    assert sorted(os.listdir(tmp_path / "_staging")) == ["b"]
    fs.delete_own(str(theirs))
    assert not (tmp_path / "_staging").exists()
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_the_api_reads_only_the_policies_it_names_as_the_cli_does(tmp_path):
    """api.evaluate(policies=[...]) selects them before the join, as `--policies` does, so the days it stores
    count the decisions of those policies only (before: every policy's rows, stored under the selection's key, so
    a later CLI run with --policies loaded 600 decision rows where a cold one reads 120)."""
    from scavenger import api

    write_parquet(build_random(13, K=2, n_ads=5, days=(0, 1), per_day=60, with_nulls=False), str(tmp_path))
    api.evaluate(f"{tmp_path}/logs", f"{tmp_path}/decisions", policies=["det"], engine="duckdb", gate="report",
                 stats_dir=str(tmp_path / "s"), max_quarantine_share=1.0)
    warm, _ = _run(tmp_path, tmp_path / "warm", "--policies", "det", stats=tmp_path / "s")
    cold, _ = _run(tmp_path, tmp_path / "cold", "--policies", "det")
    assert warm["counts"]["days_scanned"] == 0
    assert warm["counts"]["decisions"]["rows_in"] == cold["counts"]["decisions"]["rows_in"] == 120


@pytest.mark.parametrize("body", [[], {"tables": 5}, {"tables": [["x"]]}, {"tables": [], "K": "x"},
                                  {"tables": [], "K": None}, {"tables": [], "K": 10 ** 30}, {"tables": [], "K": -1}])
def test_a_malformed_day_manifest_is_no_manifest(tmp_path, body):
    """A store manifest damaged or edited by hand makes its day be scanned again (before: an internal error, or with
    K = 10**30 a scan that padded every row to that many positions and never ended)."""
    from scavenger.statistics.store import Store

    store = Store(str(tmp_path))
    os.makedirs(tmp_path / "_manifest")
    (tmp_path / "_manifest" / "dt=2026-03-01.json").write_text(json.dumps(body))
    assert store.manifest(D0) is None
    (tmp_path / "_manifest" / "dt=2026-03-01.json").write_text(json.dumps({"tables": ["log_counts"], "K": 3}))
    assert store.manifest(D0)["K"] == 3


def _as_legacy_ids(store) -> None:
    """Rewrite a store's event ids as a store written before they were integers holds them: the hex text of the
    16 digits (id + 2^63 in hex) under event_ids/ instead of event_hashes/."""
    for part in sorted((store / "event_hashes").glob("dt=*")):
        ids = pd.concat([pd.read_parquet(f) for f in part.glob("*.parquet")])
        text = [format(int(v) + 2 ** 63, "016x") for v in ids["id_hash"]]
        os.makedirs(store / "event_ids" / part.name)
        pd.DataFrame({"id_hash": text}).to_parquet(store / "event_ids" / part.name / "part-0.parquet")
    shutil.rmtree(store / "event_hashes")


def test_event_ids_stored_as_hex_text_still_find_copies(tmp_path):
    """Days stored with the ids as hex text (before they were integers) are read as the same ids: a new day's copy
    of an earlier day's id is flagged, and a day read now that repeats an id of a later stored day has that day
    scanned again, as with the integers."""
    data = build_random(7, K=2, n_ads=5, days=(0, 1, 2), per_day=60, with_nulls=False)
    root, store = tmp_path / "d", tmp_path / "s"
    day = lambda i: D0 + dt.timedelta(i)  # noqa: E731
    _set_id(data, 2, 0, [r for r in data["logs"] if r["dt"] == day(1)][0]["event_id"])
    write_parquet(data, str(root), days={day(1)})
    _run(root, tmp_path / "first", stats=store)
    _as_legacy_ids(store)
    write_parquet(data, str(root), days={day(0), day(2)})
    new, _ = _run(root, tmp_path / "new", "--from", day(2).isoformat(), stats=store)
    assert new["counts"]["logs"]["by_reason"] == {"DUPLICATE_EVENT_ID": 1}
    assert new["counts"]["days_scanned"] == 1
    _as_legacy_ids(store)
    _set_id(data, 0, 0, [r for r in data["logs"] if r["dt"] == day(1)][1]["event_id"])
    write_parquet(data, str(root), days={day(0)})
    _run(root, tmp_path / "backfill", "--to", day(0).isoformat(), stats=store)
    assert not (store / "_manifest" / f"dt={day(1)}.json").exists()   # day 1 repeats day 0's id: scanned again
    assert (store / "_manifest" / f"dt={day(2)}.json").exists()
    assert (store / "event_ids" / f"dt={day(1)}").exists()      # its ids still count until it is scanned again
    full, _ = _run(root, tmp_path / "all", stats=store)
    assert full["counts"]["days_scanned"] == 1
    assert not (store / "event_ids" / f"dt={day(1)}").exists()  # written again: its ids as integers only
    assert (store / "event_hashes" / f"dt={day(1)}").exists()


def test_a_file_rewritten_with_its_old_size_and_mtime_is_read_again(tmp_path):
    """A day's file rewritten in place with other rewards, the same byte size (plain encoding) and its old mtime set
    back (``os.utime``): the store sees the change through the file's ctime and the window equals a cold scan
    (before: the stored day's old statistics were reused, every estimate of the old rewards)."""
    import glob

    import pyarrow.parquet as pq

    data = build_random(11, K=2, n_ads=5, days=(0, 1), per_day=80, with_nulls=False)
    root, store = tmp_path / "d", tmp_path / "s"
    write_parquet(data, str(root))
    path = sorted(glob.glob(str(root / "logs" / "dt=2026-03-02" / "*.parquet")))[0]
    plain = {"compression": "none", "use_dictionary": False, "write_statistics": False}
    table = pq.read_table(path)
    pq.write_table(table, path, **plain)
    first, _ = _run(root, tmp_path / "first", stats=store)
    rows = table.to_pylist()
    for row in rows:
        for s in row["slots"]:
            s["reward"] = None if s["reward"] is None else 1.0 - s["reward"]
    st = os.stat(path)
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), path, **plain)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    warm, west = _run(root, tmp_path / "warm", stats=store)
    cold, cest = _run(root, tmp_path / "cold")
    assert first["counts"]["days_scanned"] == 2 and warm["counts"]["days_scanned"] == 1
    _same(_values(west), _values(cest))


def test_partial_slate_share_does_not_depend_on_batching(tmp_path):
    """Days of K = 3 and a day of K = 2 (every row of it partial in the window of K = 3): the diagnostic
    partial_slate_share is the same scanned in one pass, one day per pass, or with the K = 2 day from the store, and
    equals the share counted row by row (before: the day scanned alone counted its rows as full slates)."""
    data = _k3_days_then_k2()
    write_parquet(data, str(tmp_path))
    rows = {(r["event_id"], r["dt"]): r for r in data["logs"]}
    expect = {}
    for d in data["decisions"]:
        full = sorted(s["position"] for s in rows[(d["event_id"], d["dt"])]["slots"]) == [1, 2, 3]
        n, p = expect.get(d["policy_id"], (0, 0))
        expect[d["policy_id"]] = (n + 1, p + (not full))

    def shares(out):
        diag = pd.read_parquet(out / "diagnostics")
        diag = diag[diag["metric"] == "partial_slate_share"]
        return dict(zip(diag["policy_id"], diag["value"]))

    _run(tmp_path, tmp_path / "one")
    _run(tmp_path, tmp_path / "day", "--batch-days", "1")
    _run(tmp_path, tmp_path / "k2", "--from", "2026-03-03", "--to", "2026-03-03", stats=tmp_path / "s")
    _run(tmp_path, tmp_path / "warm", stats=tmp_path / "s")
    want = {p: partial / n for p, (n, partial) in expect.items()}
    day3 = [d for d in data["decisions"] if d["dt"] == D0 + dt.timedelta(2)]
    short = [sorted(s["position"] for s in rows[(d["event_id"], d["dt"])]["slots"]) != [1, 2] for d in day3]
    alone = {p: sum(x for d, x in zip(day3, short) if d["policy_id"] == p)
             / sum(1 for d in day3 if d["policy_id"] == p) for p in {d["policy_id"] for d in day3}}
    assert shares(tmp_path / "k2") == pytest.approx(alone, abs=1e-12)
    assert 0 < min(want.values()) < 1
    for out in ("one", "day", "warm"):
        got = shares(tmp_path / out)
        assert got.keys() == want.keys() and all(abs(got[p] - want[p]) <= 1e-12 for p in want), (out, got, want)
