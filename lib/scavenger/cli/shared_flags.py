"""Flags and steps shared by the jobs that read logs (validate, adc, evaluate): inputs, engine, gate, outputs.

Everything a user can get wrong (flags, dates, estimator names, local input paths, the output location) is
checked by ``prepare`` before any engine starts: bad usage exits 2 in about a second and writes nothing."""
from __future__ import annotations

from ..errors import UsageError
from ..pipelines import options as O
from .arguments import (MAX_SEED, check_adc_option, check_days_fit, check_id_length, check_job_paths,  # noqa: F401
                     check_out, check_out_outside_inputs, check_text_args, finite_number, parse_seed)

CALIBRATION_SCOPE_HELP = (
    "check e: scope within which logged propensities are compared with observed frequencies. auto (default): per "
    "logging policy, and per value of context_id where context_id partitions the ads (each ad shown under one "
    "value only, e.g. the Open Bandit Dataset's campaigns); auto:KEY: the same for another key; policy: per "
    "logging policy only; KEY: per logging policy and value of KEY always (context_id or context:NAME)")


def add_input_arguments(parser, decisions: bool | str = True) -> None:
    parser.add_argument("--logs", required=True, help="impression logs: Parquet partitioned by dt (path or URI), "
                                                      "or a catalog table")
    if decisions:
        parser.add_argument("--decisions", default=None, required=decisions == "required",
                            help="target decisions: path, URI or table (several policies)")
        parser.add_argument("--policies", default=None, help="comma list of policy ids (default: all)")
        parser.add_argument("--max-policies", type=int, default=1000,
                            help="refuse decisions with more target policies than this (default 1000)")
    parser.add_argument("--from", dest="date_from", default=None, help="first dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--to", dest="date_to", default=None, help="last dt (YYYY-MM-DD, inclusive)")


def add_engine_arguments(parser) -> None:
    g = parser.add_argument_group("engine")
    g.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                   help="auto (default): DuckDB for local Parquet, Spark for tables, remote URIs, SPARK_REMOTE or "
                        "spark-submit; duckdb; spark")
    g.add_argument("--stats-dir", default=None,
                   help="per-day statistics store (any URI): stored days are merged, only new days are read")
    g.add_argument("--batch-days", type=int, default=None,
                   help="days per pass when several are missing (default: all in one pass, except that DuckDB "
                        "splits a window larger than its memory limit; Spark also reads --conf "
                        "spark.scavenger.scanBatchDays)")


def add_output_arguments(parser, what: str) -> None:
    parser.add_argument("--out", required=True, help=f"output directory or URI: {what}, result.json")
    parser.add_argument("--catalog", default=None, metavar="DB",
                        help="also write the result tables, the quarantine and the verdicts as tables of the Spark "
                             "session's catalog in database DB, partitioned by dt (re-running a day replaces it)")
    parser.add_argument("--catalog-days", choices=("window", "last"), default="window",
                        help="with --catalog and --by-day, the days of the by-day table written to the catalog: "
                             "window (default: every day, each day's partition replaced) or last (the window's "
                             "last day only: a scheduled trailing window, whose earlier days belong to the runs "
                             "of those days)")
    parser.add_argument("--json", action="store_true", help="print result.json on stdout instead of the summary")
    parser.add_argument("--verbose", action="store_true", help="show Spark's own log lines")


def add_gate_arguments(parser) -> None:
    g = parser.add_argument_group("data gate (the checks of `scavenger validate`)")
    g.add_argument("--gate", choices=("enforce", "report", "off"), default="enforce",
                   help="enforce (default): quarantine bad rows and exit 3 instead of writing an estimate whose "
                        "assumption failed; report: mark the estimates; off: no checks")
    g.add_argument("--max-quarantine-share", type=float, default=O.GATE_DEFAULTS["max_quarantine_share"],
                   help="fail when more than this share of rows is quarantined (default 0.001)")
    g.add_argument("--reward-min", type=float, default=O.GATE_DEFAULTS["reward_min"],
                   help="declared minimum slot reward (default 0)")
    g.add_argument("--reward-max", type=float, default=O.GATE_DEFAULTS["reward_max"],
                   help="declared maximum slot reward (default 1): rows above it are quarantined, and the intervals "
                        "and Theorem 3/4 bounds take the range a slate reward can take from it")
    g.add_argument("--cramers-v-max", type=float, default=O.GATE_DEFAULTS["cramers_v_max"],
                   help="check a: largest bias-corrected Cramer's V between a context feature and the logged ad")
    g.add_argument("--calibration-scope", default=O.GATE_DEFAULTS["calibration_scope"], help=CALIBRATION_SCOPE_HELP)
    g.add_argument("--duplicates", choices=O.DUPLICATES, default=O.GATE_DEFAULTS["duplicates"],
                   help="duplicate event ids: keep the first copy (by dt, event_time) or quarantine every copy, on "
                        "every day of the window and the statistics store")
    g.add_argument("--max-slots", type=int, default=O.GATE_DEFAULTS["max_slots"],
                   help="longest slate (and largest position) a row may have; longer rows are quarantined")
    g.add_argument("--max-id-length", type=int, default=O.GATE_DEFAULTS["max_id_length"],
                   help="longest id (event, policy, context, ad) and context key or value a row may hold, in "
                        "characters (default 1000); rows with a longer one are quarantined (ID_TOO_LONG, "
                        "CONTEXT_TOO_LONG)")
    g.add_argument("--require-full-slates", action="store_true",
                   help="quarantine rows that do not hold every position 1..K (default: a row contributes "
                        "through the slots it holds)")
    g.add_argument("--allow-partial-slates", action="store_true", help="(the default now; kept for old scripts)")
    g.add_argument("--quarantine-null-propensity", action="store_true",
                   help="quarantine rows with a null propensity (default: they are valid; estimators that need "
                        "propensities leave them out and say so)")
    g.add_argument("--count-null-propensity", action="store_true", help="(the default now; kept for old scripts)")
    g.add_argument("--no-great-expectations", action="store_true", help="skip the great-expectations suites")


def gate_config(args):
    """GateConfig from the gate flags (UsageError on a bad value): the checks of pipelines/options.py, which the
    notebook API's gate keywords go through too."""
    return O.gate_config(args.gate, max_quarantine_share=args.max_quarantine_share, reward_min=args.reward_min,
                         reward_max=args.reward_max, cramers_v_max=args.cramers_v_max,
                         calibration_scope=args.calibration_scope, duplicates=args.duplicates,
                         max_slots=args.max_slots, max_id_length=args.max_id_length,
                         require_full_slates=args.require_full_slates,
                         quarantine_null_propensity=args.quarantine_null_propensity,
                         great_expectations=not args.no_great_expectations,
                         ge_row_sample=getattr(args, "ge_row_sample", 0) or 0, seed=getattr(args, "seed", 0) or 0)


def prepare_inputs(args, decisions: bool = True):
    """Inputs described, --out and --stats-dir checked: the fail-fast step (no engine)."""
    from ..pipelines.common import describe_inputs

    check_out(args.out, "--out")
    if getattr(args, "stats_dir", None):
        check_out(args.stats_dir, "--stats-dir")
    check_out_outside_inputs(args)
    if getattr(args, "batch_days", None) is not None and args.batch_days < 0:
        raise UsageError(f"--batch-days must be >= 0, got {args.batch_days}")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()] \
        if decisions and getattr(args, "policies", None) is not None else None
    if policies == []:
        raise UsageError(f"--policies {args.policies!r} names no policy: give a comma list of policy ids, or leave "
                         f"the flag out for every policy")
    if decisions and getattr(args, "max_policies", 1) < 1:
        raise UsageError("--max-policies must be >= 1")
    return describe_inputs(args.logs, getattr(args, "decisions", None) if decisions else None, args.date_from,
                           args.date_to, policies)


def batch_days(args, engine) -> int | None:
    """--batch-days, else Spark's spark.scavenger.scanBatchDays, else None: the window decides
    (statistics/batches.auto_batch_days: DuckDB batches a window larger than its memory)."""
    if getattr(args, "batch_days", None) is not None:
        return int(args.batch_days)
    return engine.scan_batch_days()


def quarantine_dir(args) -> str:
    """Where quarantined rows go: catalog tables ``<db>.quarantine_logs`` / ``_decisions`` with --catalog, else
    beside the statistics store (the days it holds) or under --out."""
    from ..io import fs

    if getattr(args, "catalog", None):
        return f"catalog:{args.catalog}.quarantine"
    return fs.join(args.stats_dir, "quarantine") if getattr(args, "stats_dir", None) else fs.join(args.out,
                                                                                                   "quarantine")


def check_catalog(args, ctx, engine) -> None:
    """--catalog needs the Spark engine and an existing database (exit 2 before any work)."""
    if not getattr(args, "catalog", None):
        return
    engine.check_catalog(args.catalog)


OUTPUT_CONTRACTS = ("estimates", "adc", "diagnostics", "differences", "running")


def write_results(args, ctx, tables: dict, window_end) -> dict:
    """Result tables (pandas) under --out (name/part-0.parquet; by-day tables partitioned by dt) and, with
    --catalog, as catalog tables <db>.<name> (the window's tables under dt = its last day)."""
    from ..io import fs, manifest, outputs

    from ..contract import conform_frame, load_contract

    written = {}
    for name, frame in tables.items():
        if frame is None:
            continue
        base = name[:-len("_by_day")] if name.endswith("_by_day") else name
        if base in OUTPUT_CONTRACTS:       # the output contracts of schemas/ (types as declared there)
            frame = conform_frame(frame, load_contract(base))
        uri = fs.join(args.out, name)
        if "dt" in frame.columns:
            outputs.write_by_day(frame, uri)
        else:
            outputs.write_table(frame, uri)
        written[name] = uri
        if getattr(args, "catalog", None):
            extra = frame.assign(run_id=ctx.result.run_id)
            if "dt" in frame.columns and getattr(args, "catalog_days", "window") == "last":
                import pandas as pd

                extra = extra[pd.to_datetime(extra["dt"]).dt.date == window_end]
                if not len(extra):
                    continue
            table = f"{args.catalog}.{name}"
            ctx.engine_open.write_catalog_table(extra, table, None if "dt" in frame.columns else window_end)
            written[f"{name}_table"] = table
            manifest.record(f"{name}_table", table, "catalog", rows=len(extra),
                            days=set(extra["dt"]) if "dt" in extra.columns else [window_end])
    return written


def check_level(args) -> None:
    if hasattr(args, "level") and not 0 < args.level < 1:
        raise UsageError("--level must be in (0, 1)")
    if hasattr(args, "delta") and not 0 < args.delta < 1:
        raise UsageError("--delta must be in (0, 1)")
