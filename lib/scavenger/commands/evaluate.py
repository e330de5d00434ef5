"""`scavenger evaluate`: off-policy estimates of target policies (scavenging, factored, re-ordering, slate OPE)."""
from __future__ import annotations

from . import _common as C

NAME = "evaluate"
HELP = "Estimate the value of target policies from impression logs (one pass per new day; intervals per estimator)"


def add_arguments(parser):
    from .. import registry

    C.add_input_arguments(parser)
    C.add_engine_arguments(parser)
    C.add_gate_arguments(parser)
    C.add_output_arguments(parser, "OUT/estimates/, OUT/diagnostics/, OUT/adc/ (and OUT/estimates_by_day/)")
    parser.add_argument("--estimators", default=None,
                        help="comma list of " + ", ".join(registry.names()) + " (default: every estimator that "
                             "applies; one the data cannot support is left out with a note)")
    parser.add_argument("--by-day", action="store_true",
                        help="also one estimate per day of the window (OUT/estimates_by_day/), from the same "
                             "per-day statistics: no extra scan")
    parser.add_argument("--adc", default="estimate",
                        help="'estimate' (from the window's logs) or the path of a stored ADC table (scavenger adc)")
    parser.add_argument("--adc-method", default="heuristic",
                        help="which ADC row factored and reorder use: naive, uniform, heuristic (default: as "
                             "precise as the cross-fitted variance_optimal on every shape measured, issue 30), "
                             "variance_optimal "
                             "(with --adc PATH: any method the stored table holds)")
    parser.add_argument("--delta", type=float, default=0.05, help="Theorem 3/4 bounds hold w.p. 1 - delta")
    parser.add_argument("--level", type=float, default=0.95, help="level of the intervals")
    parser.add_argument("--uniform-logging", action="store_true",
                        help="logging is uniform over actions: add the Theorem 4 estimates")
    parser.add_argument("--n-ads", type=int, default=None, help="ad catalogue size for k of Theorem 3")
    parser.add_argument("--prior-mean", type=float, default=None, help="PI++ prior P' (default: logged mean reward)")
    parser.add_argument("--reorder", action="append", default=[],
                        help="add a re-ordering policy: random[:seed], ctr:FIT_FROM:FIT_TO, scores:PATH "
                             "(csv/parquet with ad_id,score or context_id,ad_id,score); repeatable")


def prepare(args, ctx):
    from .. import registry
    from ..errors import UsageError
    from ..pipelines.evaluate import EvaluateOptions
    from ..statistics.reorder import parse_reorder_specs

    C.check_level(args)
    _check_adc_method(args.adc, args.adc_method)
    estimators = registry.resolve(args.estimators) if args.estimators else None
    reorder = parse_reorder_specs(args.reorder)
    if args.decisions is None and not reorder:
        raise UsageError("evaluate needs --decisions or at least one --reorder policy")
    inputs = C.prepare_inputs(args)
    gate = C.gate_config(args)
    options = EvaluateOptions(
        estimators=[e.strip() for e in args.estimators.split(",") if e.strip()] if args.estimators else None,
        adc=args.adc, adc_method=args.adc_method, delta=args.delta, level=args.level,
        uniform_logging=args.uniform_logging, prior_mean=args.prior_mean, n_ads=args.n_ads, reorder=reorder,
        policies=inputs.policies, by_day=args.by_day)
    ctx.result.inputs = {"logs": args.logs, "decisions": args.decisions, "from": args.date_from, "to": args.date_to,
                         "stats_dir": args.stats_dir, "estimators": estimators or registry.resolve(None),
                         "adc": args.adc, "adc_method": args.adc_method, "delta": args.delta, "level": args.level,
                         "reorder": reorder, "gate": args.gate, "by_day": args.by_day}
    return inputs, gate, options


def run(args, ctx, prepared):
    from ..errors import DataCheckFailed
    from ..pipelines.evaluate import evaluate
    from ..statistics.scan import StatsConfig

    inputs, gate, options = prepared
    engine = ctx.engine(inputs)
    config = StatsConfig(rules=gate.rules, max_policies=args.max_policies,
                         policies=tuple(inputs.policies) if inputs.policies else None,
                         calibration_key=_calibration_key(gate))
    with ctx.result.timed("evaluate"):
        ev = evaluate(engine, inputs, options, gate, config, args.stats_dir, C.quarantine_dir(args),
                      ctx.result.run_id, C.batch_days(args, engine))
    r = ctx.result
    r.outputs.update(C.write_results(args, ctx, {"estimates": ev.estimates, "diagnostics": ev.diagnostics,
                                                 "adc": ev.adc, "estimates_by_day": ev.estimates_by_day},
                                     max(ev.stats.dates)))
    r.outputs["quarantine"] = C.quarantine_dir(args)
    stats = ev.stats
    r.counts.update({**C.window_counts(stats),
                     "policies": int(ev.estimates["policy_id"].nunique()), "estimates": len(ev.estimates),
                     **ev.window.counts})
    r.verdicts = ev.verdicts
    r.summary.update({"window": stats.window, "checks": ev.window.check_verdicts, "notes": ev.notes,
                      "estimates": _summary_rows(ev.estimates)})
    if ev.warnings:
        import sys

        from ..safe import bound

        r.summary["warnings"] = ev.warnings
        for w in ev.warnings:
            print(f"scavenger evaluate: warning: {bound(w)}", file=sys.stderr)
    if ev.refused:
        raise DataCheckFailed("not identified from these data: " + "; ".join(ev.refused), verdicts=ev.verdicts)


def _check_adc_method(adc: str, method: str) -> None:
    """--adc-method names an estimated method, or (with --adc PATH) a method the stored table holds (exit 2)."""
    from ..errors import UsageError
    from ..estimators.adc import METHODS

    if adc in (None, "", "estimate"):
        if method not in METHODS:
            raise UsageError(f"--adc-method must be one of {', '.join(METHODS)} when ADCs are estimated; got "
                             f"{method!r}")
        return
    from ..estimate import read_adc_table

    held = sorted(str(m) for m in read_adc_table(adc)["method"].dropna().unique())
    if method not in held:
        raise UsageError(f"--adc-method {method!r}: the ADC table {adc} holds the method(s) {', '.join(held)}")


def _calibration_key(gate) -> str:
    from ..checks.assumptions import parse_calibration_scope

    mode, key = parse_calibration_scope(gate.assumptions.calibration_scope)
    return key if mode == "auto" and key else "context_id"


def _summary_rows(est) -> list:
    cols = ("policy_id", "estimator", "interval_kind", "value", "ci_low", "ci_high", "n_events", "identified",
            "reason", "recommended", "checks")
    return [{k: r.get(k) for k in cols} for r in est.to_dict("records")]
