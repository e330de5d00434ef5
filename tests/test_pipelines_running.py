"""`evaluate --by-day --baseline` (issue 59), in process on DuckDB: running/ rows equal fresh runs over each prefix
window (1e-12), differences equal numpy on the raw rows (against `logging` and against another target), a baseline
absent from --decisions exits 2 naming it, and the summary shows the differences."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from helpers.reference import build_random, clean, slate_r, write_parquet
from scavenger.cli import main

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
COLS = ("value", "ci_low", "ci_high", "cs_low", "cs_high", "n_events")
KEY = ["policy_id", "estimator"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("running")
    data = build_random(seed=7, K=2, n_ads=4, days=(0, 1, 2), per_day=400, logging_policies=("lp_a",),
                        with_nulls=False)
    logs, decs = write_parquet(data, str(root / "in"))
    return data, logs, decs, root


def _evaluate(logs, decs, out, stats, *extra, estimators="slate,ranking") -> int:
    return main(["evaluate", "--engine", "duckdb", "--gate", "off", "--logs", logs, "--decisions", decs,
                 "--stats-dir", str(stats), "--out", str(out), "--estimators", estimators, *extra])


def _read(path) -> pd.DataFrame:
    parts = sorted(path.glob("dt=*"))
    if not parts:
        return pd.read_parquet(path)
    return pd.concat([pd.read_parquet(p).assign(dt=p.name.split("=", 1)[1]) for p in parts], ignore_index=True)


@pytest.fixture(scope="module", params=["logging", "sto"])
def full(request, dataset):
    data, logs, decs, root = dataset
    out = root / f"full_{request.param}"
    assert _evaluate(logs, decs, out, root / f"st_{request.param}", "--by-day", "--baseline", request.param) == 0
    return request.param, out


def _close(a: pd.DataFrame, b: pd.DataFrame, cols=COLS) -> None:
    assert len(a) == len(b) and len(a)
    for c in cols:
        x, y = a[c].to_numpy(dtype=float), b[c].to_numpy(dtype=float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), c
        ok = ~np.isnan(x)
        assert np.allclose(x[ok], y[ok], rtol=1e-12, atol=1e-12), (c, x[ok], y[ok])


def test_running_equals_fresh_prefix_runs(full, dataset):
    baseline, out = full
    data, logs, decs, root = dataset
    running = _read(out / "running")
    assert set(running["dt"]) == set(DAYS)
    assert running.groupby(["policy_id", "baseline_id", "estimator", "dt"], dropna=False).size().max() == 1
    for i, day in enumerate(DAYS):
        fresh = root / f"prefix_{baseline}_{i}"
        assert _evaluate(logs, decs, fresh, root / f"st_prefix_{baseline}_{i}", "--from", DAYS[0], "--to", day,
                         "--baseline", baseline) == 0
        at = running[running["dt"] == day]
        est = pd.read_parquet(fresh / "estimates")
        est = est[est["interval_kind"] != "bound"].drop_duplicates(KEY)
        plain = at[at["baseline_id"].isna()].merge(est[KEY], on=KEY)
        _close(plain.sort_values(KEY).reset_index(drop=True),
               est.merge(plain[KEY], on=KEY).sort_values(KEY).reset_index(drop=True))
        assert set(plain["window"]) == {f"{DAYS[0]}..{day}"}
        diff = pd.read_parquet(fresh / "differences").sort_values(KEY).reset_index(drop=True)
        mine = at[at["baseline_id"] == baseline].sort_values(KEY).reset_index(drop=True)
        _close(mine, diff)
    # the last day's running rows are the window's own estimates
    last = running[(running["dt"] == DAYS[-1]) & running["baseline_id"].isna()]
    est = pd.read_parquet(out / "estimates")
    est = est[est["interval_kind"] != "bound"].drop_duplicates(KEY)
    _close(last.sort_values(KEY).reset_index(drop=True),
           est.merge(last[KEY], on=KEY).sort_values(KEY).reset_index(drop=True))
    # the band only narrows as days are added (the running intersection)
    for _, g in running[running["cs_low"].notna()].groupby(["policy_id", "baseline_id", "estimator"],
                                                          dropna=False):
        g = g.sort_values("dt")
        assert (np.diff(g["cs_low"].to_numpy(float)) >= -1e-15).all()
        assert (np.diff(g["cs_high"].to_numpy(float)) <= 1e-15).all()


def test_running_of_scavenging_and_the_adc_family_equals_fresh_prefix_runs(dataset):
    """Their prefixes read shortcuts a fresh run does not take (the direct approach's sums of every prefix from one
    statement; the ADC of the method used only, no ADC table being written): the same numbers all the same."""
    data, logs, decs, root = dataset
    families = "scavenging,adc_based"
    out = root / "sa_full"
    assert _evaluate(logs, decs, out, root / "st_sa", "--by-day", estimators=families) == 0
    running = _read(out / "running")
    by_day = _read(out / "estimates_by_day")
    shown = 0
    for i, day in enumerate(DAYS):
        fresh = root / f"sa_prefix_{i}"
        assert _evaluate(logs, decs, fresh, root / f"st_sa_{i}", "--from", DAYS[0], "--to", day,
                         estimators=families) == 0
        est = pd.read_parquet(fresh / "estimates")
        est = est[est["interval_kind"] != "bound"].drop_duplicates(KEY).sort_values(KEY).reset_index(drop=True)
        at = running[running["dt"] == day].sort_values(KEY).reset_index(drop=True)
        _close(at, est, ("value", "std_error", "ci_low", "ci_high", "n_events"))
        shown += int(np.isfinite(at["value"].to_numpy(float)).sum())
        one = root / f"sa_day_{i}"      # and each by-day row, a fresh run over its day
        assert _evaluate(logs, decs, one, root / f"st_sa_day_{i}", "--from", day, "--to", day,
                         estimators=families) == 0
        est = pd.read_parquet(one / "estimates").sort_values(KEY + ["interval_kind"]).reset_index(drop=True)
        mine = by_day[by_day["dt"] == day].sort_values(KEY + ["interval_kind"]).reset_index(drop=True)
        _close(mine, est, ("value", "std_error", "ci_low", "ci_high", "n_events"))
    assert shown >= 3 * 3        # identified rows: scavenging's and factored's or reorder's, on every prefix


def _events(data) -> dict:
    """{policy: {event_id: (r, [Y_1..Y_K])}} over the clean events, as the pass computes them."""
    events, decisions = clean(data)
    by_id = {ev["event_id"]: ev for ev in events}
    K = max(s["position"] for ev in events for s in ev["slots"])
    out: dict = {}
    for d in decisions:
        ev = by_id[d["event_id"]]
        Y = []
        for k in range(1, K + 1):
            at = [s for s in ev["slots"] if s["position"] == k]
            if not at:
                Y.append(1.0)
                continue
            pik = sum(x["probability"] for x in d["slots"] if x["position"] == k and x["ad_id"] == at[0]["ad_id"])
            Y.append(pik / at[0]["propensity"])
        out.setdefault(d["policy_id"], {})[d["event_id"]] = (slate_r(ev), np.array(Y))
    return out


def test_differences_equal_numpy_on_raw_rows(full, dataset):
    baseline, out = full
    data = dataset[0]
    diff = pd.read_parquet(out / "differences")
    ev = _events(data)
    est = pd.read_parquet(out / "estimates").drop_duplicates(KEY).set_index(KEY)
    K = len(next(iter(next(iter(ev.values())).values()))[1])
    checked = 0
    for row in diff.itertuples():
        if not math.isfinite(row.value):
            assert row.reason
            continue
        a = ev[row.policy_id]
        if baseline == "logging":
            ids = sorted(a)
            r = np.array([a[i][0] for i in ids])
            Y = np.array([a[i][1] for i in ids])
            x = {"slate_pi": r * (1 - K + Y.sum(1)), "slate_ips": r * Y.prod(1)}.get(row.estimator)
            d = None if x is None else x - r
            # every difference: the estimate minus the logs' mean reward on the same events
            assert row.value == pytest.approx(est.loc[(row.policy_id, row.estimator), "value"] - r.mean(),
                                              rel=1e-9, abs=1e-12)
        else:
            b = ev[baseline]
            ids = sorted(set(a) & set(b))
            r = np.array([a[i][0] for i in ids])
            Ya, Yb = np.array([a[i][1] for i in ids]), np.array([b[i][1] for i in ids])
            d = {"slate_pi": r * (Ya.sum(1) - Yb.sum(1)), "slate_ips": r * (Ya.prod(1) - Yb.prod(1))}.get(
                row.estimator)
        assert row.n_events == len(ids)
        if d is not None:
            assert row.value == pytest.approx(d.mean(), rel=1e-9, abs=1e-12)
            assert row.std_error == pytest.approx(d.std(ddof=1) / math.sqrt(len(d)), rel=1e-9)
            checked += 1
        if math.isfinite(row.cs_low):        # within the difference's range [rmin - rmax, rmax - rmin] = [-2, 2]
            assert -2.0 <= row.cs_low <= row.cs_high <= 2.0
    assert checked >= 2
    assert set(diff["baseline_id"]) == {baseline}
    assert baseline not in set(diff["policy_id"])


def test_baseline_absent_from_decisions_exits_2(dataset, capsys):
    data, logs, decs, root = dataset
    code = _evaluate(logs, decs, root / "absent", root / "st_absent", "--baseline", "no_such_policy")
    assert code == 2        # the decisions' files name their policies (one column read): before any engine starts
    err = capsys.readouterr().err
    assert "no_such_policy" in err and "policies read: " in err and "det" in err.split("policies read: ")[1]
    assert not (root / "st_absent").exists() and not (root / "absent" / "estimates").exists()
    code = _evaluate(logs, decs, root / "absent2", root / "st_absent", "--baseline", "no_such_policy",
                     "--policies", "det")        # not among --policies: before any engine starts
    assert code == 2
    assert "no_such_policy" in capsys.readouterr().err
    assert not (root / "absent2" / "estimates").exists()


def test_summary_shows_the_differences(dataset, capsys):
    data, logs, decs, root = dataset
    assert _evaluate(logs, decs, root / "summary", root / "st_logging", "--baseline", "logging") == 0
    out = capsys.readouterr().out
    assert "minus logging (value, interval, anytime-valid sequence):" in out
    assert "slate_pi" in out.split("minus logging", 1)[1]


def test_api_baseline_keyword(dataset):
    import scavenger
    from scavenger.errors import UsageError

    data, logs, decs, root = dataset
    res = scavenger.evaluate(logs, decs, estimators=["slate"], baseline="logging", by_day=True, gate="off",
                             engine="duckdb")
    assert set(res.differences["baseline_id"]) == {"logging"} and res.differences["value"].notna().any()
    assert {"cs_low", "cs_high"} <= set(res.pandas.columns) and set(res.running["dt"].astype(str)) == set(DAYS)
    with pytest.raises(UsageError, match="no_such_policy"):
        scavenger.evaluate(logs, decs, estimators=["pi"], baseline="no_such_policy", policies=["det"], gate="off",
                           engine="duckdb")
    # an in-memory frame of decisions names its policies too: exit 2 before any engine (engine="spark" never starts)
    import pyarrow.parquet as pq

    frame = pq.read_table(decs).to_pandas()
    with pytest.raises(UsageError, match="policies read: .*det"):
        scavenger.evaluate(logs, frame, estimators=["pi"], baseline="no_such_policy", gate="off", engine="spark")


def test_pair_statement_translates_for_every_width():
    from scavenger.engines.dialect import to_duckdb
    from scavenger.statistics.sql.pairs_tables import pair_moments

    for Kw in (0, 1, 3, 9):
        for baseline in ("sto", "b'ad \\\\ ${x} é"):
            assert to_duckdb(pair_moments(Kw, baseline), f"pair_moments Kw={Kw}")


def test_pair_moments_equal_between_engines(spark, tmp_path):
    """The pair moments (statistics/sql/pairs_tables.py) on DuckDB and Spark, rows holding positions beyond the
    wide ones included (reference.with_long_rows), equal to 1e-12."""
    from helpers.reference import with_long_rows
    from scavenger.engines import open_engine
    from scavenger.pipelines.common import describe_inputs, window_dates
    from scavenger.statistics.scan import ScanPlan, StatsConfig
    from scavenger.statistics.window import window_statistics

    write_parquet(with_long_rows(seed=21, share=0.1), str(tmp_path))
    frames = []
    for name in ("duckdb", "spark"):
        eng = open_engine(name, "test", spark=spark if name == "spark" else None)
        inputs = describe_inputs(f"{tmp_path}/logs", f"{tmp_path}/decisions")
        w = window_statistics(eng, inputs.logs, inputs.decisions, window_dates(eng, inputs), ScanPlan(),
                              StatsConfig(baseline="sto"))
        frames.append(w.table("pair_moments").sort_values(["policy_id", "fold"]).reset_index(drop=True))
        eng.close()
    a, b = frames
    assert len(a) and list(a["policy_id"]) == list(b["policy_id"]) and set(a["baseline_id"]) == {"sto"}
    assert a["n_long"].sum() > 0 and a["n"].sum() > 0
    for c in a.columns:
        if c not in ("policy_id", "baseline_id", "dt"):
            x, y = a[c].to_numpy(float), b[c].to_numpy(float)
            assert np.allclose(np.nan_to_num(x), np.nan_to_num(y), rtol=1e-12, atol=1e-15), c


def test_a_baseline_deciding_some_events_only(tmp_path):
    """Differences over the events both decide; the target's others counted as unused, with the reason."""
    data = build_random(seed=7, K=2, n_ads=4, days=(0, 1), per_day=300, logging_policies=("lp_a",), with_nulls=False)
    dropped = {d["event_id"] for d in data["decisions"] if d["policy_id"] == "sto"}
    dropped = set(sorted(dropped)[:100])
    data["decisions"] = [d for d in data["decisions"] if d["policy_id"] != "sto" or d["event_id"] not in dropped]
    logs, decs = write_parquet(data, str(tmp_path / "in"))
    assert _evaluate(logs, decs, tmp_path / "out", tmp_path / "st", "--baseline", "sto") == 0
    diff = pd.read_parquet(tmp_path / "out" / "differences")
    pi = diff[(diff["policy_id"] == "det") & (diff["estimator"] == "slate_pi")].iloc[0]
    assert pi["n_events"] == 600 - 100 and pi["n_unused"] == 100
    assert pi["unused_reasons"] == "not decided by the baseline sto: 100"
    ev = _events(data)
    a, b = ev["det"], ev["sto"]
    ids = sorted(set(a) & set(b))
    d = np.array([a[i][0] * (a[i][1].sum() - b[i][1].sum()) for i in ids])
    assert pi["value"] == pytest.approx(d.mean(), rel=1e-9)


def test_ranking_estimates_carry_their_sequence(full):
    """IIPS, RIPS and Cascade-DR rows carry a band (or the reason for none); the self-normalized forms give none,
    with the reason (estimators/ranking_sequences.py)."""
    est = pd.read_parquet(full[1] / "estimates")
    ranking = est[est["estimator"].str.startswith(("slate_iips", "slate_rips", "slate_cascade_dr", "slate_sn"))]
    ranking = ranking[ranking["identified"]]
    assert len(ranking)
    for r in ranking.itertuples():
        if r.estimator in ("slate_sniips", "slate_snrips"):
            assert math.isnan(r.cs_low) and "ratio" in r.cs_reason
        elif math.isnan(r.cs_low):
            assert r.cs_reason and "no anytime-valid construction" not in r.cs_reason, r
        else:
            assert r.cs_low <= r.cs_high and pd.isna(r.cs_reason), r
    assert ranking["cs_low"].notna().any()


def test_slotted_logs_by_day_and_running_say_why_as_a_fresh_run(tmp_path):
    """Slotted logs (each ad at one position): no ADC is identified, and a --by-day window or a running/ prefix
    says so without making the ADC table (adc_source._none_identified), in the words a fresh run uses."""
    gen = tmp_path / "gen"
    assert main(["generate", "--engine", "duckdb", "--layout", "slotted", "--days", "2", "--events-per-day", "400",
                 "--seed", "4", "--start-date", "2026-03-01", "--out", str(gen)]) == 0
    logs, decs = str(gen / "logs"), str(gen / "decisions")
    out = tmp_path / "by_day"
    assert _evaluate(logs, decs, out, tmp_path / "st", "--by-day", estimators="adc_based") == 0
    fresh = tmp_path / "fresh"
    assert _evaluate(logs, decs, fresh, tmp_path / "st_fresh", "--from", "2026-03-02", "--to", "2026-03-02",
                     estimators="adc_based") == 0
    want = pd.read_parquet(fresh / "estimates").sort_values(KEY).reset_index(drop=True)
    assert (~want["identified"]).all() and want["reason"].str.contains("pass --adc").all()
    for table in ("estimates_by_day", "running"):
        got = _read(out / table)
        got = got[got["dt"] == "2026-03-02"].sort_values(KEY).reset_index(drop=True)
        if table == "running":
            fresh2 = tmp_path / "fresh2"
            assert _evaluate(logs, decs, fresh2, tmp_path / "st_fresh2", "--from", "2026-03-01", "--to",
                             "2026-03-02", estimators="adc_based") == 0
            want = pd.read_parquet(fresh2 / "estimates").sort_values(KEY).reset_index(drop=True)
        assert list(got["reason"]) == list(want["reason"]) and len(got)
