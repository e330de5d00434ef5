"""The notebook API and notebooks/example.ipynb.

- API wrappers give the CLI's numbers on the same data (they call the same library functions);
- the example notebook executes top to bottom (nbclient, a real IPython kernel) and its estimates and OBD ADCs
  equal those of `scavenger evaluate` / `scavenger ingest-obd` + `scavenger adc` on the same data (1e-9 relative).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import scavenger
from scavenger import cli

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "example.ipynb"
KEYS = ["policy_id", "estimator", "interval_kind"]
NUMBERS = ["value", "std_error", "ci_low", "ci_high", "n_events"]


def assert_same_table(a: pd.DataFrame, b: pd.DataFrame, keys, numbers, rel=1e-9):
    """Same key set; every numeric column equal to ``rel`` relative (NaN where the other is NaN)."""
    a = a.sort_values(keys).reset_index(drop=True)
    b = b.sort_values(keys).reset_index(drop=True)
    assert a[keys].astype(str).values.tolist() == b[keys].astype(str).values.tolist()
    for col in numbers:
        x, y = a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float)
        assert np.array_equal(np.isnan(x), np.isnan(y)), col
        ok = ~np.isnan(x)
        np.testing.assert_allclose(x[ok], y[ok], rtol=rel, atol=1e-12, err_msg=col)


@pytest.fixture(scope="module")
def small_generated(tmp_path_factory):
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = tmp_path_factory.mktemp("api") / "gen"
    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=3, n_ads=5, n_contexts=4, days=2,
                          events_per_day=1500, seed=5)
    truth = generate("duckdb", cfg, str(out))   # the same rows as on Spark (portable hash)
    return out, truth


def test_api_evaluate_and_adc_equal_the_cli(spark, small_generated, tmp_path):
    from scavenger.contract import read_decisions, read_logs

    gen, truth = small_generated
    logs, decisions = read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions"))
    estimators = "scavenging,factored,ips,pi,pi_plus_plus,pi_beta"
    res = scavenger.evaluate(logs, decisions, estimators=estimators.split(","), gate="off")   # as the CLI below
    assert cli.main(["evaluate", "--gate", "off", "--logs", str(gen / "logs"), "--decisions", str(gen / "decisions"),
                     "--estimators", estimators, "--out", str(tmp_path / "ev")]) == 0
    cli_est = pd.read_parquet(tmp_path / "ev" / "estimates")
    assert_same_table(res.to_pandas(), cli_est, KEYS, NUMBERS)
    # the Spark table holds the same rows as the pandas one
    sp = res.table.toPandas()
    assert_same_table(sp, res.to_pandas(), KEYS, NUMBERS, rel=0)
    assert set(res.to_pandas()["policy_id"]) == set(truth["policies"])
    # diagnostics too
    cli_diag = pd.read_parquet(tmp_path / "ev" / "diagnostics")
    mine = res.diagnostics_pandas.assign(slot=lambda d: d["slot"].astype(float))
    theirs = cli_diag.assign(slot=lambda d: d["slot"].astype(float).fillna(-1))
    assert_same_table(mine.assign(slot=mine["slot"].fillna(-1)), theirs, ["policy_id", "metric", "slot"], ["value"])

    a = scavenger.adc(logs, gate="off")
    assert cli.main(["adc", "--gate", "off", "--logs", str(gen / "logs"), "--out", str(tmp_path / "adc")]) == 0
    assert_same_table(a.to_pandas(), pd.read_parquet(tmp_path / "adc" / "adc"), ["method", "position", "interval_kind"],
                      ["coefficient", "std_error", "ci_low", "ci_high", "ads_used", "impressions_used", "dcg"])
    assert a.table.count() == len(a.to_pandas())


def test_api_validate_equals_the_cli(spark, small_generated, tmp_path):
    import json

    from scavenger.contract import read_decisions, read_logs

    gen, _ = small_generated
    logs, decisions = read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions"))
    v = scavenger.validate(logs, decisions, checks="a,b,e")
    assert cli.main(["validate", "--logs", str(gen / "logs"), "--decisions", str(gen / "decisions"), "--checks",
                     "a,b,e", "--no-great-expectations", "--out", str(tmp_path / "val")]) == 0
    g = pd.read_parquet(tmp_path / "val" / "validation")
    result = json.loads((tmp_path / "val" / "result.json").read_text())
    order = ["check", "scope", "verdict"]
    mine, theirs = v.pandas.sort_values(order).reset_index(drop=True), g.sort_values(order).reset_index(drop=True)
    assert mine[order].values.tolist() == theirs[order].values.tolist()
    np.testing.assert_allclose(mine["statistic"].to_numpy(dtype=float), theirs["statistic"].to_numpy(dtype=float),
                               rtol=1e-9)
    assert v.counts["logs"]["rows_in"] == 3000 == v.counts["logs"]["rows_used"] + v.counts["logs"]["rows_quarantined"]
    assert v.counts["logs"] == result["counts"]["logs"]
    assert {c.split(".")[0] for c in mine["check"]} >= {"a", "b", "e"} and not v.failed
    assert v.table.count() == len(v.pandas)


def test_api_takes_the_cli_gate_options(small_generated, tmp_path):
    """The notebook API's gate takes the CLI's gate flags as keywords, with the CLI's defaults and checks (before:
    reward_max, cramers_v_max, calibration_scope, duplicates... were a TypeError from GateConfig)."""
    from scavenger.errors import UsageError

    gen, _ = small_generated
    opts = dict(cramers_v_max=0.01, calibration_scope="policy", duplicates="quarantine_all", reward_max=2.0)
    v = scavenger.validate(str(gen / "logs"), checks="a,e", engine="duckdb", **opts)
    assert cli.main(["validate", "--logs", str(gen / "logs"), "--checks", "a,e", "--no-great-expectations",
                     "--cramers-v-max", "0.01", "--calibration-scope", "policy", "--duplicates", "quarantine_all",
                     "--reward-max", "2", "--out", str(tmp_path / "val")]) in (0, 3)
    g = pd.read_parquet(tmp_path / "val" / "validation")
    order = ["check", "scope", "verdict", "message"]
    assert v.pandas.sort_values(order)[order].values.tolist() == g.sort_values(order)[order].values.tolist()
    assert scavenger.evaluate(str(gen / "logs"), str(gen / "decisions"), estimators=["factored"], engine="duckdb",
                              gate="report", **opts).pandas["identified"].any()
    with pytest.raises(UsageError, match="unknown gate option"):
        scavenger.adc(str(gen / "logs"), engine="duckdb", reward_maximum=2.0)
    with pytest.raises(UsageError, match="duplicates must be one of"):
        scavenger.adc(str(gen / "logs"), engine="duckdb", duplicates="drop")
    with pytest.raises(UsageError, match="--cramers-v-max"):
        scavenger.adc(str(gen / "logs"), engine="duckdb", cramers_v_max=3)


def test_unknown_estimator_is_a_usage_error(spark, small_generated):
    from scavenger.contract import read_decisions, read_logs
    from scavenger.errors import UsageError

    gen, _ = small_generated
    with pytest.raises(UsageError):
        scavenger.evaluate(read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions")),
                           estimators=["not_an_estimator"])


# The notebook runs top to bottom in a real IPython kernel driven by nbclient, in a helper process; the executed
# copy is kept in the fixture's directory.
_EXECUTE = """
import sys
from pathlib import Path

import nbclient
import nbformat

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
nb = nbformat.read(src, as_version=4)
client = nbclient.NotebookClient(nb, timeout=1200, kernel_name="python3",
                                 resources={"metadata": {"path": str(src.parent)}})
try:
    client.execute()  # raises CellExecutionError on any failing cell
finally:
    nbformat.write(nb, dst)
"""


@pytest.fixture(scope="module")
def notebook_run(obd_dir, tmp_path_factory) -> dict:
    """The example notebook executed at a small scale; returns the helper's exit code and output, and the paths."""
    for module in ("nbformat", "nbclient", "ipykernel"):
        pytest.importorskip(module)
    import subprocess

    from helpers.cluster_util import fast_jvm_env

    work = tmp_path_factory.mktemp("notebook")
    env = fast_jvm_env({**os.environ, "SCAVENGER_NOTEBOOK_WORKDIR": str(work / "work"),
                        "SCAVENGER_OBD_DIR": str(obd_dir), "SCAVENGER_NOTEBOOK_EVENTS": "1500",
                        "SCAVENGER_PROGRESS": "0",
                        "SCAVENGER_MASTER": os.environ.get("SCAVENGER_TEST_MASTER", "local[2]")})
    executed = work / "example.executed.ipynb"
    proc = subprocess.run([sys.executable, "-c", _EXECUTE, str(NOTEBOOK), str(executed)], cwd=NOTEBOOK.parent,
                          env=env, capture_output=True, text=True, timeout=1500)
    return {"returncode": proc.returncode, "output": _error_outputs(executed) or proc.stderr[-4000:],
            "work": work / "work", "executed": executed}


def _error_outputs(executed: Path) -> str:
    """The failing cell's source and error (name, value, last traceback lines) from the executed copy."""
    import re

    import nbformat

    if not executed.exists():
        return ""
    errors = []
    for cell in nbformat.read(executed, as_version=4).cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                tb = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(o.get("traceback", [])[-3:]))
                errors.append(f"{cell.source[:400]}\n{o['ename']}: {o['evalue'][:1500]}\n{tb[-1500:]}")
    return "\n\n".join(errors)


@pytest.mark.slow
@pytest.mark.e2e
def test_example_notebook_runs_and_matches_the_cli(spark, obd_dir, tmp_path, notebook_run):
    import nbformat

    assert notebook_run["returncode"] == 0, notebook_run["output"]
    work = notebook_run["work"]
    nb = nbformat.read(notebook_run["executed"], as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 6  # ADC, 2 forest kinds, alpha, reduction

    # generated logs: the notebook's estimates equal `scavenger evaluate` on the same files
    nb_est = pd.read_parquet(work / "notebook_estimates.parquet")
    estimators = (work / "notebook_estimators.txt").read_text()
    assert cli.main(["evaluate", "--gate", "off", "--logs", str(work / "gen" / "logs"), "--decisions",
                     str(work / "gen" / "decisions"), "--estimators", estimators, "--out", str(tmp_path / "ev")]) == 0
    assert_same_table(nb_est, pd.read_parquet(tmp_path / "ev" / "estimates"), KEYS, NUMBERS)
    assert {"slate_pi", "slate_pi_plus_plus", "scavenging_slate"} <= set(nb_est["estimator"])

    # OBD: the notebook's estimates of its fitted policy equal `scavenger evaluate` on the files it wrote
    assert cli.main(["evaluate", "--gate", "off", "--logs", str(work / "obd_top_logs"), "--decisions",
                     str(work / "obd_most_clicked"), "--estimators", "scavenging,ips,snips", "--uniform-logging",
                     "--out", str(tmp_path / "obd_ev")]) == 0
    nb_obd = pd.read_parquet(work / "notebook_obd_estimates.parquet")
    assert len(nb_obd) >= 3 and set(nb_obd["policy_id"]) == {"most_clicked"}
    assert_same_table(nb_obd, pd.read_parquet(tmp_path / "obd_ev" / "estimates"), KEYS, NUMBERS)

    # OBD: the notebook's ADCs equal ingest-obd + adc through the CLI
    assert cli.main(["ingest-obd", "--obd-dir", str(obd_dir), "--policies", "random",
                     "--out", str(tmp_path / "obd")]) == 0
    assert cli.main(["adc", "--gate", "off", "--logs", str(tmp_path / "obd" / "logs"),
                     "--out", str(tmp_path / "obd_adc")]) == 0
    nb_adc = pd.read_parquet(work / "notebook_obd_adc.parquet")
    assert_same_table(nb_adc, pd.read_parquet(tmp_path / "obd_adc" / "adc"), ["method", "position", "interval_kind"],
                      ["coefficient", "std_error", "ci_low", "ci_high", "ads_used", "impressions_used"])

