"""The one pass: every statistics table equals a plain-Python computation on small random logs (random K, string
ad ids, missing days, partial slates, several policies, stochastic and deterministic decisions); stored days merge
to one scan; the store reads only new or changed days. All on DuckDB (no JVM); tests/test_engines.py shows Spark
gives the same tables."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from helpers.reference import (arrow_tables, build_random, clean, ref_tables, with_hostile_ads, with_long_rows,
                       with_unknown_slot_rewards, write_parquet)
from scavenger.engines.duck import DuckDBEngine
from scavenger.estimators.slate import SlateMoments
from scavenger.pipelines.common import describe_inputs, window_dates
from scavenger.statistics.scan import ScanPlan, StatsConfig
from scavenger.statistics.store import Store
from scavenger.statistics.moment_columns import moments_k
from scavenger.statistics.tables import TABLES, merge
from scavenger.statistics.window import window_statistics

REL = 1e-9


def run_window(logs, decisions=None, config=StatsConfig(), store=None, batch_days=0, engine=None, dates=None):
    inputs = describe_inputs(logs, decisions)
    eng = engine or DuckDBEngine("test")
    dates = dates or window_dates(eng, inputs)
    return window_statistics(eng, inputs.logs, inputs.decisions, dates, ScanPlan(), config,
                             Store(store) if store else None, batch_days=batch_days)


def close(a, b, rel=REL):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-12)


def moments(sm: pd.DataFrame, policy: str, lp: str) -> SlateMoments:
    rows = sm[(sm["policy_id"] == policy) & (sm["logging_policy"] == lp)]
    total = merge("slate_moments", [rows.assign(fold=0)]).iloc[0].to_dict()
    return SlateMoments.from_flat(total, moments_k(rows))


def big(stats, name: str, keys: list) -> pd.DataFrame:
    cols = {"slate_covered": "sum(t) AS t", "slate_targets": "sum(n_target) AS n_target, sum(n_match) AS n_match, "
                                                             "sum(s_r) AS s_r, sum(s_r2) AS s_r2"}[name]
    return stats.engine.fetch(f"SELECT {', '.join(keys)}, {cols} FROM {stats.big[name]} GROUP BY {', '.join(keys)}")


def assert_tables_match(stats, data):
    ref = ref_tables(data)
    assert stats.K == ref["K"]
    ls = stats.table("log_summary").set_index("logging_policy")
    assert set(ls.index) == set(ref["log_summary"])
    for lp, g in ref["log_summary"].items():
        for col, v in g.items():
            assert close(ls.loc[lp, col], v), (lp, col)
    ap = stats.table("ad_position").groupby(["logging_policy", "ad_id", "position"])[["m", "m_r", "c", "c2"]].sum()
    assert len(ap) == len(ref["ad_position"])
    for key, (m, m_r, c, c2) in ref["ad_position"].items():
        assert ap.loc[key, "m"] == m and ap.loc[key, "m_r"] == m_r, key
        assert close(ap.loc[key, "c"], c) and close(ap.loc[key, "c2"], c2), key
    pe = stats.table("policy_events").set_index("policy_id")
    for p, v in ref["policy_events"].items():
        assert list(pe.loc[p, ["n_events", "n_deterministic", "n_with_base", "n_reorder", "n_partial"]]) == list(v), p
    fac = stats.table("factored")
    assert len(fac) == len(ref["factored"])
    for r in fac.itertuples():
        v = ref["factored"][(r.policy_id, r.ad_id, r.pos_i, r.pos_j)]
        assert close(r.s_rp, v[0]) and close(r.s_r2p, v[1])
    fsq = stats.table("factored_sq")
    assert len(fsq) == len(ref["factored_sq"])
    for r in fsq.itertuples():
        assert close(r.s_r2pp, ref["factored_sq"][(r.policy_id, r.ad_id, r.pos_i, r.pos_j, r.pos_j2)])
    tp = stats.table("target_placements")
    assert len(tp) == len(ref["target_placements"])
    for r in tp.itertuples():
        assert close(r.s_p, ref["target_placements"][(r.policy_id, r.logging_policy, r.ad_id, r.pos_j)])
    bt = stats.table("base_targets")
    assert len(bt) == len(ref["base_targets"])
    for r in bt.itertuples():
        v = ref["base_targets"][(r.policy_id, r.base_policy)]
        assert [r.n_target, r.n_match] == list(v[:2]) and close(r.s_r, v[2]) and close(r.s_r2, v[3])
    sm = stats.table("slate_moments")
    assert {(p, lp) for p, lp in zip(sm["policy_id"], sm["logging_policy"])} == set(ref["slate_moments"])
    for (p, lp), want in ref["slate_moments"].items():
        got = moments(sm, p, lp)
        assert got.n == want.n and got.n_missing_propensity == want.n_missing_propensity, (p, lp)
        for name in ("s_r", "s_r2", "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2", "n_W_pos", "max_W", "s_Y", "s_rY",
                     "s_r2Y", "n_Y_pos", "max_Y", "s_YY", "s_rYY", "s_r2YY"):
            assert np.allclose(np.asarray(getattr(got, name), float), np.asarray(getattr(want, name), float),
                               rtol=REL, atol=1e-12), (p, lp, name)
    acts = big(stats, "slate_covered", ["policy_id", "held", "slate_key"])
    assert dict(zip(zip(acts["policy_id"], acts["held"], acts["slate_key"]), acts["t"])) == dict(ref["slate_covered"])
    tg = big(stats, "slate_targets", ["policy_id", "held", "slate_key"])
    assert len(tg) == len(ref["slate_targets"])
    for r in tg.itertuples():
        v = ref["slate_targets"][(r.policy_id, r.held, r.slate_key)]
        assert [r.n_target, r.n_match] == list(v[:2]) and close(r.s_r, v[2]) and close(r.s_r2, v[3])


@pytest.fixture(scope="module")
def data():
    return build_random(seed=11, K=3, n_ads=7)


@pytest.fixture(scope="module")
def one_scan(data):
    L, D = arrow_tables(data)
    return run_window(L, D, StatsConfig(bootstrap=4, seed=5))


def test_tables_equal_python_reference(one_scan, data):
    counts = one_scan.table("log_counts")
    assert counts["rows"].sum() == len(data["logs"])
    assert counts["rows"].sum() - counts["quarantined"].sum() == ref_tables(data)["n_clean"]
    assert counts["quarantined"].sum() > 0          # null rewards without a slate reward: MISSING_REWARD
    assert_tables_match(one_scan, data)


@pytest.mark.parametrize("seed", [3, 8])
def test_random_shapes_equal_reference(seed):
    """Random K (1..4), random ad ids and catalogue size, a missing day."""
    data = build_random(seed=seed, days=(0, 2), per_day=40)
    assert_tables_match(run_window(*arrow_tables(data)), data)


def test_decisions_of_many_entries_equal_reference():
    """Decisions listing 60 entries (beyond DET_PAIRWISE: det by distinct (position, ad) pairs, not pairwise; a
    decision of 20,000 entries took 26 s of the join): a deterministic one with 59 zero-probability entries at
    position 1 and a stochastic one spreading position 1 over 60 ads. Every table equals the reference, and
    n_deterministic counts the first only."""
    from scavenger.statistics.sql.decisions import DET_PAIRWISE

    data = build_random(seed=4, K=3, n_ads=6, days=(0,), per_day=50, with_nulls=False)
    extra = []
    for d in [d for d in data["decisions"] if d["policy_id"] == "det"]:
        first = next(x for x in d["slots"] if x["position"] == 1)
        rest = [x for x in d["slots"] if x["position"] != 1]
        zeros = [{"position": 1, "ad_id": f"z{i}", "probability": 0.0} for i in range(59)]
        spread = [{"position": 1, "ad_id": f"z{i}", "probability": 1 / 60} for i in range(59)]
        extra.append({**d, "policy_id": "many_det", "slots": [first, *zeros, *rest]})
        extra.append({**d, "policy_id": "many_sto", "slots": [dict(first, probability=1 / 60), *spread, *rest]})
    assert len(extra[0]["slots"]) > DET_PAIRWISE
    data["decisions"] += extra
    stats = run_window(*arrow_tables(data))
    assert_tables_match(stats, data)
    pe = stats.table("policy_events").set_index("policy_id")
    assert pe.loc["many_det", "n_deterministic"] == pe.loc["many_det", "n_events"] == 50
    assert pe.loc["many_sto", "n_deterministic"] == 0


def test_partial_and_extra_slots_equal_reference():
    """Rows holding a subset of the positions, or an extra slot at K + 1: each contributes through what it holds
    (Y_k = 1 where it holds nothing), K is the largest position held."""
    data = build_random(seed=5, K=3, days=(0, 1), per_day=60, odd_shapes=True)
    assert any(len(ev["slots"]) != 3 for ev in data["logs"])
    stats = run_window(*arrow_tables(data))
    assert stats.K == 4
    assert stats.table("log_summary")["n_partial"].sum() > 0
    assert_tables_match(stats, data)


def test_long_rows_beyond_the_wide_positions_equal_reference(monkeypatch):
    """A tenth of the rows hold slots up to position 9 (issue 28: one long row must not make every row K wide).
    With WIDE_SHARE = 0.5 only positions 1..4 are wide columns and the rest travel as a list (long-form moments,
    pairs and factored sums); with 0 every position is wide. Both equal the plain-Python reference, and check d's
    pair strata are the same either way. A fifth of the events carry a slate_reward with some slot rewards null
    (unknown: out of m_r, c, c2 and the factored sums), wide and extra slots alike."""
    from scavenger.statistics import scan

    data = with_unknown_slot_rewards(with_long_rows(seed=21, share=0.1), share=0.2, seed=1)
    assert any(s["reward"] is None and s["position"] > 4 for ev in data["logs"] for s in ev["slots"])
    seen, real = [], scan.wide_positions
    monkeypatch.setattr(scan, "wide_positions", lambda prof, K: seen.append(real(prof, K)) or seen[-1])
    runs = {}
    for share in (0.5, 0.0):
        monkeypatch.setattr(scan, "WIDE_SHARE", share)
        monkeypatch.setattr(scan, "WIDE_ROWS", 100 if share else 0)      # 0: every position wide, however few rows
        runs[share] = run_window(*arrow_tables(data))
        assert runs[share].K == 9
        assert_tables_match(runs[share], data)
    assert seen == [4, 9]
    keys = ["dt", "logging_policy", "stratum", "j", "k"]
    a, b = (runs[x].table("pair_strata").sort_values(keys).reset_index(drop=True) for x in (0.5, 0.0))
    assert len(a) == len(b) > 0 and (a["k"] > 4).any() and (a["j"] > 4).any()
    assert a[keys].astype(str).equals(b[keys].astype(str))
    for col in ("n", "r", "c", "o_diag"):
        assert np.array_equal(a[col].to_numpy(), b[col].to_numpy()), col
    for col in ("s", "e_diag"):
        assert np.allclose(a[col].to_numpy(float), b[col].to_numpy(float), rtol=1e-12, atol=0), col


def test_a_row_beyond_the_widest_wide_position_equals_reference(monkeypatch):
    """One row holds positions 62..70 (beyond WIDE_MAX; allowed by max_slots = 1000) among 140 events, a tenth of
    them up to 9: before, more than 1% of the rows reaching a position made it a wide column however few they were
    (Kw 9 here; one row at 128 among 80 made 128 wide columns, 16,512 moment sums in one statement, and DuckDB died
    of SIGFPE). Now only positions reached by at least WIDE_ROWS rows, and never beyond WIDE_MAX, are wide: Kw is 4,
    and every table equals the plain-Python reference."""
    from helpers import reference
    from scavenger.checks.rules import RuleConfig
    from scavenger.statistics import scan

    data = with_long_rows(seed=23, share=0.1)
    ev = next(e for e in data["logs"] if len(e["slots"]) == 3 and all(s["reward"] is not None for s in e["slots"]))
    ev["slots"] += [{"position": p, "ad_id": f"far{p}", "propensity": 0.5, "reward": float(p % 3 == 0)}
                    for p in range(62, 71)]
    assert max(s["position"] for s in ev["slots"]) == 70 > scan.WIDE_MAX
    monkeypatch.setattr(reference.log_reasons, "__defaults__", (0.0, 1.0, 1000, 1000))
    seen, real = [], scan.wide_positions
    monkeypatch.setattr(scan, "wide_positions", lambda prof, K: seen.append(real(prof, K)) or seen[-1])
    stats = run_window(*arrow_tables(data), config=StatsConfig(rules=RuleConfig(max_slots=1000)))
    assert stats.K == 70 and seen == [4] and stats.Kw == 4
    assert_tables_match(stats, data)


def test_bootstrap_replicates(one_scan):
    ap = one_scan.table("ad_position")
    mb = np.vstack(ap["m_boot"].to_numpy())
    cb = np.vstack(ap["c_boot"].to_numpy())
    assert mb.shape == (len(ap), 4)
    total = ap["m_r"].sum()     # the replicates count the impressions with a known reward
    ratio = mb.sum(0) / total
    assert np.all(np.abs(ratio - 1) < 5 * np.sqrt(1 / (total / 3)))  # 3 slots per event share one weight
    assert np.all(cb <= mb + 1e-12) and np.all(cb >= 0)
    assert not np.allclose(mb[:, 0], mb[:, 1])


def test_folds_split_events_in_two(one_scan):
    """fold = parity of a digit of md5(event_id): about half the events each, all of an event's slots together."""
    ap = one_scan.table("ad_position")
    by_fold = ap.groupby("fold")["m"].sum()
    assert set(by_fold.index) == {0, 1}
    assert abs(by_fold[0] / by_fold.sum() - 0.5) < 0.15


def assert_equals_one_scan(stored, one) -> None:
    """Every table of a stored/merged window equals one scan's: counts and sums of integer terms bit for bit,
    other sums to 1e-12 relative."""
    n_exact = 0
    for name, t in TABLES.items():
        if t.big:
            continue
        a, b = stored.table(name), one.table(name)
        keys = (["dt"] if t.per_day else []) + list(t.keys)
        assert len(a) == len(b), name
        if not len(a):
            continue
        a, b = a.sort_values(keys).reset_index(drop=True), b.sort_values(keys).reset_index(drop=True)
        assert sorted(a.columns) == sorted(b.columns), name
        assert a[keys].astype(str).equals(b[keys].astype(str)), name
        for col in a.columns:
            if col in keys or a[col].dtype == object and isinstance(a[col].iloc[0], str):
                continue
            va, vb = a[col].to_numpy(), b[col].to_numpy()
            if va.dtype == object:
                va, vb = np.vstack(va).astype(float), np.vstack(vb).astype(float)
            va, vb = np.nan_to_num(va.astype(float)), np.nan_to_num(vb.astype(float))
            if np.all(va == np.round(va)) and np.all(vb == np.round(vb)):
                assert np.array_equal(va, vb), (name, col)
                n_exact += 1
            else:
                assert np.allclose(va, vb, rtol=1e-12, atol=0), (name, col)
    assert n_exact >= 20


def test_merge_of_stored_days_equals_one_scan(data, tmp_path, one_scan):
    logs, decs = write_parquet(data, str(tmp_path / "in"))
    cfg, sd = StatsConfig(bootstrap=4, seed=5), str(tmp_path / "stats")
    days = sorted({ev["dt"] for ev in data["logs"]})
    run_window(logs, decs, cfg, sd, dates=days[:1])
    run_window(logs, decs, cfg, sd, dates=days[1:])
    stored = run_window(logs, decs, cfg, sd)
    assert stored.scanned == [] and stored.loaded == days
    assert_equals_one_scan(stored, one_scan)


def test_window_of_stored_days_and_a_new_one_equals_one_scan(data, tmp_path, one_scan):
    """The stored days are read and merged while the new day is scanned; the window adds the two: the same tables
    as one scan of every day, and each day's own tables kept for by-day estimates."""
    logs, decs = write_parquet(data, str(tmp_path / "in"))
    cfg, sd = StatsConfig(bootstrap=4, seed=5), str(tmp_path / "stats")
    days = sorted({ev["dt"] for ev in data["logs"]})
    run_window(logs, decs, cfg, sd, dates=days[:-1])
    window = run_window(logs, decs, cfg, sd)
    assert window.scanned == days[-1:] and window.loaded == days[:-1]
    assert_equals_one_scan(window, one_scan)
    for d in days:
        n = int(window.day(d).table("log_counts")["rows"].sum())
        assert n == sum(1 for ev in data["logs"] if ev["dt"] == d)


def test_merge_takes_text_min_and_max_in_string_order():
    """ad_position's stratum_min/max are text: merged days take their min/max in string order per key (through
    ordered categoricals, the compiled group-by), a key whose days hold no value stays None, and sums add."""
    keys = dict(logging_policy="lp", fold=0, position=1)
    day1 = pd.DataFrame([{**keys, "ad_id": "a", "m": 2, "stratum_min": "c10", "stratum_max": "c9"},
                         {**keys, "ad_id": "b", "m": 1, "stratum_min": None, "stratum_max": None},
                         {**keys, "ad_id": "c", "m": 4, "stratum_min": "z", "stratum_max": "z"}])
    day2 = pd.DataFrame([{**keys, "ad_id": "a", "m": 3, "stratum_min": "c2", "stratum_max": "c10"},
                         {**keys, "ad_id": "b", "m": 5, "stratum_min": None, "stratum_max": None},
                         {**keys, "ad_id": "c", "m": 1, "stratum_min": "Z", "stratum_max": "a"}])
    got = merge("ad_position", [day1, day2]).set_index("ad_id")
    both = pd.concat([day1, day2])
    for ad, rows in both.groupby("ad_id"):
        lo, hi = rows["stratum_min"].dropna().tolist(), rows["stratum_max"].dropna().tolist()
        assert got.loc[ad, "stratum_min"] == (min(lo) if lo else None)
        assert got.loc[ad, "stratum_max"] == (max(hi) if hi else None)
        assert got.loc[ad, "m"] == rows["m"].sum()
    assert got.loc["a", "stratum_min"] == "c10" and got.loc["c", "stratum_max"] == "z"
    assert got["stratum_min"].dtype == object


def test_days_side_by_side_merge_as_one_sorted_frame():
    """A table that keeps dt as a key: the stored days and the day scanned now, each sorted by its keys
    (sorted_day), merge side by side into the frame the sorting merge makes of all rows at once, row for row;
    frames whose days interleave, or a day's rows in the engine's order, still merge sorted."""
    from scavenger.statistics.tables import sorted_day

    rng = np.random.default_rng(3)
    days = [pd.Timestamp("2026-03-01").date() + pd.Timedelta(days=i) for i in range(4)]
    cells = pd.DataFrame([{"dt": d, "logging_policy": lp, "position": k, "feature": "context_id", "value": v,
                           "ad_id": a, "n": int(rng.integers(0, 5)) if rng.random() > 0.1 else None}
                          for d in days for lp in ("b", "a") for k in (2, 1) for v in ("y", "x") for a in ("q", "p")])
    cells = cells.sample(frac=1.0, random_state=4).reset_index(drop=True)      # the engine's order
    whole = merge("context_cells", [cells])
    assert whole["n"].notna().all()
    stored = sorted_day("context_cells", cells[cells["dt"] < days[3]])
    new = sorted_day("context_cells", cells[cells["dt"] == days[3]])
    pd.testing.assert_frame_equal(merge("context_cells", [stored, new]), whole)
    odd = [cells[cells["dt"].isin(days[::2])], cells[cells["dt"].isin(days[1::2])]]   # interleaved, unsorted
    pd.testing.assert_frame_equal(merge("context_cells", odd), whole)


def _moments_by_definition(r, Y) -> dict:
    """The flat slate moments of events with rewards r and slot factors Y (events x K), from the declaration
    (estimators/slate_moments.moment_terms) evaluated with numpy."""
    from scavenger.estimators.slate_moments import moment_terms

    K = Y.shape[1]
    sym = {"1": np.ones(len(r)), "r": r, "W": Y.prod(axis=1), "missing": np.zeros(len(r)),
           **{f"Y{k + 1}": Y[:, k] for k in range(K)}}
    out = {}
    for alias, agg, factors in moment_terms(K):
        v = np.prod([sym[f] for f in factors], axis=0) if factors else np.ones(len(r))
        out[alias] = {"sum": v.sum(), "count_pos": float((v > 0).sum()), "max": v.max()}[agg]
    return out


def test_moments_of_fewer_positions_pad_as_factors_of_one():
    """A day whose events hold positions 1..2 merged with K = 4: its moments equal those of the same events with
    Y_3 = Y_4 = 1 (the padding convention), every column computed by definition."""
    from scavenger.statistics.moment_columns import pad_moments

    rng = np.random.default_rng(3)
    r, Y = rng.random(50), rng.random((50, 2)) * 3
    day = pd.DataFrame([{"policy_id": "p", "logging_policy": "lp", "fold": 0, **_moments_by_definition(r, Y)}])
    padded = pad_moments(day, 4).iloc[0]
    expected = _moments_by_definition(r, np.hstack([Y, np.ones((50, 2))]))
    assert moments_k(pad_moments(day, 4)) == 4
    for alias, value in expected.items():
        assert padded[alias] == pytest.approx(value, rel=1e-12), alias


def test_batches_store_each_batch_and_a_failure_keeps_earlier_ones(data, tmp_path, one_scan, monkeypatch):
    """batch_days=1: one day per pass. A failure in the second pass leaves the first day stored, so the re-run
    reads only the two days left; the window equals one scan of all days."""
    from scavenger.statistics import window as W

    logs, decs = write_parquet(data, str(tmp_path / "in"))
    cfg, sd = StatsConfig(bootstrap=4, seed=5), str(tmp_path / "stats")
    days = sorted({ev["dt"] for ev in data["logs"]})
    calls, real = [], W.scan_days

    def dies_on_second_pass(engine, logs_, decisions, batch, *args, **kwargs):
        calls.append(list(batch))
        if len(calls) == 2:
            raise RuntimeError("driver killed")
        return real(engine, logs_, decisions, batch, *args, **kwargs)

    monkeypatch.setattr(W, "scan_days", dies_on_second_pass)
    with pytest.raises(RuntimeError, match="driver killed"):
        run_window(logs, decs, cfg, sd, batch_days=1)
    assert calls == [[days[0]], [days[1]]]
    assert Store(sd).manifest(days[0]) is not None and Store(sd).manifest(days[1]) is None
    monkeypatch.setattr(W, "scan_days", real)
    rerun = run_window(logs, decs, cfg, sd, batch_days=1)
    assert rerun.loaded == [days[0]] and rerun.scanned == days[1:]
    assert_equals_one_scan(rerun, one_scan)


def test_store_rereads_only_changed_days(tmp_path):
    data = build_random(seed=21, K=2, n_ads=4, days=(0, 1), per_day=30)
    logs, decs = write_parquet(data, str(tmp_path / "in"))
    sd = str(tmp_path / "stats")
    first = run_window(logs, decs, store=sd)
    assert len(first.scanned) == 2 and first.loaded == []
    again = run_window(logs, decs, store=sd)
    assert again.scanned == [] and len(again.loaded) == 2
    day2 = max(ev["dt"] for ev in data["logs"])
    fewer = dict(data, logs=[ev for ev in data["logs"] if ev["dt"] != day2 or not ev["event_id"].endswith("-0")])
    write_parquet(fewer, str(tmp_path / "in"), days=[day2])
    third = run_window(logs, decs, store=sd)
    assert third.scanned == [day2] and len(third.loaded) == 1
    assert int(third.table("log_counts")["rows"].sum()) == len(fewer["logs"])
    other = run_window(logs, decs, StatsConfig(bootstrap=2), store=sd)     # another configuration: re-read
    assert len(other.scanned) == 2
    logs_only = run_window(logs, None, StatsConfig(bootstrap=2), store=sd)  # a subset of what is stored: reused
    assert logs_only.scanned == [] and len(logs_only.loaded) == 2


def test_cross_day_duplicate_ids_against_stored_days(tmp_path):
    """An event id already stored for an earlier day is DUPLICATE_EVENT_ID on a later day (keep_first), read
    from the stored id hashes, not by reading the earlier day's logs again."""
    data = build_random(seed=4, K=2, n_ads=5, days=(0, 1), per_day=20, with_nulls=False)
    day1 = min(ev["dt"] for ev in data["logs"])
    copy = next(dict(ev) for ev in data["logs"] if ev["dt"] != day1)
    copy["event_id"] = next(ev["event_id"] for ev in data["logs"] if ev["dt"] == day1)
    data["logs"].append(copy)
    logs, _ = write_parquet(data, str(tmp_path / "in"))
    sd = str(tmp_path / "stats")
    days = sorted({ev["dt"] for ev in data["logs"]})
    run_window(logs, None, store=sd, dates=days[:1])
    later = run_window(logs, None, store=sd)
    counts = later.table("log_counts").set_index("dt")
    assert counts.loc[days[1], "DUPLICATE_EVENT_ID"] == 1 and counts.loc[days[0], "DUPLICATE_EVENT_ID"] == 0
    once = run_window(logs, None)                                           # one pass over both days
    assert once.table("log_counts").set_index("dt").loc[days[1], "DUPLICATE_EVENT_ID"] == 1


def test_by_day_tables_are_each_days_own(one_scan, data):
    for d in one_scan.dates:
        day = one_scan.day(d)
        n = sum(1 for ev in data["logs"] if ev["dt"] == d)
        assert int(day.table("log_counts")["rows"].sum()) == n
        assert day.table("log_summary")["n_events"].sum() == one_scan.per_day[d]["log_summary"]["n_events"].sum()


def test_stored_small_tables_read_back_as_written(data, tmp_path):
    """Every small table of a stored day reads back as the frame the scan produced: values, columns and dtypes (the
    files are written without pandas' schema metadata), from the day's bundle, from the tables' own files, and
    from the files when the bundle does not read."""
    from scavenger.statistics.store import BUNDLE

    logs, decs = write_parquet(data, str(tmp_path / "in"))
    cfg, sd = StatsConfig(bootstrap=2, seed=3), str(tmp_path / "stats")
    scanned = run_window(logs, decs, cfg, sd)
    store = Store(sd)
    days = sorted(scanned.per_day)
    manifests = {d: store.manifest(d) for d in days}
    assert all(m["bundle"] for m in manifests.values())
    assert store._read_bundle(days[0]) and sorted(store._read_bundle(days[0])) == sorted(
        n for n in manifests[days[0]]["tables"] if not TABLES[n].big)
    _same_as_scanned(scanned, store.load_days(manifests), days)
    _same_as_scanned(scanned, store.load_days({d: {**m, "bundle": False} for d, m in manifests.items()}), days)
    (tmp_path / "stats" / BUNDLE / f"dt={days[0].isoformat()}.parquet").write_bytes(b"not parquet")
    assert store._read_bundle(days[0]) == {}
    _same_as_scanned(scanned, store.load_days(manifests), days)


def _same_as_scanned(scanned, loaded: dict, days: list) -> None:
    n = 0
    for d in days:
        for name, frame in scanned.per_day[d].items():
            if TABLES[name].big or frame is None or not len(frame):
                continue
            got = loaded[d][name]
            want = frame if "dt" in frame.columns else frame.assign(dt=d)
            want = want[["dt", *[c for c in want.columns if c != "dt"]]].reset_index(drop=True)
            got = got[list(want.columns)]
            for col in want.columns:
                if want[col].dtype == object and len(want) and isinstance(want[col].iloc[0], np.ndarray):
                    assert all(np.array_equal(a, b) for a, b in zip(got[col], want[col])), (name, col)
                    got, want = got.drop(columns=[col]), want.drop(columns=[col])
            pd.testing.assert_frame_equal(got, want, check_dtype=True, obj=f"{name} {d}")
            n += 1
    assert n >= 10


def test_ad_position_the_same_summed_per_stratum_value_first_or_not(data, monkeypatch):
    """ad_position sums per value of the scope key first when the values are few (declarations.BY_VALUE_EVENTS):
    both shapes give the same table (counts exactly, sums to 1e-12), with the bootstrap replicates and a context key."""
    from scavenger.statistics import declarations

    L, D = arrow_tables(data)
    got = {}
    for label, events in (("by value", 0), ("one aggregation", 10 ** 12)):
        monkeypatch.setattr(declarations, "BY_VALUE_EVENTS", events)
        for key in ("context_id", "context:f"):
            w = run_window(L, D, StatsConfig(bootstrap=3, seed=2, calibration_key=key))
            got[label, key] = w.table("ad_position")
    t = TABLES["ad_position"]
    keys = (["dt"] if t.per_day else []) + list(t.keys)
    for key in ("context_id", "context:f"):
        a = got["by value", key].sort_values(keys).reset_index(drop=True)
        b = got["one aggregation", key].sort_values(keys).reset_index(drop=True)
        assert list(a.columns) == list(b.columns) and len(a) > 10
        for col in a.columns:
            if col in ("m_boot", "c_boot"):
                assert np.allclose(np.vstack(a[col]), np.vstack(b[col]), rtol=1e-12, atol=0), col
            elif a[col].dtype.kind in "fi":
                assert np.allclose(a[col], b[col], rtol=1e-12, atol=0, equal_nan=True), col
            else:
                assert a[col].astype(str).equals(b[col].astype(str)), col


def test_ad_ids_holding_the_slate_key_separators():
    """Slate keys read back one way whatever the ad ids hold: 'x|2:y' at 1 and 'z' at 2 is not 'x' at 1 and 'y|2:z'
    at 2 (unescaped, both were '1:x|2:y|2:z'), and an ad named like the empty-position marker is an ad."""
    data = with_hostile_ads()
    stats = run_window(*arrow_tables(data))
    assert_tables_match(stats, data)
    events, decisions = clean(data)
    decided = {d["event_id"] for d in decisions}
    slates = {tuple(sorted((s["position"], s["ad_id"]) for s in ev["slots"])) for ev in events
              if ev["event_id"] in decided}
    assert ((1, "x|2:y"), (2, "z")) in slates and ((1, "x"), (2, "y|2:z")) in slates
    assert len(big(stats, "slate_covered", ["held", "slate_key"])) == len(slates)
