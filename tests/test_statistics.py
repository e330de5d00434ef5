"""The statistics layer: every table equals a plain Python/numpy computation on small random logs; merging stored
days equals one scan of both days; the per-dt store rescans only missing or changed days."""
from __future__ import annotations

import datetime as dt
import math
import random
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from scavenger.contract import load_contract
from scavenger.estimators.slate import SlateMoments
from scavenger.statistics import StatsConfig, merge, scan, split_by_dt, window_statistics
from scavenger.statistics.tables import TABLES

REL = 1e-9


# ---- random logs built directly (random K, string ad ids, missing days, several policies) ---------------------
def build_random(seed: int, K: int | None = None, n_ads: int | None = None, days=(0, 1, 3), per_day: int = 60,
                 logging_policies=("lp_a", "lp_b"), with_nulls: bool = True, odd_shapes: bool = False):
    """``odd_shapes``: some logged slates off the contract's shape (a position missing, or an extra slot at K + 1),
    which the scan reads on its per-row path (``rest``)."""
    rng = random.Random(seed)
    K = K or rng.randint(1, 4)
    n_ads = n_ads or rng.randint(K + 1, K + 5)
    ads = [f"{rng.choice('qwxyz')}{rng.randrange(10**6)}-{i}" for i in range(n_ads)]
    logs, decs = [], []
    for d in days:
        day = dt.date(2026, 3, 1) + dt.timedelta(days=d)
        for e in range(per_day):
            eid = f"ev{seed}-{d}-{e}"
            lp = rng.choice(logging_policies)
            slate = rng.sample(ads, K)
            slots = []
            for i, a in enumerate(slate):
                prop = None if (with_nulls and rng.random() < 0.03) else rng.choice([0.25, 0.5, 1.0, rng.uniform(0.05, 1)])
                rew = None if (with_nulls and rng.random() < 0.03) else float(rng.random() < 0.35)
                slots.append({"position": i + 1, "ad_id": a, "propensity": prop, "reward": rew})
            if odd_shapes and rng.random() < 0.3:
                if K > 1 and rng.random() < 0.6:
                    del slots[rng.randrange(K)]
                else:
                    slots.append({"position": K + 1, "ad_id": rng.choice(ads), "propensity": 0.5,
                                  "reward": float(rng.random() < 0.5)})
            rng.shuffle(slots)  # slot order in the array must not matter
            slate_reward = round(rng.uniform(0, 3), 3) if rng.random() < 0.1 else None
            logs.append({"event_id": eid, "event_time": dt.datetime(day.year, day.month, day.day, 12),
                         "context_id": f"c{rng.randrange(3)}", "context": {"f": "v"}, "logging_policy": lp,
                         "slots": slots, "slate_reward": slate_reward, "dt": day})
            # det: the logged slate half of the time; follows a base policy
            tgt = slate if rng.random() < 0.5 else rng.sample(ads, K)
            decs.append({"policy_id": "det", "event_id": eid, "dt": day, "base_policy": rng.choice(logging_policies),
                         "slots": [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(tgt)]})
            # perm: a re-ordering of the logged ads
            perm = slate[:]
            rng.shuffle(perm)
            decs.append({"policy_id": "perm", "event_id": eid, "dt": day, "base_policy": None,
                         "slots": [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(perm)]})
            # sto: per position 2 ads with random probabilities (an ad may appear at several positions)
            sto = []
            for i in range(K):
                pair = rng.sample(ads, 2)
                p = rng.uniform(0.1, 0.9)
                sto += [{"position": i + 1, "ad_id": pair[0], "probability": p},
                        {"position": i + 1, "ad_id": pair[1], "probability": 1 - p}]
            decs.append({"policy_id": "sto", "event_id": eid, "dt": day, "base_policy": None, "slots": sto})
            # dup: off the contract, one (position, ad) pair repeated with its probability split (the scan's
            # per-row lambda path); det0: deterministic with an extra probability-0 entry (not one per position)
            dup = [dict(x) for x in sto]
            dup[0]["probability"] /= 2
            dup.insert(1, dict(dup[0]))
            decs.append({"policy_id": "dup", "event_id": eid, "dt": day, "base_policy": None, "slots": dup})
            det0 = [{"position": i + 1, "ad_id": a, "probability": 1.0} for i, a in enumerate(tgt)]
            det0.append({"position": 1, "ad_id": rng.choice(ads), "probability": 0.0})
            decs.append({"policy_id": "det0", "event_id": eid, "dt": day, "base_policy": None, "slots": det0})
    return {"K": K, "ads": ads, "logs": logs, "decisions": decs}


def frames(spark, data):
    L = spark.createDataFrame(data["logs"], load_contract("impression_log").struct_type())
    D = spark.createDataFrame(data["decisions"], load_contract("decisions").struct_type())
    return L, D


def write_dataset(spark, data, root):
    from scavenger.contract import write_partitioned
    L, D = frames(spark, data)
    write_partitioned(L.coalesce(1), f"{root}/logs")
    write_partitioned(D.coalesce(1), f"{root}/decisions")
    return f"{root}/logs", f"{root}/decisions"


# ---- plain python reference ----------------------------------------------------------------------------------
def slate_r(ev):
    if ev["slate_reward"] is not None:
        return ev["slate_reward"]
    return sum(s["reward"] or 0.0 for s in ev["slots"])


def ref_tables(data):
    """Every statistics table (summed over the window) computed row by row."""
    K = data["K"]
    ref = {}
    ls = defaultdict(lambda: defaultdict(float))
    ap = defaultdict(lambda: np.zeros(3))
    for ev in data["logs"]:
        r = slate_r(ev)
        g = ls[ev["logging_policy"]]
        g["n_events"] += 1
        g["n_slots"] += len(ev["slots"])
        g["s_r"] += r
        g["s_r2"] += r * r
        g["n_missing_propensity"] += any(s["propensity"] is None for s in ev["slots"])
        g["n_null_reward"] += sum(s["reward"] is None for s in ev["slots"])
        g["r_max"] = max(g.get("r_max", -math.inf), r)
        g["r_min"] = min(g.get("r_min", math.inf), r)
        for s in ev["slots"]:
            x = s["reward"] or 0.0
            ap[(ev["logging_policy"], s["ad_id"], s["position"])] += [1, x, x * x]
    ref["log_summary"] = ls
    ref["ad_position"] = ap
    events = {ev["event_id"]: ev for ev in data["logs"]}
    pe = defaultdict(lambda: np.zeros(4))
    fac = defaultdict(lambda: np.zeros(2))
    fsq = defaultdict(float)
    tp = defaultdict(float)
    base = defaultdict(lambda: np.zeros(4))
    Ys = defaultdict(lambda: ([], []))
    for d in data["decisions"]:
        ev = events[d["event_id"]]
        r = slate_r(ev)
        p = d["policy_id"]
        det = all(x["probability"] in (0.0, 1.0) for x in d["slots"])
        reorder = det and sorted(x["ad_id"] for x in d["slots"] if x["probability"] > 0) == \
            sorted(s["ad_id"] for s in ev["slots"])
        pe[p] += [1, det, d["base_policy"] is not None, reorder]
        if d["base_policy"] is not None:
            m = d["base_policy"] == ev["logging_policy"]
            base[(p, d["base_policy"])] += [1, m, m * r, m * r * r]
        for x in d["slots"]:
            if x["probability"] > 0:
                tp[(p, x["ad_id"], x["position"])] += x["probability"]
        for s in ev["slots"]:
            rew = s["reward"] or 0.0
            if rew == 0:
                continue
            tg = [x for x in d["slots"] if x["ad_id"] == s["ad_id"] and x["probability"] > 0]
            for x in tg:
                fac[(p, s["ad_id"], s["position"], x["position"])] += [rew * x["probability"],
                                                                       rew * rew * x["probability"]]
                for y in tg:
                    fsq[(p, s["ad_id"], s["position"], x["position"], y["position"])] += \
                        rew * rew * x["probability"] * y["probability"]
        Y = []
        for k in range(1, K + 1):
            at_k = [s for s in ev["slots"] if s["position"] == k]
            if not at_k:  # a gap: Y_k unknown, the event counts as missing a propensity
                Y.append(np.nan)
                continue
            s = at_k[0]
            pik = sum(x["probability"] for x in d["slots"] if x["position"] == k and x["ad_id"] == s["ad_id"])
            Y.append(pik / s["propensity"] if s["propensity"] is not None else np.nan)
        Ys[(p, ev["logging_policy"])][0].append(r)
        Ys[(p, ev["logging_policy"])][1].append(Y)
    ref.update(policy_events=pe, factored=fac, factored_sq=fsq, target_placements=tp, base_targets=base)
    ref["slate_moments"] = {k: SlateMoments.from_arrays(np.array(v[0]), np.array(v[1]).reshape(-1, K))
                            for k, v in Ys.items()}
    return ref


def close(a, b, rel=REL):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def assert_tables_match(tables, data):
    ref = ref_tables(data)
    ls = tables["log_summary"].set_index("logging_policy")
    assert set(ls.index) == set(ref["log_summary"])
    for lp, g in ref["log_summary"].items():
        for col, v in g.items():
            assert close(ls.loc[lp, col], v), (lp, col)
    ap = tables["ad_position"]
    assert len(ap) == len(ref["ad_position"])
    for row in ap.itertuples():
        m, c, c2 = ref["ad_position"][(row.logging_policy, row.ad_id, row.position)]
        assert (row.m, close(row.c, c), close(row.c2, c2)) == (m, True, True)
    pe = tables["policy_events"].set_index("policy_id")
    for p, v in ref["policy_events"].items():
        assert list(pe.loc[p, ["n_events", "n_deterministic", "n_with_base", "n_reorder"]]) == list(v)
    fac = tables["factored"]
    assert len(fac) == len(ref["factored"])
    for row in fac.itertuples():
        v = ref["factored"][(row.policy_id, row.ad_id, row.pos_i, row.pos_j)]
        assert close(row.s_rp, v[0]) and close(row.s_r2p, v[1])
    fsq = tables["factored_sq"]
    assert len(fsq) == len(ref["factored_sq"])
    for row in fsq.itertuples():
        assert close(row.s_r2pp, ref["factored_sq"][(row.policy_id, row.ad_id, row.pos_i, row.pos_j, row.pos_j2)])
    tp = tables["target_placements"]
    assert len(tp) == len(ref["target_placements"])
    for row in tp.itertuples():
        assert close(row.s_p, ref["target_placements"][(row.policy_id, row.ad_id, row.pos_j)])
    bt = tables["base_targets"]
    assert len(bt) == len(ref["base_targets"])
    for row in bt.itertuples():
        v = ref["base_targets"][(row.policy_id, row.base_policy)]
        assert [row.n_target, row.n_match] == list(v[:2]) and close(row.s_r, v[2]) and close(row.s_r2, v[3])
    sm = tables["slate_moments"]
    for row in sm.itertuples():
        m = ref["slate_moments"][(row.policy_id, row.logging_policy)]
        assert row.n == m.n and row.n_missing_propensity == m.n_missing_propensity
        for name in ("s_r", "s_r2", "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2", "n_W_pos", "max_W"):
            assert close(np.nan_to_num(getattr(row, name)), getattr(m, name)), name
        for name in ("s_Y", "s_rY", "s_r2Y", "n_Y_pos", "max_Y", "s_YY", "s_rYY", "s_r2YY"):
            got = np.nan_to_num(np.asarray(getattr(row, name), dtype=float))
            want = np.asarray(getattr(m, name), dtype=float).ravel()
            assert np.allclose(got, want, rtol=REL, atol=1e-12), name


def slate_groups(tables, data):
    """Direct-approach check without the hash: per policy the multiset of (n_target, n_match, s_r, s_r2) rows and
    the multiset of logged-slate counts."""
    events = {ev["event_id"]: ev for ev in data["logs"]}
    key = lambda slots, f=lambda s: True: tuple(sorted((s["position"], s["ad_id"]) for s in slots if f(s)))  # noqa
    T = defaultdict(int)
    for ev in data["logs"]:
        T[key(ev["slots"])] += 1
    tg = defaultdict(lambda: np.zeros(4))
    for d in data["decisions"]:
        if not all(x["probability"] in (0.0, 1.0) for x in d["slots"]):
            continue
        ev = events[d["event_id"]]
        r = slate_r(ev)
        k = key(d["slots"], lambda s: s["probability"] > 0)
        m = k == key(ev["slots"])
        tg[(d["policy_id"], k)] += [1, m, m * r, m * r * r]
    return sorted(T.values()), tg


# ---- tests ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def data():
    return build_random(seed=11, K=3, n_ads=7)


@pytest.fixture(scope="module")
def stats_one_scan(spark, data):
    L, D = frames(spark, data)
    return scan(L, D, StatsConfig(bootstrap=4, seed=5))


def test_tables_equal_python_reference(stats_one_scan, data):
    merged = {name: merge(name, [df]) for name, df in stats_one_scan.items()}
    assert_tables_match(merged, data)
    counts, tg = slate_groups(merged, data)
    assert sorted(merged["slate_actions"]["t"].tolist()) == counts
    got = sorted(tuple(np.round(r, 9)) for r in
                 merged["slate_targets"][["n_target", "n_match", "s_r", "s_r2"]].to_numpy(float))
    want = sorted(tuple(np.round(v, 9)) for v in tg.values())
    assert got == want


@pytest.mark.parametrize("seed", [3])
def test_random_shapes_equal_reference(spark, seed):
    """Random K (1..4), random ad ids and catalogue size, a missing day."""
    data = build_random(seed=seed, days=(0, 2), per_day=40)
    L, D = frames(spark, data)
    merged = {name: merge(name, [df]) for name, df in scan(L, D).items()}
    assert_tables_match(merged, data)


@pytest.mark.parametrize("seed", [5])
def test_off_contract_slates_equal_reference(spark, seed):
    """Logged slates with a missing position or an extra slot (the scan's per-row path for the events) beside
    the decision shapes of ``build_random``: every table still equals the row-by-row reference."""
    data = build_random(seed=seed, K=3, days=(0, 1), per_day=50, odd_shapes=True)
    assert any(len(ev["slots"]) != 3 for ev in data["logs"])
    L, D = frames(spark, data)
    merged = {name: merge(name, [df]) for name, df in scan(L, D, StatsConfig(n_positions=3)).items()}
    assert_tables_match(merged, data)


def test_bootstrap_replicates(stats_one_scan):
    ap = merge("ad_position", [stats_one_scan["ad_position"]])
    mb = np.vstack(ap["m_boot"].to_numpy())
    cb = np.vstack(ap["c_boot"].to_numpy())
    assert mb.shape == (len(ap), 4)
    # each replicate's weights are Poisson(1) per event: the total weighted impressions average the real count
    total = ap["m"].sum()
    ratio = mb.sum(0) / total
    assert np.all(np.abs(ratio - 1) < 5 * np.sqrt(1 / (total / 3)))  # 3 slots per event share one weight
    assert np.all(cb <= mb + 1e-12) and np.all(cb >= 0)
    assert not np.allclose(mb[:, 0], mb[:, 1])  # replicates differ


def test_merge_of_stored_days_equals_one_scan(spark, data, tmp_path, stats_one_scan):
    logs, decs = write_dataset(spark, data, str(tmp_path / "in"))
    cfg = StatsConfig(bootstrap=4, seed=5)
    days = sorted({ev["dt"] for ev in data["logs"]})
    # the first day scanned alone, the other days in a second scan; both stored
    window_statistics(spark, logs, decs, days[0], days[0], str(tmp_path / "stats"), cfg)
    window_statistics(spark, logs, decs, days[1], days[-1], str(tmp_path / "stats"), cfg)
    stored = window_statistics(spark, logs, decs, days[0], days[-1], str(tmp_path / "stats"), cfg)
    assert stored.scanned == [] and stored.loaded == days
    assert_equals_one_scan(stored, stats_one_scan)


def assert_equals_one_scan(stored, one_scan) -> None:
    """Every table of a stored/merged window equals the merged tables of one scan: keys identical, counts and sums
    of integer terms bit for bit, other sums up to the summation order (1e-12 relative)."""
    one = {name: merge(name, [df]) for name, df in one_scan.items()}
    n_exact = 0
    for name in TABLES:
        a, b = stored.table(name), one.get(name)
        keys = TABLES[name][0]
        a = a.sort_values(keys).reset_index(drop=True)
        b = b.sort_values(keys).reset_index(drop=True)
        assert list(a.columns) == list(b.columns), name
        assert a[keys].equals(b[keys]), name
        for col in a.columns:
            if col in keys:
                continue
            va, vb = a[col].to_numpy(), b[col].to_numpy()
            if va.dtype == object:
                va, vb = np.vstack(va).astype(float), np.vstack(vb).astype(float)
            va, vb = np.nan_to_num(va.astype(float)), np.nan_to_num(vb.astype(float))
            integral = np.all(va == np.round(va)) and np.all(vb == np.round(vb))
            if integral:
                # counts and sums of integer terms (0/1 clicks): bit for bit
                assert np.array_equal(va, vb), (name, col)
                n_exact += 1
            else:
                # sums of non-integer terms (revenue, importance weights): equal up to the summation order
                assert np.allclose(va, vb, rtol=1e-12, atol=0), (name, col)
    assert n_exact >= 20


def test_scan_batches_store_each_batch_and_equal_one_scan(spark, data, tmp_path, stats_one_scan, monkeypatch):
    """spark.scavenger.scanBatchDays=1: the 3-day window is scanned one day per pass. A failure in the second pass
    leaves the first day stored (its manifest written), so the re-run scans only the two days left; the window
    equals one scan of all days."""
    from scavenger.errors import UsageError
    from scavenger.session import SCAN_BATCH_CONF, scan_batch_days
    from scavenger.statistics import store

    logs, decs = write_dataset(spark, data, str(tmp_path / "in"))
    cfg = StatsConfig(bootstrap=4, seed=5)
    days = sorted({ev["dt"] for ev in data["logs"]})
    assert len(days) == 3
    sd = str(tmp_path / "stats")
    assert scan_batch_days(spark) == 0
    calls = []

    def dies_on_second_pass(logs_df, decisions_df, config):
        calls.append(sorted(r["dt"] for r in logs_df.select("dt").distinct().collect()))
        if len(calls) == 2:
            raise RuntimeError("driver killed")
        return scan(logs_df, decisions_df, config)

    try:
        spark.conf.set(SCAN_BATCH_CONF, "1")
        monkeypatch.setattr(store, "scan", dies_on_second_pass)
        with pytest.raises(RuntimeError, match="driver killed"):
            window_statistics(spark, logs, decs, stats_dir=sd, config=cfg)
        assert calls == [[days[0]], [days[1]]]
        assert store.read_day(sd, days[0])[0] is not None and store.read_day(sd, days[1])[0] is None
        monkeypatch.setattr(store, "scan", scan)
        rerun = window_statistics(spark, logs, decs, stats_dir=sd, config=cfg)
        assert rerun.loaded == [days[0]] and rerun.scanned == days[1:]
        assert_equals_one_scan(rerun, stats_one_scan)
        for bad in ("-1", "a week"):
            spark.conf.set(SCAN_BATCH_CONF, bad)
            with pytest.raises(UsageError, match="scanBatchDays"):   # even with every day stored
                window_statistics(spark, logs, decs, stats_dir=sd, config=cfg)
    finally:
        spark.conf.unset(SCAN_BATCH_CONF)


def test_store_rescans_only_changed_days(spark, tmp_path):
    data = build_random(seed=21, K=2, n_ads=4, days=(0, 1), per_day=30)
    logs, decs = write_dataset(spark, data, str(tmp_path / "in"))
    sd = str(tmp_path / "stats")
    first = window_statistics(spark, logs, decs, stats_dir=sd)
    assert len(first.scanned) == 2 and first.loaded == []
    again = window_statistics(spark, logs, decs, stats_dir=sd)
    assert again.scanned == [] and len(again.loaded) == 2
    # change day 2: rewrite its partition with one event fewer -> only that day is rescanned
    day2 = max(ev["dt"] for ev in data["logs"])
    keep = [ev for ev in data["logs"] if ev["dt"] != day2 or not ev["event_id"].endswith("-0")]
    from scavenger.contract import write_partitioned
    L = spark.createDataFrame([ev for ev in keep if ev["dt"] == day2], load_contract("impression_log").struct_type())
    write_partitioned(L.coalesce(1), logs)
    third = window_statistics(spark, logs, decs, stats_dir=sd)
    assert third.scanned == [day2] and len(third.loaded) == 1
    assert int(third.table("log_summary")["n_events"].sum()) == len(keep)
    # a different config (bootstrap) or policy filter is a different fingerprint
    from scavenger.statistics.store import fingerprint
    fp = fingerprint(spark, day2, logs, decs, StatsConfig())
    assert fp == fingerprint(spark, day2, logs, decs, StatsConfig())
    assert fp != fingerprint(spark, day2, logs, decs, StatsConfig(bootstrap=2))
    assert fp != fingerprint(spark, day2, logs, decs, StatsConfig(), policies=["det"])


def test_split_by_dt_and_merge_by_dt(stats_one_scan, data):
    days = split_by_dt(stats_one_scan)
    assert sorted(days) == sorted({ev["dt"] for ev in data["logs"]})
    per_day = merge("log_summary", [days[d]["log_summary"] for d in days], by_dt=True)
    assert per_day["n_events"].sum() == len(data["logs"])
    for d in days:
        n = sum(1 for ev in data["logs"] if ev["dt"] == d)
        assert per_day.loc[per_day["dt"] == d, "n_events"].sum() == n


def test_row_storage_level_conf(spark):
    """The storage level of persisted row-level frames (the scan's flat events, the gate's rows) comes from
    spark.scavenger.rowStorageLevel (default DISK_ONLY); a name that is not a StorageLevel is a usage error
    (exit 2), not a silent fallback."""
    from pyspark import StorageLevel

    from scavenger.errors import UsageError
    from scavenger.session import ROW_STORAGE_CONF, row_storage_level

    assert spark.conf.get(ROW_STORAGE_CONF, None) is None
    assert row_storage_level(spark) == StorageLevel.DISK_ONLY
    try:
        spark.conf.set(ROW_STORAGE_CONF, "memory_and_disk")
        assert row_storage_level(spark) == StorageLevel.MEMORY_AND_DISK
        spark.conf.set(ROW_STORAGE_CONF, "RAM_PLEASE")
        with pytest.raises(UsageError, match="not a pyspark StorageLevel"):
            row_storage_level(spark)
    finally:
        spark.conf.unset(ROW_STORAGE_CONF)
