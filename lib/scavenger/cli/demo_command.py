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
    parser.add_argument("--seed", default="0", help="random seed, a whole number >= 0 (default 0)")
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                        help="auto (default): DuckDB for a local --out (no JVM), Spark for a URI that is not local, "
                             "--master/--conf, spark-submit or SPARK_REMOTE")


MAX_DAYS = 366          # the demo's logging is history-dependent: one statement per day


def prepare(args, ctx):
    """Every flag checked before an engine starts or --out is touched (exit 2)."""
    from ..simulation.config import GeneratorConfig, MAX_EVENTS_PER_DAY
    from . import shared_flags as C

    if not 1 <= args.days <= MAX_DAYS:
        raise UsageError(f"--days must be in 1..{MAX_DAYS} (the demo writes one day per statement); got {args.days}")
    if not 100 <= args.events_per_day <= MAX_EVENTS_PER_DAY:
        raise UsageError(f"--events-per-day must be in 100..{MAX_EVENTS_PER_DAY}; got {args.events_per_day}")
    C.check_days_fit(GeneratorConfig.start_date, args.days, "--days")
    args.seed = C.parse_seed(args.seed, "--seed")
    # the slotted data set uses seed + 1
    if args.seed + 1 > C.MAX_SEED:
        raise UsageError(f"--seed must be below {C.MAX_SEED} (the demo's second data set uses seed + 1)")
    return None


def run(args, ctx, prepared=None):
    from ..demo import run_demo

    if not isinstance(args.seed, int):
        prepare(args, ctx)
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
