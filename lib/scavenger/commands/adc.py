"""`scavenger adc`: attention-decay coefficients (naive, alpha-weighted) with intervals, beside DCG."""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "adc"
HELP = "Estimate attention-decay coefficients C_i from impression logs (naive and alpha-weighted, with CIs, DCG beside)"


def add_arguments(parser):
    from ._gate_flags import add_gate_arguments

    add_gate_arguments(parser)
    parser.add_argument("--logs", required=True, help="impression logs: path (Parquet by dt) or table")
    parser.add_argument("--from", dest="date_from", default=None, help="first dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--to", dest="date_to", default=None, help="last dt (YYYY-MM-DD, inclusive)")
    parser.add_argument("--stats-dir", default=None, help="per-dt statistics store (reused across runs)")
    parser.add_argument("--out", required=True, help="output directory: OUT/adc/ and OUT/result.json")
    parser.add_argument("--bootstrap", type=int, default=0,
                        help="Poisson bootstrap replicates (seeded from event_id) besides the delta-method CI")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--dcg-base", type=float, default=2.0, help="b of the DCG reference 1/log_b(b+i-1)")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    parser.add_argument("--smoothing", type=float, default=1.0,
                        help="pseudo-impressions shrinking s2(a,i) of the variance-optimal alpha")


def run(args, ctx):
    from ..evaluation import adc_statistics, estimate_adc, write_table

    if args.bootstrap < 0 or args.bootstrap > 1000:
        raise UsageError("--bootstrap must be between 0 and 1000")
    if not 0 < args.level < 1:
        raise UsageError("--level must be in (0, 1)")
    if args.dcg_base <= 1:
        raise UsageError("--dcg-base must be > 1")
    result = ctx.result
    result.inputs = {"logs": args.logs, "from": args.date_from, "to": args.date_to, "stats_dir": args.stats_dir,
                     "bootstrap": args.bootstrap, "seed": args.seed}
    from ._gate_flags import gate_config_from_args
    from ..evaluation import gated_adc_statistics

    gate_config = gate_config_from_args(args, args.out, result.run_id)
    with result.timed("statistics"):
        stats, verdicts, check_verdicts = gated_adc_statistics(
            ctx.spark, args.logs, args.date_from, args.date_to, args.stats_dir, args.bootstrap, args.seed,
            gate_config)
    result.verdicts = verdicts
    with result.timed("estimate"):
        table = estimate_adc(stats, level=args.level, dcg_base=args.dcg_base, smoothing=args.smoothing)
    table["checks"] = " ".join(f"{c}:{v}" for c, v in check_verdicts.items()) or "not_run"
    path = write_table(table, args.out, "adc")
    result.outputs = {"adc": os.path.abspath(path)}
    ls = stats.table("log_summary")
    result.counts = {"days": len(stats.dates), "days_scanned": len(stats.scanned), "days_loaded": len(stats.loaded),
                     "events": int(ls["n_events"].sum()) if len(ls) else 0,
                     "impressions": int(stats.table("ad_position")["m"].sum())}
    if getattr(stats, "gate_counts", None):
        result.counts["gate"] = stats.gate_counts
    result.summary = {"window": stats.window,
                      "adc": {m: table[(table["method"] == m) & (table["interval_kind"] == "delta")]
                              .sort_values("position")["coefficient"].round(6).tolist()
                              for m in table["method"].unique()},
                      "dcg": table.drop_duplicates("position").sort_values("position")["dcg"].round(6).tolist()}
    show = table[table["interval_kind"] == ("bootstrap" if args.bootstrap else "delta")]
    print(show[["position", "method", "coefficient", "ci_low", "ci_high", "ads_used", "impressions_used", "dcg"]]
          .to_string(index=False))
