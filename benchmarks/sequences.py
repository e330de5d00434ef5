"""Anytime validity (issue 59): over held-out 20-day sequences of slotted 3/20/60 logs (1,500 events a day, each
sequence its own world and truth, from `scavenger generate`), one `scavenger evaluate --by-day --baseline logging`
per sequence on DuckDB, and per cell (target, estimator, alone or minus logging) the share of sequences on which

- the naive interval (the cumulative estimate's fixed-horizon interval, looked at every day: running/ ci_low,
  ci_high) excludes the truth on some day, and
- the confidence sequence (running/ cs_low, cs_high) does,

with an exact one-sided binomial test of the sequence's rate against 5% at P = 0.001, the first day the sequence
is finite (median), and on the last day its width over the fixed-horizon interval's (mean).

    .venv/bin/python benchmarks/sequences.py                      # 60 sequences (about 30 minutes)
    .venv/bin/python benchmarks/sequences.py --sequences 8 --workdir /tmp/seq

Writes WORKDIR/sequences.csv (one row per sequence and cell) and WORKDIR/sequences.md (the table printed).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coverage_data import SCAVENGER, SHAPES, generate, run  # noqa: E402

HELD_OUT_SEED = 59_000      # seeds of the held-out worlds: 59000 + i (none used while building the sequences)
ESTIMATORS = "slate_ips,slate_pi,slate_pi_plus_plus,slate_pi_beta"


def read_running(path: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(d).assign(dt=d.name.split("=", 1)[1]) for d in sorted(path.glob("dt=*"))],
                     ignore_index=True)


def sequence(i: int, days: int, events: int, work: Path, reuse: bool) -> pd.DataFrame:
    """One held-out sequence: generate, evaluate --by-day --baseline logging, one row per cell."""
    shape = SHAPES["slotted_2000"]
    shape = type(shape)(**{**shape.__dict__, "name": f"seq{i}", "events": events})
    gen, out = work / f"seq{i}", work / f"seq{i}_out"
    generate(shape, days, HELD_OUT_SEED + i, gen, reuse)
    if not (reuse and (out / "running").exists()):
        run([SCAVENGER, "evaluate", "--engine", "duckdb", "--gate", "off", "--logs", str(gen / "logs"),
             "--decisions", str(gen / "decisions"), "--out", str(out), "--by-day", "--baseline", "logging",
             "--estimators", ESTIMATORS], work / f"seq{i}_evaluate.log")
    gt = json.loads((gen / "ground_truth.json").read_text())
    truth = {p: v["value"] for p, v in gt["policies"].items()}
    logged = gt["logging_policy"]["value"]
    r = read_running(out / "running")
    rows = []
    for (p, b, e), g in r.groupby(["policy_id", "baseline_id", "estimator"], dropna=False):
        if p not in truth:
            continue
        g = g.sort_values("dt")
        t = truth[p] - (logged if isinstance(b, str) else 0.0)
        lo, hi, cl, ch = (g[c].astype(float).to_numpy() for c in ("ci_low", "ci_high", "cs_low", "cs_high"))
        ci_ok, cs_ok = np.isfinite(lo) & np.isfinite(hi), np.isfinite(cl) & np.isfinite(ch)
        first = int(np.argmax(cs_ok)) + 1 if cs_ok.any() else None
        last_ratio = (ch[-1] - cl[-1]) / (hi[-1] - lo[-1]) if cs_ok[-1] and ci_ok[-1] else np.nan
        rows.append({"sequence": i, "target": p, "estimator": e, "minus_logging": isinstance(b, str),
                     "naive_missed": bool(np.any(ci_ok & ((lo > t) | (hi < t)))),
                     "cs_missed": bool(np.any(cs_ok & ((cl > t) | (ch < t)))), "cs_first_day": first,
                     "last_width_ratio": last_ratio})
    return pd.DataFrame(rows)


def table(df: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    out = []
    for (tgt, est, minus), g in df.groupby(["target", "estimator", "minus_logging"]):
        n, miss = len(g), int(g["cs_missed"].sum())
        out.append({"target": tgt, "estimator": est, "minus_logging": minus, "sequences": n,
                    "naive_ever_missed": g["naive_missed"].mean(), "cs_ever_missed": miss / n,
                    "cs_pass": bool(binom.sf(miss - 1, n, alpha) >= 0.001),
                    "cs_first_finite_day": g["cs_first_day"].median(),
                    "last_day_width_ratio": g["last_width_ratio"].mean()})
    return pd.DataFrame(out)


def markdown(t: pd.DataFrame) -> str:
    cols = list(t.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in t.to_dict("records"):
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=60)
    ap.add_argument("--days", type=int, default=20)
    ap.add_argument("--events", type=int, default=1500)
    ap.add_argument("--workdir", default="/tmp/scavenger_sequences")
    ap.add_argument("--reuse", action="store_true", help="keep generated logs and outputs found in WORKDIR")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    t0, frames = time.perf_counter(), []
    for i in range(args.sequences):
        frames.append(sequence(i, args.days, args.events, work, args.reuse))
        print(f"sequence {i + 1}/{args.sequences} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(work / "sequences.csv", index=False)
    text = markdown(table(df))
    (work / "sequences.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
