"""Row rules and quarantine: every injected bad row gets its reason, counts reconcile exactly."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from scavenger.checks import rules
from scavenger.checks.rules import DECISION_REASONS, LOG_REASONS, RuleConfig

DAY = "2026-01-01"
DAY2 = "2026-01-02"


def _slate(ads, props=None, rewards=None, positions=None):
    k = len(ads)
    props = props or [0.25] * k
    rewards = rewards or [0.0] * k
    positions = positions or list(range(1, k + 1))
    return [{"position": p, "ad_id": a, "propensity": q, "reward": r}
            for p, a, q, r in zip(positions, ads, props, rewards)]


def _log(i, day=DAY, time="12:00:00", **kw):
    row = {"event_id": f"e{i}", "event_time": f"{day} {time}", "context_id": "c1",
           "context": {"f0": "a"}, "logging_policy": "uniform",
           "slots": _slate(["a1", "a2", "a3"]), "slate_reward": None, "dt": day}
    row.update(kw)
    return row


def _bad_logs():
    """(row, expected reasons) for every kind of bad row of the issue, plus clean rows."""
    cases = [
        (_log(100, slots=_slate(["a1", "a2", "a3"], props=[None, .25, .25])), {"NULL_PROPENSITY"}),
        (_log(101, slots=_slate(["a1", "a2", "a3"], props=[0.0, .25, .25])), {"ZERO_PROPENSITY"}),
        (_log(102, slots=_slate(["a1", "a2", "a3"], props=[1.5, .25, .25])), {"PROPENSITY_GT_1"}),
        (_log(103, slots=_slate(["a1", "a1", "a3"])), {"DUPLICATE_AD"}),
        (_log(104, slots=_slate(["a1", "a2", "a3"], positions=[1, 2, 4])), {"POSITION_GAP"}),
        (_log(105, slots=_slate(["a1", "a2", "a3"], positions=[1, 2, 2])), {"DUPLICATE_POSITION"}),
        (_log(106, slots=_slate(["a1", "a2", "a3"], rewards=[0.0, 2.0, 0.0])), {"REWARD_OUT_OF_RANGE"}),
        (_log(107, slots=_slate(["a1", "a2", "a3"], rewards=[0.0, float("nan"), 0.0])), {"REWARD_NOT_FINITE"}),
        (_log(108, slots=_slate(["a1", "a2", "a3"], rewards=[0.0, float("inf"), 0.0])), {"REWARD_NOT_FINITE"}),
        (_log(109, event_time="yesterday at noon"), {"EVENT_TIME_UNPARSEABLE"}),
        (_log(110, event_time=f"{DAY2} 00:00:01"), {"EVENT_TIME_OUTSIDE_DT"}),
        (_log(111, slots=[]), {"EMPTY_SLATE"}),
        (_log(112, slate_reward=-1.0), {"REWARD_OUT_OF_RANGE"}),
        (_log(113, slots=_slate(["a1", "a2", "a3"], rewards=[None, 0.0, 0.0])), {"MISSING_REWARD"}),
        # the same event id in another dt partition of the window: the later copy is quarantined
        (_log(1, day=DAY2), {"DUPLICATE_EVENT_ID"}),
        # two kinds at once
        (_log(114, slots=_slate(["a1", "a1", "a3"], props=[0.0, .25, .25])), {"DUPLICATE_AD", "ZERO_PROPENSITY"}),
    ]
    clean_rows = [(_log(i, day=DAY if i % 2 else DAY2), set()) for i in range(1, 41)]
    return clean_rows + cases


@pytest.fixture(scope="module")
def flagged_logs(spark):
    cases = _bad_logs()
    df = rules.raw_frame(spark, [r for r, _ in cases])
    flagged = rules.flag_logs(df, RuleConfig(reward_max=1.0)).cache()
    got = {r["event_id"] + "|" + str(r["dt"]): set(r[rules.REASON])
           for r in flagged.select("event_id", "dt", rules.REASON).collect()}
    return cases, flagged, got


def test_every_bad_log_row_has_its_reason(flagged_logs):
    cases, _, got = flagged_logs
    assert len(got) == len(cases)
    for row, expected in cases:
        assert got[row["event_id"] + "|" + row["dt"]] == expected, row["event_id"]


def test_log_counts_reconcile(flagged_logs):
    cases, flagged, _ = flagged_logs
    counts = rules.reason_counts(flagged, LOG_REASONS)
    n_bad = sum(1 for _, e in cases if e)
    assert counts["rows"].sum() == len(cases)
    assert counts["quarantined"].sum() == n_bad
    assert rules.clean(flagged, "impression_log").count() == len(cases) - n_bad
    expected = pd.Series(0, index=LOG_REASONS)
    for _, e in cases:
        for code in e:
            expected[code] += 1
    assert counts[LOG_REASONS].sum().astype(int).to_dict() == expected.astype(int).to_dict()


def test_null_propensity_configurable(spark):
    rows = [_log(1, slots=_slate(["a1", "a2"], props=[None, .5])), _log(2)]
    df = rules.raw_frame(spark, rows)
    counted_only = rules.flag_logs(df, RuleConfig(quarantine_null_propensity=False))
    assert counted_only.where("size(reason_codes) > 0").count() == 0
    quarantined = rules.flag_logs(df, RuleConfig(quarantine_null_propensity=True))
    assert [r[0] for r in quarantined.where("size(reason_codes) > 0").select("event_id").collect()] == ["e1"]


def test_duplicates_quarantine_all(spark):
    rows = [_log(1), _log(1, time="13:00:00"), _log(2)]
    df = rules.raw_frame(spark, rows)
    keep = rules.flag_logs(df, RuleConfig(duplicates="keep_first"))
    assert keep.where("size(reason_codes) > 0").count() == 1
    first = keep.where("size(reason_codes) = 0 and event_id = 'e1'").select("event_time").collect()
    assert first[0][0] == dt.datetime(2026, 1, 1, 12, 0, 0)
    allq = rules.flag_logs(df, RuleConfig(duplicates="quarantine_all"))
    assert allq.where("size(reason_codes) > 0").count() == 2


def test_revenue_range(spark):
    rows = [_log(1, slots=_slate(["a1", "a2"], rewards=[3.5, 0.0])), _log(2, slots=_slate(["a1", "a2"], rewards=[12.0, 0.0]))]
    df = rules.raw_frame(spark, rows)
    flagged = rules.flag_logs(df, RuleConfig(reward_max=10.0))
    bad = {r[0] for r in flagged.where("size(reason_codes) > 0").select("event_id").collect()}
    assert bad == {"e2"}


def _dec(i, policy="p1", day=DAY, slots=None):
    return {"policy_id": policy, "event_id": f"e{i}", "dt": day, "base_policy": None,
            "slots": slots if slots is not None else [
                {"position": 1, "ad_id": "a1", "probability": 0.5},
                {"position": 1, "ad_id": "a2", "probability": 0.5},
                {"position": 2, "ad_id": "a3", "probability": 1.0}]}


def test_decision_rules_and_counts(spark, flagged_logs):
    _, flagged, _ = flagged_logs
    cases = [(_dec(i, day=DAY if i % 2 else DAY2), set()) for i in range(1, 21)]
    cases += [
        (_dec(1, policy="p2", slots=[{"position": 1, "ad_id": "a1", "probability": 1.2},
                                     {"position": 1, "ad_id": "a2", "probability": -0.2}]),
         {"PROBABILITY_OUT_OF_RANGE"}),
        (_dec(3, policy="p2", slots=[{"position": 1, "ad_id": "a1", "probability": 0.5},
                                     {"position": 2, "ad_id": "a2", "probability": 1.0}]), {"PROBABILITY_SUM"}),
        (_dec(5, policy="p1"), {"DUPLICATE_DECISION"}),
        (_dec(9999, policy="p1"), {"UNKNOWN_EVENT"}),
        (_dec(2, policy="p3", day=DAY), {"UNKNOWN_EVENT"}),   # e2 is logged on DAY2, not DAY
        (_dec(101, policy="p1"), {"EVENT_QUARANTINED"}),
        (_dec(7, policy="p2", slots=[]), {"EMPTY_SLOTS"}),
    ]
    df = rules.raw_frame(spark, [r for r, _ in cases], name="decisions")
    fd = rules.flag_decisions(df, flagged).cache()
    got = sorted((r["policy_id"], r["event_id"], tuple(sorted(r[rules.REASON])))
                 for r in fd.select("policy_id", "event_id", rules.REASON).collect())
    want = sorted((r["policy_id"], r["event_id"], tuple(sorted(e))) for r, e in cases)
    assert got == want
    counts = rules.reason_counts(fd, DECISION_REASONS)
    assert counts["rows"].sum() == len(cases)
    assert counts["quarantined"].sum() == sum(1 for _, e in cases if e)
    assert rules.clean(fd, "decisions").count() + counts["quarantined"].sum() == len(cases)


def test_quarantine_written_idempotently(spark, flagged_logs, tmp_path):
    _, flagged, _ = flagged_logs
    path = str(tmp_path / "quarantine" / "logs")
    for run in ("r1", "r2"):
        rules.write_quarantine(spark, flagged, "impression_log", path, run, [DAY, DAY2])
    q = spark.read.parquet(path)
    n_bad = flagged.where("size(reason_codes) > 0").count()
    assert q.count() == n_bad
    assert {r[0] for r in q.select("run_id").distinct().collect()} == {"r2"}
    assert set(q.columns) >= {"event_id", "slots", "reason_codes", "run_id", "dt"}
    # a re-run of DAY2 with nothing to quarantine empties that partition
    only_day = flagged.where(f"dt = '{DAY2}' and size(reason_codes) = 0")
    rules.write_quarantine(spark, only_day, "impression_log", path, "r3", [DAY2])
    q2 = spark.read.parquet(path)
    assert q2.where(f"dt = '{DAY2}'").count() == 0
    assert q2.count() == flagged.where(f"dt = '{DAY}' and size(reason_codes) > 0").count()


def test_partial_slates(spark):
    """OBD-style one-slot rows at position 2 or 3: a gap for full slates, fine with allow_partial_slates."""
    rows = [_log(1, slots=_slate(["a1"], positions=[3])), _log(2, slots=_slate(["a1"], positions=[0])), _log(3)]
    df = rules.raw_frame(spark, rows)
    full = {r[0]: list(r[1]) for r in rules.flag_logs(df).select("event_id", rules.REASON).collect()}
    assert full == {"e1": ["POSITION_GAP"], "e2": ["POSITION_GAP"], "e3": []}
    partial = {r[0]: list(r[1]) for r in rules.flag_logs(df, RuleConfig(allow_partial_slates=True))
               .select("event_id", rules.REASON).collect()}
    assert partial == {"e1": [], "e2": ["POSITION_GAP"], "e3": []}
