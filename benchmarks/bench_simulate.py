"""Exact pattern sampler vs row-by-row sampler for the seed 002 section 6 simulation (same N, same S).

Both produce the same estimators (IPS, SNIPS, PI, wPI, PI++ variants, beta) for one reward tensor; the row-level
sampler draws every slate and reward and goes through estimators/slate.py, the exact one draws one multinomial
over the 2^K match patterns plus one binomial per pattern. Prints time per simulation and the ratio.

    .venv/bin/python benchmarks/bench_simulate.py [--N 100000] [--sims 20] [--presets]

``--presets`` additionally times every figure preset at the paper's scale in-process (single core).
"""
from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from scavenger.simulation import slate_sim as ss

SETTINGS = [("elementwise", (3, 50, 800)), ("elementwise", (2, 25, 50, 75, 100)), ("pairwise", (2, 25, 50, 75, 100))]


def bench(model, D, N, sims, seed=0):
    tensor = ss.draw_tensor(np.random.default_rng(seed), D, model, 0.25)
    probs, q = ss.pattern_probs(D), ss.pattern_means(tensor)
    t0 = time.perf_counter()
    reps = 0
    while True:  # repeat the exact sampler until it has run for >= 0.5 s
        ss.pattern_estimates(*ss.sample_patterns(np.random.default_rng(seed + reps), N, probs, q, sims), D, (0.25,))
        reps += 1
        if time.perf_counter() - t0 > 0.5:
            break
    exact = (time.perf_counter() - t0) / (reps * sims)
    t0 = time.perf_counter()
    ss.row_level_estimates(np.random.default_rng(seed), tensor, N, sims, (0.25,))
    row = (time.perf_counter() - t0) / sims
    return exact, row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=float, default=1e5)
    ap.add_argument("--sims", type=int, default=20)
    ap.add_argument("--presets", action="store_true")
    args = ap.parse_args()
    N = int(args.N)
    print(f"N={N:,} rows per simulation, S={args.sims} simulations, one tensor, one core")
    print(f"{'model':12s} {'D':22s} {'exact s/sim':>12s} {'row s/sim':>11s} {'ratio':>9s} {'row @N=1e7 (s/sim, est.)':>26s}")
    for model, D in SETTINGS:
        exact, row = bench(model, D, N, args.sims)
        print(f"{model:12s} {str(list(D)):22s} {exact:12.2e} {row:11.3e} {row / exact:9.0f} {row * 1e7 / N:26.2f}")
    if args.presets:
        from scavenger.simulation.slate_figures import PAPER_SCALE, run_preset

        for preset, (tensors, sims, n_list) in PAPER_SCALE.items():
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                info = run_preset(preset, tmp, tensors, sims, n_list)
                wall = time.perf_counter() - t0
            print(f"{preset}: {info['simulations']:,} simulations of N in {list(n_list)} "
                  f"({info['rows_simulated']:.2e} rows) in {wall:.1f} s wall (simulate {info['simulate_seconds']} s)")


if __name__ == "__main__":
    main()
