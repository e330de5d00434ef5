"""Benchmark of the ADC and evaluate pipelines in one warm process (issue 3, item 9), through the notebook API
(``scavenger.adc`` / ``scavenger.evaluate``, the code of the jobs). Prints figures; not a test. benchmarks/run times
the jobs cold from the command line; this script adds the ADCs, the warm (stored) runs and the per-row Python loop.

    python benchmarks/bench_scavenging.py --events 10000000 --ads 1000 --positions 4 --workdir /tmp/bench_scav

Generates uniform logs with the ground-truth generator (4 target policies: oracle, most_clicked, uniform_random,
oracle_mix), then times, on ``--engine`` (auto: DuckDB for these local files)
  - adc cold (empty stats_dir: one scan per dt) and warm (every day loaded from the store),
  - evaluate cold and warm (factored and the slate estimators; the direct-approach slate tables are off by default,
    they grow with the number of distinct slates, use --slate-actions to add scavenging_slate, which reads them),
  - a straightforward per-row Python implementation (ADC counts + factored sums) on a slice of --python-events,
and reports events/s and the peak resident memory of the driver (Python process and the driver JVM, VmHWM).
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path


def jvm_peak_mb(spark) -> float | None:
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except Exception:  # noqa: BLE001
        return None
    return None


def py_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def per_row_python(logs_dir: str, decisions_dir: str, n_events: int, C) -> tuple[float, int]:
    """A straightforward per-row implementation: M(a,i), C(a,i) and the factored sums, one Python loop."""
    import pyarrow.dataset as ds

    t0 = time.perf_counter()
    logs = ds.dataset(logs_dir, partitioning="hive").head(n_events, columns=["event_id", "slots"]).to_pylist()
    ids = {r["event_id"] for r in logs}
    dec = defaultdict(dict)
    wanted = ds.field("event_id").isin(list(ids))
    for batch in ds.dataset(decisions_dir, partitioning="hive").to_batches(
            columns=["policy_id", "event_id", "slots"], filter=wanted):
        for r in batch.to_pylist():
            if r["event_id"] in ids:
                dec[r["event_id"]][r["policy_id"]] = r["slots"]
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    M, Cc = defaultdict(float), defaultdict(float)
    fac = defaultdict(float)
    for r in logs:
        targets = dec.get(r["event_id"], {})
        for s in r["slots"]:
            rew = s["reward"] or 0.0
            M[(s["ad_id"], s["position"])] += 1
            Cc[(s["ad_id"], s["position"])] += rew
            if rew:
                for pid, slots in targets.items():
                    for d in slots:
                        if d["ad_id"] == s["ad_id"]:
                            fac[(pid, s["ad_id"], s["position"], d["position"])] += rew * d["probability"]
    T_a = defaultdict(float)
    for (a, _), m in M.items():
        T_a[a] += m
    values = defaultdict(float)
    for (pid, a, i, j), v in fac.items():
        values[pid] += v * C[j - 1] / C[i - 1] / T_a[a]
    t_loop = time.perf_counter() - t0
    return t_read, t_loop


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--ads", type=int, default=1000)
    ap.add_argument("--positions", type=int, default=4)
    ap.add_argument("--python-events", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="/tmp/bench_scavenging")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--slate-actions", action="store_true", help="also the direct approach (scavenging_slate)")
    ap.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"))
    ap.add_argument("--reuse", action="store_true", help="reuse generated data in --workdir")
    args = ap.parse_args(argv)

    import scavenger
    from scavenger.session import get_spark
    from scavenger.simulation.generator import GeneratorConfig, generate

    spark = get_spark("bench-scavenging", master=args.master,
                      conf={"spark.driver.memory": args.driver_memory, "spark.ui.showConsoleProgress": "false",
                            "spark.sql.shuffle.partitions": "8"})
    work = Path(args.workdir)
    gen = work / "gen"
    figures = {"events": args.events, "ads": args.ads, "positions": args.positions, "days": args.days,
               "master": args.master, "engine": args.engine}
    if not (args.reuse and (gen / "ground_truth.json").exists()):
        shutil.rmtree(work, ignore_errors=True)
        t0 = time.perf_counter()
        generate(spark, GeneratorConfig(logging="uniform", n_positions=args.positions, n_ads=args.ads,
                                        days=args.days, events_per_day=args.events // args.days, seed=0), str(gen))
        figures["generate_s"] = round(time.perf_counter() - t0, 1)
    truth = json.loads((gen / "ground_truth.json").read_text())
    n = truth["counts"]["events"]
    logs, decs = str(gen / "logs"), str(gen / "decisions")

    for kind in ("cold", "warm"):
        if kind == "cold":
            shutil.rmtree(work / "stats_adc", ignore_errors=True)
        t0 = time.perf_counter()
        result = scavenger.adc(logs, stats_dir=str(work / "stats_adc"), gate="off", engine=args.engine)
        table = result.pandas
        dt = time.perf_counter() - t0
        figures["engine_used"] = result.engine.get("name")
        figures[f"adc_{kind}_s"] = round(dt, 2)
        figures[f"adc_{kind}_events_per_s"] = round(n / dt)
    figures["adc_variance_optimal"] = table[(table["method"] == "variance_optimal")
                                            & (table["interval_kind"] == "delta")]["coefficient"].round(4).tolist()
    figures["adc_true"] = truth["adc"]
    estimators = ["factored", "slate"] + (["scavenging_slate"] if args.slate_actions else [])
    for kind in ("cold", "warm"):
        if kind == "cold":
            shutil.rmtree(work / "stats_eval", ignore_errors=True)
        t0 = time.perf_counter()
        ev = scavenger.evaluate(logs, decs, estimators=estimators, stats_dir=str(work / "stats_eval"), gate="off",
                                engine=args.engine)
        dt = time.perf_counter() - t0
        figures[f"evaluate_{kind}_s"] = round(dt, 2)
        figures[f"evaluate_{kind}_events_per_s"] = round(n / dt)
    est = ev.pandas
    fac = est[est["estimator"] == "factored"].set_index("policy_id")
    figures["factored_vs_truth"] = {p: [round(fac.loc[p, "value"], 4), round(fac.loc[p, "std_error"], 4),
                                        round(t["realized_value"], 4)] for p, t in truth["policies"].items()}
    figures["driver_jvm_peak_mb"] = jvm_peak_mb(spark)
    figures["driver_python_peak_mb"] = round(py_peak_mb(), 1)

    m = min(args.python_events, n)
    t_read, t_loop = per_row_python(logs, decs, m, truth["adc"])
    figures["python_rows"] = m
    figures["python_read_s"] = round(t_read, 2)
    figures["python_loop_s"] = round(t_loop, 2)
    figures["python_events_per_s"] = round(m / t_loop)
    figures["python_events_per_s_incl_read"] = round(m / (t_read + t_loop))
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
