"""`scavenger train`: learn which m ads to show (seed 000) on one window, write decisions for a later one."""
from __future__ import annotations

NAME = "train"
HELP = "learn m-ad policies (regression / cost-sensitive reductions) from logs; write decisions for a later window"


def add_arguments(parser) -> None:
    parser.add_argument("--logs", required=True, help="impression logs (path or table)")
    parser.add_argument("--from", dest="date_from", required=True, help="training window start (YYYY-MM-DD)")
    parser.add_argument("--to", dest="date_to", required=True, help="training window end (inclusive)")
    parser.add_argument("--score-from", required=True, help="window to write decisions for: start")
    parser.add_argument("--score-to", required=True, help="window to write decisions for: end (inclusive)")
    parser.add_argument("--method", default="both", choices=["regression", "cost_sensitive", "both"])
    parser.add_argument("--m", type=int, default=4, help="number of ads to choose per event (positions 1..m)")
    parser.add_argument("--adc", default="estimate",
                        help="ADCs C_1..C_K: comma-separated numbers, a stored ADC table, or 'estimate' (default)")
    parser.add_argument("--adc-method", default="heuristic",
                        help="ADC method for the offset and for the factored estimate (default heuristic, as "
                             "evaluate; with --adc PATH: a method the table holds)")
    parser.add_argument("--eligibility", default=None,
                        help="table of eligible ads: (dt, ad_id) or (event_id, ad_id); default: ads seen in training")
    parser.add_argument("--interactions", default="2", choices=["1", "2", "full"],
                        help="context features crossed with the ad: 1 single features, 2 also pairs, full also "
                             "the context key")
    parser.add_argument("--max-pair-keys", type=int, default=None,
                        help="interactions 2/full: only the first N entries of a context (in key order) form pairs, "
                             "so a row's cost is bounded (default 64); rows with more are counted in result.json "
                             "(counts train_rows_pairs_capped, score_rows_pairs_capped) and warned about")
    parser.add_argument("--reg-param", type=float, default=1e-4, help="L2 regularisation of the learners")
    parser.add_argument("--max-iter", type=int, default=25, help="Newton iterations of the regression (Poisson GLM)")
    parser.add_argument("--truth", default="auto",
                        help="generator truth dir for true values/regret ('auto': <logs>/../truth if present; "
                             "'none': off)")
    parser.add_argument("--no-estimate", action="store_true",
                        help="skip the factored estimate of the learned policies on the scoring window")
    parser.add_argument("--dedup", default="random", choices=["random", "next_best", "both"],
                        help="cost-sensitive Set Select Test: replace duplicates by random unused eligible ads "
                             "(seed 000) or by the best unused by the round's score; both: write two policies")
    parser.add_argument("--seed", type=int, default=0, help="seed of tie-breaks and duplicate replacement")
    parser.add_argument("--gate", choices=("enforce", "report", "off"), default="enforce",
                        help="the factored estimate's data gate, evaluate's (checks a, b): enforce (default) "
                             "refuses an estimate whose check failed (no number; the decisions are still written), "
                             "report prints it marked, off runs no checks")
    parser.add_argument("--max-id-length", type=int, default=1000,
                        help="rows holding an id (event, policy, context, ad), a context key or value longer than "
                             "this many characters are left out of training and scoring and counted (default "
                             "1000; evaluate quarantines them as ID_TOO_LONG, CONTEXT_TOO_LONG)")
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                        help="auto (default): DuckDB for local Parquet, Spark for tables, remote URIs, SPARK_REMOTE or "
                             "spark-submit; duckdb; spark")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--json", action="store_true", help="print result.json on stdout instead of the summary")
    parser.add_argument("--verbose", action="store_true", help="show Spark's own log lines")


def prepare(args, ctx):
    """Every check a user can fail, before an engine starts (exit 2)."""
    from ..policies.features import PAIR_KEYS
    from ..policies.train import TrainConfig, prepare as describe

    cfg = TrainConfig(logs=args.logs, date_from=args.date_from, date_to=args.date_to, score_from=args.score_from,
                      score_to=args.score_to, out=args.out, method=args.method, m=args.m, adc=args.adc,
                      adc_method=args.adc_method, eligibility=args.eligibility, seed=args.seed,
                      interactions=args.interactions,
                      max_pair_keys=PAIR_KEYS if args.max_pair_keys is None else args.max_pair_keys,
                      reg_param=args.reg_param, max_iter=args.max_iter, truth=args.truth,
                      estimate=not args.no_estimate, dedup=args.dedup, gate=args.gate,
                      max_id_length=args.max_id_length)
    inputs = describe(cfg)
    from ..policies.features import is_adc_table, parse_adc_numbers
    from .arguments import check_adc_option

    if cfg.adc in (None, "", "estimate") or is_adc_table(cfg.adc):
        check_adc_option(cfg.adc, cfg.adc_method)     # as evaluate: a bad table or method is exit 2
    else:
        parse_adc_numbers(cfg.adc)
    return cfg, inputs


def run(args, ctx, prepared) -> None:
    from ..policies.train import run_training

    cfg, inputs = prepared
    engine = ctx.engine(inputs)
    with ctx.result.timed("train"):
        run_training(engine, cfg, ctx.result, inputs)
