"""``scavenger validate``: contract and quality rules (quarantine), assumption checks 3a-3e, GE Data Docs.

Writes ``OUT/validation/`` (check, scope, statistic, threshold, verdict, message), ``OUT/quarantine/logs/dt=*/``
and ``OUT/quarantine/decisions/dt=*/`` (original columns + reason_codes + run_id), ``OUT/data_docs/index.html``
and ``OUT/result.json``. Exit 0 when every requested check passes (or with --no-gate), 3 when the quarantined
share passes --max-quarantine-share or a check fails, 2 on bad arguments.
"""
from __future__ import annotations

import math

from ._gate_flags import CALIBRATION_SCOPE_HELP

NAME = "validate"
HELP = "check logs (and decisions): quarantine bad rows, test the estimators' assumptions, build Data Docs"


def _share(text: str) -> float:
    from ..errors import UsageError

    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--max-quarantine-share expects a number in [0, 1], got {text!r}") from None
    if not (0.0 <= value <= 1.0):
        raise UsageError(f"--max-quarantine-share expects a number in [0, 1], got {text!r}")
    return value


def add_arguments(parser) -> None:
    parser.add_argument("--logs", required=True, help="impression logs: Parquet path (partitioned by dt) or table")
    parser.add_argument("--decisions", default=None, help="target decisions: path or table (enables checks b, c)")
    parser.add_argument("--from", dest="date_from", default=None, help="first dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--to", dest="date_to", default=None, help="last dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--max-quarantine-share", type=str, default="0.001",
                        help="gate: fail when more than this share of rows is quarantined (default 0.001)")
    parser.add_argument("--reward-min", type=float, default=0.0, help="declared minimum slot reward (default 0)")
    parser.add_argument("--reward-max", type=float, default=1.0,
                        help="declared maximum slot reward (default 1: clicks; set it for revenue)")
    parser.add_argument("--cramers-v-max", type=float, default=0.1,
                        help="check a: fail when the bias-corrected Cramer's V passes this (default 0.1)")
    parser.add_argument("--calibration-scope", default="auto", help=CALIBRATION_SCOPE_HELP)
    parser.add_argument("--checks", default="a,b,c,d,e", help="assumption checks to run, e.g. a,b (default all)")
    parser.add_argument("--no-gate", action="store_true", help="report only: exit 0 even when a check fails")
    parser.add_argument("--count-null-propensity", action="store_true",
                        help="count events with a null propensity instead of quarantining them")
    parser.add_argument("--duplicates", choices=["keep_first", "quarantine_all"], default="keep_first",
                        help="duplicate event ids: keep the first copy (by dt, event_time) or quarantine all")
    parser.add_argument("--allow-partial-slates", action="store_true",
                        help="rows may hold some positions only (e.g. the OBD sample's one-slot rows)")
    parser.add_argument("--no-great-expectations", action="store_true", help="skip the GE suites and Data Docs")
    parser.add_argument("--ge-row-sample", type=int, default=0,
                        help="also run the row-level GE quality suites on a seeded sample of about this many "
                             "rows (default 0: only the exact daily suites, which cost no extra scan)")
    parser.add_argument("--seed", type=int, default=0)


def run(args, ctx) -> None:
    from ..checks import AssumptionConfig, GateConfig, RuleConfig, parse_checks, run_gate
    from ..checks.assumptions import parse_calibration_scope
    from ..contract import filter_window, parse_date, read_source
    from ..errors import DataCheckFailed, UsageError

    share = _share(args.max_quarantine_share)
    checks = parse_checks(args.checks)
    for flag, value in (("--reward-min", args.reward_min), ("--reward-max", args.reward_max),
                        ("--cramers-v-max", args.cramers_v_max)):
        if not math.isfinite(value):
            raise UsageError(f"{flag} must be finite, got {value}")
    if args.reward_max <= args.reward_min:
        raise UsageError(f"--reward-max ({args.reward_max}) must be above --reward-min ({args.reward_min})")
    if not (0.0 < args.cramers_v_max <= 1.0):
        raise UsageError(f"--cramers-v-max expects a number in (0, 1], got {args.cramers_v_max}")
    try:
        parse_calibration_scope(args.calibration_scope)
    except ValueError as exc:
        raise UsageError(f"--calibration-scope: {exc}") from None
    if args.ge_row_sample < 0:
        raise UsageError(f"--ge-row-sample must be >= 0, got {args.ge_row_sample}")
    date_from, date_to = parse_date(args.date_from, "--from"), parse_date(args.date_to, "--to")

    spark = ctx.spark
    result = ctx.result
    logs = filter_window(read_source(spark, args.logs), date_from, date_to)
    decisions = (filter_window(read_source(spark, args.decisions), date_from, date_to)
                 if args.decisions else None)
    result.inputs.update({"logs": args.logs, "decisions": args.decisions, "from": date_from, "to": date_to,
                          "checks": list(checks)})
    config = GateConfig(
        rules=RuleConfig(reward_min=args.reward_min, reward_max=args.reward_max,
                         quarantine_null_propensity=not args.count_null_propensity, duplicates=args.duplicates,
                         allow_partial_slates=args.allow_partial_slates),
        assumptions=AssumptionConfig(cramers_v_max=args.cramers_v_max, calibration_scope=args.calibration_scope),
        max_quarantine_share=share, gate=not args.no_gate, great_expectations=not args.no_great_expectations,
        ge_row_sample=args.ge_row_sample, out_dir=args.out, run_id=result.run_id, seed=args.seed)
    with result.timed("validate"):
        gate = run_gate(spark, logs, decisions, checks=checks, config=config)
    try:
        result.counts.update(gate.counts)
        result.outputs.update(gate.outputs)
        result.timings.update({f"gate.{k}": v for k, v in gate.timings.items()})
        result.verdicts = gate.verdict_records()
        result.summary.update({"checks": gate.check_verdicts, "failed_checks": gate.failed_checks,
                               "gate": config.gate, "message": gate.message})
        if gate.failed:
            raise DataCheckFailed(gate.message, verdicts=result.verdicts)
        if not config.gate and gate.failed_checks:
            result.message = f"--no-gate: {gate.message}"
    finally:
        gate.release()
