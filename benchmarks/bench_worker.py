"""One timed step of ``benchmarks/run`` in a fresh process (its own JVM): generate, validate, adc, evaluate,
incremental or duckdb. Not meant to be called by hand.

    python benchmarks/bench_worker.py SPEC.json RESULT.json

SPEC (written by ``benchmarks/run``) names the step, the data set paths, the Spark settings and the modes to run;
RESULT receives a JSON list of records, one per mode (``cold`` = first run in this fresh process with an empty
statistics store; ``warm`` = the same step again in the same process, still with an empty store, so a full
rescan with the JIT warm and the page cache hot; ``incremental`` = window of D days after D - 1 days were stored).

Memory of each record: the peak resident set (VmHWM) of the driver JVM and of this Python process since the
start of that mode (the peaks are reset between modes through /proc/<pid>/clear_refs when the kernel allows it;
otherwise they are cumulative over the process, which the record says), and the peak JVM heap + off-heap memory
of the executors from Spark's status REST API (stage-level peaks of the stages of that mode; in local mode the
executor runs inside the driver JVM).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import resource
import shutil
import sys
import time
import traceback
from pathlib import Path
from urllib.request import urlopen

MB = 1024 * 1024


# ---- memory -----------------------------------------------------------------------------------------------------
def _vm_hwm_mb(pid) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak(pid) -> bool:
    """Reset VmHWM of a process we own (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


class Memory:
    """Peaks of the driver JVM, this Python process and the executors, per mode."""

    def __init__(self, spark=None):
        self.spark = spark
        self.jvm_pid = None
        if spark is not None:
            try:
                self.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
            except Exception:  # noqa: BLE001
                self.jvm_pid = None
        self.reset_ok = False
        self.mode_start_ms = 0

    def start(self) -> None:
        ok_py = _reset_peak("self")
        ok_jvm = _reset_peak(self.jvm_pid) if self.jvm_pid else True
        self.reset_ok = ok_py and ok_jvm
        self.mode_start_ms = int(time.time() * 1000)

    def python_peak_mb(self) -> float:
        hwm = _vm_hwm_mb("self") if self.reset_ok else None
        return round(hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    def jvm_peak_mb(self) -> float | None:
        v = _vm_hwm_mb(self.jvm_pid) if self.jvm_pid else None
        return None if v is None else round(v, 1)

    def _rest(self, path: str):
        sc = self.spark.sparkContext
        url = sc.uiWebUrl
        if not url:
            return None
        try:
            with urlopen(f"{url}/api/v1/applications/{sc.applicationId}/{path}", timeout=10) as fh:
                return json.load(fh)
        except Exception:  # noqa: BLE001
            return None

    def executor_peak_mb(self) -> tuple[float | None, str]:
        """(peak JVMHeapMemory + JVMOffHeapMemory in MB, where it came from)."""
        if self.spark is None:
            return None, "no Spark"
        stages = self._rest("stages?details=false")
        best = None
        for st in stages or []:
            sub = st.get("submissionTime")
            try:
                t = _dt.datetime.strptime(sub.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000
            except Exception:  # noqa: BLE001
                continue
            if t < self.mode_start_ms:
                continue
            m = st.get("peakExecutorMetrics") or {}
            v = (m.get("JVMHeapMemory") or 0) + (m.get("JVMOffHeapMemory") or 0)
            if v and (best is None or v > best):
                best = v
        if best is not None:
            return round(best / MB, 1), "stage peaks of this mode"
        best = None
        for ex in self._rest("executors") or []:
            m = ex.get("peakMemoryMetrics") or {}
            v = (m.get("JVMHeapMemory") or 0) + (m.get("JVMOffHeapMemory") or 0)
            if v and (best is None or v > best):
                best = v
        if best is not None:
            return round(best / MB, 1), "executor peaks since process start"
        return None, "executor metrics unavailable"

    def record(self) -> dict:
        ex, ex_src = self.executor_peak_mb()
        notes = []
        if self.spark is not None:
            master = self.spark.sparkContext.master
            if master.startswith("local"):
                notes.append(f"{master}: executor inside the driver JVM")
            if ex_src != "stage peaks of this mode":
                notes.append(f"executor_peak_mb: {ex_src}")
        if not self.reset_ok:
            notes.append("driver peaks cumulative over the process")
        return {"driver_jvm_peak_mb": self.jvm_peak_mb(), "driver_python_peak_mb": self.python_peak_mb(),
                "executor_peak_mb": ex, "mem_note": "; ".join(notes)}


# ---- Spark ------------------------------------------------------------------------------------------------------
def spark_session(spec: dict):
    from scavenger.session import get_spark

    conf = {"spark.ui.showConsoleProgress": "false",
            "spark.executor.metrics.pollingInterval": "250ms"}
    if spec.get("driver_memory"):
        conf["spark.driver.memory"] = spec["driver_memory"]
    conf.update(spec.get("conf") or {})
    return get_spark(f"bench-{spec['step']}", master=spec.get("master") or None, conf=conf)


def _empty_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    Path(path).mkdir(parents=True, exist_ok=True)
    return path


def _dates(spec: dict) -> list[_dt.date]:
    start = _dt.date.fromisoformat(spec["start_date"])
    return [start + _dt.timedelta(days=d) for d in range(int(spec["days"]))]


def _meta(spec: dict) -> dict:
    p = Path(spec["data"]["meta"])
    return json.loads(p.read_text()) if p.exists() else {}


def _reference_path(spec: dict, policies) -> Path:
    return Path(spec["data"]["results"]) / f"evaluate-p{policies}.json"


def _reference(spec: dict, policies) -> float | None:
    """scavenger's slate_pi of the one-policy target from the last evaluate (warm) of this data set."""
    p = _reference_path(spec, policies)
    if not p.exists():
        return None
    return json.loads(p.read_text()).get("slate_pi")


def _events_in(stats) -> int:
    ls = stats.table("log_summary")
    return int(ls["n_events"].sum()) if len(ls) else 0


# ---- steps ------------------------------------------------------------------------------------------------------
def step_generate(spark, spec, mem) -> list:
    from pyspark.sql import functions as F

    from scavenger.contract import DECISIONS, conform, load_contract, read_decisions, write_partitioned
    from scavenger.simulation.generator import GeneratorConfig, generate

    d = spec["data"]
    K = int(spec["K"])
    shutil.rmtree(d["root"], ignore_errors=True)
    Path(d["root"]).mkdir(parents=True, exist_ok=True)
    cfg = GeneratorConfig(logging="uniform", n_positions=K, n_ads=int(spec["ads"]), days=int(spec["days"]),
                          events_per_day=int(spec["events"]) // int(spec["days"]), seed=int(spec.get("seed", 0)),
                          start_date=spec["start_date"])
    records = []
    mem.start()
    t0 = time.perf_counter()
    timings: dict = {}
    truth = generate(spark, cfg, d["gen"], timings)
    secs = time.perf_counter() - t0
    n = int(truth["counts"]["events"])
    records.append({"step": "generate", "mode": "cold", "policies": 4, "seconds": secs, "events": n,
                    "note": "generator: logs + decisions of 4 built-in targets + truth ("
                            + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ")", **mem.record()})

    # derived decision sets: 4 reversed targets (position -> K + 1 - position), one-policy set, eight-policy set
    mem.start()
    t0 = time.perf_counter()
    contract = load_contract(DECISIONS)
    dec = read_decisions(spark, d["gen_decisions"])
    rev = dec.select(
        F.concat(F.col("policy_id"), F.lit("_reversed")).alias("policy_id"), F.col("event_id"),
        F.transform(F.col("slots"), lambda s: F.struct((F.lit(K + 1) - s["position"]).alias("position"),
                                                       s["ad_id"].alias("ad_id"),
                                                       s["probability"].alias("probability"))).alias("slots"),
        F.col("base_policy"), F.col("dt"))
    write_partitioned(conform(rev, contract), d["reversed"])
    one = spec["one_policy"]
    write_partitioned(dec.where(F.col("policy_id") == F.lit(one)), d["p1"])
    _link_union([d["gen_decisions"], d["reversed"]], d["p8"])
    secs = time.perf_counter() - t0
    records.append({"step": "generate", "mode": "derived", "policies": 8, "seconds": secs, "events": n,
                    "note": f"Spark SQL: 4 reversed targets -> {d['reversed']}; {one} only -> {d['p1']}; "
                            f"built-in + reversed hard-linked -> {d['p8']}", **mem.record()})
    meta = {"events": n, "days": int(spec["days"]), "K": K, "ads": int(spec["ads"]),
            "start_date": spec["start_date"], "per_day": {k: v["events"] for k, v in truth["counts"]["per_day"].items()},
            "truth": {p: v["realized_value"] for p, v in truth["policies"].items()},
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat()}
    Path(d["meta"]).write_text(json.dumps(meta, indent=1))
    return records


def _link_union(sources: list[str], target: str) -> None:
    """A decisions directory holding every dt=*/ Parquet file of ``sources`` (hard links; copies if links fail)."""
    shutil.rmtree(target, ignore_errors=True)
    for i, src in enumerate(sources):
        for part in sorted(Path(src).glob("dt=*/*.parquet")):
            out = Path(target) / part.parent.name / f"s{i}-{part.name}"
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(part, out)
            except OSError:
                shutil.copy2(part, out)


def step_validate(spark, spec, mem) -> list:
    from scavenger.checks import GateConfig, run_gate
    from scavenger.contract import read_source

    d = spec["data"]
    records = []
    for mode in spec["modes"]:
        out = _empty_dir(str(Path(spec["scratch"]) / f"validate_{mode}"))
        mem.start()
        t0 = time.perf_counter()
        logs = read_source(spark, d["logs"])
        dec = read_source(spark, spec["decisions"])
        g = run_gate(spark, logs, dec, config=GateConfig(out_dir=out, run_id=f"bench-{mode}",
                                                           great_expectations=bool(spec.get("great_expectations", True))))
        try:
            n = int(g.counts["logs"]["rows_in"])
            verdict = "passed" if not g.failed else "FAILED: " + g.message[:200]
            timings = dict(g.timings)
        finally:
            g.release()
        secs = time.perf_counter() - t0
        records.append({"step": "validate", "mode": mode, "policies": spec["policies"], "seconds": secs, "events": n,
                        "value_check": f"gate {verdict}",
                        "note": "quarantine + checks a-e" + (" + GE suites" if spec.get("great_expectations", True)
                                                             else "") + " ("
                                + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items() if k != "total") + ")",
                        **mem.record()})
    return records


def step_adc(spark, spec, mem) -> list:
    from scavenger.evaluation import adc_statistics, estimate_adc, gated_adc_statistics

    d = spec["data"]
    records = []
    for mode in spec["modes"]:
        stats_dir = _empty_dir(str(Path(spec["scratch"]) / f"stats_adc_{mode}"))
        mem.start()
        t0 = time.perf_counter()
        if spec.get("gate") == "enforce":
            from scavenger.checks import GateConfig
            stats, _, _ = gated_adc_statistics(spark, d["logs"], None, None, stats_dir, gate_config=GateConfig(
                out_dir=str(Path(spec["scratch"]) / f"adc_gate_{mode}"), run_id=f"bench-{mode}"))
        else:
            stats = adc_statistics(spark, d["logs"], stats_dir=stats_dir)
        table = estimate_adc(stats)
        secs = time.perf_counter() - t0
        vo = table[(table["method"] == "variance_optimal") & (table["interval_kind"] == "delta")]
        coef = vo.sort_values("position")["coefficient"].round(4).tolist()
        records.append({"step": "adc", "mode": mode, "policies": 0, "seconds": secs, "events": _events_in(stats),
                        "days_scanned": len(stats.scanned), "value_check": f"C variance_optimal={coef}",
                        "note": f"adc_statistics + estimate_adc, gate {spec.get('gate', 'off')}", **mem.record()})
    return records


def _evaluate_once(spark, spec, date_from, date_to, stats_dir):
    from scavenger.evaluation import EvaluateOptions, evaluate
    from scavenger.statistics import StatsConfig

    gate_config = None
    if spec.get("gate") == "enforce":
        from scavenger.checks import GateConfig
        gate_config = GateConfig(out_dir=str(Path(spec["scratch"]) / "eval_gate"), run_id="bench")
    options = EvaluateOptions(estimators=None, policies=spec.get("policy_filter") or None)
    config = StatsConfig(slate_actions=bool(spec.get("slate_actions", False)))
    return evaluate(spark, spec["data"]["logs"], spec["decisions"], date_from, date_to, stats_dir, options, config,
                    gate_config=gate_config)


def _summary(ev, one: str) -> dict:
    est = ev.estimates
    out = {"n_estimates": int(len(est)), "policies_seen": sorted(est["policy_id"].unique().tolist()),
           "estimators": sorted(est["estimator"].unique().tolist())}
    row = est[(est["policy_id"] == one) & (est["estimator"] == "slate_pi")]
    if len(row):
        out["slate_pi"] = float(row["value"].iloc[0])
        out["slate_pi_se"] = float(row["std_error"].iloc[0])
        out["slate_pi_n"] = int(row["n_events"].iloc[0])
    out["estimates"] = [{"policy_id": r["policy_id"], "estimator": r["estimator"],
                         "interval_kind": r["interval_kind"], "value": _f(r["value"]),
                         "std_error": _f(r["std_error"])} for r in est.to_dict("records")]
    return out


def _f(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def step_evaluate(spark, spec, mem) -> list:
    records = []
    one = spec["one_policy"]
    truth = _meta(spec).get("truth", {}).get(one)
    for mode in spec["modes"]:
        stats_dir = _empty_dir(str(Path(spec["scratch"]) / f"stats_eval_{mode}"))
        mem.start()
        t0 = time.perf_counter()
        ev = _evaluate_once(spark, spec, None, None, stats_dir)
        secs = time.perf_counter() - t0
        s = _summary(ev, one)
        check = ""
        if "slate_pi" in s:
            check = f"{one} slate_pi={s['slate_pi']:.6f}+-{s['slate_pi_se']:.6f}"
            if truth is not None and s["slate_pi_se"] > 0:
                check += f" truth={truth:.6f} z={(s['slate_pi'] - truth) / s['slate_pi_se']:+.2f}"
        records.append({"step": "evaluate", "mode": mode, "policies": spec["policies"], "seconds": secs,
                        "events": _events_in(ev.stats), "days_scanned": len(ev.stats.scanned), "value_check": check,
                        "note": f"{s['n_estimates']} estimates, {len(s['policies_seen'])} policies x "
                                f"{len(s['estimators'])} estimators (all applicable)"
                                + (" (policy filter over the 8-policy decisions)" if spec.get("policy_filter") else "")
                                + f", gate {spec.get('gate', 'off')}, "
                                f"slate_actions {'on' if spec.get('slate_actions') else 'off'}",
                        "summary": s, **mem.record()})
        if mode == "warm" or len(spec["modes"]) == 1:
            p = _reference_path(spec, spec["policies"])
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(s, indent=1))
    return records


def step_incremental(spark, spec, mem) -> list:
    one = spec["one_policy"]
    dates = _dates(spec)
    if len(dates) < 2:
        raise SystemExit("incremental needs at least 2 days")
    stats_dir = _empty_dir(str(Path(spec["scratch"]) / "stats_incremental"))
    mem.start()
    t0 = time.perf_counter()
    prime = _evaluate_once(spark, spec, dates[0], dates[-2], stats_dir)
    t_prime = time.perf_counter() - t0
    mem.start()
    t0 = time.perf_counter()
    ev = _evaluate_once(spark, spec, dates[0], dates[-1], stats_dir)
    secs = time.perf_counter() - t0
    s = _summary(ev, one)
    new_day = int(_meta(spec).get("per_day", {}).get(dates[-1].isoformat(), 0))
    scanned = [d.isoformat() for d in ev.stats.scanned]
    check = f"{one} slate_pi={s.get('slate_pi', float('nan')):.6f}"
    ref = _reference(spec, spec["policies"])
    if ref is not None and "slate_pi" in s:
        check += f" vs full rescan rel_diff={abs(s['slate_pi'] - ref) / max(abs(ref), 1e-300):.1e}"
    return [{"step": "incremental", "mode": "incremental", "policies": spec["policies"], "seconds": secs,
             "events": _events_in(ev.stats), "days_scanned": len(ev.stats.scanned), "value_check": check,
             "note": f"days {dates[0]}..{dates[-2]} stored first ({len(prime.stats.scanned)} days scanned in "
                     f"{t_prime:.1f}s, not counted), then {dates[0]}..{dates[-1]}: scanned {','.join(scanned) or '-'}"
                     f", loaded {len(ev.stats.loaded)}; new-day events {new_day}"
                     + (f" ({new_day / secs:,.0f}/s)" if secs > 0 and new_day else ""),
             "summary": s, **mem.record()}]


DUCKDB_SQL = """
WITH logs AS (
    SELECT dt, event_id, slots, slate_reward
    FROM read_parquet('{logs}', hive_partitioning = true)
), decisions AS (
    SELECT dt, event_id, slots AS dslots
    FROM read_parquet('{decisions}', hive_partitioning = true)
    WHERE policy_id = '{policy}'
), per_event AS (
    SELECT
        coalesce(l.slate_reward, coalesce(list_sum(list_transform(l.slots, lambda s: coalesce(s.reward, 0.0))), 0.0))
            AS r,
        list_transform(range(1, {K} + 1), lambda k:
            coalesce(list_sum(list_transform(
                list_filter(d.dslots, lambda x: x.position = k
                            AND x.ad_id = (list_filter(l.slots, lambda s: s.position = k))[1].ad_id),
                lambda x: x.probability)), 0.0)
            / (list_filter(l.slots, lambda s: s.position = k))[1].propensity) AS y
    FROM logs l JOIN decisions d ON l.dt = d.dt AND l.event_id = d.event_id
), per_event_rg AS (
    SELECT r * (1 - {K} + list_sum(y)) AS rg
    FROM per_event
    WHERE NOT list_bool_or(list_transform(y, lambda v: v IS NULL))
)
SELECT count(*) AS n, avg(rg) AS value, stddev_samp(rg) / sqrt(count(*)) AS std_error FROM per_event_rg
"""


def duckdb_sql(logs: str, decisions: str, policy: str, K: int, version: str) -> str:
    """The PI query for one policy: Y_k = pi_k(a_k|x)/mu_k(a_k|x), G = 1 - K + sum_k Y_k, value = mean(r G).
    DuckDB < 1.3 has only the arrow lambda syntax (x -> ...)."""
    import re

    sql = DUCKDB_SQL.format(logs=logs, decisions=decisions, policy=policy.replace("'", "''"), K=int(K))
    major_minor = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if major_minor < (1, 3):
        sql = re.sub(r"lambda (\w+):", r"\1 ->", sql)
    return sql


def step_duckdb(spec, mem) -> list:
    import duckdb

    d = spec["data"]
    sql = duckdb_sql(str(Path(d["logs"]) / "dt=*" / "*.parquet"), str(Path(spec["decisions"]) / "dt=*" / "*.parquet"),
                     spec["one_policy"], int(spec["K"]), duckdb.__version__)
    con = duckdb.connect()
    con.execute(f"SET threads = {int(spec.get('duckdb_threads', 2))}")
    spill = Path(spec["scratch"]) / "duckdb_tmp"   # never the current directory
    con.execute(f"SET temp_directory = '{str(spill)}'")
    records = []
    ref = _reference(spec, 1)
    for mode in spec["modes"]:
        mem.start()
        t0 = time.perf_counter()
        n, value, se = con.execute(sql).fetchone()
        secs = time.perf_counter() - t0
        check = f"{spec['one_policy']} PI={value:.6f}+-{se:.6f}"
        rel = None
        if ref is not None:
            rel = abs(value - ref) / max(abs(ref), 1e-300)
            check += f" vs scavenger slate_pi={ref:.6f} rel_diff={rel:.1e}"
        else:
            check += " (no scavenger slate_pi of 1 policy to compare: run the evaluate step with --policies 1)"
        records.append({"step": "duckdb", "mode": mode, "policies": 1, "seconds": secs, "events": int(n),
                        "value_check": check, "duckdb_value": value, "duckdb_std_error": se, "rel_diff": rel,
                        "note": f"one DuckDB {duckdb.__version__} SQL query, threads={spec.get('duckdb_threads', 2)},"
                                f" over the same Parquet files (single-machine reference)",
                        **mem.record()})
    Path(spec["scratch"], "duckdb_query.sql").write_text(sql)
    return records


STEPS = {"generate": step_generate, "validate": step_validate, "adc": step_adc, "evaluate": step_evaluate,
         "incremental": step_incremental}


def _run_steps(specs: list) -> list:
    """Run the steps of ``specs`` in this process; a Spark session is started when the first Spark step needs it."""
    spark, mem, startup, records = None, None, None, []
    for spec in specs:
        Path(spec["scratch"]).mkdir(parents=True, exist_ok=True)
        try:
            if spec["step"] == "duckdb":
                recs = step_duckdb(spec, Memory(None))
            else:
                if spark is None:
                    t0 = time.perf_counter()
                    spark = spark_session(spec)
                    startup = time.perf_counter() - t0
                    mem = Memory(spark)
                recs = STEPS[spec["step"]](spark, spec, mem)
                for r in recs:
                    r["jvm_startup_s"] = None if startup is None else round(startup, 2)
                if len(specs) > 1:
                    startup = None   # a batch starts its session once
        except BaseException as exc:  # noqa: BLE001 - report every failure to the orchestrator
            recs = [{"step": spec["step"], "mode": "failed", "policies": spec.get("policies"), "seconds": None,
                     "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}]
            traceback.print_exc()
            if isinstance(exc, KeyboardInterrupt):
                records.extend(recs)
                break
        for r in recs:
            r["label"] = spec.get("label")
            if len(specs) > 1:
                r["note"] = ((r.get("note") or "") + "; single process (JVM shared with the steps before)"
                             ).lstrip("; ")
        records.extend(recs)
    if spark is not None:
        spark.stop()
    return records


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec_path, out_path = argv
    spec = json.loads(Path(spec_path).read_text())
    t_start = time.perf_counter()
    specs = spec["specs"] if spec["step"] == "batch" else [spec]
    records = _run_steps(specs)
    Path(out_path).write_text(json.dumps({"records": records, "process_s": time.perf_counter() - t_start},
                                         default=str, indent=1))
    return 1 if any(r.get("mode") == "failed" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
