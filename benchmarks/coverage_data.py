"""Data of the coverage benchmark (benchmarks/coverage.py): the shapes, their logs through `scavenger generate`, a
reversed-slate target written beside the generated decisions, and the true value of every target and ADC per day.

Truth per day (what a one-day estimate estimates): the generator's realized value of each built-in target,
sum_c n_c v_c / n over the day's contexts (ground_truth.json ``per_day``); for a target that re-orders the logged
slate, the mean over the day's events of sum_k C_{sigma(k)} P(x_t, a_{t,k}) (seed 001 section 4.2) from the
generator's click rates P(x, a) and ADCs (truth/click_rates, truth/adc); for a partial slate, the same over the
positions the row holds. The ADC truth is the generator's C_i.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SCAVENGER = str(ROOT / ".venv" / "bin" / "scavenger")


@dataclass(frozen=True)
class Shape:
    name: str
    layout: str
    positions: int
    events: int
    logging: str = "uniform"
    ads: int = 40
    slot_sizes: str | None = None
    epsilon: float = 0.2
    reversed_target: bool = False     # add the "reversed" target (the logged slate in reverse order)
    partial: float = 0.0              # share of events logged as one slot at a uniform position (generator)
    adc: bool = False                 # run `scavenger adc` too (ads move between positions)


SHAPES = {s.name: s for s in [
    Shape("slotted_300", "slotted", 3, 300, slot_sizes="3,20,60"),
    Shape("slotted_2000", "slotted", 3, 2000, slot_sizes="3,20,60"),
    Shape("ranked_uniform_4000", "ranked", 5, 4000, ads=40, reversed_target=True, adc=True),
    Shape("ranked_multi_4000", "ranked", 5, 4000, logging="multi", epsilon=0.3, ads=40, reversed_target=True,
          adc=True),
    Shape("ranked_history_4000", "ranked", 5, 4000, logging="history", epsilon=0.3, ads=40, reversed_target=True,
          adc=True),
    Shape("slotted_partial_20000", "slotted", 3, 20000, slot_sizes="3,5,8", partial=0.3),
]}


def run(cmd: list, log: Path) -> float:
    """Run a CLI command, its output into ``log``; seconds taken. Exit codes 0 and 3 (a check failed; the
    estimates that remain are written) are accepted."""
    import time

    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    if rc not in (0, 3):
        sys.exit(f"command failed ({rc}), see {log}: {' '.join(cmd)}")
    return time.perf_counter() - t0


def generate(shape: Shape, days: int, seed: int, out: Path, reuse: bool) -> float:
    """Logs, decisions and truth of a shape (the CLI's generator, partial slates included); the reversed target
    after."""
    if reuse and (out / "ground_truth.json").exists():
        return 0.0
    cmd = [SCAVENGER, "generate", "--layout", shape.layout, "--positions", str(shape.positions), "--logging",
           shape.logging, "--days", str(days), "--events-per-day", str(shape.events), "--seed", str(seed),
           "--epsilon", str(shape.epsilon), "--out", str(out)]
    cmd += ["--slot-sizes", shape.slot_sizes] if shape.slot_sizes else ["--ads", str(shape.ads)]
    cmd += ["--partial-slates", str(shape.partial)] if shape.partial > 0 else []
    out.mkdir(parents=True, exist_ok=True)
    seconds = run(cmd, out.parent / f"{out.name}.generate.log")
    con = duckdb.connect()
    if shape.reversed_target:
        _write_reversed(con, out, shape.positions)
    return seconds


def _write_reversed(con, out: Path, K: int) -> None:
    """Target "reversed": each event's logged slate in reverse order (a re-ordering of the logged ads)."""
    logs = out / "logs"
    con.execute(f"""COPY (SELECT 'reversed' AS policy_id, event_id,
        list_transform(slots, lambda s: {{'position': CAST({K} + 1 - s.position AS INTEGER), 'ad_id': s.ad_id,
                                      'probability': 1.0::DOUBLE}}) AS slots,
        CAST(NULL AS VARCHAR) AS base_policy, dt
      FROM read_parquet('{logs}/*/*.parquet', hive_partitioning = true))
      TO '{out / "decisions"}' (FORMAT PARQUET, PARTITION_BY (dt), OVERWRITE_OR_IGNORE,
                                FILENAME_PATTERN 'reversed_{{i}}')""")


def truth(shape: Shape, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(policy truth: dt, policy_id, truth; ADC truth: position, truth)."""
    gt = json.loads((out / "ground_truth.json").read_text())
    rows = [{"dt": d, "policy_id": p, "truth": v} for p, info in gt["policies"].items()
            for d, v in info["per_day"].items()]
    pol = pd.DataFrame(rows)
    con = duckdb.connect()
    if shape.partial > 0:
        pol = _partial_truth(con, out)
    if shape.reversed_target:
        pol = pd.concat([pol, _reversed_truth(con, out, shape.positions)], ignore_index=True)
    pol["dt"] = pd.to_datetime(pol["dt"]).dt.date
    adc = pd.DataFrame({"position": range(1, len(gt["adc"]) + 1), "truth": gt["adc"]})
    return pol, adc


def _rates(out: Path) -> str:
    return (f"(SELECT context_id, ad_id, p FROM read_parquet('{out / 'truth' / 'click_rates'}/*.parquet')) r")


def _reversed_truth(con, out: Path, K: int) -> pd.DataFrame:
    return con.execute(f"""
      SELECT CAST(dt AS VARCHAR) AS dt, 'reversed' AS policy_id, sum(c.coefficient * r.p) / count(DISTINCT event_id)
        AS truth
      FROM (SELECT dt, event_id, context_id, unnest(slots) AS s
            FROM read_parquet('{out / 'logs'}/*/*.parquet', hive_partitioning = true)) l
      JOIN {_rates(out)} ON r.context_id = l.context_id AND r.ad_id = l.s.ad_id
      JOIN read_parquet('{out / 'truth' / 'adc'}/*.parquet') c ON c.position = {K} + 1 - l.s.position
      GROUP BY dt""").df()


def _partial_truth(con, out: Path) -> pd.DataFrame:
    """Each target's value on the positions a row holds: mean over events of sum over held k of
    sum_a pi_k(a|x) C_k P(x, a)."""
    return con.execute(f"""
      WITH d AS (SELECT dt, policy_id, event_id, unnest(slots) AS s
                 FROM read_parquet('{out / 'decisions'}/*/*.parquet', hive_partitioning = true)),
      l AS (SELECT dt, event_id, context_id, unnest(slots).position AS position
            FROM read_parquet('{out / 'logs'}/*/*.parquet', hive_partitioning = true)),
      n AS (SELECT dt, count(DISTINCT event_id) AS n FROM l GROUP BY dt)
      SELECT CAST(d.dt AS VARCHAR) AS dt, d.policy_id, sum(d.s.probability * c.coefficient * r.p) / max(n.n) AS truth
      FROM d JOIN l ON l.event_id = d.event_id AND l.position = d.s.position
      JOIN {_rates(out)} ON r.context_id = l.context_id AND r.ad_id = d.s.ad_id
      JOIN read_parquet('{out / 'truth' / 'adc'}/*.parquet') c ON c.position = l.position
      JOIN n ON n.dt = d.dt
      GROUP BY d.dt, d.policy_id""").df()
