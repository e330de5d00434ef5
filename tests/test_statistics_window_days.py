"""A window's days merged from the statistics store, and the rows its intervals' bounds come from, against plain numpy
(DuckDB, small data): a stored day of fewer positions than the window read --by-day, and a quarantined row that
must not widen the intervals of the clean rows."""
from __future__ import annotations

import copy
import datetime as dt
import json
import math

import numpy as np
import pandas as pd

from helpers.reference import build_random, clean, joined, slate_r, write_parquet
from scavenger.cli import main

GATE = ["--engine", "duckdb", "--gate", "report", "--max-quarantine-share", "1", "--no-great-expectations"]


def _run(root, out, *extra):
    args = ["evaluate", "--logs", f"{root}/logs", "--decisions", f"{root}/decisions", *GATE, "--out", str(out)]
    assert main(args + list(extra)) in (0, 3)
    return json.loads((out / "result.json").read_text())


def _numpy_pi(events, decisions, policy, K):
    """mean(r G), G = 1 - K + sum_k Y_k, Y_k = pi_k(a_k)/mu_k (1 at a position the row does not hold), over the
    policy's events with every held propensity."""
    dec = {d["event_id"]: d["slots"] for d in decisions if d["policy_id"] == policy}
    terms = []
    for ev in events:
        if ev["event_id"] not in dec or any(s["propensity"] is None for s in ev["slots"]):
            continue
        pi = {}
        for x in dec[ev["event_id"]]:
            pi[(x["position"], x["ad_id"])] = pi.get((x["position"], x["ad_id"]), 0.0) + x["probability"]
        y = np.ones(K)
        for s in ev["slots"]:
            y[s["position"] - 1] = pi.get((s["position"], s["ad_id"]), 0.0) / s["propensity"]
        terms.append(slate_r(ev) * (1 - K + y.sum()))
    return float(np.mean(terms))


def test_by_day_from_the_store_reads_a_day_of_fewer_positions(tmp_path):
    """Two days of K = 2 stored one run each, then a day of K = 3: the window from the store --by-day (K = 3) gives
    each K = 2 day the PI of plain numpy over that day's rows (Y_3 = 1), as the cold window's --by-day does. Before,
    the stored day's slate moments kept their 2 positions beside the window's 3 weight bounds: internal error
    (ValueError: operands could not be broadcast together with shapes (2,) (3,))."""
    data = joined(build_random(7, K=2, n_ads=6, days=(0, 1), per_day=80, with_nulls=False),
                  build_random(8, K=3, n_ads=6, days=(2,), per_day=80, with_nulls=False))
    for ev in data["logs"]:      # weights of at most 2: enough events a day for the PI family's interval
        for s in ev["slots"]:
            s["propensity"] = 0.5
    write_parquet(data, str(tmp_path))
    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        _run(tmp_path, tmp_path / f"d{day}", "--from", day, "--to", day, "--stats-dir", str(tmp_path / "s"))
    window = ["--from", "2026-03-01", "--to", "2026-03-03", "--by-day", "--estimators", "pi"]
    warm = _run(tmp_path, tmp_path / "warm", *window, "--stats-dir", str(tmp_path / "s"))
    _run(tmp_path, tmp_path / "cold", *window)
    assert warm["counts"]["days_scanned"] == 0
    by = {name: pd.read_parquet(tmp_path / name / "estimates_by_day") for name in ("warm", "cold")}
    events, decisions = clean(data)
    for day in (dt.date(2026, 3, 1), dt.date(2026, 3, 2)):
        want = _numpy_pi([e for e in events if e["dt"] == day], decisions, "sto", 2)
        for name, est in by.items():
            got = est[(est["policy_id"] == "sto") & (est["estimator"] == "slate_pi")
                      & (pd.to_datetime(est["dt"]).dt.date == day)]
            assert len(got) == 1 and got["identified"].all(), (name, day)
            assert abs(float(got["value"].iloc[0]) - want) <= 1e-9 * max(1.0, abs(want)), (name, day, got, want)


def test_a_quarantined_row_widens_no_interval(tmp_path):
    """Clean rows of K = 2 with rewards in the declared [0, 3], plus one row of three slots (a duplicate position)
    and one with a slot reward of 8, both quarantined. The IPS interval's ends are clipped to the slate reward's
    range [0, 2 x 3] = [0, 6] (no clean row holds more than 2 slots of at most 3), as without the two rows; before,
    the quarantined rows' 3 slots and reward 8 gave the range [0, 24] (log_counts' max_slots and max_reward were
    over every row)."""
    data = build_random(11, K=2, n_ads=4, days=(0,), per_day=60, with_nulls=False)
    for ev in data["logs"]:
        for s in ev["slots"]:
            s["reward"] = 3.0 * s["reward"]
        ev["slate_reward"] = None
    write_parquet(data, str(tmp_path / "clean"))
    bad = copy.deepcopy(data)
    long_row = copy.deepcopy(bad["logs"][0])
    long_row["event_id"], long_row["slots"] = "bad-long", long_row["slots"] + [dict(long_row["slots"][0])]
    big = copy.deepcopy(bad["logs"][1])
    big["event_id"] = "bad-big"
    big["slots"][0]["reward"] = 8.0
    bad["logs"] += [long_row, big]
    write_parquet(bad, str(tmp_path / "bad"))
    flags = ["--reward-max", "3", "--estimators", "ips"]
    res = {name: _run(tmp_path / name, tmp_path / f"out-{name}", *flags) for name in ("clean", "bad")}
    assert res["bad"]["counts"]["logs"]["rows_quarantined"] == 2 and res["clean"]["counts"]["logs"]["rows_quarantined"] == 0
    est = {name: pd.read_parquet(tmp_path / f"out-{name}" / "estimates").set_index(["policy_id", "estimator"])
           for name in res}
    events, _ = clean(data)
    held = max(len(e["slots"]) for e in events)
    assert held == 2
    rmax = held * 3.0
    for key in est["clean"].index:
        a, b = est["clean"].loc[key], est["bad"].loc[key]
        for col in ("value", "ci_low", "ci_high"):
            x, y = float(a[col]), float(b[col])
            assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12 * max(1.0, abs(x)), (key, col, x, y)
        if b["interval_kind"] == "el":
            assert 0.0 <= float(b["ci_low"]) and float(b["ci_high"]) <= rmax, (key, b["ci_low"], b["ci_high"])


def _mixed_k_window(tmp_path):
    """Days 03-01 and 03-02 of K = 2, day 03-03 of K = 3 over the same ads (ranked: any ad at any position)."""
    write_parquet(joined(build_random(21, K=2, n_ads=6, days=(0, 1), per_day=150, with_nulls=False),
                         build_random(22, K=3, n_ads=6, days=(2,), per_day=150, with_nulls=False)), str(tmp_path))


def test_a_by_day_row_equals_that_day_alone_when_the_window_has_more_positions(tmp_path):
    """The window's --by-day rows of a K = 2 day (the window has K = 3) equal a run of that day alone, for every
    estimator: the day is read with its own K. Before, the day took the window's K: its ADC vector lacked C_3 (no row
    of that day holds position 3), so factored was not identified there though the day alone identifies it, and the
    slate moments were padded to 3 positions."""
    _mixed_k_window(tmp_path)
    _run(tmp_path, tmp_path / "window", "--from", "2026-03-01", "--to", "2026-03-03", "--by-day")
    _run(tmp_path, tmp_path / "alone", "--from", "2026-03-02", "--to", "2026-03-02")
    keys = ["policy_id", "estimator", "interval_kind"]
    by = pd.read_parquet(tmp_path / "window" / "estimates_by_day")
    by = by[pd.to_datetime(by["dt"]).dt.date == dt.date(2026, 3, 2)].sort_values(keys).reset_index(drop=True)
    alone = pd.read_parquet(tmp_path / "alone" / "estimates").sort_values(keys).reset_index(drop=True)
    assert by[keys].astype(str).values.tolist() == alone[keys].astype(str).values.tolist()
    factored = alone[(alone["estimator"] == "factored") & (alone["policy_id"] == "det")]
    assert len(factored) and factored["identified"].all()       # the case the window's K hid
    assert by["identified"].tolist() == alone["identified"].tolist()
    for col in ("value", "std_error", "ci_low", "ci_high"):
        x, y = by[col].to_numpy(float), alone[col].to_numpy(float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), col
        ok = ~np.isnan(x)
        np.testing.assert_allclose(x[ok], y[ok], rtol=1e-9, atol=1e-12, err_msg=col)
