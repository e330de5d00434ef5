"""Foundation: pinned pyspark, the contract round trip, table-or-path readers, OBD ingest, CLI exit codes."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scavenger import contract
from scavenger.errors import ContractError, UsageError

REPO = Path(__file__).resolve().parents[1]
PINNED_PYSPARK = "4.3.0"


def test_pyspark_is_the_pinned_version_and_consistent():
    import pyspark
    from importlib import metadata

    assert pyspark.__version__ == PINNED_PYSPARK
    assert metadata.version("pyspark") == PINNED_PYSPARK
    # pyspark-client (pulled by the Airflow Spark provider) writes into the same directory; the install recipe
    # reinstalls pyspark last and tests/test_airflow_install.py checks every file against pyspark's RECORD.
    # The jars shipped with pyspark are the same release as the Python files.
    jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    assert jars and all(PINNED_PYSPARK in j.name for j in jars)


def test_pandas_below_3():
    import pandas

    assert int(pandas.__version__.split(".")[0]) < 3


def _rows():
    from pyspark.sql import Row  # noqa: F401

    base = dt.datetime(2026, 1, 1, 10, 0, 0)
    rows = []
    for i in range(6):
        day = dt.date(2026, 1, 1 + i % 2)
        rows.append({
            "event_id": f"e{i}",
            "event_time": dt.datetime.combine(day, base.time()) + dt.timedelta(minutes=i),
            "context_id": f"c{i % 3}",
            "context": {"f0": str(i % 2), "f1": "x"},
            "logging_policy": "uniform",
            "slots": [
                {"position": 1, "ad_id": f"a{i % 4}", "propensity": 0.25, "reward": float(i % 2)},
                {"position": 2, "ad_id": f"a{(i + 1) % 4}", "propensity": 0.25, "reward": 0.0},
            ],
            "slate_reward": None if i % 3 else 1.5,
            "dt": day,
        })
    return rows


def test_contract_files_are_the_schema(spark):
    logs = contract.load_contract(contract.LOGS)
    assert logs.columns == ["event_id", "event_time", "context_id", "context", "logging_policy", "slots",
                            "slate_reward", "dt"]
    assert logs.partition_column == "dt"
    slot_fields = [f.name for f in logs.field_type("slots").elementType.fields]
    assert slot_fields == ["position", "ad_id", "propensity", "reward"]
    decisions = contract.load_contract(contract.DECISIONS)
    assert decisions.required_columns == ["policy_id", "event_id", "slots", "dt"]
    assert "base_policy" in decisions.columns


def test_contract_round_trip_path_and_table(spark, tmp_path):
    schema = contract.load_contract(contract.LOGS).struct_type()
    df = spark.createDataFrame(_rows(), schema)
    path = str(tmp_path / "logs [v1]{a,b}*")    # a name holding Hadoop glob characters is read as written
    contract.write_partitioned(df, path)
    back = contract.read_logs(spark, path)
    assert back.columns == contract.load_contract(contract.LOGS).columns
    assert back.schema["slots"].dataType.simpleString() == \
        "array<struct<position:int,ad_id:string,propensity:double,reward:double>>"
    got = sorted(back.collect(), key=lambda r: r.event_id)
    want = sorted(_rows(), key=lambda r: r["event_id"])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.event_id == w["event_id"] and g.dt == w["dt"] and g.event_time == w["event_time"]
        assert g.context == w["context"] and g.slate_reward == w["slate_reward"]
        assert [s.asDict() for s in g.slots] == w["slots"]
    # window filter prunes by dt
    assert contract.read_logs(spark, path, "2026-01-02", "2026-01-02").count() == 3
    # a catalog table (qualified: db.table) works the same way; a bare word is a path
    df.write.mode("overwrite").saveAsTable("default.round_trip_logs")
    assert contract.read_logs(spark, "default.round_trip_logs", date_from="2026-01-01",
                              date_to="2026-01-01").count() == 3
    assert not contract.is_table_name("round_trip_logs") and contract.is_table_name("default.round_trip_logs")


def test_rewriting_one_day_replaces_only_that_day(spark, tmp_path):
    from pyspark.sql import functions as F

    schema = contract.load_contract(contract.LOGS).struct_type()
    df = spark.createDataFrame(_rows(), schema)
    path = str(tmp_path / "logs")
    contract.write_partitioned(df, path)
    day2 = df.where(F.col("dt") == F.lit(dt.date(2026, 1, 2))).limit(1)
    contract.write_partitioned(day2, path)
    counts = {r["dt"]: r["count"] for r in contract.read_logs(spark, path).groupBy("dt").count().collect()}
    assert counts == {dt.date(2026, 1, 1): 3, dt.date(2026, 1, 2): 1}


def test_missing_column_is_a_contract_error(spark):
    with pytest.raises(ContractError, match="logging_policy"):
        contract.conform(spark.createDataFrame([("e1",)], "event_id string"),
                         contract.load_contract(contract.LOGS))


def test_bad_sources_are_usage_errors(spark, tmp_path):
    with pytest.raises(UsageError, match="no such path"):
        contract.read_logs(spark, str(tmp_path / "nope"))
    with pytest.raises(UsageError, match="no such table"):
        contract.read_logs(spark, "no_such_db.no_such_table")
    with pytest.raises(UsageError, match="YYYY-MM-DD"):
        contract.filter_window(spark.range(1), "2026-13-01")


def test_ingest_obd_counts_and_positions(spark, obd_dir):
    from pyspark.sql import functions as F
    import pandas as pd

    from scavenger.obd import ingest_obd

    logs = ingest_obd(spark, obd_dir)
    assert logs.columns == contract.load_contract(contract.LOGS).columns
    slots = logs.select("logging_policy", "context_id", "event_time", "dt", F.explode("slots").alias("s"))
    summary = (slots.groupBy("logging_policy", "context_id")
               .agg(F.count(F.lit(1)).alias("rows"), F.sum("s.reward").alias("clicks"),
                    F.min("s.position").alias("pmin"), F.max("s.position").alias("pmax"),
                    F.countDistinct("s.ad_id").alias("ads"),
                    F.sum((F.col("dt") != F.to_date("event_time")).cast("int")).alias("bad_dt"))
               .toPandas().set_index(["logging_policy", "context_id"]).sort_index())
    assert len(summary) == 6 and summary["rows"].sum() == 60000
    assert (summary["rows"] == 10000).all() and (summary["bad_dt"] == 0).all()
    assert (summary["pmin"] == 1).all() and (summary["pmax"] == 3).all()
    assert logs.select("event_id").distinct().count() == 60000
    # Compare with pandas reading the same CSVs directly.
    for policy in ("random", "bts"):
        for campaign in ("all", "men", "women"):
            raw = pd.read_csv(obd_dir / policy / campaign / f"{campaign}.csv", usecols=["item_id", "position", "click"])
            row = summary.loc[(policy, campaign)]
            assert row["clicks"] == raw["click"].sum()
            assert row["ads"] == raw["item_id"].nunique()
    # Uniform logging in `random`: propensity 1/80 in campaign all.
    props = (slots.where((F.col("logging_policy") == "random") & (F.col("context_id") == "all"))
             .select(F.min("s.propensity"), F.max("s.propensity")).first())
    assert props[0] == props[1] == pytest.approx(1 / 80)


def _cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"))
    return subprocess.run([sys.executable, "-m", "scavenger", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(REPO))


@pytest.mark.parametrize("args", [
    [],
    ["no-such-command"],
    ["ingest-obd"],
    ["ingest-obd", "--obd-dir", "/definitely/not/here", "--out", "/tmp/x"],
    ["ingest-obd", "--obd-dir", ".", "--out", "/tmp/x", "--policies", "greedy"],
    ["ingest-obd", "--obd-dir", ".", "--out", "/tmp/x", "--conf", "novalue"],
])
def test_cli_bad_arguments_exit_2_with_one_line(args):
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "at org.apache" not in proc.stderr
    if args:
        error_lines = [line for line in proc.stderr.splitlines() if "error" in line]
        assert len(error_lines) == 1, proc.stderr


def test_cli_help_lists_commands():
    proc = _cli("--help")
    assert proc.returncode == 0
    for name in ("generate", "ingest-obd"):
        assert name in proc.stdout


def test_cli_ingest_obd_end_to_end(obd_dir, tmp_path):
    out = tmp_path / "obd"
    proc = _cli("ingest-obd", "--obd-dir", str(obd_dir), "--out", str(out), "--master", "local[2]",
                "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "ok" and result["exit_code"] == 0
    assert result["counts"]["rows"] == 60000
    assert sorted(result["counts"]["by_file"]) == ["bts/all", "bts/men", "bts/women",
                                                   "random/all", "random/men", "random/women"]
    assert len(list((out / "logs").glob("dt=*"))) >= 1


def test_uncommitted_staging_is_invisible_and_commit_leaves_no_debris(spark, tmp_path):
    """A driver killed after writing staging files but before the rename leaves nothing readable behind."""
    schema = contract.load_contract(contract.LOGS).struct_type()
    df = spark.createDataFrame(_rows(), schema)
    path = tmp_path / "logs"
    written = contract.write_partitioned(df, str(path))
    assert written == ["2026-01-01", "2026-01-02"]
    assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == ["dt=2026-01-01", "dt=2026-01-02"]
    # Simulate a crash midway: a complete-looking partition left in _staging must not be read.
    df.write.partitionBy("dt").parquet(str(path / "_staging" / "crashed"))
    assert contract.read_logs(spark, str(path)).count() == 6
