"""The scavenger DAGs: clean and cheap to import, the task graph and params of issue 6, strict validation.

No Spark here (tests/test_airflow_e2e.py runs the DAGs). Skipped when Airflow is not installed.
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "airflow_dags"
sys.path.insert(0, str(DAGS))

from scavenger_airflow.testing import isolate_airflow_home  # noqa: E402

isolate_airflow_home()
pytest.importorskip("airflow.sdk")
pytest.importorskip("airflow.providers.apache.spark.operators.spark_submit")

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402
from airflow.sdk import CronDataIntervalTimetable  # noqa: E402
from scavenger_airflow import config as C  # noqa: E402
from scavenger_airflow import plans as P  # noqa: E402
from scavenger_airflow.operators import ScavengerSparkSubmitOperator  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:GitWildMatchPattern:DeprecationWarning")  # Airflow's own

DAG_FILES = {"scavenger_daily": DAGS / "scavenger_daily.py", "scavenger_evaluate": DAGS / "scavenger_evaluate.py"}

_IMPORT_PROBE = textwrap.dedent("""
    import json, sys, time, warnings
    sys.path.insert(0, {dags!r})
    # Airflow itself (and the provider) are the baseline, not the DAG file's cost.
    import airflow.sdk, pendulum, croniter  # croniter runs `file` at its own import
    import airflow.providers.apache.spark.operators.spark_submit
    events = []
    def audit(event, args):
        if event == "open" and isinstance(args[0], str) and not args[0].endswith((".py", ".pyc", ".so")):
            events.append(f"open {{args[0]}}")
        elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "socket.connect",
                       "sqlite3.connect", "urllib.Request"):
            events.append(f"{{event}} {{args[0]!r}}"[:200])
    sys.addaudithook(audit)
    warnings.simplefilter("error")
    start = time.perf_counter()
    module = __import__({name!r})
    seconds = time.perf_counter() - start
    print(json.dumps({{"seconds": seconds, "events": events, "dag_id": module.dag.dag_id,
                      "pyspark": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark"),
                      "scavenger": sorted(m for m in sys.modules if m.split(".")[0] == "scavenger")}}))
""")


@pytest.mark.parametrize("dag_id", sorted(DAG_FILES))
def test_dag_file_imports_fast_without_warnings_spark_or_io(dag_id):
    """A fresh interpreter imports the DAG file with warnings as errors in < 2 s, opening no file other than
    Python modules, starting no process, touching no DB or socket, and importing neither pyspark nor scavenger."""
    code = _IMPORT_PROBE.format(dags=str(DAGS), name=DAG_FILES[dag_id].stem)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["dag_id"] == dag_id
    assert probe["events"] == []
    assert probe["pyspark"] == []
    # the estimator names come from the registry (one declaration): a pure module, nothing else of the library
    assert set(probe["scavenger"]) <= {"scavenger", "scavenger.errors", "scavenger.registry"}
    assert probe["seconds"] < 2.0


def test_dagbag_has_both_dags_and_no_import_errors_or_warnings():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert bag.captured_warnings == {}
    assert sorted(bag.dag_ids) == sorted(DAG_FILES)
    # helpers are not parsed as DAG files (.airflowignore)
    assert {Path(s.file).name for s in bag.dagbag_stats} == {"scavenger_daily.py", "scavenger_evaluate.py"}


@pytest.fixture(scope="module")
def daily():
    import scavenger_daily

    return scavenger_daily.dag


@pytest.fixture(scope="module")
def evaluate_dag():
    import scavenger_evaluate

    return scavenger_evaluate.dag


def _upstream(dag):
    return {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks}


def test_daily_task_graph(daily):
    assert _upstream(daily) == {
        "plan": [],
        "validate": ["plan"],
        "stats_jobs": ["plan"],
        "adc": ["plan", "validate"],
        "stats": ["adc", "stats_jobs"],
        "evaluate_jobs": ["plan"],
        "evaluate": ["evaluate_jobs", "stats"],
        "report": ["evaluate", "plan"],
    }
    spark_tasks = {"validate", "stats", "adc", "evaluate", "report"}
    mapped = {t.task_id for t in daily.tasks if t.is_mapped}
    assert mapped == {"stats", "evaluate"}  # one job per registry dataset
    for tid in spark_tasks:
        task = daily.task_dict[tid]
        cls = task.operator_class if tid in mapped else type(task)
        assert issubclass(cls, ScavengerSparkSubmitOperator) and issubclass(cls, SparkSubmitOperator)


def test_daily_schedule_backfill_retries_and_timeouts(daily):
    assert isinstance(daily.timetable, CronDataIntervalTimetable)  # ds = the finished day the run processes
    assert daily.timetable.expression == "0 0 * * *" and str(daily.timetable.timezone) == "UTC"
    assert daily.catchup is True
    assert daily.max_active_runs == 1  # backfill one dt at a time; the statistics store is shared
    assert daily.dagrun_timeout == timedelta(hours=8)
    for tid in ("validate", "adc", "report"):
        task = daily.task_dict[tid]
        assert task.retries >= 1
        assert task.retry_exponential_backoff >= 2.0
        assert task.max_retry_delay == timedelta(minutes=30)
        assert task.execution_timeout == timedelta(hours=2)
        assert task._conn_id == "spark_default"
    for tid in ("stats", "evaluate"):
        kwargs = daily.task_dict[tid].partial_kwargs
        assert kwargs["retries"] >= 1 and kwargs["execution_timeout"] == timedelta(hours=2)
        assert kwargs["conn_id"] == "spark_default"


def test_evaluate_graph_and_params(evaluate_dag):
    assert _upstream(evaluate_dag) == {"plan": [], "evaluate": ["plan"]}
    assert isinstance(evaluate_dag.task_dict["evaluate"], ScavengerSparkSubmitOperator)
    assert type(evaluate_dag.timetable).__name__ == "NullTimetable"  # schedule=None: manual triggers only
    assert evaluate_dag.max_active_runs == 1  # the ad-hoc runs share {stats_dir}/adhoc: one writer at a time
    params = evaluate_dag.params
    assert set(params.keys()) == {"logs", "decisions", "date_from", "date_to", "policies", "estimators",
                                  "prior_mean", "adc_source", "adc_method", "baseline"}
    schema = {k: params.get_param(k).schema for k in params.keys()}
    assert "evaluate --help" in params.get_param("estimators").description   # the registry checks names at run time
    with pytest.raises(C.ConfigError, match="unknown estimator"):
        C.check_estimators(["pii"])
    assert schema["adc_source"]["enum"] == list(C.ADC_SOURCES)
    assert (schema["prior_mean"]["minimum"], schema["prior_mean"]["maximum"]) == C.PRIOR_MEAN_RANGE
    assert params.validate()["adc_source"] == "estimate"


@pytest.mark.parametrize("key, value, words", [
    ("prior_mean", 5000, "greater than the maximum"),
    ("prior_mean", "0.5", "is not of type"),
    ("estimators", ["pi; rm -rf /"], "does not match"),
    ("estimators", ["slate_pi", "slate_pi"], "non-unique"),
    ("logs", "-rf", "does not match"),
    ("logs", "db.logs; DROP TABLE x", "does not match"),
    ("logs", "relative/path", "does not match"),
    ("decisions", "/data/d $(reboot)", "does not match"),
    ("date_from", "2026-13-01", "is not a 'date'"),
    ("date_to", "yesterday", "is not a 'date'"),
    ("adc_source", "/etc/passwd", "is not one of"),
    ("adc_method", "best", "is not one of"),
    ("policies", ["a b"], "does not match"),
    ("baseline", "-rf", "does not match"),
    ("baseline", ["logging"], "is not of type"),
])
def test_bad_param_is_rejected_with_a_clear_message(evaluate_dag, key, value, words):
    from airflow.sdk.definitions.param import ParamValidationError

    params = copy.deepcopy(evaluate_dag.params)
    with pytest.raises(ParamValidationError) as info:
        params[key] = value
    message = str(info.value)
    assert f"Invalid input for param {key}" in message and words in message


def test_cross_field_and_second_line_checks():
    good = {"logs": "/data/logs", "decisions": "cat.db.decisions", "date_from": "2026-03-01",
            "date_to": "2026-03-07", "policies": ["p1"], "estimators": ["slate_pi"], "prior_mean": 0.5,
            "adc_source": "estimate", "adc_method": None}
    assert C.evaluate_params(good)["prior_mean"] == 0.5
    for change, words in [({"date_from": "2026-03-08"}, "param date_from 2026-03-08 is after date_to"),
                          ({"date_from": "2024-01-01"}, "at most 366"),
                          ({"logs": "/data/../etc"}, "param logs: '/data/../etc' is not allowed"),
                          ({"date_to": "2026-02-30"}, "param date_to: '2026-02-30' is not a calendar date"),
                          ({"prior_mean": True}, "param prior_mean: expected a number"),
                          ({"baseline": "p9"}, "param baseline: 'p9' is not among param policies"),
                          ({"baseline": "a b"}, "param baseline: 'a b' is not allowed")]:
        with pytest.raises(C.ConfigError, match=words.replace("(", r"\(").replace(".", r"\.")):
            C.evaluate_params({**good, **change})


def test_config_layers_and_rejections(tmp_path):
    cfg = C.merge_config('{"root": "/srv/out", "window_days": 3}', '{"window_days": 5}')
    assert (cfg["root"], cfg["window_days"], cfg["stats_dir"]) == ("/srv/out", 5, "/srv/out/stats-store")
    for text, words in [('{"rooot": "/x"}', "unknown config key"),
                        ('{"root": "out"}', "root: 'out' is not allowed"),
                        ('{"window_days": 0}', "window_days: expected an integer"),
                        ('{"registry": [{"name": "a", "decisions": "x; DROP TABLE y"}]}', "registry[0].decisions"),
                        ('{"registry": [{"name": "a", "decisions": "/d"}, {"name": "a", "decisions": "/e"}]}',
                         "appears twice"),
                        ('{"spark_conf": {"spark.driver.extraJavaOptions": "$(id)"}}', "spark_conf[spark.driver"),
                        ('{"spark_conf": {"--py-files": "x"}}', "spark_conf key"),
                        ('{"report": "maybe"}', "report: 'maybe' is not one of"),
                        ('{"validate": {"checks": "a; rm"}}', "validate.checks"),
                        ('{"validate": {"reward_max": "1"}}', "validate.reward_max"),
                        ('{"validate": {"extra": 1}}', "validate: expected an object"),
                        ('{"experiment_start": "2026-02-30"}', "experiment_start: '2026-02-30' is not a calendar"),
                        ('{"experiment_start": "yesterday"}', "experiment_start: 'yesterday' is not allowed"),
                        ('{"baseline": "--all"}', "baseline: '--all' is not allowed"),
                        ('{"baseline": "p9", "registry": [{"name": "a", "decisions": "/d", "policies": ["p1"]}]}',
                         "baseline: 'p9' is not among registry[0].policies (p1)"),
                        ("[1]", "expected a JSON object")]:
        with pytest.raises(C.ConfigError) as info:
            C.merge_config(None, text)
        assert words in str(info.value)


def test_daily_plan_argv_for_one_dt():
    cfg = C.merge_config(None, json.dumps({
        "root": "/srv/out", "repo": "/opt/scavenger", "logs": "wh.logs", "window_days": 7,
        "registry": [{"name": "main", "decisions": "/d/main", "policies": ["p1", "p2"]},
                     {"name": "alt", "decisions": "wh.alt_decisions"}],
        "estimators": ["slate_pi", "slate_ips"], "prior_mean": 0.25, "adc_method": "naive",
        "spark_conf": {"spark.executor.memory": "4g"}, "report": "off"}))
    plan = P.daily_plan(cfg, "2026-03-10", python="/usr/bin/python3", run_id="scheduled__2026-03-10T00:00:00+00:00")
    rid = ["--run-id", "scheduled__2026-03-10T00:00:00+00:00"]
    conf = {"spark.pyspark.python": "/usr/bin/python3", "spark.pyspark.driver.python": "/usr/bin/python3",
            "spark.executor.memory": "4g"}
    # validate gates the checks of the deployment's estimators (and of the ADCs); validate and adc share the
    # logs' statistics store, each registry dataset has its own (its decisions shape the day's tables)
    assert plan["validate"] == {"application": "/opt/scavenger/jobs/validate.py", "conf": conf, "skip_reason": "",
                                "engine": "spark",
                                "application_args": ["--logs", "wh.logs", "--from", "2026-03-10", "--to", "2026-03-10",
                                                     "--estimators", "adc,slate_pi,slate_ips",
                                                     "--stats-dir", "/srv/out/stats-store/logs",
                                                     "--out", "/srv/out/validate/dt=2026-03-10", *rid]}
    assert plan["adc"]["application_args"] == [
        "--logs", "wh.logs", "--from", "2026-03-04", "--to", "2026-03-10", "--stats-dir",
        "/srv/out/stats-store/logs", "--by-day", "--out", "/srv/out/adc/dt=2026-03-10", *rid]
    assert [s["application_args"][-6:-2] for s in plan["stats"]] == [
        ["--stats-dir", "/srv/out/stats-store/datasets/main", "--out", "/srv/out/stats/main/dt=2026-03-10"],
        ["--stats-dir", "/srv/out/stats-store/datasets/alt", "--out", "/srv/out/stats/alt/dt=2026-03-10"]]
    assert plan["evaluate"][0]["application"] == "/opt/scavenger/jobs/evaluate.py"
    assert plan["evaluate"][0]["application_args"] == [
        "--logs", "wh.logs", "--decisions", "/d/main", "--policies", "p1,p2", "--from", "2026-03-04",
        "--to", "2026-03-10", "--estimators", "slate_pi,slate_ips", "--prior-mean", "0.25",
        "--adc", "/srv/out/adc/dt=2026-03-10", "--adc-method", "naive", "--stats-dir",
        "/srv/out/stats-store/datasets/main", "--by-day", "--out", "/srv/out/evaluate/main/dt=2026-03-10", *rid]
    assert plan["evaluate"][1]["application_args"][:4] == ["--logs", "wh.logs", "--decisions", "wh.alt_decisions"]
    assert plan["report"]["skip_reason"].startswith("report is off")


def test_evaluate_merges_the_day_the_stats_task_stored(tmp_path):
    """The daily DAG's stats task stores dt so that its evaluate reads only the window's other days: with the
    config's default adc_source (daily), evaluate gets --adc of the adc task, whose stored days hold tables that a
    day stored with ADCs estimated lacks (reorder_pairs). Before, stats ran without --adc, and evaluate scanned dt
    a second time (2 days read, 0 from the store, on this 2-day window)."""
    from scavenger.cli import main

    gen = tmp_path / "gen"
    assert main(["generate", "--out", str(gen), "--layout", "ranked", "--days", "2", "--ads", "20",
                 "--events-per-day", "2000", "--start-date", "2026-03-09", "--seed", "3"]) == 0
    cfg = C.merge_config(None, json.dumps({
        "root": str(tmp_path / "out"), "logs": str(gen / "logs"), "engine": "duckdb", "window_days": 2,
        "registry": [{"name": "main", "decisions": str(gen / "decisions"), "policies": []}]}))
    plan = P.daily_plan(cfg, "2026-03-10")
    for step in (plan["adc"], plan["stats"][0], plan["evaluate"][0]):      # the DAG's order (test_daily_task_graph)
        assert main([Path(step["application"]).stem, *step["application_args"]]) == 0
    result = json.loads((tmp_path / "out" / "evaluate" / "main" / "dt=2026-03-10" / "result.json").read_text())
    counts = result["counts"]
    assert (counts["days"], counts["days_scanned"], counts["days_loaded"]) == (2, 1, 1)
    assert counts["logs"]["rows_in"] == 4000 and counts["rows_read"] == 2000
    assert result["inputs"]["adc"] == str(tmp_path / "out" / "adc" / "dt=2026-03-10")


def test_engine_and_catalog_reach_every_job():
    """engine duckdb: each job runs in a local process with --engine duckdb; catalog: --catalog on the jobs that
    write result tables; the daily DAG's param engine overrides the config per run."""
    base = {"root": "/srv/out", "repo": "/opt/scavenger", "logs": "/wh/logs"}
    duck = P.daily_plan(C.merge_config(None, json.dumps({**base, "engine": "duckdb"})), "2026-03-10")
    for step in (duck["validate"], duck["adc"], *duck["stats"], *duck["evaluate"], duck["report"]):
        assert step["engine"] == "duckdb" and step["application_args"][-2:] == ["--engine", "duckdb"]
    cat = P.daily_plan(C.merge_config(None, json.dumps({**base, "catalog": "scv"})), "2026-03-10")
    for step in (cat["validate"], cat["adc"], *cat["evaluate"]):
        assert step["application_args"][-2:] == ["--catalog", "scv"]
    # every job's parser takes its argv: report reads files only (it was given --catalog: exit 2 every day)
    from scavenger.cli import build_parser

    for job, steps in cat.items():
        for step in steps if isinstance(steps, list) else [steps]:
            build_parser().parse_args([Path(step["application"]).stem, *step["application_args"]])
    assert "--catalog" not in cat["report"]["application_args"]
    # the trailing window's by-day rows go to the catalog for dt only (earlier days are earlier runs' partitions)
    for step in (cat["adc"], *cat["evaluate"]):
        assert step["application_args"][-4:-2] == ["--catalog-days", "last"]
    # an ad-hoc evaluation writes its own directory, never the daily catalog partition of its last day
    adhoc = P.evaluate_plan(C.merge_config(None, json.dumps({**base, "catalog": "scv"})),
                            {"logs": "/wh/logs", "decisions": "/wh/dec", "date_from": "2026-03-01",
                             "date_to": "2026-03-10"}, "k1")
    assert "--catalog" not in adhoc["application_args"]
    with pytest.raises(C.ConfigError, match="catalog"):
        C.merge_config(None, json.dumps({**base, "engine": "duckdb", "catalog": "scv"}))
    with pytest.raises(C.ConfigError, match="engine"):
        C.merge_config(None, json.dumps({**base, "engine": "flink"}))


def test_daily_dag_publishes_assets_and_takes_an_engine_param(daily):
    outlets = {t.task_id: [a.name for a in t.outlets] for t in daily.tasks if t.outlets}
    assert outlets == {"validate": ["scavenger.validation"], "adc": ["scavenger.adc"],
                       "evaluate": ["scavenger.estimates"], "report": ["scavenger.report"]}
    assert daily.params["engine"] is None


def test_report_absence_is_tolerated_only_by_config(tmp_path):
    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    (repo / "jobs" / "report.py").write_text("")
    base = {"root": str(tmp_path / "out"), "repo": str(repo)}
    required = P.daily_plan(C.merge_config(None, json.dumps({**base, "report": "required"})), "2026-03-10")
    assert required["report"]["skip_reason"] == ""  # runs (and fails loudly if the job is missing)
    lenient = P.daily_plan(C.merge_config(None, json.dumps({**base, "report": "if_available"})), "2026-03-10")
    assert "does not exist in this checkout" in lenient["report"]["skip_reason"]
    (repo / "lib" / "scavenger" / "cli").mkdir(parents=True)
    (repo / "lib" / "scavenger" / "cli" / "report_command.py").write_text("")
    present = P.daily_plan(C.merge_config(None, json.dumps({**base, "report": "if_available"})), "2026-03-10")
    assert present["report"]["skip_reason"] == ""


def test_enums_and_flags_match_the_jobs():
    """The DAG's fixed enums are the jobs' own lists, and each job's parser accepts the argv the plan builds."""
    registry = pytest.importorskip("scavenger.registry")
    adc = pytest.importorskip("scavenger.estimators.attention_decay")
    assert C.ESTIMATORS == tuple(registry.ESTIMATORS)
    assert C.ADC_METHODS == tuple(adc.METHODS)
    from scavenger.cli import build_parser

    cfg = C.merge_config(None, json.dumps({"estimators": list(C.ESTIMATORS), "prior_mean": 1.5,
                                           "adc_method": "heuristic"}))
    step = P.daily_plan(cfg, "2026-03-10", run_id="r1")["evaluate"][0]
    args = build_parser().parse_args(["evaluate", *step["application_args"]])
    assert args.estimators.split(",") == list(C.ESTIMATORS)
    assert (args.prior_mean, args.adc_method, args.run_id) == (1.5, "heuristic", "r1")
    assert args.date_from == "2026-03-04" and args.date_to == "2026-03-10"
    cfg = C.merge_config(None, json.dumps({"validate": {"great_expectations": False, "checks": "a,d",
                                                        "cramers_v_max": 0.2}}))
    plan = P.daily_plan(cfg, "2026-03-10")
    v = build_parser().parse_args(["validate", *plan["validate"]["application_args"]])
    assert (v.no_great_expectations, v.checks, v.cramers_v_max, v.date_from, v.date_to) == \
        (True, "a,d", 0.2, "2026-03-10", "2026-03-10")
    a = build_parser().parse_args(["adc", *plan["adc"]["application_args"]])
    assert (a.date_from, a.date_to, a.stats_dir) == ("2026-03-04", "2026-03-10", P.stores(cfg)["logs"])
    if P.job_exists(cfg, "report"):
        r = build_parser().parse_args(["report", *plan["report"]["application_args"]])
        assert (r.root, r.dt, r.out) == (cfg["root"], "2026-03-10", P.out_dir(cfg, "report", "2026-03-10"))


def test_example_config_file_is_valid_and_read_from_the_env(tmp_path, monkeypatch):
    example = DAGS / "scavenger_config.example.json"
    monkeypatch.setenv("SCAVENGER_AIRFLOW_CONFIG", str(example))
    cfg = C.merge_config(C.read_config_file(None), None)
    assert [e["name"] for e in cfg["registry"]] == ["ranker_v2", "offline_candidates"]
    assert cfg["stats_dir"] == "/data/scavenger/stats-store"
    monkeypatch.setenv("SCAVENGER_AIRFLOW_CONFIG", str(tmp_path / "missing.json"))
    with pytest.raises(C.ConfigError, match="cannot read the scavenger config file"):
        C.read_config_file(None)


def test_py_files_reach_spark_submit():
    """The config's py_files (a zip of lib/ for cluster deploy mode) is spark-submit's --py-files (it was checked,
    documented and then dropped)."""
    cfg = C.merge_config(None, json.dumps({"root": "/srv/out", "py_files": "/opt/scavenger/lib.zip"}))
    plan = P.daily_plan(cfg, "2026-03-10")
    steps = [plan["validate"], plan["adc"], *plan["stats"], *plan["evaluate"], plan["report"]]
    assert {s.get("py_files") for s in steps} == {"/opt/scavenger/lib.zip"}
    op = ScavengerSparkSubmitOperator(task_id="t", step=plan["adc"])
    op._apply_step()
    assert op.py_files == "/opt/scavenger/lib.zip" and op._get_hook()._py_files == "/opt/scavenger/lib.zip"


def test_daily_plan_fails_at_once_on_a_setting_to_fix(daily, monkeypatch):
    """No logical date (a run Airflow 3 triggered without one), or an engine param the config refuses, fails the
    plan task without retries (AirflowFailException) saying why; before, a ConfigError was retried twice."""
    from airflow.sdk.exceptions import AirflowFailException
    from scavenger_airflow import runtime

    base = C.merge_config(None, json.dumps({"root": "/srv/out", "catalog": "scv"}))
    monkeypatch.setattr(runtime, "load_config", lambda: copy.deepcopy(base))
    plan = daily.task_dict["plan"].python_callable
    with pytest.raises(AirflowFailException, match="no logical date"):
        plan(ds=None, run_id="r1", params={})
    with pytest.raises(AirflowFailException, match="catalog"):
        plan(ds="2026-03-10", run_id="r1", params={"engine": "duckdb"})
    assert plan(ds="2026-03-10", run_id="r1", params={})["adc"]["application_args"][-2:] == ["--catalog", "scv"]


def test_each_registry_dataset_writes_its_own_catalog_database():
    """Two registry datasets evaluated into one database replaced each other's rows of every day (the dt partition
    of <db>.estimates, diagnostics, estimates_by_day, quarantine_decisions: the last task to finish won), and the
    day-statistics task wrote its one-day estimates there too. The config now refuses two datasets in one database,
    a dataset may name its own (registry[].catalog), and only validate, adc and evaluate write tables."""
    base = {"root": "/srv/out", "catalog": "scv",
            "registry": [{"name": "a", "decisions": "/d/a"}, {"name": "b", "decisions": "/d/b"}]}
    with pytest.raises(C.ConfigError, match="'a' and 'b' would both write"):
        C.merge_config(None, json.dumps(base))
    base["registry"][1]["catalog"] = "scv_b"
    plan = P.daily_plan(C.merge_config(None, json.dumps(base)), "2026-03-10")
    assert [s["application_args"][-2:] for s in plan["evaluate"]] == [["--catalog", "scv"], ["--catalog", "scv_b"]]
    assert not any("--catalog" in s["application_args"] for s in plan["stats"])
    assert plan["validate"]["application_args"][-2:] == ["--catalog", "scv"]
    with pytest.raises(C.ConfigError, match=r"registry\[1\].catalog"):
        C.merge_config(None, json.dumps({**base, "catalog": None, "engine": "duckdb"}))


def test_local_engine_streams_the_job_log_and_stops_the_job_on_kill():
    """engine duckdb: the job's lines reach the task log while it runs (they were held until it ended, and lost
    when the task was stopped), and stopping the task (on_kill: timeout, marked failed) sends the job SIGTERM."""
    import threading
    import time

    from airflow.sdk.exceptions import AirflowException

    op = ScavengerSparkSubmitOperator(task_id="t", step={"application": "/opt/scavenger/jobs/adc.py",
                                                        "application_args": [], "engine": "duckdb"})
    op._apply_step()
    op._local_command = lambda: [sys.executable, "-c", "import time; print('scanning day 1', flush=True); "
                                                       "time.sleep(120)"]
    seen, raised = [], []

    class Log:
        def info(self, fmt, *args):
            seen.append(fmt % args)

    object.__setattr__(op, "_cached_logger", Log())      # what the operator's `log` property returns
    assert op.log.__class__ is Log

    def run():
        try:
            op._run_local()
        except AirflowException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 30
    while "scanning day 1" not in seen and time.time() < deadline:
        time.sleep(0.1)
    assert "scanning day 1" in seen                 # logged while the job still runs
    start = time.time()
    op.on_kill()
    thread.join(30)
    assert not thread.is_alive() and time.time() - start < 20
    assert raised and raised[0].returncode == -15   # stopped by SIGTERM


def test_documented_backfill_runs_one_dt_at_a_time():
    """Airflow 3 applies a backfill's max_active_runs independently of the DAG's (default 10): the documented
    backfill command ran ten dts at once against the shared statistics stores, which take one writer at a time."""
    text = (REPO / "docs" / "airflow.md").read_text()
    commands = [line for line in text.splitlines() if line.startswith("airflow backfill create")]
    assert commands and all("--max-active-runs 1" in c for c in commands)


def test_experiment_start_and_baseline_reach_the_daily_evaluate():
    """From experiment_start on, each dt's evaluate covers experiment_start..dt with --by-day and the config's
    --baseline (its running/ holds every day of the experiment); before it, the trailing window; a start more than
    366 days back is a setting to fix. The ad-hoc DAG passes its baseline param."""
    from scavenger.cli import build_parser

    cfg = C.merge_config(None, json.dumps({"root": "/srv/out", "window_days": 7, "experiment_start": "2026-03-01",
                                           "baseline": "logging",
                                           "registry": [{"name": "main", "decisions": "/d/main",
                                                         "policies": ["soft", "greedy"]}]}))
    step = P.daily_plan(cfg, "2026-03-20")["evaluate"][0]
    args = build_parser().parse_args(["evaluate", *step["application_args"]])
    assert (args.date_from, args.date_to, args.by_day, args.baseline) == ("2026-03-01", "2026-03-20", True,
                                                                          "logging")
    assert args.policies == "soft,greedy"
    before = P.daily_plan(cfg, "2026-02-20")["evaluate"][0]["application_args"]       # not started: trailing
    assert before[before.index("--from") + 1] == "2026-02-14" and "--baseline" in before
    first = P.daily_plan(cfg, "2026-03-01")["evaluate"][0]["application_args"]
    assert first[first.index("--from") + 1] == "2026-03-01"
    with pytest.raises(C.ConfigError, match="experiment_start: 2026-03-01 is 367 days before dt 2027-03-02"):
        P.daily_plan(cfg, "2027-03-02")
    # a baseline among the policies; none: no --baseline, and the window is the trailing one
    cfg = C.merge_config(None, json.dumps({"baseline": "greedy", "registry": [
        {"name": "main", "decisions": "/d/main", "policies": ["soft", "greedy"]}, {"name": "all", "decisions": "/d/x"}]}))
    assert [s["application_args"][s["application_args"].index("--baseline") + 1] for s in
            P.daily_plan(cfg, "2026-03-20")["evaluate"]] == ["greedy", "greedy"]
    plain = P.daily_plan(C.merge_config(None, None), "2026-03-20")["evaluate"][0]["application_args"]
    assert "--baseline" not in plain and plain[plain.index("--from") + 1] == "2026-03-14"
    params = {"logs": "/data/logs", "decisions": "/data/dec", "date_from": "2026-03-01", "date_to": "2026-03-07",
              "policies": [], "estimators": [], "prior_mean": None, "adc_source": "estimate", "adc_method": None,
              "baseline": "logging"}
    adhoc = P.evaluate_plan(C.merge_config(None, None), params, "k1")["application_args"]
    assert build_parser().parse_args(["evaluate", *adhoc]).baseline == "logging"
    assert "--baseline" not in P.evaluate_plan(C.merge_config(None, None), {**params, "baseline": None},
                                               "k1")["application_args"]
