"""The notebook API on frames against the same call on paths: ``scavenger.evaluate`` of the README walkthrough's logs
given as paths, as pandas DataFrames (NumPy-backed as ``pd.read_parquet`` gives them, and pyarrow-backed as
``pd.read_parquet(..., dtype_backend="pyarrow")`` gives them) and as pyarrow Tables. The target: frames at most
1.5x paths. Prints figures; not a test.

    .venv/bin/python benchmarks/api_frames.py                      # the walkthrough's logs: 7 days x 20,000 events
    .venv/bin/python benchmarks/api_frames.py --events-per-day 100000 --repeat 5 --workdir /tmp/api-frames

Generates the logs once with ``scavenger generate`` (slotted, the walkthrough's command), reads them into pandas
and pyarrow once (those reads are the user's: timed apart), then runs the same ``scavenger.evaluate(logs,
decisions)`` (DuckDB, default gate and estimators, no statistics store) ``--repeat`` times per input kind,
interleaved, after one warm-up call (imports), and reports the median of each and its ratio to paths. The estimates
must be the same whatever the input (checked to 1e-12).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def generate(workdir: str, days: int, events_per_day: int) -> str:
    gen = os.path.join(workdir, "gen")
    if not os.path.exists(os.path.join(gen, "ground_truth.json")):
        cli = os.path.join(os.path.dirname(sys.executable), "scavenger")
        subprocess.run([cli, "generate", "--days", str(days), "--events-per-day", str(events_per_day),
                        "--layout", "slotted", "--out", gen], check=True, stdout=subprocess.DEVNULL)
    return gen


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--days", type=int, default=7)
    p.add_argument("--events-per-day", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default="/tmp/scavenger-api-frames")
    args = p.parse_args(argv)
    os.environ.setdefault("SCAVENGER_PROGRESS", "0")

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    import scavenger

    gen = generate(args.workdir, args.days, args.events_per_day)
    logs, decisions = os.path.join(gen, "logs"), os.path.join(gen, "decisions")
    read_pd, (lp, dp) = timed(lambda: (pd.read_parquet(logs), pd.read_parquet(decisions)))
    read_pa, (la, da) = timed(lambda: (pq.read_table(logs), pq.read_table(decisions)))
    read_pda, (lpa, dpa) = timed(lambda: (pd.read_parquet(logs, dtype_backend="pyarrow"),
                                          pd.read_parquet(decisions, dtype_backend="pyarrow")))
    inputs = {"paths": (logs, decisions), "pandas": (lp, dp), "pyarrow": (la, da), "pandas_arrow": (lpa, dpa)}
    scavenger.evaluate(logs, decisions)                      # warm-up: imports, sqlglot, DuckDB
    seconds = {k: [] for k in inputs}
    values = {}
    for _ in range(args.repeat):
        for kind, (lg, dc) in inputs.items():
            s, ev = timed(lambda: scavenger.evaluate(lg, dc))
            seconds[kind].append(s)
            values[kind] = ev.estimates.sort_values(["policy_id", "estimator"])["value"].to_numpy(dtype=float)
    for kind in ("pandas", "pyarrow", "pandas_arrow"):
        same = np.allclose(values[kind], values["paths"], rtol=0, atol=1e-12, equal_nan=True)
        assert same, f"{kind}: estimates differ from the paths' run"
    n = len(lp)
    print(f"scavenger.evaluate, {args.days} days x {args.events_per_day:,} events ({n:,} log rows, {len(dp):,} "
          f"decision rows), DuckDB, median of {args.repeat} (seconds):")
    base = statistics.median(seconds["paths"])
    for kind, s in seconds.items():
        med = statistics.median(s)
        runs = ", ".join(f"{x:.2f}" for x in s)
        print(f"  {kind:<12} {med:7.2f}   ratio to paths {med / base:4.2f}   (runs: {runs})")
    print(f"  reading the logs beforehand (the user's step, not timed above): pd.read_parquet {read_pd:.2f} s, "
          f"pq.read_table {read_pa:.2f} s, pd.read_parquet(dtype_backend='pyarrow') {read_pda:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
