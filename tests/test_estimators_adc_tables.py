"""The ADC-based tables (factored, factored_sq, policy_ads) are made only where they can be read: with the ADCs
estimated from the logs, not for days whose ads never move between positions (slotted layouts: no ADC identified),
and made again for every day when the window's ads do identify them, so a window equals the same window scanned
with the tables always made. All on DuckDB."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers.reference import build_random, write_parquet
from scavenger import registry
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import describe_inputs, window_dates
from scavenger.statistics.scan import ADC_TABLES, ScanPlan, StatsConfig, adcs_identifiable
from scavenger.statistics.store import Store
from scavenger.statistics.tables import TABLES
from scavenger.statistics.window import window_statistics

ESTIMATED = registry.plan_for(["factored", "reorder", "slate_pi"], (), adcs_given=False)


def _slotted_first_day(seed: int = 21):
    """K = 3 random logs over two days; on the first, every ad id is suffixed by its position (logs and decisions),
    so no ad of that day is shown at two positions."""
    data = build_random(seed=seed, K=3, n_ads=6, days=(0, 1), per_day=120)
    first = min(r["dt"] for r in data["logs"])
    for row in data["logs"] + data["decisions"]:
        if row["dt"] == first:
            for s in row["slots"]:
                s["ad_id"] = f"{s['ad_id']}@{s['position']}"
    return data, first


def _window(root: str, plan, dates=None, store=None):
    eng = DuckDBEngine("test")
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    days = window_dates(eng, inputs) if dates is None else dates
    return window_statistics(eng, inputs.logs, inputs.decisions, days, plan, StatsConfig(), store=store)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    data, first = _slotted_first_day()
    root = str(tmp_path_factory.mktemp("adc_tables"))
    write_parquet(data, root)
    return root, first, sorted({r["dt"] for r in data["logs"]})


def test_plans():
    assert ESTIMATED.adc_tables == "identifiable"
    assert registry.plan_for(["factored"], (), adcs_given=True).adc_tables == "always"
    assert registry.plan_for(["slate_pi", "scavenging_slate"], (), adcs_given=False).adc_tables == "never"
    assert set(ADC_TABLES) & ESTIMATED.tables(True, False) == set()
    assert set(ADC_TABLES) <= ScanPlan().tables(True, False)


def test_identifiable():
    ap = pd.DataFrame({"ad_id": ["a", "b", "a"], "position": [1, 2, 2], "m": [3, 4, 0]})
    assert not adcs_identifiable(ap, 2)                 # 'a' at position 2 was never shown (m = 0)
    assert adcs_identifiable(ap.assign(m=1), 2)
    assert adcs_identifiable(ap.iloc[:0], 1)            # one position: C = (1)
    assert not adcs_identifiable(ap.iloc[:0], 3)


def test_slotted_day_makes_no_adc_tables(logs):
    root, first, days = logs
    alone = _window(root, ESTIMATED, [first])
    assert not set(ADC_TABLES) & set(alone.tables) and "policy_events" in alone.tables
    assert not adcs_identifiable(alone.table("ad_position"), alone.K)
    always = _window(root, ScanPlan(), [first])
    assert set(ADC_TABLES) <= set(always.tables) and len(always.table("factored")) > 0
    for name in set(alone.tables) - {"reorder_pairs"}:
        _same(alone.table(name), always.table(name), name)
    for s in (alone, always):
        s.engine.close()


def test_window_identifying_the_adcs_makes_them_for_every_day(logs, tmp_path):
    """The slotted day evaluated alone into a store (no ADC-based tables stored), then the two-day window from that
    store: the second day's ads move, so both days are scanned with the tables, equal to a window that always made
    them (without the second look, the first day's factored sums were missing from the window's)."""
    root, first, days = logs
    store = Store(str(tmp_path / "store"))
    alone = _window(root, ESTIMATED, [first], store)
    assert alone.scanned == [first] and not set(ADC_TABLES) & set(store.manifest(first)["tables"])
    alone.engine.close()
    window = _window(root, ESTIMATED, days, store)
    assert adcs_identifiable(window.table("ad_position"), window.K)
    assert set(ADC_TABLES) <= set(store.manifest(first)["tables"])      # the day was stored again, with them
    always = _window(root, ScanPlan(), days)
    # this run read both days: the second in the first look, the first again in the second look
    assert window.scanned == sorted(days) and len(window.per_day[first]["factored"]) > 0
    for name in ADC_TABLES + ("policy_events", "ad_position", "target_placements"):
        _same(window.table(name), always.table(name), name)
    again = _window(root, ESTIMATED, days, store)                       # both days from the store now
    assert again.scanned == [] and set(ADC_TABLES) <= set(again.tables)
    for s in (window, always, again):
        s.engine.close()


def _same(a: pd.DataFrame, b: pd.DataFrame, name: str) -> None:
    keys = [k for k in (["dt"] if TABLES[name].per_day else []) + list(TABLES[name].keys) if k in a.columns]
    a, b = (x.sort_values(keys).reset_index(drop=True) for x in (a, b))
    assert list(a.columns) == list(b.columns) and len(a) == len(b), name
    for col in a.columns:
        if a[col].dtype.kind in "fi" and b[col].dtype.kind in "fi":
            assert np.allclose(a[col], b[col], rtol=1e-12, atol=0, equal_nan=True), (name, col)
        else:
            assert a[col].astype(str).equals(b[col].astype(str)), (name, col)


def test_evaluate_on_slotted_logs_says_why(tmp_path):
    """The pipeline on the slotted day alone: factored is not identified, with the ADC's reason, as when the tables
    were made; with an ADC table given (--adc), the tables are made and factored is estimated."""
    from test_estimators_scavenging import run_evaluate

    data, first = _slotted_first_day()
    data = {**data, "logs": [r for r in data["logs"] if r["dt"] == first],
            "decisions": [r for r in data["decisions"] if r["dt"] == first]}
    ev, eng = run_evaluate(data, ["factored", "slate_pi"])
    fac = ev.estimates[ev.estimates["estimator"] == "factored"]
    assert len(fac) and not fac["identified"].any()
    assert fac["reason"].str.contains("no ad was shown at more than one position").all()
    assert ev.estimates[ev.estimates["estimator"] == "slate_pi"]["identified"].all()
    eng.close()
    adc = tmp_path / "adc.csv"
    pd.DataFrame({"position": [1, 2, 3], "method": "naive", "coefficient": [1.0, 0.6, 0.3]}).to_csv(adc, index=False)
    ev, eng = run_evaluate(data, ["factored"], adc=str(adc), adc_method="naive")
    fac = ev.estimates[ev.estimates["estimator"] == "factored"]
    assert len(fac) and fac["identified"].all() and np.isfinite(fac["value"].astype(float)).all()
    eng.close()


def test_second_look_sees_the_same_earlier_days_as_one_run(tmp_path):
    """Days slotted, moving, slotted, one day per pass into a store, and the third day repeating an event id of the
    first: the repeat is DUPLICATE_EVENT_ID however the window is scanned. The second look (ADCs identified by the
    middle day) scans the slotted days again with the earlier ones stored; a run that always made the tables must
    see the same earlier days, so each pass checks the days stored before it, this run's earlier passes included
    (it did not: 1 repeat flagged with the second look, 0 without)."""
    data = build_random(seed=21, K=3, n_ads=6, days=(0, 1, 2), per_day=120)
    days = sorted({r["dt"] for r in data["logs"]})
    for row in data["logs"] + data["decisions"]:
        if row["dt"] in (days[0], days[2]):
            for s in row["slots"]:
                s["ad_id"] = f"{s['ad_id']}@{s['position']}"
    repeat = next(dict(ev) for ev in data["logs"] if ev["dt"] == days[2])
    repeat["event_id"] = next(ev["event_id"] for ev in data["logs"] if ev["dt"] == days[0])
    data["logs"].append(repeat)
    root = str(tmp_path / "in")
    write_parquet(data, root)
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    runs = {}
    for name, plan, batch in (("estimated", ESTIMATED, 1), ("always", ScanPlan(), 1), ("one pass", ScanPlan(), 0)):
        eng = DuckDBEngine("test")
        runs[name] = window_statistics(eng, inputs.logs, inputs.decisions, days, plan, StatsConfig(),
                                       store=Store(str(tmp_path / name)), batch_days=batch)
        eng.close()
    for name, w in runs.items():
        assert w.table("log_counts")["DUPLICATE_EVENT_ID"].tolist() == [0, 0, 1], name
    for name in ("log_summary", "ad_position") + ADC_TABLES:
        _same(runs["estimated"].table(name), runs["always"].table(name), name)
        _same(runs["always"].table(name), runs["one pass"].table(name), name)


def test_quarantine_rows_recorded_once_when_days_are_scanned_again(tmp_path, monkeypatch):
    """The second look writes the days' quarantined rows again (the same partitions, replaced): the run manifest
    counts each day's rows once, as the files hold them (it added them again: 70 log rows recorded for 35)."""
    import glob

    import pyarrow.parquet as pq

    from helpers.reference import with_bad_rows
    from scavenger.io import manifest as M

    data, first = _slotted_first_day()
    data, _, _ = with_bad_rows(data)
    root = str(tmp_path / "in")
    write_parquet(data, root)
    inputs = describe_inputs(f"{root}/logs", f"{root}/decisions")
    for plan in (ESTIMATED, ScanPlan()):
        out = str(tmp_path / f"out_{plan.adc_tables}")
        monkeypatch.setattr(M, "_current", None)
        run = M.begin(out, "r1", "evaluate")
        eng = DuckDBEngine("test")
        window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), plan, StatsConfig(),
                          quarantine_dir=f"{out}/quarantine", run_id="r1", batch_days=1)
        eng.close()
        recorded = {t["name"]: t["rows"] for t in run.tables}
        for kind in ("logs", "decisions"):
            files = glob.glob(f"{out}/quarantine/{kind}/dt=*/*.parquet")
            rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            assert rows > 0 and recorded[f"quarantine_{kind}"] == rows, (plan.adc_tables, kind)
