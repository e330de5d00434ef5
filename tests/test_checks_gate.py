"""The gate and `scavenger validate`: counts reconcile, thresholds decide, outputs written, exit codes 0/3/2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from scavenger.checks import ESTIMATOR_CHECKS, GateConfig, run_gate
from scavenger.checks.testing import deterministic_decisions, synthetic_logs
from scavenger.cli import main
from scavenger.contract import write_partitioned
from scavenger.errors import DataCheckFailed


def _inject_bad(df, n_bad: int):
    """Zero the first slot's propensity on n_bad events (ZERO_PROPENSITY)."""
    bad_ids = [f"13-{i}" for i in range(n_bad)]
    slots = F.when(F.col("event_id").isin(bad_ids), F.transform(
        F.col("slots"), lambda s: s.withField("propensity", F.lit(0.0)))).otherwise(F.col("slots"))
    return df.select(*[slots.alias(c) if c == "slots" else F.col(c) for c in df.columns])


@pytest.fixture(scope="module")
def slotted(spark):
    df, _ = synthetic_logs(spark, n=3000, mode="uniform_slotted", k=3, slot_size=4, seed=13, days=2)
    return df.cache()


@pytest.fixture(scope="module")
def data_dir(spark, slotted, tmp_path_factory):
    root = tmp_path_factory.mktemp("validate")
    write_partitioned(slotted, str(root / "slotted" / "logs"))
    dec = deterministic_decisions(spark, slotted, "first_ads", {1: "s1_a0", 2: "s2_a0", 3: "s3_a0"})
    write_partitioned(dec, str(root / "slotted" / "decisions"))
    ranked, _ = synthetic_logs(spark, n=3000, mode="uniform_ranked", n_ads=8, k=3, seed=12, days=2)
    write_partitioned(ranked, str(root / "ranked" / "logs"))
    return root


def test_gate_below_threshold_proceeds_on_clean_rows(spark, slotted, tmp_path):
    logs = _inject_bad(slotted, 2)                     # 2 / 3000 = 0.067% < 0.1%
    dec = deterministic_decisions(spark, slotted, "first_ads", {1: "s1_a0", 2: "s2_a0", 3: "s3_a0"})
    gate = run_gate(spark, logs, dec, checks=ESTIMATOR_CHECKS["pi"],
                    config=GateConfig(out_dir=str(tmp_path), run_id="t1"))
    try:
        c = gate.counts["logs"]
        assert (c["rows_in"], c["rows_used"], c["rows_quarantined"]) == (3000, 2998, 2)
        assert c["by_reason"] == {"ZERO_PROPENSITY": 2}
        d = gate.counts["decisions"]                   # the 2 quarantined events take their decisions along
        assert (d["rows_in"], d["rows_used"], d["rows_quarantined"]) == (3000, 2998, 2)
        assert d["by_reason"] == {"EVENT_QUARANTINED": 2}
        assert not gate.failed, gate.message
        assert gate.clean_logs.count() == 2998 and gate.clean_decisions.count() == 2998
        assert gate.verdicts_for("pi") == {"b": "pass", "c": "pass", "d": "pass", "e": "pass"}
        assert gate.check_verdicts["quarantine"] == "warn"
        q = spark.read.parquet(str(tmp_path / "quarantine" / "logs"))
        assert q.count() == 2 and q.where(F.col("run_id") == "t1").count() == 2
        v = spark.read.parquet(str(tmp_path / "validation"))
        assert v.columns == ["check", "scope", "statistic", "threshold", "verdict", "message"]
        assert v.count() == len(gate.verdicts)
        assert (tmp_path / "data_docs" / "index.html").exists()
        ge = gate.verdicts[gate.verdicts["check"] == "ge.impression_log.daily"]
        zero = ge[ge["scope"].str.contains("column=ZERO_PROPENSITY")]
        assert list(zero["verdict"]) == ["warn"]       # GE saw the 2 bad rows; the gate decides
        # every phase is timed (result.json of validate shows them)
        assert {"rules_logs", "rules_decisions", "quarantine_write", "check_slot_table", "check_target_mass",
                "check_e", "great_expectations", "total"} <= set(gate.timings)
    finally:
        gate.release()


def test_gate_above_threshold_fails(spark, slotted):
    gate = run_gate(spark, _inject_bad(slotted, 4), None, checks=(),
                    config=GateConfig(great_expectations=False))
    try:
        assert gate.failed and gate.failed_checks == ["quarantine"]
        assert gate.verdicts.iloc[0]["statistic"] == pytest.approx(4 / 3000, rel=1e-12)
        with pytest.raises(DataCheckFailed):
            gate.raise_if_failed()
    finally:
        gate.release()
    report_only = run_gate(spark, _inject_bad(slotted, 4), None, checks=(),
                           config=GateConfig(great_expectations=False, gate=False))
    assert not report_only.failed and report_only.failed_checks == ["quarantine"]
    report_only.release()


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
    # nothing quarantined: no Spark job writes the quarantine tables, but they exist (empty) for readers
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
    ["--reward-max", "-1"], ["--from", "2026-13-01"], ["--cramers-v-max", "0"],
])
def test_cli_bad_arguments_exit_2(data_dir, tmp_path, argv):
    s = data_dir / "slotted"
    assert _run(["--logs", str(s / "logs"), "--out", str(tmp_path / "bad"), *argv]) == 2


def test_cli_missing_path_exit_2(tmp_path):
    assert _run(["--logs", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2


def test_suite_files_match_generators():
    from scavenger.checks.expectations import contract_suite_spec, daily_suite_spec, load_suite_spec

    for name in ("impression_log", "decisions"):
        assert load_suite_spec(f"{name}.contract") == contract_suite_spec(name)
        assert load_suite_spec(f"{name}.daily") == json.loads(json.dumps(daily_suite_spec(name)))
