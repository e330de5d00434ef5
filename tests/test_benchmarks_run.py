"""Smoke test of benchmarks/run at a tiny scale (3 days x 1k events, K = 3; a 31-day set of 100 events a day):
every step runs on the DuckDB engine (the default for local files) beside both hand-written reference queries, the
CSV and JSON hold the expected rows, the references' PI equals scavenger's slate_pi, and the 31-day window after one
new day reads exactly that day and gives the numbers of a full rescan."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.cluster_util import fast_jvm_env

# its own processes: two `scavenger generate` (Spark), the Spark reference query, a few DuckDB evaluates
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "run"
EVENTS, DAYS, INC_PER_DAY = 3000, 3, 100
EXPECTED = {("evaluate", "duckdb", 1), ("evaluate", "duckdb", 8), ("reference", "duckdb", 1),
            ("reference", "spark", 1), ("reference", "duckdb", 8), ("reference", "spark", 8),
            ("incremental", "duckdb", 1), ("one_day", "duckdb", 1), ("long_row", "duckdb", 1),
            ("by_day_plain", "duckdb", 4), ("by_day", "duckdb", 4)}


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> dict:
    """benchmarks/run at the tiny scale in its own process; returns its exit code, output, CSV rows and JSON."""
    pytest.importorskip("duckdb")
    work = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, str(RUN), "--events", str(EVENTS), "--days", str(DAYS), "--positions", "3",
           "--slot-sizes", "3,4,5", "--engines", "duckdb", "--incremental-events-per-day", str(INC_PER_DAY),
           "--by-day-events-per-day", str(INC_PER_DAY), "--by-day-rounds", "1",
           "--gate", "report", "--workdir", str(work)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1200,
                          env=fast_jvm_env({**os.environ, "SCAVENGER_PROGRESS": "0"}))
    rows = payload = None
    if (work / "figures.csv").exists():
        with open(work / "figures.csv", newline="") as fh:
            rows = list(csv.DictReader(fh))
    if (work / "figures.json").exists():
        payload = json.loads((work / "figures.json").read_text())
    return {"returncode": proc.returncode, "stdout": proc.stdout, "output": proc.stdout[-3000:] + proc.stderr[-3000:],
            "work": work, "rows": rows, "payload": payload}


def _by_key(bench) -> dict:
    return {(r["step"], r["engine"], r["policies"]): r for r in bench["payload"]["rows"]}


def test_run_exits_0_with_every_step_in_csv_and_json(bench):
    assert bench["returncode"] == 0, bench["output"]
    rows, csv_rows = bench["payload"]["rows"], bench["rows"]
    assert {(r["step"], r["engine"], r["policies"]) for r in rows} == EXPECTED
    assert len(rows) == len(EXPECTED) == len(csv_rows)
    assert list(csv_rows[0].keys()) == ["step", "engine", "policies", "events", "seconds", "peak_mb", "value", "note"]
    for r, c in zip(rows, csv_rows):
        assert (c["step"], c["engine"], c["policies"]) == (r["step"], r["engine"], str(r["policies"]))
        assert r["events"] == EVENTS
        assert r["seconds"] > 0 and float(c["seconds"]) == r["seconds"]
        assert r["peak_mb"] > 0                   # the process tree's resident memory was sampled
    notes = {k: r["note"] for k, r in _by_key(bench).items()}
    assert notes[("evaluate", "duckdb", 1)] == "engine duckdb"
    assert notes[("evaluate", "duckdb", 8)] == "8 policies"   # eight targets really are eight policies
    assert notes[("long_row", "duckdb", 1)] == "K = 64"       # the one 64-slot row really widened the logs
    for e in ("duckdb", "spark"):                             # the references group by policy
        assert notes[("reference", e, 1)].endswith(", policies 1") and notes[("reference", e, 8)].endswith(
            ", policies 8")
    assert bench["payload"]["config"]["events"] == EVENTS and bench["payload"]["machine"]["cores"] >= 1


def test_verdicts_compare_each_figure_with_its_target(bench):
    verdicts = bench["payload"]["verdicts"]
    assert verdicts[0] == "targets:"
    for what in ("evaluate (default engine for local files: DuckDB) / hand-written Spark query",
                 "evaluate --engine duckdb / hand-written DuckDB query", "8 policies / 1 policy (duckdb)",
                 "31-day window after one new day / one-day evaluate (duckdb)",
                 "one 64-slot row added / the same logs without it (duckdb)",
                 "30 days --by-day --baseline logging / the same evaluate without (duckdb"):
        line = next((v for v in verdicts if what in v), None)
        assert line is not None and line.rstrip().endswith(("-> met", "-> not met")), (what, verdicts)
        assert line in bench["stdout"]
    for what in ("the hand-written duckdb query itself, 8 policies / 1 policy",
                 "evaluate / hand-written duckdb query, both with 8 policies"):
        line = next((v for v in verdicts if what in v), None)
        assert line is not None and line.rstrip().endswith("x") and line in bench["stdout"], (what, verdicts)


def test_reference_queries_equal_scavenger_slate_pi(bench):
    rows = _by_key(bench)
    pi = rows[("evaluate", "duckdb", 1)]["value"]
    assert isinstance(pi, float) and 0 < pi < 3                  # 3 slots, click rewards
    assert rows[("reference", "duckdb", 1)]["value"] == pytest.approx(pi, rel=1e-9)
    assert rows[("reference", "spark", 1)]["value"] == pytest.approx(pi, rel=1e-9)
    result = json.loads((bench["work"] / "ev1-duckdb" / "result.json").read_text())
    assert result["status"] == "ok" and result["engine"]["name"] == "duckdb"
    assert result["counts"]["logs"]["rows_used"] == EVENTS and result["counts"]["policies"] == 1
    ev8 = json.loads((bench["work"] / "ev8-duckdb" / "result.json").read_text())
    assert ev8["counts"]["policies"] == 8 and ev8["counts"]["logs"]["rows_used"] == EVENTS
    # with eight policies each reference reports its first policy in name order: scavenger's slate_pi of it
    est = pd.read_parquet(bench["work"] / "ev8-duckdb" / "estimates")
    pis = est[est["estimator"] == "slate_pi"].set_index("policy_id")["value"].sort_index()
    assert len(pis) == 8
    for e in ("duckdb", "spark"):
        assert rows[("reference", e, 8)]["value"] == pytest.approx(pis.iloc[0], rel=1e-9)


def test_incremental_reads_exactly_the_new_day_and_equals_a_rescan(bench, tmp_path):
    from scavenger.cli import main

    inc = _by_key(bench)[("incremental", "duckdb", 1)]
    assert inc["note"] == f"days read 1 of 31, rows read {INC_PER_DAY}"
    work = bench["work"]
    first30 = json.loads((work / "inc30-duckdb" / "result.json").read_text())["counts"]
    assert (first30["days"], first30["days_scanned"]) == (30, 30)
    window = json.loads((work / "inc31-duckdb" / "result.json").read_text())["counts"]
    assert (window["days"], window["days_scanned"], window["days_loaded"]) == (31, 1, 30)
    assert window["rows_read"] == INC_PER_DAY and window["logs"]["rows_used"] == 31 * INC_PER_DAY
    # merging the stored days gives the numbers of a full rescan of the 31 days
    data = next(work.glob(f"inc{INC_PER_DAY}-k3"))
    assert main(["evaluate", "--logs", str(data / "gen" / "logs"), "--decisions", str(data / "dec1"), "--gate",
                 "report", "--out", str(tmp_path / "rescan")]) == 0
    keys = ["policy_id", "estimator", "interval_kind"]
    merged = pd.read_parquet(work / "inc31-duckdb" / "estimates").sort_values(keys).reset_index(drop=True)
    rescan = pd.read_parquet(tmp_path / "rescan" / "estimates").sort_values(keys).reset_index(drop=True)
    assert merged[keys].values.tolist() == rescan[keys].values.tolist() and len(merged) > 0
    for col in ("value", "std_error", "ci_low", "ci_high"):
        pd.testing.assert_series_equal(merged[col], rescan[col], rtol=1e-9, atol=1e-12, obj=col)
