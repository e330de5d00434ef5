"""``scavenger_daily``: the scheduled warehouse pipeline, one run per day ``dt`` (= the run's ``ds``).

    plan -> validate (gate of the deployment's estimators) -> adc (trailing window)
         -> stats (the day's one pass, per registry dataset, with the ADCs evaluate uses)
         -> evaluate (per registry dataset, trailing window, and per day) -> report

With the config's ``experiment_start``, evaluate covers experiment_start..dt instead (its running/ holds every day
of the experiment), and with ``baseline`` each target minus that policy (differences/, confidence sequences); the
report plots both (plans.daily_plan).

Outputs are published as Assets (scavenger.validation, .adc, .estimates, .report) whose events carry the dt as
their partition key, so downstream DAGs can schedule on them. The param ``engine`` (spark | duckdb) runs a day
on DuckDB in a local process instead of spark-submit (small deployments).

Every Spark task is ``spark-submit jobs/<name>.py`` through the Spark connection (``spark_default``:
host ``local[*]``); it writes only ``{root}/<job>/dt=<ds>/`` and a re-run replaces that directory, so runs of
different days never touch each other's outputs. The day statistics go to the shared stores
``{stats_dir}/logs/`` (validate, adc) and ``{stats_dir}/datasets/<registry name>/`` (stats, evaluate), each
``<table>/dt=<day>/`` (one partition per day). Settings: scavenger_airflow/config.py (Variables
``scavenger_config`` / ``scavenger_config_file``, file ``$SCAVENGER_AIRFLOW_CONFIG``), read when ``plan`` runs.
A failed gate (exit 3) fails ``validate`` without retries, with the validation message in its log, and every
downstream task ends ``upstream_failed``.
"""
from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, CronDataIntervalTimetable, Param, chain, task
from scavenger_airflow.operators import ScavengerSparkSubmitOperator

SPARK_CONN_ID = os.environ.get("SCAVENGER_SPARK_CONN_ID", "spark_default")
START_DATE = pendulum.parse(os.environ.get("SCAVENGER_DAILY_START", "2026-01-01"), tz="UTC")

DEFAULT_ARGS = {
    "owner": "scavenger",
    "retries": int(os.environ.get("SCAVENGER_AIRFLOW_RETRIES", "2")),
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=30),
    "execution_timeout": timedelta(hours=2),
}

# What the daily DAG publishes, partitioned by dt (the run's ds): downstream DAGs can schedule on these.
ASSETS = {name: Asset(name=f"scavenger.{name}", uri=f"scavenger://outputs/{name}")
          for name in ("validation", "adc", "estimates", "report")}

with DAG(
    dag_id="scavenger_daily",
    description="validate -> day statistics -> ADCs -> evaluate registered policies -> report, per dt",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=START_DATE,
    catchup=True,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    dagrun_timeout=timedelta(hours=8),
    tags=["scavenger"],
    doc_md=__doc__,
    params={"engine": Param(None, type=["null", "string"], enum=[None, "spark", "duckdb"],
                            description="run this day's jobs on Spark (spark-submit) or on DuckDB in a local "
                                        "process; default: the config's engine")},
) as dag:

    @task(multiple_outputs=True)
    def plan(ds=None, run_id=None, params=None):
        """Read and check the config, build every job's argv for this dt (nothing runs here)."""
        import sys

        from airflow.sdk.exceptions import AirflowFailException
        from scavenger_airflow import config as C
        from scavenger_airflow import plans as P
        from scavenger_airflow.runtime import load_config

        cfg = load_config()
        if not ds:
            # a run triggered without a logical date (Airflow 3 allows it) has no day to process
            raise AirflowFailException("this run has no logical date (ds), so no day dt to process: trigger "
                                       "scavenger_daily with a logical date, e.g. airflow dags trigger "
                                       "scavenger_daily --logical-date 2026-01-07")
        try:
            if params and params.get("engine"):
                cfg = C.validate_config({**cfg, "engine": params["engine"]})
            return P.daily_plan(cfg, ds, python=sys.executable, run_id=run_id)
        except C.ConfigError as exc:     # a setting to fix: fail at once, no retries
            raise AirflowFailException(f"scavenger config: {exc}") from None

    @task
    def registry_jobs(jobs: list):
        """One job per registry dataset (mapped tasks need a plain list as their input)."""
        return jobs

    steps = plan()
    validate = ScavengerSparkSubmitOperator(task_id="validate", conn_id=SPARK_CONN_ID, step=steps["validate"],
                                            outlets=[ASSETS["validation"]])
    stats = ScavengerSparkSubmitOperator.partial(task_id="stats", conn_id=SPARK_CONN_ID).expand(
        step=registry_jobs.override(task_id="stats_jobs")(steps["stats"]))
    adc = ScavengerSparkSubmitOperator(task_id="adc", conn_id=SPARK_CONN_ID, step=steps["adc"],
                                       outlets=[ASSETS["adc"]])
    evaluate = ScavengerSparkSubmitOperator.partial(task_id="evaluate", conn_id=SPARK_CONN_ID,
                                                    outlets=[ASSETS["estimates"]]).expand(
        step=registry_jobs.override(task_id="evaluate_jobs")(steps["evaluate"]))
    report = ScavengerSparkSubmitOperator(task_id="report", conn_id=SPARK_CONN_ID, step=steps["report"],
                                          outlets=[ASSETS["report"]])
    # adc before stats: the day's statistics are made with the adc task's table (evaluate's --adc), so evaluate
    # reuses them
    chain(validate, adc, stats, evaluate, report)
