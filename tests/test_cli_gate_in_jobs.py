"""The data gate inside `adc` and `evaluate` (issue 5 item 4): estimates carry the verdicts of the checks they
rely on, a failed assumption stops a gated job with exit 3, bad rows are set aside and counted.

The logs come from the generator (Spark); the jobs run with the CLI's default engine (DuckDB for local Parquet)."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scavenger.cli import main
from scavenger.simulation.generator import GeneratorConfig, generate

PI_FAMILY = "slate_ips, slate_snips, slate_pi, slate_wpi, slate_pi_plus_plus, slate_pi_beta"


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("gatejobs")
    out = {}
    for name, logging in (("uniform", "uniform"), ("contextual", "contextual")):
        cfg = GeneratorConfig(layout="ranked", logging=logging, n_positions=3, n_ads=8, n_contexts=12, days=1,
                              events_per_day=6000, seed=11, contextual_noise=0.1, epsilon=0.1)
        generate("duckdb", cfg, str(root / name))
        out[name] = root / name
    return out


def _result(path):
    return json.loads((path / "result.json").read_text())


def test_adc_refuses_contextual_logs_and_marks_when_reporting(gen, tmp_path):
    logs = str(gen["contextual"] / "logs")
    out = tmp_path / "adc_enforce"
    assert main(["adc", "--logs", logs, "--out", str(out), "--no-great-expectations"]) == 3
    res = _result(out)
    assert res["status"] == "data_check_failed" and "check(s) a" in res["message"]
    assert any(v["check"].startswith("a") and v["verdict"] == "fail" for v in res["verdicts"])
    assert not (out / "adc").exists()  # no estimate written
    out2 = tmp_path / "adc_report"
    assert main(["adc", "--logs", logs, "--out", str(out2), "--gate", "report", "--no-great-expectations"]) == 0
    table = pd.read_parquet(out2 / "adc")
    assert table["checks"].str.fullmatch(r"a:fail b:(pass|warn|fail)").all()


def test_evaluate_gates_per_estimator_on_ranked_logs(gen, tmp_path):
    logs, decisions = str(gen["uniform"] / "logs"), str(gen["uniform"] / "decisions")
    # asked by name, PI relies on factorized logging (check d), which ranked slates break: exit 3
    out = tmp_path / "ev_pi"
    assert main(["evaluate", "--logs", logs, "--decisions", decisions, "--estimators", "pi", "--out", str(out),
                 "--no-great-expectations"]) == 3
    assert "slate_pi: check(s) d failed" in _result(out)["message"]
    assert not (out / "estimates").exists()
    # the default set: PI-family left out with one note for the set, the scavenging/factored estimates written
    # with verdicts
    out = tmp_path / "ev_default"
    assert main(["evaluate", "--logs", logs, "--decisions", decisions, "--out", str(out),
                 "--no-great-expectations"]) == 0
    est = pd.read_parquet(out / "estimates")
    assert {"factored", "scavenging_slate"} <= set(est["estimator"])
    assert not any(e.startswith("slate_") for e in est["estimator"])
    assert est.loc[est["estimator"] == "factored", "checks"].str.fullmatch(
        r"a:(pass|warn) b:(pass|warn) f:(pass|warn)").all()
    diag = pd.read_parquet(out / "diagnostics")
    notes = [m for m in diag["metric"] if m.startswith("gate_note: ")]
    assert notes == [f"gate_note: {PI_FAMILY}: check(s) d failed (factorized logging); left out of the default set"]
    res = _result(out)
    gate = res["counts"]["logs"]
    assert gate["rows_in"] == gate["rows_used"] + gate["rows_quarantined"] == 6000


def test_evaluate_sets_bad_rows_aside_and_estimates_on_clean_rows(gen, tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(gen["uniform"] / "logs", logs)
    first = sorted(logs.glob("dt=*/*.parquet"))[0]
    dup = pq.read_table(first).slice(0, 3)  # three duplicated events: 3 of 6003 rows = 0.05% < the 0.1% threshold
    pq.write_table(dup, first.parent / "part-dup.parquet")
    out = tmp_path / "ev"
    assert main(["evaluate", "--logs", str(logs), "--decisions", str(gen["uniform"] / "decisions"),
                 "--estimators", "factored", "--out", str(out), "--no-great-expectations"]) == 0
    res = _result(out)
    gate = res["counts"]["logs"]
    assert (gate["rows_in"], gate["rows_used"], gate["rows_quarantined"]) == (6003, 6000, 3)
    assert gate["by_reason"] == {"DUPLICATE_EVENT_ID": 3}
    assert res["counts"]["rows_read"] == 6003           # one pass over every row, the copies included
    est = pd.read_parquet(out / "estimates")
    assert (est["n_events"] == 6000).all()
    # ... and the same estimates as the clean data without a gate
    out_clean = tmp_path / "ev_clean"
    assert main(["evaluate", "--logs", str(gen["uniform"] / "logs"), "--decisions",
                 str(gen["uniform"] / "decisions"), "--estimators", "factored", "--gate", "off",
                 "--out", str(out_clean)]) == 0
    clean = pd.read_parquet(out_clean / "estimates").sort_values("policy_id")
    gated = est.sort_values("policy_id")
    assert list(clean["policy_id"]) == list(gated["policy_id"])
    assert (abs(clean["value"].to_numpy() - gated["value"].to_numpy())
            <= 1e-9 * abs(clean["value"].to_numpy())).all()
    # above the threshold the gate stops the job
    out_fail = tmp_path / "ev_fail"
    assert main(["evaluate", "--logs", str(logs), "--decisions", str(gen["uniform"] / "decisions"),
                 "--estimators", "factored", "--max-quarantine-share", "0.0001", "--out", str(out_fail),
                 "--no-great-expectations"]) == 3
    assert "quarantined" in _result(out_fail)["message"]


def test_a_check_one_target_fails_refuses_that_target_only(gen, tmp_path):
    """Checks b.rare_mass and c.support judge each target policy's own mass. One target that puts an ad never logged
    at position 1 failed them, and the gate then dropped the estimator for every target of the decisions: the
    default run wrote nothing (exit 3, "no estimator left to run") although the other targets' estimates are
    identified. Now only that target's rows are refused, with the check's message; the others' equal the run
    without it."""
    src = gen["uniform"] / "decisions"
    dec = pd.concat([pd.read_parquet(f).assign(dt=f.parent.name[3:]) for f in sorted(src.glob("dt=*/*.parquet"))])
    pid = sorted(dec["policy_id"].unique())[0]
    bad = dec[dec["policy_id"] == pid].copy()
    bad["policy_id"] = "never"
    bad["slots"] = [[{**s, "ad_id": "never logged"} if s["position"] == 1 else s for s in slots]
                    for slots in bad["slots"]]
    root = tmp_path / "decisions"
    for day, g in pd.concat([dec, bad]).groupby("dt"):
        (root / f"dt={day}").mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(g.drop(columns=["dt"]), schema=pq.read_schema(
            sorted(src.glob("dt=*/*.parquet"))[0]), preserve_index=False), root / f"dt={day}" / "part-0.parquet")
    logs = str(gen["uniform"] / "logs")
    args = ["--logs", logs, "--estimators", "factored", "--no-great-expectations"]
    assert main(["evaluate", "--decisions", str(src), "--out", str(tmp_path / "alone"), *args]) == 0
    alone = pd.read_parquet(tmp_path / "alone" / "estimates").set_index("policy_id")
    # asked by name: the job says the named estimator is not identified for 'never' (exit 3), and writes the rest
    assert main(["evaluate", "--decisions", str(root), "--out", str(tmp_path / "both"), *args]) == 3
    both = pd.read_parquet(tmp_path / "both" / "estimates").set_index("policy_id")
    assert "check b (enough exploration) failed for this target" in both.loc["never", "reason"]
    assert not both.loc["never", "identified"] and pd.isna(both.loc["never", "value"])
    for p in alone.index:
        assert abs(both.loc[p, "value"] - alone.loc[p, "value"]) <= 1e-12 * abs(alone.loc[p, "value"])
        assert both.loc[p, "identified"] and both.loc[p, "checks"] == alone.loc[p, "checks"]
    # the default set: written, exit 0 (a default estimator the data cannot support is left with its reason)
    assert main(["evaluate", "--logs", logs, "--decisions", str(root), "--out", str(tmp_path / "default"),
                 "--no-great-expectations"]) == 0
    est = pd.read_parquet(tmp_path / "default" / "estimates")
    fact = est[est["estimator"] == "factored"].set_index("policy_id")
    assert fact.loc[pid, "identified"] and not fact.loc["never", "identified"]
    # --gate report: the number, marked by the target's own verdicts
    assert main(["evaluate", "--decisions", str(root), "--out", str(tmp_path / "report"), "--gate", "report",
                 *args]) == 0
    rep = pd.read_parquet(tmp_path / "report" / "estimates").set_index("policy_id")
    assert rep.loc["never", "identified"] and rep.loc["never", "checks"] == "a:pass b:fail f:pass"
    assert rep.loc[pid, "checks"] == alone.loc[pid, "checks"]


def test_gate_flags_build_frozen_configs():
    """The gate flags of validate, adc and evaluate (cli/shared_flags.py): RuleConfig and AssumptionConfig are frozen
    dataclasses (built with replace); partial slates are accepted unless --require-full-slates; --gate off is a
    GateConfig that runs no checks; --calibration-scope is checked up front (exit 2)."""
    import argparse
    import dataclasses

    from scavenger.cli.shared_flags import add_gate_arguments, gate_config
    from scavenger.errors import UsageError

    parser = argparse.ArgumentParser()
    add_gate_arguments(parser)
    cfg = gate_config(parser.parse_args(["--allow-partial-slates", "--reward-max", "5", "--cramers-v-max", "0.2",
                                         "--calibration-scope", "context:campaign"]))
    assert cfg.rules.allow_partial_slates and cfg.rules.reward_max == 5.0
    assert cfg.assumptions.cramers_v_max == 0.2 and cfg.assumptions.calibration_scope == "context:campaign"
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.rules.reward_max = 2.0
    default = gate_config(parser.parse_args([]))
    assert default.rules.allow_partial_slates and default.rules.reward_max == 1.0
    assert not gate_config(parser.parse_args(["--require-full-slates"])).rules.allow_partial_slates
    assert default.assumptions.calibration_scope == "auto" and default.enforce and default.mode == "enforce"
    off = gate_config(parser.parse_args(["--gate", "off"]))
    assert off.mode == "off" and not off.enforce
    with pytest.raises(UsageError):
        gate_config(parser.parse_args(["--calibration-scope", "campaign"]))
