"""The queries a user would write instead of scavenger: one DuckDB query and one Spark SQL query that read the logs
and the decisions, join them on (dt, event_id), and compute per target policy the pseudoinverse estimate with the
sums its variance needs (r G and the K^2 second moments of Y), for slates of K slots (slot k = the k-th element of
the slots sorted by position). Run as scripts they print one JSON line: seconds of the query, seconds in all, the
number of policies, and the PI value of the first policy in name order (the one benchmarks/run evaluates when there
is one).

    python benchmarks/references.py duckdb LOGS DECISIONS K
    python benchmarks/references.py spark LOGS DECISIONS K      # local[*], Spark's default settings
"""
from __future__ import annotations

import json
import sys
import time

T0 = time.perf_counter()


def _y(k: int, logs: str = "l.s", dec: str = "d.p") -> str:
    """Y_k = pi_k(a_k) / mu_k(a_k) for a deterministic one-entry-per-position decision (Spark SQL)."""
    return (f"(CASE WHEN element_at({logs}, {k}).ad_id = element_at({dec}, {k}).ad_id "
            f"THEN element_at({dec}, {k}).probability ELSE 0D END) / element_at({logs}, {k}).propensity")


def spark_sql(logs: str, decisions: str, K: int) -> str:
    ys = ",\n    ".join(f"{_y(k)} AS y{k}" for k in range(1, K + 1))
    g = " + ".join(f"y{k}" for k in range(1, K + 1))
    moments = ", ".join(f"sum(y{j} * y{k}), sum(r * y{j} * y{k})" for j in range(1, K + 1) for k in range(j, K + 1))
    return f"""
WITH l AS (SELECT dt, event_id, sort_array(slots) AS s,
                  coalesce(slate_reward, aggregate(slots, 0D, (acc, x) -> acc + coalesce(x.reward, 0D))) AS r
           FROM {logs}),
     d AS (SELECT dt, event_id, policy_id, sort_array(slots) AS p FROM {decisions}),
     y AS (SELECT policy_id, r, {ys} FROM l JOIN d ON l.dt = d.dt AND l.event_id = d.event_id)
SELECT policy_id, avg(r * (1 - {K} + {g})) AS pi, stddev_samp(r * (1 - {K} + {g})) AS sd, count(1) AS n, {moments}
FROM y GROUP BY policy_id ORDER BY policy_id"""


def duckdb_query(logs: str, decisions: str, K: int) -> dict:
    import duckdb

    con = duckdb.connect()
    src = lambda p: f"read_parquet('{p}/*/*.parquet', hive_partitioning = true, hive_types = {{'dt': DATE}})"  # noqa
    ys = ",\n    ".join(
        f"(CASE WHEN l.s[{k}].ad_id = d.p[{k}].ad_id THEN d.p[{k}].probability ELSE 0 END) / l.s[{k}].propensity "
        f"AS y{k}" for k in range(1, K + 1))
    g = " + ".join(f"y{k}" for k in range(1, K + 1))
    moments = ", ".join(f"sum(y{j} * y{k}), sum(r * y{j} * y{k})" for j in range(1, K + 1) for k in range(j, K + 1))
    q = f"""
WITH l AS (SELECT dt, event_id, list_sort(slots) AS s,
                  coalesce(slate_reward, list_sum(list_transform(slots, lambda x: coalesce(x.reward, 0)))) AS r
           FROM {src(logs)}),
     d AS (SELECT dt, event_id, policy_id, list_sort(slots) AS p FROM {src(decisions)}),
     y AS (SELECT policy_id, r, {ys} FROM l JOIN d USING (dt, event_id))
SELECT policy_id, avg(r * (1 - {K} + {g})), stddev_samp(r * (1 - {K} + {g})), count(*), {moments}
FROM y GROUP BY policy_id ORDER BY policy_id"""
    t = time.perf_counter()
    rows = con.execute(q).fetchall()
    return _result(time.perf_counter() - t, rows)


def _result(seconds: float, rows: list) -> dict:
    """The JSON line: rows are (policy_id, pi, sd, n, ...) per policy in name order."""
    return {"query_seconds": seconds, "policies": len(rows), "policy_id": rows[0][0] if rows else None,
            "pi": rows[0][1] if rows else None, "n": sum(r[3] for r in rows)}


def spark_query(logs: str, decisions: str, K: int) -> dict:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("reference").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(logs).createOrReplaceTempView("logs")
    spark.read.parquet(decisions).createOrReplaceTempView("decisions")
    t = time.perf_counter()
    rows = [tuple(r) for r in spark.sql(spark_sql("logs", "decisions", K)).collect()]
    out = _result(time.perf_counter() - t, rows)
    spark.stop()
    return out


if __name__ == "__main__":
    engine, logs_path, dec_path, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    result = (duckdb_query if engine == "duckdb" else spark_query)(logs_path, dec_path, k)
    result["total_seconds"] = time.perf_counter() - T0
    print(json.dumps(result))
