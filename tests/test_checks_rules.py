"""Row rules and quarantine: every injected bad row gets its reason, counts reconcile exactly.

The rules are flag columns of the one pass (checks/rules.py, evaluated by statistics/sql/logs.py and
decisions.py); here the pass runs on DuckDB over raw records (event_time and dt as strings, as read from JSON or
CSV: a value that does not parse becomes null) and each row's reasons are read back from the quarantine it
writes. Clean rows are the ones the statistics count."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from scavenger.checks.rules import DECISION_REASONS, LOG_REASONS, RuleConfig
from scavenger.contract import DECISIONS, LOGS, arrow_schema
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import describe_inputs, window_dates
from scavenger.statistics.scan import ScanPlan, StatsConfig
from scavenger.statistics.window import window_statistics

DAY = "2026-01-01"
DAY2 = "2026-01-02"
# the fixture's rules: everything a row can break is quarantined (the defaults count null propensities and
# accept partial slates; test_null_propensity_configurable and test_partial_slates cover them)
STRICT = RuleConfig(reward_max=1.0, quarantine_null_propensity=True, require_full_slates=True)


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
        (_log(131, slots=_slate(["a1", "a2", "a3"], props=[.25, 5e-324, .25])), {"ZERO_PROPENSITY"}),
        (_log(132, slots=_slate(["a1", "a2", "a3"], props=[.25, 1e-300, .25])), set()),
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
        # an id, a context key or value beyond max_id_length (1,000 characters; two-byte ones count once)
        (_log(115, slots=_slate(["a1", "\u00e9" * 1001, "a3"])), {"ID_TOO_LONG"}),
        (_log(116, slots=_slate(["a1", "a2", "a3", "a4", "z" * 1001])), {"ID_TOO_LONG"}),    # beyond UNROLL
        (_log(117, logging_policy="u" * 1001), {"ID_TOO_LONG"}),
        (_log(118, context_id="c" * 1001), {"ID_TOO_LONG"}),
        (_log(119, event_id="e" * 1001), {"ID_TOO_LONG"}),
        (_log(120, context={"f0": "v" * 1001}), {"CONTEXT_TOO_LONG"}),
        (_log(121, context={"f0": "a", "k" * 1001: None}), {"CONTEXT_TOO_LONG"}),
        (_log(122, context_id="\u4e2d" * 1000, context={"\u4e2d" * 1000: "\u00e9" * 1000},
              slots=_slate(["a1", "\u4e2d" * 1000, "a3"])), set()),                           # at the limit
        (_log(123, context={f"k{i:02d}" + "x" * 40: "v" * 40 for i in range(30)}), set()),     # long JSON text
    ]
    clean_rows = [(_log(i, day=DAY if i % 2 else DAY2), set()) for i in range(1, 41)]
    return clean_rows + cases


def _dec(i, policy="p1", day=DAY, slots=None):
    return {"policy_id": policy, "event_id": f"e{i}", "dt": day, "base_policy": None,
            "slots": slots if slots is not None else [
                {"position": 1, "ad_id": "a1", "probability": 0.5},
                {"position": 1, "ad_id": "a2", "probability": 0.5},
                {"position": 2, "ad_id": "a3", "probability": 1.0}]}


def _decision_cases():
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
        (_dec(11, policy="p" * 1001), {"ID_TOO_LONG"}),
        (_dec(13, policy="p4", slots=[{"position": 1, "ad_id": "\u00e9" * 1001, "probability": 1.0}]),
         {"ID_TOO_LONG"}),
        (dict(_dec(15, policy="p5"), base_policy="b" * 1001), {"ID_TOO_LONG"}),
        (dict(_dec(19, policy="p6"), event_id="d" * 1001), {"ID_TOO_LONG", "UNKNOWN_EVENT"}),
        (_dec(17, policy="p7", slots=[{"position": 1, "ad_id": "\u4e2d" * 1000, "probability": 1.0}]), set()),
    ]
    return cases


def _raw(rows, name=LOGS) -> pa.Table:
    """Raw records as a pyarrow table of the contract, ``event_time`` and ``dt`` as strings (read from JSON/CSV);
    the pass conforms them (try_cast)."""
    schema = arrow_schema(name, nullable=True)
    fields = [pa.field(f.name, pa.string()) if f.name in ("event_time", "dt") else f for f in schema]
    schema = pa.schema(fields)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def run_pass(log_rows, dec_rows=None, rules=RuleConfig(), quarantine=None, run_id="t"):
    """The one pass over the records on DuckDB: (merged statistics, quarantined logs, quarantined decisions)."""
    inputs = describe_inputs(_raw(log_rows), _raw(dec_rows, DECISIONS) if dec_rows is not None else None)
    eng = DuckDBEngine("test")
    try:
        stats = window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(),
                                  StatsConfig(rules=rules), quarantine_dir=str(quarantine) if quarantine else None,
                                  run_id=run_id)
    finally:
        eng.close()
    if quarantine is None:
        return stats, None, None
    return stats, _read(Path(quarantine) / "logs"), _read(Path(quarantine) / "decisions")


def _read(path: Path) -> pd.DataFrame:
    files = sorted(path.glob("dt=*/*.parquet"))
    if not files:
        return pd.DataFrame(columns=["event_id", "dt", "reason_codes", "run_id"])
    return pd.concat([pd.read_parquet(f).assign(dt=f.parent.name[3:]) for f in files], ignore_index=True)


def _reasons(q: pd.DataFrame) -> dict:
    return {f"{r.event_id}|{r.dt}": set(r.reason_codes) for r in q.itertuples()}


@pytest.fixture(scope="module")
def one_pass(tmp_path_factory):
    cases, dcases = _bad_logs(), _decision_cases()
    q = tmp_path_factory.mktemp("rules") / "quarantine"
    stats, qlogs, qdec = run_pass([r for r, _ in cases], [r for r, _ in dcases], STRICT, q)
    return cases, dcases, stats, qlogs, qdec


def test_every_bad_log_row_has_its_reason(one_pass):
    cases, _, stats, qlogs, _ = one_pass
    quarantined = _reasons(qlogs)
    assert len(quarantined) == len(qlogs) == sum(1 for _, e in cases if e)     # one quarantine row per bad row
    got = {r["event_id"] + "|" + r["dt"]: quarantined.get(r["event_id"] + "|" + r["dt"], set()) for r, _ in cases}
    assert len(qlogs) + stats.table("log_summary")["n_events"].sum() == len(got) == len(cases)   # in = out
    for row, expected in cases:
        assert got[row["event_id"] + "|" + row["dt"]] == expected, row["event_id"]


def test_log_counts_reconcile(one_pass):
    cases, _, stats, _, _ = one_pass
    counts = stats.table("log_counts")
    n_bad = sum(1 for _, e in cases if e)
    assert counts["rows"].sum() == len(cases)
    assert counts["quarantined"].sum() == n_bad
    assert stats.table("log_summary")["n_events"].sum() == len(cases) - n_bad      # the clean rows, counted
    expected = pd.Series(0, index=LOG_REASONS)
    for _, e in cases:
        for code in e:
            expected[code] += 1
    assert counts[LOG_REASONS].sum().astype(int).to_dict() == expected.astype(int).to_dict()


def test_null_propensity_configurable(tmp_path):
    rows = [_log(1, slots=_slate(["a1", "a2"], props=[None, .5])), _log(2)]
    counted, q, _ = run_pass(rows, quarantine=tmp_path / "counted")
    assert len(q) == 0 and int(counted.table("log_counts")["null_propensity_events"].sum()) == 1
    _, q, _ = run_pass(rows, rules=RuleConfig(quarantine_null_propensity=True), quarantine=tmp_path / "q")
    assert list(q["event_id"]) == ["e1"]


def test_duplicates_quarantine_all(tmp_path):
    rows = [_log(1), _log(1, time="13:00:00"), _log(2)]
    _, keep, _ = run_pass(rows, rules=RuleConfig(duplicates="keep_first"), quarantine=tmp_path / "keep")
    assert len(keep) == 1
    # the later copy (13:00) is set aside: the first by event_time stays clean
    assert pd.Timestamp(keep["event_time"].iloc[0]).tz_localize(None) == dt.datetime(2026, 1, 1, 13, 0, 0)
    _, allq, _ = run_pass(rows, rules=RuleConfig(duplicates="quarantine_all"), quarantine=tmp_path / "all")
    assert len(allq) == 2


def test_revenue_range(tmp_path):
    rows = [_log(1, slots=_slate(["a1", "a2"], rewards=[3.5, 0.0])),
            _log(2, slots=_slate(["a1", "a2"], rewards=[12.0, 0.0]))]
    _, q, _ = run_pass(rows, rules=RuleConfig(reward_max=10.0), quarantine=tmp_path / "q")
    bad = set(q["event_id"])
    assert bad == {"e2"}


def test_decision_rules_and_counts(one_pass):
    _, cases, stats, _, qdec = one_pass
    got = sorted((r.policy_id, r.event_id, tuple(sorted(r.reason_codes))) for r in qdec.itertuples())
    want = sorted((r["policy_id"], r["event_id"], tuple(sorted(e))) for r, e in cases if e)
    assert got == want
    counts = stats.table("decision_counts")
    assert counts["rows"].sum() == len(cases)
    assert counts["quarantined"].sum() == sum(1 for _, e in cases if e)
    clean = stats.table("policy_events").set_index("policy_id")["n_events"]
    want_clean = pd.Series([r["policy_id"] for r, e in cases if not e]).value_counts()
    assert clean.sum() + counts["quarantined"].sum() == len(cases)
    assert clean.to_dict() == want_clean.to_dict()
    assert counts[DECISION_REASONS].sum().astype(int).to_dict() == {
        c: sum(1 for _, e in cases if c in e) for c in DECISION_REASONS}


def test_quarantine_written_idempotently(tmp_path):
    cases = _bad_logs()
    rows = [r for r, _ in cases]
    path = tmp_path / "quarantine"
    for run in ("r1", "r2"):
        _, q, _ = run_pass(rows, rules=STRICT, quarantine=path, run_id=run)
    n_bad = sum(1 for _, e in cases if e)
    assert len(q) == n_bad
    assert set(q["run_id"]) == {"r2"}
    assert set(q.columns) >= {"event_id", "slots", "reason_codes", "run_id", "dt"}
    # a re-run of DAY2 with nothing to quarantine empties that partition
    only_day = [r for r, e in cases if r["dt"] == DAY2 and not e]
    _, q2, _ = run_pass(only_day, rules=STRICT, quarantine=path, run_id="r3")
    assert (q2["dt"] == DAY2).sum() == 0
    assert len(q2) == sum(1 for r, e in cases if r["dt"] == DAY and e)


def test_partial_slates(tmp_path):
    """OBD-style one-slot rows at position 2 or 3: fine by default (a row contributes through the slots it holds),
    a gap with require_full_slates; a position below 1 is a gap either way."""
    rows = [_log(1, slots=_slate(["a1"], positions=[3])), _log(2, slots=_slate(["a1"], positions=[0])), _log(3)]

    def reasons(rules, name):
        _, q, _ = run_pass(rows, rules=rules, quarantine=tmp_path / name)
        got = {r.event_id: sorted(r.reason_codes) for r in q.itertuples()}
        return {f"e{i}": got.get(f"e{i}", []) for i in (1, 2, 3)}

    full = reasons(RuleConfig(require_full_slates=True), "full")
    assert full == {"e1": ["POSITION_GAP"], "e2": ["POSITION_GAP"], "e3": []}
    partial = reasons(RuleConfig(), "partial")
    assert RuleConfig().allow_partial_slates and partial == {"e1": [], "e2": ["POSITION_GAP"], "e3": []}
