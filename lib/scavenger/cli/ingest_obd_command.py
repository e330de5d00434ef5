"""`scavenger ingest-obd`: the Open Bandit Dataset sample (or full dataset) into the impression-log contract."""
from __future__ import annotations

import os

from .. import obd
from ..errors import UsageError
from ..io import fs

NAME = "ingest-obd"
HELP = "Turn Open Bandit Dataset CSVs into impression logs (one-slot impressions, Parquet partitioned by dt)"


def add_arguments(parser):
    parser.add_argument("--obd-dir", required=True, help="root of the OBD data (<policy>/<campaign>/<campaign>.csv)")
    parser.add_argument("--out", required=True, help="output directory (logs written to OUT/logs)")
    parser.add_argument("--policies", default=",".join(obd.POLICIES), help="comma list of random,bts")
    parser.add_argument("--campaigns", default=",".join(obd.CAMPAIGNS), help="comma list of all,men,women")
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark", "local"),
                        help="auto (default): DuckDB for a local --out (no JVM), Spark when --master/--conf are "
                             "given, --out is a URI, or under spark-submit/SPARK_REMOTE; duckdb (local is the same); "
                             "spark. One Spark SQL statement either way: the same rows")


def _choices(value: str, allowed, flag: str) -> tuple[str, ...]:
    """The comma list's values, each once (first occurrence kept: ``all,all`` would ingest every row twice)."""
    items = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    bad = [v for v in items if v not in allowed]
    if not items or bad:
        raise UsageError(f"{flag} must be a comma list of {', '.join(allowed)}; got {value!r}")
    return items


def prepare(args, ctx):
    """Before --out is touched: the lists, the files present and every file's header and rows
    (obd.check_obd_csv: exit 2 for a file that is not an OBD CSV, exit 3 for rows that do not parse)."""
    policies = _choices(args.policies, obd.POLICIES, "--policies")
    campaigns = _choices(args.campaigns, obd.CAMPAIGNS, "--campaigns")
    files = obd.obd_files(args.obd_dir, policies, campaigns)
    checked = obd.check_obd_files(files)
    return policies, campaigns, files, checked


def run(args, ctx, prepared):
    policies, campaigns, files, checked = prepared
    result = ctx.result
    result.inputs = {"obd_dir": os.path.abspath(args.obd_dir),
                     "files": [str(path) for _, _, path in files]}
    if args.engine == "local":
        args.engine = "duckdb"
    logs_path = fs.join(args.out, "logs")
    engine = ctx.output_engine(args.out)
    with result.timed("ingest"):
        counts = obd.ingest_obd_to(engine, args.obd_dir, logs_path, policies, campaigns)
    _record(result, logs_path, counts, files, checked)


def _record(result, logs_path, counts, files, checked=None) -> None:
    result.outputs = {"logs": os.path.abspath(logs_path) if fs.is_local(logs_path) else logs_path}
    result.counts = {"rows": sum(v["rows"] for v in counts.values()), "by_file": counts}
    if checked is not None:
        result.counts["rows_read"] = sum(v["rows"] for v in checked.values())
    print(f"ingest-obd: {result.counts['rows']} rows from {len(files)} files -> {logs_path}")
