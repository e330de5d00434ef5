"""``scavenger simulate``: seed 002 section 6 (slate OPE simulation study) with the exact pattern sampler."""
from __future__ import annotations

import math
import os
import sys

from ..errors import UsageError

NAME = "simulate"
HELP = "Reproduce the slate OPE simulation study (seed 002, section 6): IPS, PI, wPI, PI++, beta; N*MSE tables and plots"


MAX_N = 10 ** 12   # slates per simulation: the pattern sampler draws multinomial counts as 64-bit integers


def _n_list(text: str) -> tuple:
    values = []
    for x in str(text).split(","):
        if not x.strip():
            continue
        try:
            number = float(x)
        except ValueError:
            raise UsageError(f"--N expects numbers like 1e7 or 1e6,1e7, got {text!r}") from None
        if not math.isfinite(number) or not number.is_integer() or not 1 <= number <= MAX_N:
            raise UsageError(f"--N expects whole numbers from 1 to {MAX_N:.0e} (like 1e7 or 1e6,1e7), got {text!r}")
        values.append(int(number))
    if not values:
        raise UsageError(f"--N must be positive, got {text!r}")
    return tuple(values)


def prepare(args, ctx):
    """Every flag checked before Spark starts or --out is touched (exit 2): (tensors, sims, N list)."""
    from ..simulation.slate_figures import PAPER_SCALE
    from . import shared_flags as C

    tensors0, sims0, n0 = PAPER_SCALE[args.preset]
    tensors = args.tensors if args.tensors is not None else tensors0
    sims = args.sims if args.sims is not None else sims0
    N_list = _n_list(args.N) if args.N is not None else n0
    if tensors < 1 or sims < 2:
        raise UsageError("--tensors must be >= 1 and --sims >= 2")
    if not (math.isfinite(args.pbar) and 0 < args.pbar <= 0.5):
        raise UsageError("--pbar must be in (0, 0.5]")
    if args.seed < 0 or args.seed > C.MAX_SEED:
        raise UsageError(f"--seed must be a whole number from 0 to {C.MAX_SEED}; got {args.seed}")
    if args.partitions is not None and args.partitions < 1:
        raise UsageError(f"--partitions must be >= 1; got {args.partitions}")
    return tensors, sims, N_list


def add_arguments(parser) -> None:
    from ..simulation.presets import PRESETS

    parser.add_argument("--preset", required=True, choices=PRESETS, help="which figure of section 6")
    parser.add_argument("--tensors", type=int, default=None,
                        help="reward tensors per setting (default: the paper's, 50 for fig1/fig2, 200 else)")
    parser.add_argument("--sims", type=int, default=None,
                        help="simulations per tensor (default: the paper's, 1000 for fig1/fig2, 500 else)")
    parser.add_argument("--N", dest="N", default=None,
                        help="slates per simulation, comma list allowed (default 1e7; fig3/fig4: 1e6,1e7)")
    parser.add_argument("--pbar", type=float, default=0.25, help="true prior mean reward (fig1 uses a grid)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("spark", "local"), default="spark",
                        help="spread tensors over Spark tasks (default) or run in this process")
    parser.add_argument("--partitions", type=int, default=None, help="Spark partitions for the tensor jobs")
    parser.add_argument("--out", required=True, help="output directory")


def run(args, ctx, prepared=None) -> None:
    from ..simulation.slate_figures import run_preset

    tensors, sims, N_list = prepared if prepared is not None else prepare(args, ctx)
    ctx.result.inputs.update({"preset": args.preset, "tensors": tensors, "sims": sims, "N": list(N_list),
                              "pbar": args.pbar, "seed": args.seed, "backend": args.backend})
    spark = None
    if args.backend == "spark":
        # Python workers must run this interpreter (numpy/pandas/scavenger); only a default, never overrides.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        with ctx.result.timed("spark_start"):
            spark = ctx.spark
    with ctx.result.timed("simulate_and_write"):
        info = run_preset(args.preset, args.out, tensors, sims, N_list, seed=args.seed, pbar=args.pbar,
                          spark=spark, partitions=args.partitions)
    ctx.result.outputs.update(info.pop("paths"))
    ctx.result.counts.update({k: info.pop(k) for k in ("cells", "simulations", "rows_simulated")})
    ctx.result.timings["simulate_seconds"] = info.pop("simulate_seconds")
    ctx.result.summary.update(info)
