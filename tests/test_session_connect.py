"""Spark Connect (issue 22): a Connect server started from pyspark's own sbin/, bound to 127.0.0.1; the CLI
(SPARK_REMOTE) and the notebook API run against it and give the estimates of a classic session to 1e-12."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from helpers.cluster_util import fast_jvm_env
from helpers.reference import build_random, write_parquet

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect")
    port = _free_port()
    env = fast_jvm_env({**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(work),
                        "SPARK_PID_DIR": str(work), "SPARK_IDENT_STRING": f"scv{port}"})
    start = [str(home / "sbin" / "start-connect-server.sh"), "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.sql.shuffle.partitions=4",
             "--conf", "spark.driver.memory=2g", "--conf", "spark.ui.enabled=false"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    deadline = time.time() + 120
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(1)
    else:
        pytest.fail(f"the Spark Connect server did not open port {port}: {list(work.glob('*.out'))}")
    yield f"sc://127.0.0.1:{port}"
    subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("cdata")
    write_parquet(build_random(seed=14, K=3, n_ads=6, days=(0, 1), per_day=80, with_nulls=False,
                               logging_policies=("lp",)), str(root))
    return str(root)


def _run(argv, env) -> dict:
    """The CLI in its own process: returns its exit code and result.json (the test asserts)."""
    proc = subprocess.run([sys.executable, "-m", "scavenger", *argv], env=env, capture_output=True, text=True,
                          timeout=600)
    out = argv[argv.index("--out") + 1]
    result = json.loads(Path(out, "result.json").read_text()) if Path(out, "result.json").exists() else {}
    return {"code": proc.returncode, "result": result, "stderr": proc.stderr}


def test_cli_under_spark_connect_equals_classic(connect_server, dataset, tmp_path, spark):
    from scavenger.cli import main

    argv = ["evaluate", "--logs", f"{dataset}/logs", "--decisions", f"{dataset}/decisions", "--gate", "report",
            "--no-great-expectations", "--by-day"]
    remote = _run(argv + ["--out", str(tmp_path / "remote")], {**os.environ, "SPARK_REMOTE": connect_server})
    assert remote["code"] == 0, remote["stderr"][-2000:]
    assert remote["result"]["engine"]["name"] == "spark" and remote["result"]["engine"]["connect"] is True
    assert "SPARK_REMOTE" in remote["result"]["engine"]["why"]
    assert "CANNOT_MODIFY_CONFIG" not in remote["stderr"]      # no client setting of the server's static confs
    assert main(argv + ["--out", str(tmp_path / "classic"), "--engine", "spark"]) == 0
    for table in ("estimates", "estimates_by_day"):
        a = pd.read_parquet(tmp_path / "remote" / table).sort_values(["policy_id", "estimator", "interval_kind"]
                                                                     + (["dt"] if table.endswith("day") else []))
        b = pd.read_parquet(tmp_path / "classic" / table).sort_values(list(a.columns[:0]) + ["policy_id", "estimator",
                                                                      "interval_kind"]
                                                                     + (["dt"] if table.endswith("day") else []))
        assert len(a) == len(b) > 0
        pd.testing.assert_series_equal(a["value"].reset_index(drop=True), b["value"].reset_index(drop=True),
                                       rtol=1e-12)
        pd.testing.assert_series_equal(a["ci_high"].reset_index(drop=True), b["ci_high"].reset_index(drop=True),
                                       rtol=1e-12)


def test_notebook_api_on_a_connect_dataframe(connect_server, dataset):
    """A notebook on a shared cluster holds Connect DataFrames: the API runs on them (no JVM access)."""
    code = f"""
import json, scavenger
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote({connect_server!r}).getOrCreate()
logs = spark.read.parquet({dataset + '/logs'!r})
adc = scavenger.adc(logs, gate="off")
# pandas in the notebook, contexts as dicts: with SPARK_REMOTE set the frame goes to Spark (auto), and Spark Connect
# types a column of dicts as a struct; both read as DuckDB reads the frame (an AttributeError and an analysis error
# before)
frame = logs.toPandas()
frame["context"] = [dict(c or {{}}) for c in frame["context"]]
tables = [scavenger.adc(x, gate="off", engine=e).pandas for x, e in
          ((frame, "auto"), (spark.createDataFrame(frame), "auto"), (frame, "duckdb"))]
same = [bool(t.sort_values(["method", "position"])["coefficient"].reset_index(drop=True).sub(
    tables[2].sort_values(["method", "position"])["coefficient"].reset_index(drop=True)).abs().max() < 1e-12)
    and len(t) == len(tables[2]) for t in tables[:2]]
print(json.dumps({{"engine": adc.engine, "rows": len(adc.pandas), "same": same}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SCAVENGER_PROGRESS": "0", "SPARK_REMOTE": connect_server})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["engine"]["connect"] is True and out["rows"] > 0
    assert out["same"] == [True, True]
    assert "Could not serialize" not in proc.stderr       # toPandas()'s plan metrics are not pyarrow's to keep
