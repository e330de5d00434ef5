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

from conftest import OBD_DIR

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
def small_generated(spark, tmp_path_factory):
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = tmp_path_factory.mktemp("api") / "gen"
    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=3, n_ads=5, n_contexts=4, days=2,
                          events_per_day=1500, seed=5)
    truth = generate(spark, cfg, str(out))
    return out, truth


def test_api_evaluate_and_adc_equal_the_cli(spark, small_generated, tmp_path):
    from scavenger.contract import read_decisions, read_logs

    gen, truth = small_generated
    logs, decisions = read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions"))
    estimators = "scavenging,factored,ips,pi,pi_plus_plus,pi_beta"
    res = scavenger.evaluate(logs, decisions, estimators=estimators.split(","))
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

    a = scavenger.adc(logs)
    assert cli.main(["adc", "--gate", "off", "--logs", str(gen / "logs"), "--out", str(tmp_path / "adc")]) == 0
    assert_same_table(a.to_pandas(), pd.read_parquet(tmp_path / "adc" / "adc"), ["method", "position", "interval_kind"],
                      ["coefficient", "std_error", "ci_low", "ci_high", "ads_used", "impressions_used", "dcg"])
    assert a.table.count() == len(a.to_pandas())


def test_api_validate_wraps_run_gate(spark, small_generated):
    pytest.importorskip("scavenger.checks.gate")
    from scavenger.checks.gate import GateConfig, run_gate
    from scavenger.contract import read_decisions, read_logs

    gen, _ = small_generated
    logs, decisions = read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions"))
    v = scavenger.validate(logs, decisions, checks="a,b,e")
    g = run_gate(spark, logs, decisions, checks=("a", "b", "e"), config=GateConfig(great_expectations=False))
    assert v.pandas[["check", "scope", "verdict"]].values.tolist() == \
        g.verdicts[["check", "scope", "verdict"]].values.tolist()
    np.testing.assert_allclose(v.pandas["statistic"].to_numpy(dtype=float), g.verdicts["statistic"].to_numpy(dtype=float),
                               rtol=1e-9)
    assert v.counts["logs"]["rows_in"] == 3000 == v.counts["logs"]["rows_used"] + v.counts["logs"]["rows_quarantined"]
    assert v.table.count() == len(v.pandas)
    v.gate.release()
    g.release()


def test_unknown_estimator_is_a_usage_error(spark, small_generated):
    from scavenger.contract import read_decisions, read_logs
    from scavenger.errors import UsageError

    gen, _ = small_generated
    with pytest.raises(UsageError):
        scavenger.evaluate(read_logs(spark, str(gen / "logs")), read_decisions(spark, str(gen / "decisions")),
                           estimators=["not_an_estimator"])


# The notebook runs top to bottom in a real IPython kernel driven by nbclient, in a helper process started in the
# background when collection ends (tests/conftest.py); the executed copy is kept in that run's directory.
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


def _notebook_spec(work: Path):
    import importlib.util

    from conftest import BackgroundSpec

    if not OBD_DIR.exists() or any(importlib.util.find_spec(m) is None
                                   for m in ("nbformat", "nbclient", "ipykernel")):
        return None    # the test skips
    env = {"SCAVENGER_NOTEBOOK_WORKDIR": str(work / "work"), "SCAVENGER_OBD_DIR": str(OBD_DIR),
           "SCAVENGER_NOTEBOOK_EVENTS": "1500", "SCAVENGER_PROGRESS": "0",
           "SCAVENGER_MASTER": os.environ.get("SCAVENGER_TEST_MASTER", "local[2]")}
    return BackgroundSpec(cmd=[sys.executable, "-c", _EXECUTE, NOTEBOOK, work / "example.executed.ipynb"],
                          cwd=NOTEBOOK.parent, env=env, timeout=1500)


BACKGROUND = {"notebook_run": _notebook_spec}


@pytest.fixture(scope="module")
def notebook_run(background_run):
    return background_run("notebook_run")


@pytest.mark.slow
def test_example_notebook_runs_and_matches_the_cli(spark, obd_dir, tmp_path, notebook_run):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    run = notebook_run
    assert run.returncode == 0, run.tail()
    work = run.workdir / "work"
    nb = nbformat.read(run.workdir / "example.executed.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 6  # ADC, 2 forest kinds, alpha, reduction

    # generated logs: the notebook's estimates equal `scavenger evaluate` on the same files
    nb_est = pd.read_parquet(work / "notebook_estimates.parquet")
    estimators = (work / "notebook_estimators.txt").read_text()
    assert cli.main(["evaluate", "--gate", "off", "--logs", str(work / "gen" / "logs"), "--decisions", str(work / "gen" / "decisions"),
                     "--estimators", estimators, "--out", str(tmp_path / "ev")]) == 0
    assert_same_table(nb_est, pd.read_parquet(tmp_path / "ev" / "estimates"), KEYS, NUMBERS)
    assert {"slate_pi", "slate_pi_plus_plus", "scavenging_slate"} <= set(nb_est["estimator"])

    # OBD: the notebook's estimates of its fitted policy equal `scavenger evaluate` on the files it wrote
    assert cli.main(["evaluate", "--gate", "off", "--logs", str(work / "obd_top_logs"), "--decisions", str(work / "obd_most_clicked"),
                     "--estimators", "scavenging,ips,snips", "--uniform-logging", "--out", str(tmp_path / "obd_ev")]) == 0
    nb_obd = pd.read_parquet(work / "notebook_obd_estimates.parquet")
    assert len(nb_obd) >= 3 and set(nb_obd["policy_id"]) == {"most_clicked"}
    assert_same_table(nb_obd, pd.read_parquet(tmp_path / "obd_ev" / "estimates"), KEYS, NUMBERS)

    # OBD: the notebook's ADCs equal ingest-obd + adc through the CLI
    assert cli.main(["ingest-obd", "--obd-dir", str(obd_dir), "--policies", "random",
                     "--out", str(tmp_path / "obd")]) == 0
    assert cli.main(["adc", "--gate", "off", "--logs", str(tmp_path / "obd" / "logs"), "--out", str(tmp_path / "obd_adc")]) == 0
    nb_adc = pd.read_parquet(work / "notebook_obd_adc.parquet")
    assert_same_table(nb_adc, pd.read_parquet(tmp_path / "obd_adc" / "adc"), ["method", "position", "interval_kind"],
                      ["coefficient", "std_error", "ci_low", "ci_high", "ads_used", "impressions_used"])

