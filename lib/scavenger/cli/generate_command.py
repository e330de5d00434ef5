"""`scavenger generate`: impression logs, target-policy decisions and their exact ground truth."""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "generate"
HELP = ("Generate impression logs with known ground truth (ranked or slotted slates, four logging modes), "
        "decisions of built-in target policies and ground_truth.json")


def add_arguments(parser):
    parser.add_argument("--out", required=True, help="output directory: OUT/logs, OUT/decisions, OUT/truth, "
                                                     "OUT/ground_truth.json, OUT/result.json")
    parser.add_argument("--layout", default="ranked", help="ranked (K distinct ads from one pool) or slotted "
                                                           "(slot k from its own pool of d_k ads)")
    parser.add_argument("--logging", default="uniform", help="uniform, history, contextual or multi")
    parser.add_argument("--positions", default="4", help="number of positions K (default 4)")
    parser.add_argument("--ads", default="100", help="ranked: size of the ad pool (>= K; default 100)")
    parser.add_argument("--slot-sizes", default=None, help="slotted: comma list of pool sizes d_k, one per "
                                                           "position (default 5 each)")
    parser.add_argument("--contexts", default="60", help="number of contexts (default 60)")
    parser.add_argument("--days", default="3", help="number of days (dt partitions; default 3)")
    parser.add_argument("--events-per-day", default="200000", help="impressions per day (default 200000)")
    parser.add_argument("--start-date", default="2026-01-01", help="first dt, YYYY-MM-DD")
    parser.add_argument("--adc", default=None, help="comma list C_1..C_K starting at 1, strictly decreasing "
                                                    "(default: the paper's 1,.613,.527,.433, extended geometrically)")
    parser.add_argument("--epsilon", default="0.2", help="exploration rate of the epsilon-greedy logging policies")
    parser.add_argument("--seed", default="0", help="random seed (same seed, same rows)")
    parser.add_argument("--partial-slates", default="0", metavar="SHARE",
                        help="share of events logged as one slot only, at a uniform position, like the Open Bandit "
                             "Dataset's rows (default 0: full slates); ground_truth.json then gives held_slots")
    parser.add_argument("--click-model", default="additive",
                        help="additive (default): each slot clicked independently with C_k P(x, a); cascade: the "
                             "user stops at the first click (--layout slotted), the truth of the ranking family")
    parser.add_argument("--no-propensities", action="store_true",
                        help="log no propensities (every one null): propensity-free logs, seed 001's setting")
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                        help="auto (default): DuckDB for a local --out (no JVM), Spark for a URI that is not local, "
                             "--master/--conf, spark-submit or SPARK_REMOTE; the same rows either way")


def _number_list(value: str | None, flag: str, kind=float):
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"{flag} expects a comma list of numbers; got {value!r}")
    try:
        return [kind(float(v)) if kind is int else kind(v) for v in items]
    except ValueError:
        raise UsageError(f"{flag} expects a comma list of numbers; got {value!r}") from None


def _number(value: str, flag: str, kind=int):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag} expects a number; got {value!r}") from None
    if kind is int:
        if not number.is_integer():
            raise UsageError(f"{flag} expects an integer; got {value!r}")
        return int(number)
    return number


MAX_WORLD_CELLS = 20_000_000   # contexts x ads of the world's click-rate table (8 bytes each, a few copies in memory)


def config_from_args(args):
    from ..simulation.generator import GeneratorConfig
    from . import shared_flags as C

    cfg = GeneratorConfig(
        layout=args.layout, logging=args.logging,
        n_positions=_number(args.positions, "--positions"), n_ads=_number(args.ads, "--ads"),
        slot_sizes=_number_list(args.slot_sizes, "--slot-sizes", int),
        n_contexts=_number(args.contexts, "--contexts"), days=_number(args.days, "--days"),
        events_per_day=_number(args.events_per_day, "--events-per-day"), start_date=args.start_date,
        adc=_number_list(args.adc, "--adc", float), epsilon=_number(args.epsilon, "--epsilon", float),
        seed=C.parse_seed(args.seed, "--seed"),
        partial_slates=_number(args.partial_slates, "--partial-slates", float),
        propensities=not args.no_propensities, click_model=args.click_model)
    if cfg.layout == "ranked" and cfg.slot_sizes is not None:
        raise UsageError("--slot-sizes applies to --layout slotted only")
    cfg = cfg.resolved()  # validates: UsageError (exit 2) before Spark starts
    C.check_days_fit(cfg.start_date, cfg.days, "--days")
    n_total = cfg.n_ads if cfg.layout == "ranked" else sum(cfg.slot_sizes)
    if cfg.n_contexts * n_total > MAX_WORLD_CELLS:
        raise UsageError(f"--contexts {cfg.n_contexts} x {n_total} ads = {cfg.n_contexts * n_total:,} click rates: "
                         f"the world's tables hold at most {MAX_WORLD_CELLS:,}; lower --contexts "
                         f"or {'--ads' if cfg.layout == 'ranked' else '--slot-sizes'}")
    return cfg


def prepare(args, ctx):
    """Every flag checked before an engine starts or --out is touched (exit 2); the generator's config."""
    return config_from_args(args)


def run(args, ctx, cfg=None):
    from ..simulation.generator import generate

    cfg = cfg if cfg is not None else config_from_args(args)
    result = ctx.result
    result.inputs = {"config": cfg.to_dict()}
    with result.timed("generate"):
        try:
            truth = generate(ctx.output_engine(args.out), cfg, args.out, timings=result.timings)
        except MemoryError:
            # the world's arrays are built in Python; generate has no --batch-days (the advice of the other jobs)
            raise UsageError("generate ran out of memory building the world: lower --contexts, --ads (or "
                             "--slot-sizes) or --events-per-day") from None
    out = os.path.abspath(args.out)
    result.outputs = {"logs": os.path.join(out, "logs"), "decisions": os.path.join(out, "decisions"),
                      "truth": os.path.join(out, "truth"), "ground_truth": os.path.join(out, "ground_truth.json")}
    result.counts = {"events": truth["counts"]["events"], "slots": truth["counts"]["slots"],
                     "clicks": truth["counts"]["clicks"], "days": cfg.days,
                     "per_day": truth["counts"]["per_day"]}
    result.summary = {
        "layout": cfg.layout, "logging": cfg.logging, "adc": truth["adc"],
        "mean_reward": truth["mean_reward"]["overall"],
        "logging_policy_value": truth["logging_policy"]["value"],
        "policy_values": {pid: v["value"] for pid, v in truth["policies"].items()},
    }
    values = ", ".join(f"{pid}={v['value']:.4f}" for pid, v in truth["policies"].items())
    print(f"generate: {truth['counts']['events']} events, {truth['counts']['clicks']} clicks over {cfg.days} day(s) "
          f"-> {out}")
    print(f"  {cfg.layout}/{cfg.logging}, K={cfg.n_positions}; true values per event: logging="
          f"{truth['logging_policy']['value']:.4f}, {values}")
    if truth.get("held_slots"):
        held = truth["held_slots"]
        result.summary["held_slots"] = {pid: v["value"] for pid, v in held["policies"].items()}
        print(f"  partial slates: {held['partial_slates']:.0%} of events hold one slot; value of the held slots = "
              f"{held['held_fraction']:.4f} x value: " + ", ".join(f"{pid}={v['value']:.4f}"
                                                                     for pid, v in held["policies"].items()))
    if not cfg.propensities:
        print("  no propensities logged (IPS/PI family not identified on these logs)")
