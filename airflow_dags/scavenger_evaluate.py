"""``scavenger_evaluate``: an on-demand evaluation, triggered by hand with typed, validated params.

    plan (check params, build argv) -> evaluate (spark-submit jobs/evaluate.py)

Params are checked twice: by their JSON schemas when the run is created (type, pattern, enum, range) and by
``plan`` (cross-field rules: date_from <= date_to, window length). Sources are absolute paths, URIs or catalog
table names matched by strict patterns; estimators and the ADC source come from fixed enums; nothing from a param
is evaluated as code or SQL, and the job argv goes to spark-submit as a list, never through a shell.
The output goes to ``{root}/evaluate-adhoc/<from>_<to>_<hash of the params>/``: the same params replace the
same directory.
"""
from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, task
from scavenger_airflow import config as C
from scavenger_airflow import plans as P
from scavenger_airflow.operators import ScavengerSparkSubmitOperator

SPARK_CONN_ID = os.environ.get("SCAVENGER_SPARK_CONN_ID", "spark_default")

PARAMS = {
    "logs": Param(str(C.REPO / "demo-out" / "logs"), type="string", pattern=C.SOURCE_PATTERN,
                  title="Impression logs", description="absolute path, URI, or table [catalog.][db.]table"),
    "decisions": Param(str(C.REPO / "demo-out" / "decisions"), type="string", pattern=C.SOURCE_PATTERN,
                       title="Target-policy decisions",
                       description="absolute path, URI, or table [catalog.][db.]table"),
    "date_from": Param("2026-01-01", type="string", format="date", pattern=C.DATE_PATTERN,
                       title="First day (inclusive)"),
    "date_to": Param("2026-01-07", type="string", format="date", pattern=C.DATE_PATTERN,
                     title="Last day (inclusive)"),
    "policies": Param([], type="array", items={"type": "string", "pattern": C.NAME_PATTERN}, uniqueItems=True,
                      title="Policy ids", description="empty: every policy in the decisions"),
    "estimators": Param([], type="array", items={"type": "string", "pattern": C.ESTIMATOR_PATTERN},
                        uniqueItems=True, title="Estimators",
                        description="empty: the job's default set; names and aliases as `scavenger evaluate --help` "
                                    "lists them (plugins included), checked when the run starts"),
    "prior_mean": Param(None, type=["null", "number"], minimum=C.PRIOR_MEAN_RANGE[0],
                        maximum=C.PRIOR_MEAN_RANGE[1], title="Prior mean reward for PI++",
                        description="null: the logged mean reward"),
    "adc_source": Param("estimate", type="string", enum=list(C.ADC_SOURCES), title="ADC source",
                        description="estimate: from the window's own logs; daily: the ADC table scavenger_daily "
                                    "computed for date_to"),
    "adc_method": Param(None, type=["null", "string"], enum=[None, *C.ADC_METHODS], title="ADC method",
                        description="which ADC estimate to use; null: the job's default"),
    "baseline": Param(None, type=["null", "string"], pattern=C.NAME_PATTERN, title="Baseline policy",
                      description="each target minus this policy on the same events (differences/, with "
                                  "confidence sequences): another target of the decisions, or 'logging' for what "
                                  "the logs earned; null: none"),
}

with DAG(
    dag_id="scavenger_evaluate",
    description="evaluate target policies on a date window of logs, triggered by hand",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,   # the ad-hoc runs share one statistics store ({stats_dir}/adhoc), which takes one writer
                         # at a time: two runs writing the same day could leave one's manifest over the other's tables
    params=PARAMS,
    default_args={
        "owner": "scavenger",
        "retries": int(os.environ.get("SCAVENGER_AIRFLOW_RETRIES", "2")),
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=30),
        "execution_timeout": timedelta(hours=4),
    },
    tags=["scavenger"],
    doc_md=__doc__,
) as dag:

    @task
    def plan(params=None):
        """Check the params (cross-field rules too) and the config; build the evaluate job's argv."""
        import hashlib
        import json
        import sys

        from airflow.sdk.exceptions import AirflowFailException
        from scavenger_airflow.runtime import load_config

        cfg = load_config()
        try:
            checked = C.evaluate_params(dict(params))
            digest = hashlib.sha256(json.dumps(checked, sort_keys=True).encode()).hexdigest()[:12]
            key = f"{checked['date_from']}_{checked['date_to']}_{digest}"
            return P.evaluate_plan(cfg, checked, key, python=sys.executable)
        except C.ConfigError as exc:
            raise AirflowFailException(f"invalid params: {exc}") from None

    ScavengerSparkSubmitOperator(task_id="evaluate", conn_id=SPARK_CONN_ID, step=plan())
