"""The engines' floor on a benchmarks/run data set: how long Spark (local[2], 4g driver) and DuckDB (2 threads) take
to merely read the logs and the decisions and join them on (dt, event_id), with no statistic computed, beside DuckDB's
one-query PI. It tells whether a speed target can be met by any rewrite of the statistics. Prints figures; not a test.

    .venv/bin/python benchmarks/bench_floor.py /tmp/scavenger-bench/data/n10000000-d30-k4-a1000-s0 --positions 4

Each measurement runs --reps times in the same process; the last one is the warm figure. Spark writes to the `noop`
sink, which evaluates every column of the plan and discards the rows.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="a data set directory of benchmarks/run (gen/logs, decisions_p1, decisions_p8)")
    ap.add_argument("--positions", type=int, default=4, help="slate size K of the data set (default 4)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each measurement (default 2)")
    ap.add_argument("--reps-8", type=int, default=1, help="repetitions of the 8-policy join (default 1)")
    ap.add_argument("--skip", default="", help="comma list of: spark, spark8, duckdb")
    args = ap.parse_args(argv)
    args.skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    unknown = args.skip - {"spark", "spark8", "duckdb"}
    if unknown:
        ap.error(f"--skip: unknown {sorted(unknown)} (choose from spark, spark8, duckdb)")
    return args


def timed(label: str, fn, reps: int, rows: int, table: list) -> None:
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        value = fn()
        secs.append(time.perf_counter() - t0)
    table.append((label, secs[0], secs[-1], rows / secs[-1]))
    print(f"{label:58s} first {secs[0]:7.1f} s  last {secs[-1]:7.1f} s  {rows / secs[-1]:>12,.0f} events/s"
          + ("" if value is None else f"  ({value})"), flush=True)


def spark_floor(args, root: Path, table: list) -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from scavenger.statistics.scan import flatten_events

    spark = (SparkSession.builder.appName("bench-floor").master("local[2]")
             .config("spark.driver.memory", "4g").config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logs = spark.read.parquet(str(root / "gen" / "logs"))
    dec1 = spark.read.parquet(str(root / "decisions_p1")).withColumnRenamed("slots", "dslots")
    n = logs.count()

    def noop(df):
        return lambda: df.write.format("noop").mode("overwrite").save()

    keys = ["dt", "event_id"]
    prop_sum = F.sum(F.aggregate(F.col("slots"), F.lit(0.0), lambda acc, s: acc + s["propensity"]))
    if "spark" not in args.skip:
        timed("spark: read the logs, every column", noop(logs), args.reps, n, table)
        timed("spark: read the logs, sum of slot propensities", lambda: logs.select(prop_sum).first()[0],
              args.reps, n, table)
        timed("spark: flatten_events (the scan's slot columns)", noop(flatten_events(logs, args.positions)),
              args.reps, n, table)
        timed("spark: read the 1-policy decisions, every column", noop(dec1), args.reps, n, table)
        timed("spark: join logs x 1-policy decisions, keys only, count",
              lambda: logs.select(*keys).join(dec1.select(*keys), keys).count(), args.reps, n, table)
        timed("spark: join logs x 1-policy decisions, every column", noop(logs.join(dec1, keys)), args.reps, n,
              table)
    if "spark8" not in args.skip:
        dec8 = spark.read.parquet(str(root / "decisions_p8")).withColumnRenamed("slots", "dslots")
        timed("spark: join logs x 8-policy decisions, every column", noop(logs.join(dec8, keys)), args.reps_8, n,
              table)
    spark.stop()
    return n


def duckdb_floor(args, root: Path, n: int, table: list) -> None:
    import duckdb

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_worker import duckdb_sql

    con = duckdb.connect()
    con.execute("SET threads = 2")
    logs, dec = f"{root}/gen/logs/dt=*/*.parquet", f"{root}/decisions_p1/dt=*/*.parquet"
    src = "read_parquet('{}', hive_partitioning = true)"
    timed("duckdb: read the logs, sum of slot propensities", lambda: con.execute(
        f"SELECT sum(list_sum(list_transform(slots, lambda s: s.propensity))) FROM {src.format(logs)}").fetchone()[0],
        args.reps, n, table)
    timed("duckdb: join logs x 1-policy decisions, keys only, count", lambda: con.execute(
        f"SELECT count(*) FROM {src.format(logs)} l JOIN {src.format(dec)} d "
        "ON l.dt = d.dt AND l.event_id = d.event_id").fetchone()[0], args.reps, n, table)
    sql = duckdb_sql(logs, dec, "oracle_mix", args.positions, duckdb.__version__)
    timed("duckdb: PI of oracle_mix as one query (benchmarks/run)", lambda: con.execute(sql).fetchone()[1],
          args.reps, n, table)


def main(argv=None) -> int:
    args = parse_args(argv)
    root = Path(args.data)
    if not (root / "gen" / "logs").is_dir():
        print(f"bench_floor: {root}/gen/logs not found (generate it with benchmarks/run --steps generate)",
              file=sys.stderr)
        return 2
    table: list = []
    n = spark_floor(args, root, table)
    if "duckdb" not in args.skip:
        duckdb_floor(args, root, n, table)
    print(f"\n{n:,} events, K = {args.positions}; warm = the last of the repetitions")
    print("| measured | seconds (first) | seconds (warm) | events/s (warm) |\n|---|---|---|---|")
    for label, first, last, rate in table:
        print(f"| {label} | {first:.1f} | {last:.1f} | {rate:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
