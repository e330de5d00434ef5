"""The gate and `scavenger validate`: counts reconcile, thresholds decide, outputs written, exit codes 0/3/2.

The gate is the validate pipeline (pipelines/validate.py over pipelines/common.run_window): one pass per day with
the row rules as flags, verdicts as pure functions of the merged statistics. Here it runs on DuckDB over small
numpy-drawn logs (no JVM); the CLI runs with its default engine (DuckDB for local Parquet)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scavenger import registry
from scavenger.checks.testing import deterministic_decisions, synthetic_logs
from scavenger.cli import main
from scavenger.engines.duck import DuckDBEngine
from scavenger.errors import DataCheckFailed
from scavenger.pipelines.common import GateConfig, describe_inputs, run_window
from scavenger.pipelines.validate import validate
from scavenger.statistics.scan import ScanPlan, StatsConfig

FIRST_ADS = {1: "s1_a0", 2: "s2_a0", 3: "s3_a0"}


def _inject_bad(table: pa.Table, n_bad: int) -> pa.Table:
    """Zero the first slot's propensity on n_bad events (ZERO_PROPENSITY)."""
    bad_ids = {f"13-{i}" for i in range(n_bad)}
    rows = table.to_pylist()
    for r in rows:
        if r["event_id"] in bad_ids:
            r["slots"][0]["propensity"] = 0.0
    return pa.Table.from_pylist(rows, schema=table.schema)


def _write_partitioned(table: pa.Table, root: Path) -> str:
    """Parquet partitioned by dt (pyarrow: the layout every writer produces)."""
    for day in sorted(set(table["dt"].to_pylist())):
        part = table.filter(pa.compute.equal(table["dt"], pa.scalar(day))).drop(["dt"])
        path = root / f"dt={day.isoformat()}"
        path.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, path / "part-0.parquet")
    return str(root)


@pytest.fixture(scope="module")
def slotted():
    df, _ = synthetic_logs(None, n=3000, mode="uniform_slotted", k=3, slot_size=4, seed=13, days=2)
    return df


@pytest.fixture(scope="module")
def data_dir(slotted, tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    _write_partitioned(slotted, root / "slotted" / "logs")
    dec = deterministic_decisions(None, slotted, "first_ads", FIRST_ADS)
    _write_partitioned(dec, root / "slotted" / "decisions")
    ranked, _ = synthetic_logs(None, n=3000, mode="uniform_ranked", n_ads=8, k=3, seed=12, days=2)
    _write_partitioned(ranked, root / "ranked" / "logs")
    return root


def test_gate_below_threshold_proceeds_on_clean_rows(slotted, tmp_path):
    logs = _inject_bad(slotted, 2)                     # 2 / 3000 = 0.067% < 0.1%
    dec = deterministic_decisions(None, slotted, "first_ads", FIRST_ADS)
    eng = DuckDBEngine("test")
    try:
        v = validate(eng, describe_inputs(logs, dec), ["pi"], None, GateConfig(),
                     quarantine_dir=str(tmp_path / "quarantine"), run_id="t1", docs_dir=str(tmp_path / "data_docs"))
    finally:
        eng.close()
    c = v.window.counts["logs"]
    assert (c["rows_in"], c["rows_used"], c["rows_quarantined"]) == (3000, 2998, 2)
    assert c["by_reason"] == {"ZERO_PROPENSITY": 2}
    d = v.window.counts["decisions"]                   # the 2 quarantined events take their decisions along
    assert (d["rows_in"], d["rows_used"], d["rows_quarantined"]) == (3000, 2998, 2)
    assert d["by_reason"] == {"EVENT_QUARANTINED": 2}
    assert not v.failed, v.message
    stats = v.window.stats                             # the statistics count the clean rows only
    assert stats.table("log_summary")["n_events"].sum() == 2998
    assert stats.table("policy_events")["n_events"].sum() == 2998
    assert {c_: v.window.check_verdicts[c_] for c_ in registry.get("pi").checks} == \
        {"b": "pass", "c": "pass", "d": "pass", "e": "pass", "f": "pass"}
    assert v.window.check_verdicts["quarantine"] == "warn"
    q = pd.read_parquet(tmp_path / "quarantine" / "logs")
    assert len(q) == 2 and (q["run_id"] == "t1").sum() == 2
    frame = v.verdict_frame()                          # what `validate` writes as OUT/validation
    assert list(frame.columns) == ["check", "scope", "statistic", "threshold", "verdict", "message"]
    assert len(frame) == len(v.verdicts) == len(v.window.verdicts) + len(v.ge_rows)
    assert (tmp_path / "data_docs" / "index.html").exists()
    ge = frame[frame["check"] == "ge.impression_log.daily"]
    zero = ge[ge["scope"].str.contains("column=ZERO_PROPENSITY")]
    assert list(zero["verdict"]) == ["warn"]           # GE saw the 2 bad rows; the gate decides
    # the checks pi relies on were run, and only those (plus the quarantine)
    assert v.checks == registry.checks_for(["slate_pi"]) == ("b", "c", "d", "e", "f")


def test_gate_above_threshold_fails(slotted):
    logs = _inject_bad(slotted, 4)
    eng = DuckDBEngine("test")
    try:
        with pytest.raises(DataCheckFailed, match="4 of 3000 rows quarantined") as exc:
            run_window(eng, describe_inputs(logs), (), ScanPlan(False, False, False),
                       GateConfig(great_expectations=False), StatsConfig())
        (q,) = [r for r in exc.value.verdicts if r["check"] == "quarantine"]
        assert q["verdict"] == "fail" and q["statistic"] == pytest.approx(4 / 3000, rel=1e-12)
        assert exc.value.exit_code == 3
        report_only = run_window(eng, describe_inputs(logs), (), ScanPlan(False, False, False),
                                 GateConfig(great_expectations=False, mode="report"), StatsConfig())
    finally:
        eng.close()
    assert report_only.check_verdicts == {"quarantine": "fail"}   # marked, not raised
    assert report_only.counts["logs"]["rows_used"] == 2996


def _run(argv):
    return main(["validate", *argv])


def test_cli_exit_codes(data_dir, tmp_path):
    s = data_dir / "slotted"
    out = tmp_path / "ok"
    assert _run(["--logs", str(s / "logs"), "--decisions", str(s / "decisions"), "--out", str(out),
                 "--run-id", "cli1"]) == 0
    res = json.loads((out / "result.json").read_text())
    c = res["counts"]["logs"]
    assert c["rows_in"] == c["rows_used"] + c["rows_quarantined"] == 3000
    assert res["summary"]["checks"]["d"] == "pass" and res["exit_code"] == 0
    assert any(v["check"] == "a.context_independence" for v in res["verdicts"])
    assert Path(res["outputs"]["data_docs"]).exists()
    assert res["engine"]["name"] == "duckdb" and res["timings_seconds"]["validate"] > 0   # the gate is timed
    assert len(pd.read_parquet(res["outputs"]["validation"])) == len(res["verdicts"])
    # nothing quarantined: no quarantine rows are written, but the tables exist (empty) for readers
    assert res["counts"]["logs"]["rows_quarantined"] == 0
    for table in ("logs", "decisions"):
        q = out / "quarantine" / table
        assert q.is_dir() and not list(q.glob("dt=*"))

    # ranked layout: sampling without replacement fails 3d -> exit 3; --no-gate reports and exits 0
    r = data_dir / "ranked"
    assert _run(["--logs", str(r / "logs"), "--out", str(tmp_path / "ranked"), "--checks", "d",
                 "--no-great-expectations"]) == 3
    res = json.loads((tmp_path / "ranked" / "result.json").read_text())
    assert res["status"] == "data_check_failed" and res["summary"]["failed_checks"] == ["d"]
    assert _run(["--logs", str(r / "logs"), "--out", str(tmp_path / "ranked2"), "--checks", "d",
                 "--no-great-expectations", "--no-gate"]) == 0

    # a window with one day only
    assert _run(["--logs", str(s / "logs"), "--out", str(tmp_path / "day"), "--from", "2026-01-02",
                 "--to", "2026-01-02", "--checks", "a,b", "--no-great-expectations"]) == 0
    res = json.loads((tmp_path / "day" / "result.json").read_text())
    assert res["counts"]["logs"]["rows_in"] == 1500


@pytest.mark.parametrize("argv", [
    ["--max-quarantine-share", "2"], ["--max-quarantine-share", "x"], ["--checks", "a,z"],
    ["--reward-max", "-1"], ["--from", "2026-13-01"], ["--cramers-v-max", "0"], ["--max-id-length", "0"],
    ["--max-id-length", "1000001"],
])
def test_cli_bad_arguments_exit_2(data_dir, tmp_path, argv):
    s = data_dir / "slotted"
    assert _run(["--logs", str(s / "logs"), "--out", str(tmp_path / "bad"), *argv]) == 2


def test_cli_missing_path_exit_2(tmp_path):
    assert _run(["--logs", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2


def test_suite_files_match_generators():
    """schemas/expectations/ holds what the generators write: the contract suites (run on the inputs' schemas,
    checks/ge_window.py) and the daily suites (on the pass's per-dt counts)."""
    from scavenger.checks.expectations import daily_suite_spec, load_suite_spec
    from scavenger.checks.ge_window import schema_suite_spec

    for name in ("impression_log", "decisions"):
        assert load_suite_spec(f"{name}.contract") == schema_suite_spec(name)
        assert load_suite_spec(f"{name}.daily") == json.loads(json.dumps(daily_suite_spec(name)))
