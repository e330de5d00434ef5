"""The data gate inside `adc` and `evaluate` (issue 5 item 4): estimates carry the verdicts of the checks they
rely on, a failed assumption stops a gated job with exit 3, bad rows are set aside and counted."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from scavenger.cli import main
from scavenger.contract import read_logs, write_partitioned
from scavenger.simulation.generator import GeneratorConfig, generate

SPARK_FLAGS = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=4"]


@pytest.fixture(scope="module")
def gen(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("gatejobs")
    out = {}
    for name, logging in (("uniform", "uniform"), ("contextual", "contextual")):
        cfg = GeneratorConfig(layout="ranked", logging=logging, n_positions=3, n_ads=8, n_contexts=12, days=1,
                              events_per_day=6000, seed=11, contextual_noise=0.1, epsilon=0.1)
        generate(spark, cfg, str(root / name))
        out[name] = root / name
    return out


def _result(path):
    return json.loads((path / "result.json").read_text())


def test_adc_refuses_contextual_logs_and_marks_when_reporting(gen, tmp_path):
    logs = str(gen["contextual"] / "logs")
    out = tmp_path / "adc_enforce"
    assert main(["adc", "--logs", logs, "--out", str(out), "--no-great-expectations", *SPARK_FLAGS]) == 3
    res = _result(out)
    assert res["status"] == "data_check_failed" and "check(s) a" in res["message"]
    assert any(v["check"].startswith("a") and v["verdict"] == "fail" for v in res["verdicts"])
    assert not (out / "adc").exists()  # no estimate written
    out2 = tmp_path / "adc_report"
    assert main(["adc", "--logs", logs, "--out", str(out2), "--gate", "report", "--no-great-expectations",
                 *SPARK_FLAGS]) == 0
    table = pd.read_parquet(out2 / "adc")
    assert table["checks"].str.fullmatch(r"a:fail b:(pass|warn|fail)").all()


def test_evaluate_gates_per_estimator_on_ranked_logs(gen, tmp_path):
    logs, decisions = str(gen["uniform"] / "logs"), str(gen["uniform"] / "decisions")
    # asked by name, PI relies on factorized logging (check d), which ranked slates break: exit 3
    out = tmp_path / "ev_pi"
    assert main(["evaluate", "--logs", logs, "--decisions", decisions, "--estimators", "pi", "--out", str(out),
                 "--no-great-expectations", *SPARK_FLAGS]) == 3
    assert "slate_pi: check(s) d failed" in _result(out)["message"]
    assert not (out / "estimates").exists()
    # the default set: PI-family left out with a note, the scavenging/factored estimates written with verdicts
    out = tmp_path / "ev_default"
    assert main(["evaluate", "--logs", logs, "--decisions", decisions, "--out", str(out),
                 "--no-great-expectations", *SPARK_FLAGS]) == 0
    est = pd.read_parquet(out / "estimates")
    assert {"factored", "scavenging_slate"} <= set(est["estimator"])
    assert not any(e.startswith("slate_") for e in est["estimator"])
    assert est.loc[est["estimator"] == "factored", "checks"].str.fullmatch(r"a:(pass|warn) b:(pass|warn)").all()
    diag = pd.read_parquet(out / "diagnostics")
    assert diag["metric"].str.contains("gate_note: slate_pi: check\\(s\\) d failed").any()
    res = _result(out)
    gate = res["counts"]["gate"]["logs"]
    assert gate["rows_in"] == gate["rows_used"] + gate["rows_quarantined"] == 6000


def test_evaluate_sets_bad_rows_aside_and_estimates_on_clean_rows(spark, gen, tmp_path):
    from pyspark.sql import functions as F

    src = read_logs(spark, str(gen["uniform"] / "logs"))
    dup = src.limit(3)  # three duplicated events: 3 of 6003 rows = 0.05% < the 0.1% threshold
    logs = str(tmp_path / "logs")
    write_partitioned(src.unionByName(dup), logs)
    out = tmp_path / "ev"
    assert main(["evaluate", "--logs", logs, "--decisions", str(gen["uniform"] / "decisions"),
                 "--estimators", "factored", "--out", str(out), "--no-great-expectations", *SPARK_FLAGS]) == 0
    res = _result(out)
    gate = res["counts"]["gate"]["logs"]
    assert (gate["rows_in"], gate["rows_used"], gate["rows_quarantined"]) == (6003, 6000, 3)
    assert res["counts"]["events"] == 6000
    est = pd.read_parquet(out / "estimates")
    assert (est["n_events"] == 6000).all()
    # ... and the same estimates as the clean data without a gate
    out_clean = tmp_path / "ev_clean"
    assert main(["evaluate", "--logs", str(gen["uniform"] / "logs"), "--decisions",
                 str(gen["uniform"] / "decisions"), "--estimators", "factored", "--gate", "off",
                 "--out", str(out_clean), *SPARK_FLAGS]) == 0
    clean = pd.read_parquet(out_clean / "estimates").sort_values("policy_id")
    gated = est.sort_values("policy_id")
    assert list(clean["policy_id"]) == list(gated["policy_id"])
    assert (abs(clean["value"].to_numpy() - gated["value"].to_numpy())
            <= 1e-9 * abs(clean["value"].to_numpy())).all()
    # above the threshold the gate stops the job
    out_fail = tmp_path / "ev_fail"
    assert main(["evaluate", "--logs", logs, "--decisions", str(gen["uniform"] / "decisions"),
                 "--estimators", "factored", "--max-quarantine-share", "0.0001", "--out", str(out_fail),
                 "--no-great-expectations", *SPARK_FLAGS]) == 3
    assert "quarantined" in _result(out_fail)["message"]


def test_gate_flags_build_frozen_configs():
    """adc/evaluate gate flags: RuleConfig and AssumptionConfig are frozen dataclasses (built with replace);
    --calibration-scope is checked up front (exit 2)."""
    import argparse

    from scavenger.commands._gate_flags import add_gate_arguments, gate_config_from_args
    from scavenger.errors import UsageError

    parser = argparse.ArgumentParser()
    add_gate_arguments(parser)
    cfg = gate_config_from_args(parser.parse_args(["--allow-partial-slates", "--reward-max", "5", "--cramers-v-max",
                                                   "0.2", "--calibration-scope", "context:campaign"]), None, "r1")
    assert cfg.rules.allow_partial_slates and cfg.rules.reward_max == 5.0
    assert cfg.assumptions.cramers_v_max == 0.2 and cfg.assumptions.calibration_scope == "context:campaign"
    default = gate_config_from_args(parser.parse_args([]), None, "r1")
    assert not default.rules.allow_partial_slates and default.rules.reward_max == 1.0
    assert default.assumptions.calibration_scope == "auto" and default.gate
    assert gate_config_from_args(parser.parse_args(["--gate", "off"]), None, "r1") is None
    with pytest.raises(UsageError):
        gate_config_from_args(parser.parse_args(["--calibration-scope", "campaign"]), None, "r1")
