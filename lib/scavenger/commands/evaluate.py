"""`scavenger evaluate`: off-policy estimates of target policies (scavenging, factored, re-ordering, slate OPE)."""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "evaluate"
HELP = "Estimate the value of target policies from impression logs (one scan per new dt; intervals per estimator)"


def add_arguments(parser):
    from ._gate_flags import add_gate_arguments

    add_gate_arguments(parser)
    parser.add_argument("--logs", required=True, help="impression logs: path (Parquet by dt) or table")
    parser.add_argument("--decisions", default=None, help="target decisions: path or table (several policies)")
    parser.add_argument("--from", dest="date_from", default=None, help="first dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--to", dest="date_to", default=None, help="last dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--estimators", default=None,
                        help="comma list of scavenging_slate, scavenging_base, factored, reorder, ips, snips, pi, "
                             "wpi, pi_plus_plus, pi_beta (or the groups scavenging, slate); default: all applicable")
    parser.add_argument("--policies", default=None, help="comma list of policy ids (default: all in --decisions)")
    parser.add_argument("--adc", default="estimate",
                        help="'estimate' (from the window's logs) or the path of a stored ADC table (scavenger adc)")
    parser.add_argument("--adc-method", default="variance_optimal",
                        help="which ADC row to use: naive, uniform, heuristic, variance_optimal")
    parser.add_argument("--delta", type=float, default=0.05, help="Theorem 3/4 bounds hold w.p. 1 - delta")
    parser.add_argument("--level", type=float, default=0.95, help="level of the CLT intervals")
    parser.add_argument("--uniform-logging", action="store_true",
                        help="logging is uniform over actions: add the Theorem 4 estimates")
    parser.add_argument("--n-ads", type=int, default=None, help="ad catalogue size for k of Theorem 3")
    parser.add_argument("--prior-mean", type=float, default=None, help="PI++ prior P' (default: logged mean reward)")
    parser.add_argument("--reorder", action="append", default=[],
                        help="add a re-ordering policy: random[:seed], ctr:FIT_FROM:FIT_TO, scores:PATH "
                             "(csv/parquet with ad_id,score or context_id,ad_id,score); repeatable")
    parser.add_argument("--no-slate-actions", action="store_true",
                        help="skip the direct-approach slate tables (they grow with the number of distinct slates)")
    parser.add_argument("--stats-dir", default=None, help="per-dt statistics store (reused across runs)")
    parser.add_argument("--out", required=True, help="output directory: OUT/estimates/, OUT/diagnostics/, result.json")


def run(args, ctx):
    from ..evaluation import EvaluateOptions, evaluate, write_table
    from ..statistics.reorder import parse_reorder_specs
    from ..statistics.scan import StatsConfig

    if not 0 < args.delta < 1:
        raise UsageError("--delta must be in (0, 1)")
    if not 0 < args.level < 1:
        raise UsageError("--level must be in (0, 1)")
    options = EvaluateOptions(
        estimators=[e.strip() for e in args.estimators.split(",") if e.strip()] if args.estimators else None,
        adc=args.adc, adc_method=args.adc_method, delta=args.delta, level=args.level,
        uniform_logging=args.uniform_logging, prior_mean=args.prior_mean, n_ads=args.n_ads,
        reorder=parse_reorder_specs(args.reorder),
        policies=[p.strip() for p in args.policies.split(",") if p.strip()] if args.policies else None)
    config = StatsConfig(slate_actions=not args.no_slate_actions)
    result = ctx.result
    result.inputs = {"logs": args.logs, "decisions": args.decisions, "from": args.date_from, "to": args.date_to,
                     "stats_dir": args.stats_dir, "estimators": options.normalized_estimators(), "adc": args.adc,
                     "adc_method": args.adc_method, "delta": args.delta, "level": args.level,
                     "reorder": options.reorder}
    from ._gate_flags import gate_config_from_args

    gate_config = gate_config_from_args(args, args.out, result.run_id)
    with result.timed("evaluate"):
        ev = evaluate(ctx.spark, args.logs, args.decisions, args.date_from, args.date_to, args.stats_dir, options,
                      config, gate_config=gate_config)
    outputs = {"estimates": write_table(ev.estimates, args.out, "estimates"),
               "diagnostics": write_table(ev.diagnostics, args.out, "diagnostics")}
    if ev.adc is not None:
        outputs["adc"] = write_table(ev.adc, args.out, "adc")
    result.outputs = {k: os.path.abspath(v) for k, v in outputs.items()}
    ls = ev.stats.table("log_summary")
    result.counts = {"days": len(ev.stats.dates), "days_scanned": len(ev.stats.scanned),
                     "days_loaded": len(ev.stats.loaded), "events": int(ls["n_events"].sum()) if len(ls) else 0,
                     "policies": int(ev.estimates["policy_id"].nunique()), "estimates": len(ev.estimates)}
    result.verdicts = ev.verdicts
    if ev.gate_counts:
        result.counts["gate"] = ev.gate_counts
    result.summary = {"window": ev.stats.window, "estimates": [
        {k: r[k] for k in ("policy_id", "estimator", "interval_kind", "value", "ci_low", "ci_high",
                           "supported_share")}
        for r in ev.estimates.to_dict("records")]}
    cols = ["policy_id", "estimator", "interval_kind", "value", "std_error", "ci_low", "ci_high", "n_events",
            "supported_share"]
    print(ev.estimates[cols].to_string(index=False))
