"""Smoke test of benchmarks/run at a tiny scale (3 days x 3k events, K = 3): every step runs, the CSV holds the
expected rows, DuckDB's one-query PI equals scavenger's slate_pi, and the incremental window scans one day."""
from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # one Spark JVM of its own plus a DuckDB query: about a minute on 2 idle cores

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "run"


def _bench_spec(work: Path):
    """benchmarks/run at the tiny scale; started in the background when collection ends (tests/conftest.py)."""
    import importlib.util

    from conftest import BackgroundSpec

    if importlib.util.find_spec("duckdb") is None:
        return None    # the fixture skips
    cmd = [sys.executable, str(RUN), "--events", "9000", "--days", "3", "--positions", "3", "--ads", "50",
           "--policies", "1,8", "--steps", "all", "--workdir", str(work), "--single-process",
           "--no-great-expectations", "--master", os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
           "--driver-memory", "1g", "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.showConsoleProgress=false"]
    return BackgroundSpec(cmd=cmd, cwd=REPO, timeout=900)


BACKGROUND = {"bench": _bench_spec}


@pytest.fixture(scope="module")
def bench(background_run):
    pytest.importorskip("duckdb")
    run = background_run("bench")
    assert run.returncode == 0, run.tail()
    work = run.workdir
    with open(work / "figures.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    payload = json.loads((work / "figures.json").read_text())
    return {"work": work, "rows": rows, "payload": payload, "stdout": run.stdout}


def _rows(rows, step, mode=None, policies=None):
    return [r for r in rows if r["step"] == step and (mode is None or r["mode"] == mode)
            and (policies is None or r["policies"] == str(policies))]


def test_csv_has_every_step_and_mode(bench):
    rows = bench["rows"]
    assert not [r for r in rows if r["mode"] == "failed"], [r["note"] for r in rows if r["mode"] == "failed"]
    expected = {("generate", "", "cold"), ("generate", "", "derived"), ("validate", "4", "cold"),
                ("validate", "4", "warm"), ("adc", "0", "cold"), ("adc", "0", "warm"),
                ("evaluate", "1", "cold"), ("evaluate", "1", "warm"), ("evaluate", "8", "cold"),
                ("evaluate", "8", "warm"), ("incremental", "1", "incremental"),
                ("duckdb", "1", "cold"), ("duckdb", "1", "warm")}
    got = {(r["step"], "" if r["step"] == "generate" else r["policies"], r["mode"]) for r in rows}
    assert expected <= got, expected - got
    for r in rows:
        assert r["K"] == "3" and r["days"] == "3"
        assert float(r["seconds"]) > 0
        if r["step"] in ("validate", "adc", "evaluate", "incremental", "duckdb"):
            assert int(r["events"]) == 9000
            assert float(r["events_per_s"]) > 0
        if r["step"] != "duckdb":
            assert float(r["driver_jvm_peak_mb"]) > 0
        assert float(r["driver_python_peak_mb"]) > 0
    assert set(bench["rows"][0].keys()) >= {"events", "days", "K", "step", "policies", "mode", "seconds",
                                            "events_per_s", "days_scanned", "driver_jvm_peak_mb",
                                            "driver_python_peak_mb", "executor_peak_mb", "value_check", "note"}
    # eight policies really are eight different targets, each with all its estimators
    ev8 = [r for r in bench["payload"]["records"] if r["step"] == "evaluate" and r["policies"] == 8]
    assert ev8 and all(r["n_estimates"] >= 8 * 6 for r in ev8)
    assert "Issue targets" in bench["stdout"]


def test_duckdb_pi_equals_scavenger_slate_pi(bench):
    work = bench["work"]
    ref = json.loads(next((work / "data").glob("*/results/evaluate-p1.json")).read_text())
    dd = [r for r in bench["payload"]["records"] if r["step"] == "duckdb"]
    assert len(dd) == 2
    for r in dd:
        assert r["events"] == ref["slate_pi_n"] == 9000
        assert r["duckdb_value"] == pytest.approx(ref["slate_pi"], rel=1e-9)
        assert r["duckdb_std_error"] == pytest.approx(ref["slate_pi_se"], rel=1e-9)
        assert r["rel_diff"] < 1e-9


def test_incremental_scans_exactly_the_new_day(bench):
    inc = _rows(bench["rows"], "incremental")
    assert len(inc) == 1
    for r in inc:
        assert r["days_scanned"] == "1", r
        assert "scanned 2026-01-03" in r["note"]
        # merging stored days gives the numbers of a full rescan
        rel = float(r["value_check"].split("rel_diff=")[1].split()[0])
        assert rel < 1e-9
    for r in _rows(bench["rows"], "evaluate"):
        assert r["days_scanned"] == "3"   # cold and warm: empty store, full rescan
