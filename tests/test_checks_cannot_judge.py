"""The assumption checks' edges where too little data, sparse tables or logged rounding made a check pass or
fail wrongly: check d on fine context strata (cannot judge, never pass), check a's false failures of independent
loggers on sparse tables, check e's tolerance for rounded propensities, its window test's false-fail rate and
its hint when the pooled cells mix contexts."""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from scavenger.checks import assumptions as A
from scavenger.checks.check_a import SPARSE_ROWS as A_SPARSE
from scavenger.engines.dialect import to_duckdb
from scavenger.statistics.sql.log_tables import pair_strata


def _check_d(a, b, stratum, cfg=A.AssumptionConfig()):
    """Check d's rows for one policy's slots 1, 2 (ads a, b per event, context stratum per event), the strata
    table built by the gate's own statement (statistics/sql/log_tables.pair_strata) on DuckDB."""
    ev = pd.DataFrame({"dt": "2026-01-01", "logging_policy": "p", "stratum": stratum, "a": a, "b": b})
    cells = ev.groupby(["dt", "logging_policy", "stratum", "a", "b"]).size().rename("n").reset_index()
    cells["j"], cells["k"] = 1, 2
    con = duckdb.connect()
    try:
        con.register("cells_df", cells)
        con.execute("CREATE TABLE scv_pair_cells AS SELECT * FROM cells_df")
        strata = con.execute(to_duckdb(pair_strata())).df()
    finally:
        con.close()
    dep, col = A.check_d(strata, cfg)
    assert dep["check"] == "d.slot_dependence" and col["check"] == "d.collisions"
    return dep, col, strata


def _ranked(rng, n, n_ads):
    ads = np.argsort(rng.random((n, n_ads)), axis=1)[:, :2]
    return ads[:, 0], ads[:, 1]


def test_check_d_context_unique_per_event_cannot_judge():
    """A ranked logger (2 of 10 ads, 5,000 events) with a context_id per event: every stratum holds one event,
    nothing can be tested -- both rows warn (they passed with 'V=0.0000 over 0 strata' and 'E=0.00 < 5')."""
    a, b = _ranked(np.random.default_rng(0), 5000, 10)
    dep, col, _ = _check_d(a, b, [f"u{i}" for i in range(5000)])
    assert dep["verdict"] == "warn" and col["verdict"] == "warn"
    assert "cannot judge slot independence: only 0 of 5000 events" in dep["message"]
    assert "widen the window or log a coarser context_id" in dep["message"]
    assert "cannot judge" in col["message"] and "only 0 of 5000 events" in col["message"]
    assert "do not overlap" not in col["message"]


def test_check_d_two_events_per_context_dependent_slots_cannot_judge():
    """Slot 2 a fixed function of slot 1, 2 events per context value: a 2x2 stratum of 2 events has chi2 = its
    null expectation whatever the logger, so V was 0 over 2,242 'tested' strata and check d passed."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 10, 5000)
    dep, col, strata = _check_d(a, a + 10, [f"c{i // 2}" for i in range(5000)])
    assert ((strata["r"] == 2) & (strata["c"] == 2)).sum() > 2000         # the strata the old check 'tested'
    assert dep["verdict"] == "warn" and dep["statistic"] == 0.0
    assert "only 0 of 5000 events are in 0 (context, day) strata" in dep["message"]
    # disjoint slot pools with every event in a stratum of two: no repeats to expect, an honest pass
    assert col["verdict"] == "pass" and "over 5000 events in strata of two events or more" in col["message"]
    # the same logger with no context: V = 0.9991, a fail
    dep, _, _ = _check_d(a, a + 10, "<null>")
    assert dep["verdict"] == "fail" and round(dep["statistic"], 4) == 0.9991


def test_check_d_tests_only_strata_that_can_show_dependence():
    """1000 ads, slot 2 = f(slot 1), 20 events per context: the strata where every event shows a different ad
    diluted V to 0.0911 (pass); over the 152 strata with a repeat V = 0.2398 (fail)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1000, 20000)
    dep, _, strata = _check_d(a, (a + 1) % 1000, [f"c{i // 20}" for i in range(20000)])
    st = A.stratified_dependence(strata)
    assert st["strata"] == 152 and st["v_pooled"] == dep["statistic"]
    assert dep["verdict"] == "fail" and round(dep["statistic"], 4) == 0.2398


def test_check_d_collision_message_follows_the_direction():
    """O/E > 1 (slot 2 repeats slot 1 more often than chance) is not 'sampled without replacement'."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 10, 5000)
    b = np.where(rng.random(5000) < 0.3, a, rng.integers(0, 10, 5000))
    _, col, _ = _check_d(a, b, "<null>")
    assert col["verdict"] == "fail" and col["statistic"] > 2.5
    assert "more than if the slots were chosen independently" in col["message"]
    assert "without replacement" not in col["message"]
    a, b = _ranked(rng, 5000, 10)
    _, col, _ = _check_d(a, b, "<null>")
    assert col["verdict"] == "fail" and col["statistic"] == 0.0
    assert "fewer than if the slots were chosen independently: the slate is sampled without replacement" in \
        col["message"]


_NO_SLOTS = pd.DataFrame(columns=["logging_policy", "dt", "position", "ad_id", "n"])


def _check_a(features: dict, ad, cfg=A.AssumptionConfig()):
    """Check a's context-independence rows of one policy and position: features name -> value per event."""
    frames = [pd.DataFrame({"logging_policy": "p", "position": 1, "feature": f, "value": v, "ad_id": ad})
              for f, v in features.items()]
    ctx = pd.concat(frames).groupby(["logging_policy", "position", "feature", "value", "ad_id"]).size()
    return A.check_a(ctx.rename("n").reset_index(), _NO_SLOTS, cfg)


def test_check_a_independent_loggers_do_not_fail():
    """Independent logger, replicates per table shape: V_bc > 0.1 in 17-33% of the sparse ones (they failed);
    now a sparse table cannot be judged (warn) and a judged one fails only when p < 0.001 too: no fail."""
    rng = np.random.default_rng(2)
    verdicts = {}
    # the sparse shapes warn whatever the draw (a size rule): 20 replicates; the judged shape: 200 (false fails)
    for n, r, c, reps in [(500, 490, 2, 20), (500, 250, 5, 20), (600, 300, 300, 20), (500, 100, 2, 20),
                          (2000, 100, 2, 200)]:
        out = []
        for _ in range(reps):
            (row,) = _check_a({"f": rng.integers(0, r, n)}, rng.integers(0, c, n))
            out.append(row["verdict"])
        verdicts[(n, r, c)] = pd.Series(out).value_counts().to_dict()
    assert verdicts[(500, 490, 2)] == verdicts[(500, 250, 5)] == verdicts[(600, 300, 300)] == {"warn": 20}
    assert verdicts[(500, 100, 2)] == {"warn": 20}                  # 5 impressions per value < 10
    assert verdicts[(2000, 100, 2)] == {"pass": 200}
    (row,) = _check_a({"f": rng.integers(0, 490, 500)}, rng.integers(0, 2, 500))
    assert "cannot judge" in row["message"] and "bucket the feature into fewer values" in row["message"]


def test_check_a_dependent_logger_still_fails():
    """Ad a: with prob. 0.5 ad = the context value, else uniform over 10: V = 0.5, p ~ 0 -- fail."""
    rng = np.random.default_rng(4)
    x = rng.integers(0, 10, 2000)
    ad = np.where(rng.random(2000) < 0.5, x, rng.integers(0, 10, 2000))
    (row,) = _check_a({"f": x}, ad)
    assert row["verdict"] == "fail" and row["statistic"] > 0.4 and "p < 0.001" in row["message"]


def test_check_a_one_context_value():
    """No context feature varies: check a cannot judge (it passed 'nothing to depend on' on any n); a constant
    feature beside one that varies is vacuous and passes, saying so."""
    rng = np.random.default_rng(5)
    ad = rng.integers(0, 4, 50)
    (row,) = _check_a({"context_id": np.full(50, "<null>")}, ad)
    assert row["verdict"] == "warn" and row["statistic"] is None
    assert "cannot judge: no context feature varies in these 50 impressions" in row["message"]
    rows = _check_a({"dow": np.full(50, "mon"), "f": rng.integers(0, 2, 50)}, ad)
    dow = [r for r in rows if r["scope"].endswith("feature=dow")][0]
    assert dow["verdict"] == "pass" and "the features that vary are tested in their own rows" in dow["message"]


@pytest.mark.parametrize("thin", [20, 21, 400])
def test_check_a_many_thin_features_are_one_row(thin):
    """A context of many keys (one row of 100,000 made a verdict row each: 14.6 s of the gate at 500,000): more
    than SPARSE_ROWS features under min_table_n impressions are one row, with the verdict their own rows would
    have had at worst; a dependent feature of enough impressions keeps its own row and still fails; up to
    SPARSE_ROWS the rows are as before."""
    rng = np.random.default_rng(6)
    n = 2000
    x = rng.integers(0, 10, n)
    ad = np.where(rng.random(n) < 0.5, x, rng.integers(0, 10, n))
    feats = {"f": x}
    for i in range(thin):      # key k<i> on 3 events only, elsewhere absent
        v = np.full(n, None, dtype=object)
        v[rng.choice(n, 3, replace=False)] = rng.choice(["a", "b"], 3)
        feats[f"k{i:03d}"] = v
    frames = [pd.DataFrame({"logging_policy": "p", "position": 1, "feature": f, "value": v, "ad_id": ad})
              .dropna(subset=["value"]) for f, v in feats.items()]
    cells = pd.concat(frames).groupby(["logging_policy", "position", "feature", "value", "ad_id"]).size()
    rows = A.check_a(cells.rename("n").reset_index(), _NO_SLOTS, A.AssumptionConfig())
    (f,) = [r for r in rows if r["scope"].endswith("feature=f")]
    assert f["verdict"] == "fail"
    thin_rows = [r for r in rows if "feature=k" in r["scope"]]
    if thin <= A_SPARSE:
        assert len(thin_rows) == thin and len(rows) == thin + 1
        return
    (one,) = [r for r in rows if "sparse" in r["scope"]]
    assert not thin_rows and len(rows) == 2
    assert one["scope"] == f"policy=p position=1 features={thin} sparse" and one["verdict"] == "warn"
    assert one["statistic"] is None and f"{thin} features have fewer than 500 impressions" in one["message"]
    assert "(e.g. k000, k001, k002, k003, k004)" in one["message"]
    seen = [{v for v in feats[f"k{i:03d}"] if v is not None} for i in range(thin)]
    one_value = sum(1 for values in seen if len(values) < 2)
    assert f"{thin - one_value} cannot be judged, {one_value} have one value" in one["message"]


def _slot(counts, p_logged, ads=None, dt="2026-01-01"):
    """A one-position slot table of one policy and day: impressions per ad, each logged with ``p_logged``."""
    counts = np.asarray(counts)
    p = np.broadcast_to(np.asarray(p_logged, dtype=float), counts.shape)
    return pd.DataFrame({"logging_policy": "p", "dt": dt, "position": 1,
                         "ad_id": ads if ads is not None else [f"a{i}" for i in range(len(counts))], "n": counts,
                         "n_p": counts, "sum_p": counts * p, "min_p": p, "max_p": p})


def _check_e(slot, cfg=A.AssumptionConfig()):
    cal = A.calibration_slot(slot[slot["n"] > 0], {})
    events = cal.groupby(["logging_policy", "stratum", "dt", "position"], as_index=False).agg(events=("n", "sum"))
    return {r["check"]: r for r in A.check_e(cal, events, cfg)}


def test_check_e_rounded_propensities_pass_real_excess_fails():
    """7 ads uniform logged as round(1/7, 4) = 0.1429 sum to 1.0003: failed 'logs wrong propensities'; the
    tolerance is half a unit of each propensity's last decimal (at most of the 3rd): 7 x 0.00005 here."""
    rng = np.random.default_rng(8)
    rows = _check_e(_slot(rng.multinomial(70000, np.full(7, 1 / 7)), round(1 / 7, 4)))
    assert rows["e.calibration"]["verdict"] == "pass" and rows["e.calibration_window"]["verdict"] == "pass"
    np.testing.assert_allclose(A.rounding_slack([0.1429, 0.143, 0.0125, 0.2, 0.25, 1 / 7]),
                               [5e-5, 5e-4, 5e-5, 5e-4, 5e-4, 0.0], rtol=1e-12)
    for p_logged, k, total in ((0.2, 6, 1.2), (0.3, 5, 1.5), (0.5, 4, 2.0), (0.143, 7, 1.001)):
        rows = _check_e(_slot(rng.multinomial(70000, np.full(k, 1 / k)), p_logged))
        cal = rows["e.calibration"]
        if p_logged == 0.143:             # 7 x round(1/7, 3): within 7 x 0.0005
            assert cal["verdict"] == "pass", cal["message"]
        else:
            assert cal["verdict"] == "fail" and cal["statistic"] == pytest.approx(total, rel=1e-12)
    assert "> 1 + 0.003" in _check_e(_slot(np.full(6, 1000), 0.2))["e.calibration"]["message"]


def test_check_e_window_test_holds_its_false_fail_rate():
    """2,000 ads at p = 1/2000, 10,000 one-slot events (E = 5 per ad): the window's normal tail failed 6 of 100
    calibrated replicates; with the exact binomial tail none of 200 fails. An ad served twice as often as
    logged over 30 such days (E = 150, O ~ 300) still fails the window test."""
    rng = np.random.default_rng(3)
    fails = 0
    for _ in range(200):
        rows = _check_e(_slot(rng.multinomial(10000, np.full(2000, 1 / 2000)), 1 / 2000))
        fails += any(r["verdict"] == "fail" for r in rows.values())
    assert fails <= 1
    served = np.full(2000, 1 / 2000)
    served[0] = 2 / 2000
    served /= served.sum()
    slot = pd.concat([_slot(rng.multinomial(10000, served), 1 / 2000, dt=f"2026-01-{d + 1:02d}") for d in range(30)])
    rows = _check_e(slot)
    win = rows["e.calibration_window"]
    assert win["verdict"] == "fail" and "ad a0 " in win["message"] and win["statistic"] > 0.8


def test_check_e_pooled_contexts_suggest_the_scope():
    """Ad s eligible under both contexts: no partition, the pooled cells sum to 1.8 and fail; the message says
    to rerun with --calibration-scope context_id."""
    from scavenger.checks import judge as J

    rng = np.random.default_rng(7)
    ctx = rng.integers(0, 2, 20000)
    pools = {0: ["s", "a1", "a2", "a3", "a4"], 1: ["s", "b1", "b2", "b3", "b4"]}
    ad = [pools[c][i] for c, i in zip(ctx, rng.integers(0, 5, 20000))]
    df = pd.DataFrame({"logging_policy": "p", "dt": "2026-01-01", "position": 1, "ad_id": ad,
                       "ctx": [f"c{c}" for c in ctx]})
    slot = df.groupby(["logging_policy", "dt", "position", "ad_id"]).agg(
        n=("ad_id", "size"), stratum_min=("ctx", "min"), stratum_max=("ctx", "max")).reset_index()
    slot = slot.assign(n_p=slot["n"], sum_p=0.2 * slot["n"], min_p=0.2, max_p=0.2)
    assert A.partition_strata(slot) == {} and A.mixed_scope(slot, {}) == {"p": 2}
    rows = {r["check"]: r for r in J._check_e(None, slot, A.AssumptionConfig())}
    cal = rows["e.calibration"]
    assert cal["verdict"] == "fail" and cal["statistic"] == pytest.approx(1.8, rel=1e-12)
    for r in rows.values():
        assert "these cells pool 2 values of context_id" in r["message"]
        assert "rerun with --calibration-scope context_id" in r["message"]
    assert "(no partition of the ads by context_id: 1 of its 9 ads are shown under two values or more)" \
        in cal["message"]


def _campaigns(per_ad: int, campaigns: int = 3, ads: int = 4) -> pd.DataFrame:
    """One policy's slot table: ``campaigns`` values of context_id with their own ``ads`` ads each (a partition),
    each ad shown ``per_ad`` times at its logged propensity 1 / ads."""
    rows = [{"ad_id": f"c{c}/i{i}", "n": per_ad, "stratum_min": f"c{c}", "stratum_max": f"c{c}"}
            for c in range(campaigns) for i in range(ads)]
    slot = pd.DataFrame(rows).assign(logging_policy="p", dt="2026-01-01", position=1)
    return slot.assign(n_p=slot["n"], sum_p=slot["n"] / ads, min_p=1 / ads, max_p=1 / ads)


def test_check_e_too_few_impressions_to_find_the_partition_says_what_it_needs():
    """3 campaigns of 4 ads each, 10 impressions per ad: too few (20 per ad on average) to tell the partition from
    chance, so the cells are pooled; the message said 'an ad is shown under two values, or too few impressions',
    now it says it cannot judge and the minimum it needs."""
    from scavenger.checks import judge as J

    assert A.partition_strata(_campaigns(10)) == {} and A.mixed_scope(_campaigns(10), {}) == {"p": 3}
    rows = {r["check"]: r for r in J._check_e(None, _campaigns(10), A.AssumptionConfig())}
    need = ("these cells pool 3 values of context_id (cannot judge whether context_id partitions the ads: its 12 "
            "ads were shown 10.0 times each on average, and telling a partition from chance needs at least 20 "
            "impressions per ad on average; widen the window); if each value has its own ads and propensities, "
            "rerun with --calibration-scope context_id")
    assert rows["e.calibration"]["verdict"] == "fail" and rows["e.calibration"]["statistic"] == 3.0
    for r in rows.values():
        assert need in r["message"]
    # with 20 impressions per ad the partition is found and the cells are compared within each campaign
    rows = {r["check"]: r for r in J._check_e(None, _campaigns(20), A.AssumptionConfig())}
    assert rows["e.calibration"]["verdict"] == "pass"
    assert "within each of the 3 values of context_id, which partition its ads" in rows["e.calibration"]["message"]
    # fewer than 2 ads per value: no partition, and the message says so (not 'cannot judge')
    rows = {r["check"]: r for r in J._check_e(None, _campaigns(40, ads=1), A.AssumptionConfig())}
    assert ("(no partition of the ads by context_id: 3 ads over 3 values, fewer than the 2 per value a partition "
            "needs)") in rows["e.calibration"]["message"]
