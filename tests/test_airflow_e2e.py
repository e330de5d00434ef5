"""End-to-end: both DAGs run for real (``dag.test()``) on small generated logs, in a helper process with its own
AIRFLOW_HOME (``python tests/test_airflow_e2e.py WORKDIR SIM`` returns the runs' data, which the tests check).

* ``scavenger_daily`` for one dt, on the config's engine (Spark: every job a spark-submit, local master): every
  task succeeds, its tables equal a direct command-line run of the same job (1e-9 relative); a second run of the
  same dt with the per-run param ``engine=duckdb`` (each job in a local process) leaves the same tables, replaces
  that dt's directories (a planted stale file disappears) and leaves another dt's directory alone;
* on ``contextual`` logs (engine duckdb) the run stops at the gate: ``validate`` fails (exit 3, no retry) with the
  failing check in the log and in result.json, and every downstream task ends ``upstream_failed``;
* ``scavenger_evaluate`` with params for the same window and the daily ADC table reproduces the daily estimates;
  a run with a bad param is refused before any task runs (also in the helper: the test process migrates no DB).
Skipped without Airflow; marked e2e and slow (Airflow DAG runs; the Spark jobs are spark-submits with their own
JVMs).
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "airflow_dags"
sys.path.insert(0, str(DAGS))

from scavenger_airflow.testing import isolate_airflow_home  # noqa: E402

isolate_airflow_home()
pytest.importorskip("airflow.sdk")
pytest.importorskip("airflow.providers.apache.spark.operators.spark_submit")
import pendulum  # noqa: E402
from scavenger_airflow import config as C  # noqa: E402
from scavenger_airflow import plans as P  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.e2e,
              pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")]  # Airflow internals

DAY1, DAY2 = "2026-03-01", "2026-03-02"
RTOL = 1e-9
VOLATILE = {"run_id"}  # columns that name the run, not the data


def _load_dag(name: str):
    """A private copy of a DAG file's DAG built with retries=0 (a failing job fails the test at once)."""
    import importlib.util

    old = os.environ.get("SCAVENGER_AIRFLOW_RETRIES")
    os.environ["SCAVENGER_AIRFLOW_RETRIES"] = "0"
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_e2e", DAGS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if old is None:
            os.environ.pop("SCAVENGER_AIRFLOW_RETRIES")
        else:
            os.environ["SCAVENGER_AIRFLOW_RETRIES"] = old
    return module.dag


def _logical(day: str):
    return pendulum.parse(day, tz="UTC")


def _migrate() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                          timeout=600)


def _generate_sim(base: Path) -> Path:
    from scavenger.simulation.generator import GeneratorConfig, generate

    # ranked layout (ads move between positions, so ADCs exist); its slates are drawn without replacement, so the
    # gate runs checks a,b,c,e (check d, factorized logging, fails on ranked slates by design)
    common = dict(layout="ranked", n_positions=3, n_ads=12, n_contexts=8, events_per_day=3000, start_date=DAY1,
                  seed=11)
    generate("duckdb", GeneratorConfig(logging="uniform", days=2, **common), str(base / "uniform"))
    generate("duckdb", GeneratorConfig(logging="contextual", days=1, **common), str(base / "contextual"))
    return base


def _use_config(cfg: dict) -> None:
    os.environ["AIRFLOW_VAR_SCAVENGER_CONFIG"] = json.dumps(cfg)


def _config(sim: Path, root: Path, logs: str) -> dict:
    return {"root": str(root), "logs": str(sim / logs / "logs"), "window_days": 2,
            "registry": [{"name": "sim", "decisions": str(sim / logs / "decisions")}],
            "validate": {"great_expectations": False, "checks": "a,b,c,e"},
            "spark_conf": {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4",
                           "spark.ui.enabled": "false"},
            "report": "required" if P.job_exists({"repo": str(REPO)}, "report") else "if_available"}


def _states(dag_run) -> dict:
    return {(ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"): str(ti.state)
            for ti in dag_run.get_task_instances()}


def _tables(job_dir: Path) -> dict[str, pd.DataFrame]:
    """Every Parquet table under a job's --out directory, keyed by its relative path, canonically ordered."""
    out = {}
    for parquet in sorted(job_dir.rglob("*.parquet")):
        table_dir = parquet.parent
        while table_dir.parent != job_dir and table_dir.name.startswith(("dt=", "policy_id=")):
            table_dir = table_dir.parent
        key = str(table_dir.relative_to(job_dir))
        if key in out:
            continue
        df = pd.read_parquet(table_dir)
        df = df[[c for c in df.columns if c not in VOLATILE]]
        for c in df.columns:
            if df[c].dtype == object:  # strings stay; lists/maps/arrays become canonical JSON
                df[c] = df[c].map(lambda v: v if isinstance(v, str) or v is None else
                                  json.dumps(v.tolist() if isinstance(v, np.ndarray) else v, sort_keys=True,
                                             default=str))
            elif str(df[c].dtype) == "category":
                df[c] = df[c].astype(str)
        keys = [c for c in df.columns if not pd.api.types.is_float_dtype(df[c])]
        out[key] = df.sort_values(keys).reset_index(drop=True) if keys else df
    return out


def _assert_same_tables(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        pd.testing.assert_frame_equal(a[key], b[key], check_exact=False, rtol=RTOL, atol=0, obj=key)


def _result(job_dir: Path) -> dict:
    return json.loads((job_dir / "result.json").read_text())


MARK = "=== scavenger-e2e: {} ==="


def _run_dags(work: Path, sim: Path) -> dict:
    """All of the module's DAG runs, in the helper process (see ``__main__`` below); returns data only:
    scavenger_daily twice for DAY2 on uniform logs (the config's engine, then the param engine=duckdb; snapshots of
    every job's tables after each run), once for DAY1 on contextual logs (stopped at the gate), and
    scavenger_evaluate for the window with the daily ADC table."""
    proc = _migrate()
    out = {"migrate": {"returncode": proc.returncode, "stderr": proc.stderr[-3000:]}}
    if proc.returncode:
        return out

    dag = _load_dag("scavenger_daily")
    out["plan_retries"] = [dag.task_dict["plan"].retries]
    root = work / "daily_root"
    cfg = _config(sim, root, "uniform")
    _use_config(cfg)
    jobs = {"validate": root / "validate" / f"dt={DAY2}", "stats": root / "stats" / "sim" / f"dt={DAY2}",
            "adc": root / "adc" / f"dt={DAY2}", "evaluate": root / "evaluate" / "sim" / f"dt={DAY2}"}
    first = dag.test(logical_date=_logical(DAY2))
    states1 = _states(first)
    snap1 = {name: _tables(d) for name, d in jobs.items()}
    stale = jobs["adc"] / "stale-from-an-old-run.txt"
    stale.write_text("x")
    other_day = root / "adc" / f"dt={DAY1}"
    other_day.mkdir(parents=True)
    (other_day / "keep.txt").write_text("another dt")
    second = dag.test(logical_date=_logical(DAY2), run_conf={"engine": "duckdb"})
    out["daily"] = {"cfg": cfg, "root": root, "jobs": jobs, "states": (states1, _states(second)),
                    "snap": (snap1, {name: _tables(d) for name, d in jobs.items()}), "stale": stale,
                    "other": other_day}

    gate_root = work / "gate_root"
    _use_config({**_config(sim, gate_root, "contextual"), "engine": "duckdb"})
    gate_dag = _load_dag("scavenger_daily")
    out["plan_retries"].append(gate_dag.task_dict["plan"].retries)
    for stream in (sys.stdout, sys.stderr):
        print(MARK.format("gate start"), file=stream, flush=True)
    run = gate_dag.test(logical_date=_logical(DAY1))
    for stream in (sys.stdout, sys.stderr):
        print(MARK.format("gate end"), file=stream, flush=True)
    out["gate"] = {"root": gate_root, "state": str(run.state), "states": _states(run)}

    _use_config({**cfg, "engine": "duckdb"})
    conf = {"logs": cfg["logs"], "decisions": cfg["registry"][0]["decisions"], "date_from": DAY1, "date_to": DAY2,
            "adc_source": "daily"}
    evaluate_dag = _load_dag("scavenger_evaluate")
    out["plan_retries"].append(evaluate_dag.task_dict["plan"].retries)
    run = evaluate_dag.test(logical_date=_logical(DAY2), run_conf=conf)
    adhoc = list((root / "evaluate-adhoc").glob(f"{DAY1}_{DAY2}_*"))
    out["evaluate"] = {"states": _states(run), "adhoc": adhoc, "tables": [_tables(d) for d in adhoc]}

    # a bad param: refused before any task runs (the exception's type and text, for the test)
    bad_dag = _load_dag("scavenger_evaluate")
    out["plan_retries"].append(bad_dag.task_dict["plan"].retries)
    before = set((root / "evaluate-adhoc").glob("*"))
    try:
        bad_dag.test(logical_date=_logical(DAY1), run_conf={"prior_mean": -1.0})
        out["bad_param"] = {"raised": None}
    except Exception as exc:  # noqa: BLE001 - the test asserts which exception this is
        out["bad_param"] = {"raised": type(exc).__name__, "message": str(exc)}
    out["bad_param"]["new_outputs"] = sorted(str(p) for p in set((root / "evaluate-adhoc").glob("*")) - before)
    return out


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    """The generated logs (uniform: 2 days; contextual: 1 day; on DuckDB, the same rows as on Spark)."""
    return _generate_sim(tmp_path_factory.mktemp("airflow_sim"))


@pytest.fixture(scope="module")
def dag_runs(sim, tmp_path_factory) -> dict:
    """The DAG runs in a helper process with its own AIRFLOW_HOME: its pickled data, exit code, stdout and stderr."""
    work = tmp_path_factory.mktemp("airflow_e2e")
    home = work / "airflow_home"
    home.mkdir()
    from helpers.cluster_util import fast_jvm_env

    env = fast_jvm_env({**os.environ, "SCAVENGER_TEST_AIRFLOW_HOME": str(home), "SCAVENGER_PROGRESS": "0"})
    env.pop("AIRFLOW_VAR_SCAVENGER_CONFIG", None)
    proc = subprocess.run([sys.executable, __file__, str(work), str(sim)], capture_output=True, text=True,
                          timeout=1500, env=env, cwd=REPO)
    value = work / "value.pkl"
    data = pickle.loads(value.read_bytes()) if value.exists() else {}
    return {**data, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.fixture(scope="module")
def daily_runs(dag_runs) -> dict:
    return dag_runs.get("daily")


def test_helper_process_ran_every_dag(dag_runs):
    assert dag_runs["returncode"] == 0, dag_runs["stderr"][-4000:]
    assert dag_runs["migrate"]["returncode"] == 0, dag_runs["migrate"]["stderr"]
    assert dag_runs["plan_retries"] == [0, 0, 0, 0]      # the private DAG copies fail a failing job at once
    assert {"daily", "gate", "evaluate"} <= set(dag_runs)


def test_daily_run_succeeds_and_writes_each_jobs_tables(daily_runs):
    states1, states2 = daily_runs["states"]
    expected = {"plan", "validate", "stats_jobs", "stats[0]", "adc", "evaluate_jobs", "evaluate[0]", "report"}
    assert set(states1) == expected
    report_state = "success" if daily_runs["cfg"]["report"] == "required" else "skipped"
    for run, states in (("spark", states1), ("duckdb", states2)):
        assert {k: v for k, v in states.items() if k != "report"} == {k: "success" for k in expected - {"report"}}, \
            (run, states)
        assert states["report"] == report_state, (run, states)
    snap = daily_runs["snap"][0]
    jobs = daily_runs["jobs"]
    for name, d in jobs.items():
        result = _result(d)
        assert (result["status"], result["exit_code"]) == ("ok", 0), (name, result.get("message"))
    assert "validation" in snap["validate"]
    assert (snap["validate"]["validation"]["verdict"] != "fail").all()
    adc = snap["adc"]["adc"]
    assert sorted(adc["position"].unique()) == [1, 2, 3]
    est = snap["evaluate"]["estimates"]
    decisions = pd.read_parquet(daily_runs["cfg"]["registry"][0]["decisions"])
    assert set(est["policy_id"]) == set(decisions["policy_id"].astype(str))
    assert set(est["estimator"]) <= set(C.ESTIMATORS) and {"factored", "scavenging_slate"} <= set(est["estimator"])
    # ranked slates are sampled without replacement: check d (factorized logging) fails, so the evaluate job's
    # gate leaves the PI-family estimators out of the default set and says so; the others carry their verdicts
    assert not {"slate_pi", "slate_pi_plus_plus"} & set(est["estimator"])
    assert est["checks"].str.contains("a:").all()
    diag = snap["evaluate"]["diagnostics"]
    # one note per set of failed checks, naming every estimator it leaves out
    assert diag["metric"].str.contains(r"gate_note: (?:slate_\w+, )*slate_pi(?:, slate_\w+)*: check\(s\) d failed",
                                       regex=True).any(), diag["metric"].tolist()
    assert np.isfinite(est["value"].to_numpy(dtype=float)).any()
    window_events = len(pd.read_parquet(daily_runs["cfg"]["logs"]))  # DAY1 and DAY2: the 2-day window
    assert window_events == 6000 and (est["n_events"] == window_events).all()
    # the day's statistics are in the shared store, partitioned by dt
    store = Path(daily_runs["cfg"]["root"]) / "stats-store"
    assert any(p.name == f"dt={DAY2}" for p in store.rglob("dt=*"))
    # the evaluate task used the adc task's table of the same dt
    assert _result(jobs["evaluate"])["inputs"]["adc"] == str(jobs["adc"])
    if daily_runs["cfg"]["report"] == "required":
        assert (daily_runs["root"] / "report" / f"dt={DAY2}" / "report.html").stat().st_size > 0


def test_daily_tables_equal_a_direct_command_line_run(daily_runs, spark, tmp_path):
    """The DAG's evaluate and adc outputs equal `scavenger <job>` run by hand with the same flags (fresh scan)."""
    from scavenger.cli import main

    cfg = daily_runs["cfg"]
    plan = P.daily_plan(C.merge_config(None, json.dumps(cfg)), DAY2)
    for name, step in (("adc", plan["adc"]), ("evaluate", plan["evaluate"][0])):
        args = list(step["application_args"])
        args[args.index("--out") + 1] = str(tmp_path / name)
        args[args.index("--stats-dir") + 1] = str(tmp_path / f"store-{name}")
        assert main([name, *args]) == 0
        _assert_same_tables(daily_runs["snap"][0][name], _tables(tmp_path / name))


def test_second_run_of_a_dt_is_identical_and_replaces_only_that_dt(daily_runs):
    snap1, snap2 = daily_runs["snap"]
    for name in snap1:
        _assert_same_tables(snap1[name], snap2[name])
    assert not daily_runs["stale"].exists()
    assert (daily_runs["other"] / "keep.txt").read_text() == "another dt"


def _between_marks(text: str) -> str:
    start, end = MARK.format("gate start"), MARK.format("gate end")
    return text[text.index(start):text.index(end)]


def test_contextual_logs_stop_at_the_gate(dag_runs):
    gate = dag_runs["gate"]
    root, states = gate["root"], gate["states"]
    assert gate["state"] == "failed"
    assert states["validate"] == "failed"
    for tid in ("stats", "adc", "evaluate", "report"):
        assert states[tid] == "upstream_failed", states
    result = _result(root / "validate" / f"dt={DAY1}")
    assert (result["exit_code"], result["status"]) == (3, "data_check_failed")
    failed = [v for v in result["verdicts"] if v.get("verdict") == "fail"]
    assert any(v.get("check", "").startswith("a.") for v in failed), failed
    text = _between_marks(dag_runs["stdout"]) + _between_marks(dag_runs["stderr"])
    assert "scavenger job validate exited 3 (data check failed)" in text
    assert result["message"].splitlines()[0] in text
    assert not (root / "adc").exists() and not (root / "evaluate").exists()


def test_evaluate_dag_reproduces_the_daily_estimates(dag_runs):
    daily, evaluate = dag_runs["daily"], dag_runs["evaluate"]
    assert evaluate["states"] == {"plan": "success", "evaluate": "success"}
    assert len(evaluate["adhoc"]) == 1
    assert _result(evaluate["adhoc"][0])["inputs"]["adc"] == str(daily["jobs"]["adc"])
    tables = daily["snap"][1]["evaluate"]
    # the daily job runs with --by-day: its per-day estimates and the running confidence sequences beside them
    assert set(tables) - set(evaluate["tables"][0]) == {"estimates_by_day", "running"}
    rest = {k: v for k, v in tables.items() if k not in ("estimates_by_day", "running")}
    _assert_same_tables(rest, evaluate["tables"][0])


def test_evaluate_dag_refuses_a_bad_param_before_running(dag_runs):
    """Run in the helper process (its Airflow DB; this process needs none): dag.test with prior_mean=-1."""
    bad = dag_runs["bad_param"]
    assert bad["raised"] == "ParamValidationError", bad
    assert "Invalid input for param prior_mean" in bad["message"], bad
    assert bad["new_outputs"] == []             # no task ran: the evaluate job wrote nothing


if __name__ == "__main__":
    # the helper process of the ``dag_runs`` fixture: python tests/test_airflow_e2e.py WORKDIR SIM
    _work = Path(sys.argv[1])
    _value = _run_dags(_work, Path(sys.argv[2]))
    (_work / "value.pkl.tmp").write_bytes(pickle.dumps(_value))
    os.replace(_work / "value.pkl.tmp", _work / "value.pkl")

