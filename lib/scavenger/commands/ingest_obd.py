"""`scavenger ingest-obd`: the Open Bandit Dataset sample (or full dataset) into the impression-log contract."""
from __future__ import annotations

import os

from .. import obd
from ..contract import write_partitioned
from ..errors import UsageError

NAME = "ingest-obd"
HELP = "Turn Open Bandit Dataset CSVs into impression logs (one-slot impressions, Parquet partitioned by dt)"


def add_arguments(parser):
    parser.add_argument("--obd-dir", required=True, help="root of the OBD data (<policy>/<campaign>/<campaign>.csv)")
    parser.add_argument("--out", required=True, help="output directory (logs written to OUT/logs)")
    parser.add_argument("--policies", default=",".join(obd.POLICIES), help="comma list of random,bts")
    parser.add_argument("--campaigns", default=",".join(obd.CAMPAIGNS), help="comma list of all,men,women")


def _choices(value: str, allowed, flag: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise UsageError(f"{flag} must be a comma list of {', '.join(allowed)}; got {value!r}")
    return items


def run(args, ctx):
    from pyspark.sql import functions as F

    policies = _choices(args.policies, obd.POLICIES, "--policies")
    campaigns = _choices(args.campaigns, obd.CAMPAIGNS, "--campaigns")
    files = obd.obd_files(args.obd_dir, policies, campaigns)
    result = ctx.result
    result.inputs = {"obd_dir": os.path.abspath(args.obd_dir),
                     "files": [str(path) for _, _, path in files]}
    logs_path = os.path.join(args.out, "logs")
    with result.timed("ingest"):
        logs = obd.ingest_obd(ctx.spark, args.obd_dir, policies, campaigns)
        write_partitioned(logs, logs_path)
    with result.timed("count"):
        written = ctx.spark.read.parquet(logs_path)
        by_file = (written.groupBy(F.col("logging_policy"), F.col("context_id"))
                   .agg(F.count(F.lit(1)).alias("rows"), F.sum(F.element_at("slots", 1).reward).alias("clicks"))
                   .orderBy("logging_policy", "context_id").collect())
    counts = {f"{r['logging_policy']}/{r['context_id']}": {"rows": r["rows"], "clicks": r["clicks"]}
              for r in by_file}
    result.outputs = {"logs": os.path.abspath(logs_path)}
    result.counts = {"rows": sum(v["rows"] for v in counts.values()), "by_file": counts}
    print(f"ingest-obd: {result.counts['rows']} rows from {len(files)} files -> {logs_path}")
