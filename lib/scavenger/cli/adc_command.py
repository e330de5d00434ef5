"""`scavenger adc`: attention-decay coefficients (naive, alpha-weighted) with intervals, beside DCG."""
from __future__ import annotations

from . import shared_flags as C

NAME = "adc"
HELP = "Estimate attention-decay coefficients C_i from impression logs (naive and alpha-weighted, with CIs, DCG beside)"


def add_arguments(parser):
    C.add_input_arguments(parser, decisions=False)
    C.add_engine_arguments(parser)
    C.add_gate_arguments(parser)
    C.add_output_arguments(parser, "OUT/adc/ (and OUT/adc_by_day/)")
    parser.add_argument("--by-day", action="store_true",
                        help="also one ADC table per day (OUT/adc_by_day/; a day with no clean logged event keeps "
                             "its rows, without coefficients, saying so)")
    parser.add_argument("--bootstrap", type=int, default=0,
                        help="Poisson bootstrap replicates (seeded from event_id) besides the delta-method CI")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--dcg-base", type=float, default=2.0, help="b of the DCG reference 1/log_b(b+i-1)")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    parser.add_argument("--smoothing", type=float, default=10.0,
                        help="pseudo-impressions shrinking the click variances s2(a,i) toward the position's pooled "
                             "rate: in the (cross-fitted) variance-optimal alpha and in every delta interval "
                             "(default 10)")


def prepare(args, ctx):
    from ..errors import UsageError
    from ..pipelines.adc import AdcOptions

    if args.bootstrap < 0 or args.bootstrap > 1000:
        raise UsageError("--bootstrap must be between 0 and 1000")
    C.check_level(args)
    inputs = C.prepare_inputs(args, decisions=False)
    ctx.result.inputs = {"logs": args.logs, "from": args.date_from, "to": args.date_to, "stats_dir": args.stats_dir,
                         "bootstrap": args.bootstrap, "seed": args.seed, "gate": args.gate, "by_day": args.by_day}
    return inputs, C.gate_config(args), AdcOptions(level=args.level, dcg_base=args.dcg_base,
                                                   smoothing=args.smoothing, bootstrap=args.bootstrap,
                                                   seed=args.seed, by_day=args.by_day)


def run(args, ctx, prepared):
    from ..errors import DataCheckFailed
    from ..estimators import attention_decay as A
    from ..pipelines.adc import adc

    inputs, gate, options = prepared
    engine = ctx.engine(inputs)
    with ctx.result.timed("adc"):
        res = adc(engine, inputs, options, gate, args.stats_dir, C.quarantine_dir(args), ctx.result.run_id,
                  C.batch_days(args, engine))
    r = ctx.result
    r.outputs.update(C.write_results(args, ctx, {"adc": res.table, "adc_by_day": res.by_day},
                                     max(res.stats.dates)))
    r.outputs["quarantine"] = C.quarantine_dir(args)
    stats = res.stats
    ap = stats.table("ad_position")
    r.counts.update({**res.window.record(), "impressions": int(ap["m"].sum()) if len(ap) else 0,
                     "impressions_reward_unknown": A.unknown_rewards(ap)})
    r.verdicts = res.window.verdicts
    from ..run_summary import adc_fields       # the notebook API's AdcResult shows the same

    r.summary.update({"window": stats.window, "checks": res.window.check_verdicts,
                      **adc_fields(res.table, args.bootstrap)})
    if res.refused:                     # no position past the first identified (pipelines/adc.refusal)
        raise DataCheckFailed("; ".join(res.refused), verdicts=r.verdicts)
