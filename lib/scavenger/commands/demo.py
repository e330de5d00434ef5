"""`scavenger demo`: generate a week of logs, run every estimator, print a readable summary."""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "demo"
HELP = "Generate a week of logs with known ground truth and run every estimator against it"


def add_arguments(parser):
    parser.add_argument("--out", default="demo-out", help="output directory (default: demo-out)")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--events-per-day", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                        help="auto (default): DuckDB for a local --out (no JVM), Spark for a URI that is not local, "
                             "--master/--conf, spark-submit or SPARK_REMOTE")


def run(args, ctx):
    from ..demo import run_demo

    if args.days < 1 or args.events_per_day < 100:
        raise UsageError("--days must be >= 1 and --events-per-day >= 100")
    from ..engines import choose_for_output

    ctx.result.inputs = {"days": args.days, "events_per_day": args.events_per_day, "seed": args.seed}
    hint = "--master or --conf given" if args.master or args.conf else None
    engine, why = choose_for_output(args.engine, args.out, hint)
    ctx.result.engine = {"name": engine, "why": why}
    with ctx.result.timed("demo"):
        summary = run_demo(ctx.spark if engine == "spark" else None, args.out, args.days, args.events_per_day,
                           args.seed, engine=engine)
    ctx.result.summary = {k: v["coverage"] for k, v in summary.items()}
    ctx.result.outputs = {"out": os.path.abspath(args.out)}
