"""The jobs on a real Spark standalone cluster (master + 2 workers on 127.0.0.1), and their behaviour under faults.

What this module proves (see docs/cluster.md):

* Same results as one machine: ``generate``, ``validate`` and ``evaluate`` (whose ADC table is ``adc``'s) submitted with pyspark's own
  ``bin/spark-submit`` (client deploy mode, the thin entry points ``jobs/<name>.py``) to the cluster write the same
  tables as the same jobs run by ``scavenger JOB --engine duckdb`` (tests/test_engines.py shows DuckDB equal to
  local Spark): every float equal to 1e-12 relative (a sum of cancelling terms: of its column's largest value),
  every other value equal (rows sorted by their keys; run ids, timings, paths and the engine's description aside).
  The statistics stores of ``evaluate`` and the ``result.json`` summaries are compared too.
* Driver killed mid-write: the cluster ``generate`` is first SIGKILLed (the spark-submit process group: JVM,
  Python driver and their children) while its ``decisions`` table is being staged. Only whole dt partitions are
  visible afterwards (the committed ``logs`` partitions, each with all its rows and equal to the reference), no
  result.json/ground_truth.json of the killed run exists, and the re-run into the same ``--out`` is identical to
  the reference -- that re-run is the cluster ``generate`` the comparison uses.
* Worker killed mid-job: while the cluster ``evaluate`` runs its statistics scan, worker 0 (the Worker JVM and
  its executor JVM, one process group) is SIGKILLed as soon as its executor is seen running tasks; Spark re-runs
  the lost tasks and stages (``spark.task.maxFailures``/``spark.stage.maxConsecutiveAttempts`` raised with
  ``--conf`` in this test only), the job exits 0 and its tables are identical to the reference -- that run is
  the cluster ``evaluate`` of the comparison.

Cost: the faults are folded into the cluster chain (one extra, killed ``generate``); the reference runs first, on
DuckDB, in a few seconds (one module-scoped fixture does all of it). ``evaluate`` runs with
``--gate off`` (``validate`` runs the same gate on the cluster) and GE suites are off (they run on the driver only).
Skipped when Java is missing.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest


from helpers.cluster_util import (  # noqa: E402
    StandaloneCluster, Submitted, free_port, get_json, java_available, kill_group, start_submit, submit,
    terminate_group,
)
from scavenger.statistics.store import BIG_DIRS  # noqa: E402

if not java_available():
    pytest.skip("Java is not installed: the cluster tests need a JVM", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.e2e]   # a standalone cluster, spark-submits, killed processes

RTOL = 1e-12
# sums of terms that cancel (a stratum's deviations from its mean: statistics/sql/interaction_tables.py), where the
# order of a sum moves the last digits of a value near 0: compared to 1e-12 of the column's largest value
CANCELLING = {"interaction_cells": ("d", "t", "vt")}
DAYS, EVENTS_PER_DAY, POLICIES = 2, 10_000, 4
# ranked slates: ads move between positions, so the ADCs are identified (on slotted logs `adc` exits 3)
GEN_FLAGS = ["--days", str(DAYS), "--events-per-day", str(EVENTS_PER_DAY), "--layout", "ranked",
             "--positions", "4", "--ads", "20", "--contexts", "20", "--seed", "11"]
NO_GE = ["--no-great-expectations"]      # the GE suites run on the driver only; they add time, not coverage
# adc and evaluate run the same data gate as validate (their default); validate exercises it on the cluster here, so
# they skip it: it would triple the cost of the module and test the same Spark code three times.
NO_GATE = ["--gate", "off"]
JOB_TIMEOUT = 600.0
# Fault tolerance for the worker-kill run only (test-side --conf; the library sets no such thing).
RETRY_CONF = {"spark.task.maxFailures": "8", "spark.stage.maxConsecutiveAttempts": "8"}


# ============================================================================================ comparing outputs
class Report:
    """What a comparison covered: tables, rows, values, the float values among them and the worst relative gap."""

    def __init__(self):
        self.tables = self.rows = self.values = self.floats = 0
        self.max_rel = 0.0
        self.errors: list[str] = []

    def add_floats(self, a: np.ndarray, b: np.ndarray, where: str) -> None:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        self.values += a.size
        self.floats += a.size
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            self.errors.append(f"{where}: NaN at different places ({int((nan_a != nan_b).sum())} values)")
            return
        a, b = a[~nan_a], b[~nan_b]
        inf = np.isinf(a) | np.isinf(b)
        if not np.array_equal(a[inf], b[inf]):
            self.errors.append(f"{where}: infinities differ")
            return
        a, b = a[~inf], b[~inf]
        if a.size:
            scale = np.maximum(np.abs(a), np.abs(b))
            table, _, column = where.rpartition(".")
            if any(t in table and column in cols for t, cols in CANCELLING.items()):
                scale = np.maximum(scale, scale.max())
            diff = np.abs(a - b)
            rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), 0.0)
            worst = float(rel.max())
            self.max_rel = max(self.max_rel, worst)
            if worst > RTOL:
                i = int(rel.argmax())
                self.errors.append(f"{where}: relative difference {worst:.3g} > {RTOL:g} ({a[i]!r} vs {b[i]!r})")

    def add_exact(self, equal: bool, n: int, where: str, detail: str = "") -> None:
        self.values += n
        if not equal:
            self.errors.append(f"{where}: values differ {detail}".rstrip())

    def merge(self, other: "Report") -> "Report":
        self.tables += other.tables
        self.rows += other.rows
        self.values += other.values
        self.floats += other.floats
        self.max_rel = max(self.max_rel, other.max_rel)
        self.errors += other.errors
        return self

    def __repr__(self):
        return (f"Report(tables={self.tables}, rows={self.rows}, values={self.values}, floats={self.floats}, "
                f"max_rel={self.max_rel:.3g}, errors={self.errors[:5]})")


def read_table(path: Path):
    """A Parquet table or directory (hive ``dt=`` partitions; files starting with ``_`` or ``.`` are ignored,
    as Spark ignores them), dictionary columns decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    cols = []
    for col in table.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _leaves(arr, name: str) -> list:
    """Flatten nested columns into (name, leaf array) pairs: struct fields, list lengths and list values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_struct(t):
        out = [(f"{name}#valid", arr.is_valid())]
        for f, child in zip(t, arr.flatten()):
            out += _leaves(child, f"{name}.{f.name}")
        return out
    if pa.types.is_map(t):
        lengths = pa.array(np.diff(arr.offsets.to_numpy(zero_copy_only=False)))
        return ([(f"{name}#valid", arr.is_valid()), (f"{name}#len", lengths)]
                + _leaves(arr.keys, f"{name}{{key}}") + _leaves(arr.items, f"{name}{{value}}"))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [(f"{name}#len", pc.list_value_length(arr))] + _leaves(arr.flatten(), f"{name}[]")
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
    return [(name, arr)]


def _sort_keys(table, keys) -> list[str]:
    import pyarrow as pa

    if keys:
        return [k for k in keys if k in table.column_names]
    return [f.name for f in table.schema
            if pa.types.is_string(f.type) or pa.types.is_integer(f.type) or pa.types.is_boolean(f.type)
            or pa.types.is_date(f.type) or pa.types.is_timestamp(f.type)]


def compare_tables(ref, got, where: str, keys=None, ignore=()) -> Report:
    """Rows sorted by ``keys`` (default: every flat non-float column); floats to RTOL, everything else exact."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rep = Report()
    rep.tables = 1
    ref = ref.drop_columns([c for c in ignore if c in ref.column_names])
    got = got.drop_columns([c for c in ignore if c in got.column_names])
    if sorted(ref.column_names) != sorted(got.column_names):
        rep.errors.append(f"{where}: columns {sorted(ref.column_names)} != {sorted(got.column_names)}")
        return rep
    got = got.select(ref.column_names)
    if ref.num_rows != got.num_rows:
        rep.errors.append(f"{where}: {ref.num_rows} rows in the reference, {got.num_rows} here")
        return rep
    rep.rows = ref.num_rows
    order = [(k, "ascending") for k in _sort_keys(ref, keys)]
    if order:
        ref, got = ref.sort_by(order), got.sort_by(order)
    for name in ref.column_names:
        a_col, b_col = ref.column(name).combine_chunks(), got.column(name).combine_chunks()
        if a_col.type != b_col.type:
            rep.errors.append(f"{where}.{name}: type {a_col.type} != {b_col.type}")
            continue
        for (leaf, a), (_, b) in zip(_leaves(a_col, name), _leaves(b_col, name)):
            if len(a) != len(b):
                rep.errors.append(f"{where}.{leaf}: {len(a)} values vs {len(b)}")
            elif pa.types.is_floating(a.type):
                nulls_a, nulls_b = a.is_null(), b.is_null()
                if not nulls_a.equals(nulls_b):
                    rep.errors.append(f"{where}.{leaf}: nulls at different rows")
                    continue
                keep = pc.invert(nulls_a)
                rep.add_floats(a.filter(keep).to_numpy(zero_copy_only=False),
                               b.filter(keep).to_numpy(zero_copy_only=False), f"{where}.{leaf}")
            else:
                equal = a.equals(b)
                detail = ""
                if not equal:
                    diff = pc.invert(pc.fill_null(pc.equal(a, b), False))
                    idx = pc.indices_nonzero(diff)
                    if len(idx):
                        i = idx[0].as_py()
                        detail = f"(first at sorted row-value {i}: {a[i]!r} vs {b[i]!r})"
                rep.add_exact(equal, len(a), f"{where}.{leaf}", detail)
    return rep


def compare_json(ref, got, where: str, rep: Report, ignore=frozenset()) -> None:
    """Recursive comparison of JSON values: floats to RTOL, the rest exact; keys in ``ignore`` skipped."""
    if isinstance(ref, dict) and isinstance(got, dict):
        keys_r, keys_g = set(ref) - set(ignore), set(got) - set(ignore)
        if keys_r != keys_g:
            rep.errors.append(f"{where}: keys {sorted(keys_r ^ keys_g)} on one side only")
        for k in sorted(keys_r & keys_g):
            compare_json(ref[k], got[k], f"{where}.{k}", rep, ignore)
    elif isinstance(ref, list) and isinstance(got, list):
        if len(ref) != len(got):
            rep.errors.append(f"{where}: {len(ref)} items vs {len(got)}")
        for i, (a, b) in enumerate(zip(ref, got)):
            compare_json(a, b, f"{where}[{i}]", rep, ignore)
    elif isinstance(ref, float) or isinstance(got, float):
        if isinstance(ref, (int, float)) and isinstance(got, (int, float)) and not isinstance(ref, bool):
            rep.add_floats(np.array([ref]), np.array([got]), where)
        else:
            rep.add_exact(False, 1, where, f"{ref!r} vs {got!r}")
    elif ref is None and got is None:
        rep.values += 1
    else:
        rep.add_exact(ref == got, 1, where, f"{ref!r} vs {got!r}" if ref != got else "")


# result.json: what differs by construction between two runs of the same job
RESULT_IGNORE = frozenset({"run_id", "started_at", "finished_at", "timings_seconds", "inputs", "outputs",
                           "written_at", "paths", "master", "engine"})    # which engine ran, and where


def load_json(path: Path):
    with open(path) as fh:
        return json.load(fh)


def dt_partitions(path: Path) -> dict[str, Path]:
    if not path.is_dir():
        return {}
    return {p.name[3:]: p for p in sorted(path.iterdir()) if p.is_dir() and p.name.startswith("dt=")}


def compare_partitioned(ref: Path, got: Path, where: str, keys, ignore=()) -> Report:
    rep = Report()
    ref_parts, got_parts = dt_partitions(ref), dt_partitions(got)
    if sorted(ref_parts) != sorted(got_parts):
        rep.errors.append(f"{where}: dt partitions {sorted(ref_parts)} != {sorted(got_parts)}")
        return rep
    if not ref_parts:
        return rep
    return rep.merge(compare_tables(read_table(ref), read_table(got), where, keys, ignore))


def compare_stats_store(ref: Path, got: Path, where: str) -> Report:
    """Every store under ``ref`` (a directory holding ``_manifest/``; ``adc`` nests its own under ``logs_only/``):
    every stored day of every statistics table (``<store>/<table>/dt=*/``: one part-0.parquet for a small table,
    the engine's part files for a big one) and the manifests' table
    lists (fingerprints name input files and their mtimes, so they differ between two generated copies)."""
    rep = Report()
    ref_stores = sorted(p.parent.relative_to(ref) for p in ref.rglob("_manifest"))
    got_stores = sorted(p.parent.relative_to(got) for p in got.rglob("_manifest")) if got.exists() else []
    if not ref_stores or ref_stores != got_stores:
        rep.errors.append(f"{where}: stores {ref_stores} != {got_stores}")
        return rep
    for store in ref_stores:
        a_root, b_root, name = ref / store, got / store, f"{where}/{store}".rstrip("/.")
        ref_man = {p.name: load_json(p) for p in sorted((a_root / "_manifest").glob("dt=*.json"))}
        got_man = {p.name: load_json(p) for p in sorted((b_root / "_manifest").glob("dt=*.json"))}
        if sorted(ref_man) != sorted(got_man):
            rep.errors.append(f"{name}: stored days {sorted(ref_man)} != {sorted(got_man)}")
            continue
        for day, manifest in ref_man.items():
            if manifest["tables"] != got_man[day]["tables"]:
                rep.errors.append(f"{name}/{day}: tables {manifest['tables']} != {got_man[day]['tables']}")
                continue
            dt = day[len("dt="):-len(".json")]
            for table in manifest["tables"]:
                where = BIG_DIRS.get(table, table)          # the event ids live under event_hashes/
                a = read_table(a_root / where / f"dt={dt}")
                b = read_table(b_root / where / f"dt={dt}")
                rep.merge(compare_tables(a, b, f"{name}/{table}/dt={dt}"))
    return rep


# ================================================================================================ the job chains
class Chain:
    """The four jobs, one after the other, via spark-submit against one master; ``abort()`` kills the running one.

    Layout under ``base``: gen/ (generate --out), validate/, adc/ (+ stats_adc/), evaluate/ (+ stats_eval/), runs/
    (stdout/stderr of every spark-submit)."""

    def __init__(self, master: str, base: Path):
        self.master = master
        self.base = base
        self.runs: dict[str, Submitted] = {}
        self.notes: dict = {}
        self._procs: list = []
        self._aborted = threading.Event()

    # paths
    gen = property(lambda self: self.base / "gen")
    logs = property(lambda self: self.base / "gen" / "logs")
    decisions = property(lambda self: self.base / "gen" / "decisions")

    def out(self, job: str) -> Path:
        return self.gen if job == "generate" else self.base / job

    def args(self, job: str) -> list[str]:
        logs, dec = str(self.logs), str(self.decisions)
        return {
            "generate": ["--out", str(self.gen), *GEN_FLAGS],
            "validate": ["--logs", logs, "--decisions", dec, "--out", str(self.out("validate")), *NO_GE],
            "adc": ["--logs", logs, "--stats-dir", str(self.base / "stats_adc"), "--out", str(self.out("adc")),
                    *NO_GATE],
            "evaluate": ["--logs", logs, "--decisions", dec, "--stats-dir", str(self.base / "stats_eval"),
                         "--out", str(self.out("evaluate")), *NO_GATE],
        }[job]

    def conf(self, extra: dict | None = None) -> dict:
        # the driver's scratch space (Spark's /tmp/spark-* and blockmgr-*) stays under the test's directory, also
        # when a driver is killed; executors use their worker's SPARK_LOCAL_DIRS
        return {"spark.local.dir": str(self.base / "spark-local"), **(extra or {})}

    def start(self, job: str, name: str | None = None, conf: dict | None = None):
        """Start a spark-submit of ``job`` with the chain's flags; returns (proc, cmd, stdout path, stderr path)."""
        self._check()
        started = start_submit(job, self.args(job), self.master, self.base / "runs", name=name or job,
                               conf=self.conf(conf))
        self._procs.append(started[0])
        return started

    def run(self, job: str, name: str | None = None, conf: dict | None = None) -> Submitted:
        self._check()
        result = submit(job, self.args(job), self.master, self.base / "runs", name=name or job,
                        conf=self.conf(conf), timeout=JOB_TIMEOUT, on_start=self._procs.append)
        self.runs[name or job] = result
        return result

    def run_all(self, jobs=("generate", "validate", "evaluate")) -> "Chain":
        for job in jobs:
            self.run(job)
        return self

    def _check(self) -> None:
        if self._aborted.is_set():
            raise RuntimeError("chain aborted")

    def abort(self) -> None:
        """No further job; kill the running one (its whole process group)."""
        self._aborted.set()
        for proc in self._procs:
            if proc.poll() is None:
                terminate_group(proc, grace=2.0)


def _cluster_generate_with_driver_kill(chain: Chain, cluster: StandaloneCluster) -> None:
    """generate on the cluster, SIGKILLed while ``decisions`` is being staged; record what is visible; re-run.

    The observations go to ``chain.notes['driver_kill']`` (asserted by test_driver_kill_leaves_no_partial_output);
    the re-run into the same ``--out`` is the cluster ``generate`` of the comparison."""
    proc, cmd, out, err = chain.start("generate", name="generate_killed")
    note: dict = {"cmd": cmd}
    try:
        # "[scavenger] scavenger generate: decisions <span> ..." = logs committed, decisions being written
        note["line"] = _wait_for(lambda: _line(out, r"\[scavenger\] scavenger generate: decisions .* \.\.\.$"),
                                 proc, JOB_TIMEOUT)
        staging = chain.decisions / "_staging"
        note["staging_seen"] = bool(_wait_for(lambda: staging.is_dir() and any(staging.iterdir()), proc, 120))
        note["alive_at_kill"] = proc.poll() is None
        note["killed_pids"] = kill_group(proc.pid)
    finally:
        terminate_group(proc)
    note["returncode"] = proc.wait()
    note["stdout"], note["stderr"] = out.read_text(errors="replace"), err.read_text(errors="replace")
    # what a reader sees now
    visible = {}
    for table in ("logs", "decisions"):
        visible[table] = {}
        for dt, part in dt_partitions(chain.gen / table).items():
            try:
                visible[table][dt] = read_table(part)
            except Exception as exc:  # noqa: BLE001 - a partial partition is exactly what we look for
                visible[table][dt] = exc
    note["visible"] = visible
    note["staging_dirs"] = sorted(str(p.relative_to(chain.gen)) for p in chain.gen.glob("*/_staging/*"))
    note["result_json"] = load_json(chain.gen / "result.json") if (chain.gen / "result.json").exists() else None
    note["ground_truth_exists"] = (chain.gen / "ground_truth.json").exists()
    note["cluster_idle"] = cluster.wait_idle()     # the master dropped the dead driver's app and executors
    chain.notes["driver_kill"] = note
    chain.run("generate")   # the re-run into the same --out


def _cluster_evaluate_with_worker_kill(chain: Chain, cluster: StandaloneCluster) -> None:
    """evaluate on the cluster; once worker 0's executor runs tasks of the statistics scan, SIGKILL worker 0's
    process group (Worker JVM + executor JVM). Observations go to ``chain.notes['worker_kill']``."""
    ui_port = free_port()   # the driver UI of this run only: its REST API shows running and failed tasks
    conf = {**RETRY_CONF, "spark.ui.enabled": "true", "spark.ui.port": str(ui_port)}
    proc, cmd, out, err = chain.start("evaluate", conf=conf)
    api = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    note: dict = {"failed_tasks": 0, "stage_retries": 0}
    start = time.monotonic()

    def app_id():
        apps = get_json(api, timeout=2) or []
        return apps[0]["id"] if apps else None

    def victim_busy():
        w0 = cluster.worker_state(0) or {}
        ids = {str(e.get("id")) for e in w0.get("executors", [])}
        app = app_id()
        if not ids or app is None:
            return None
        execs = get_json(f"{api}/{app}/executors", timeout=2) or []
        return [e for e in execs if e.get("id") in ids and e.get("activeTasks", 0) > 0] or None

    def poll_failures():
        app = app_id()
        stages = get_json(f"{api}/{app}/stages", timeout=2) if app else None
        if stages:
            note["failed_tasks"] = max(note["failed_tasks"], sum(st.get("numFailedTasks", 0) for st in stages))
            note["stage_retries"] = max(note["stage_retries"], sum(1 for st in stages if st.get("attemptId", 0) > 0))

    try:
        note["executors"] = cluster.wait_for_executors(timeout=180)
        note["line"] = _wait_for(lambda: _line(out, r"\[scavenger\] scavenger statistics: .* \.\.\.$"), proc,
                                 JOB_TIMEOUT)
        victim = cluster.workers[0]
        note["victim_tasks"], note["freezes"] = _freeze_while_busy(victim, victim_busy, proc)
        note["alive_at_kill"] = proc.poll() is None
        note["victim_executor_pids"] = victim.executor_pids()
        note["victim_pgid"] = victim.pgid
        note["killed_pids"] = cluster.kill_worker(0)
        note["victim_gone"] = not victim.alive() and not victim.pids()
        deadline = time.monotonic() + JOB_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            poll_failures()
            time.sleep(0.5)
        code = proc.poll()
        code = -signal.SIGKILL if code is None else code
    finally:
        terminate_group(proc)
    chain.runs["evaluate"] = Submitted(cmd, code, time.monotonic() - start, out, err)
    chain.notes["worker_kill"] = note


def _freeze_while_busy(victim, busy, proc, timeout: float = 120.0, settle: float = 0.5):
    """SIGSTOP the victim's executor JVMs at a moment the driver's REST API shows them running tasks, and keep them
    stopped only if it still does ``settle`` seconds later: a frozen JVM cannot finish a task, so any task-end
    message already on its way has arrived by then, and the tasks still shown are certainly in flight when the
    worker is killed (they must fail with ExecutorLostFailure). Otherwise SIGCONT and wait for the next busy moment.
    Polling alone raced: small tasks finished between the reading and the SIGKILL, and the kill then hit an idle
    executor whose loss Spark had nothing to re-run for. Returns (tasks seen running while frozen, freezes tried)."""
    deadline = time.monotonic() + timeout
    freezes = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if not _wait_for(busy, proc, max(deadline - time.monotonic(), 0.1), poll=0.05):
            return None, freezes
        pids = victim.executor_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        freezes += 1
        time.sleep(settle)
        still = busy()
        if still:
            return still, freezes
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    return None, freezes


def _line(path: Path, pattern: str) -> str | None:
    import re

    rx = re.compile(pattern)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return next((ln for ln in text.splitlines() if rx.search(ln)), None)


def _wait_for(cond, proc, timeout: float, poll: float = 0.02):
    """Poll ``cond()`` until truthy (returned), the process ends or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        if proc.poll() is not None:
            return cond() or None
        time.sleep(poll)
    return None


# ==================================================================================================== fixtures
class DuckChain(Chain):
    """The reference: the same four jobs with the same flags, run by ``scavenger JOB ... --engine duckdb`` on this
    machine (no JVM; tests/test_engines.py shows DuckDB's tables equal local Spark's to 1e-12)."""

    def __init__(self, base: Path):
        super().__init__("duckdb", base)

    def run(self, job: str, name: str | None = None, conf: dict | None = None) -> Submitted:
        logdir = self.base / "runs"
        logdir.mkdir(parents=True, exist_ok=True)
        out, err = logdir / f"{name or job}.out", logdir / f"{name or job}.err"
        cmd = [sys.executable, "-m", "scavenger", job, *self.args(job), "--engine", "duckdb"]
        start = time.monotonic()
        with open(out, "w") as fo, open(err, "w") as fe:
            code = subprocess.run(cmd, stdout=fo, stderr=fe, timeout=JOB_TIMEOUT,
                                  env={**os.environ, "SCAVENGER_PROGRESS": "0"}).returncode
        self.runs[name or job] = Submitted(cmd, code, time.monotonic() - start, out, err)
        return self.runs[name or job]


def _cluster_work(work: Path) -> dict:
    """All of the module's Spark work: the reference (the four jobs on DuckDB, first) and the four jobs on the
    cluster with the two faults built in (each job is submitted once more at most): generate's first attempt is
    killed mid-write and re-run; a worker is killed while evaluate runs. Returns both chains (finished) with their
    runs and notes for the tests to check."""
    local_ref = DuckChain(work / "local").run_all()
    with StandaloneCluster(work / "standalone", n_workers=2, cores=1, memory="1g") as cluster:
        chain = Chain(cluster.master_url, work / "on_cluster")
        try:
            t = time.monotonic()
            cluster.ensure_workers()
            _cluster_generate_with_driver_kill(chain, cluster)
            chain.run_all(("validate",))
            cluster.ensure_workers()
            _cluster_evaluate_with_worker_kill(chain, cluster)
            chain.notes["seconds"] = time.monotonic() - t
        finally:
            chain.abort()       # nothing left running if the chain stopped half-way
    return {"chain": chain, "local_ref": local_ref}


@pytest.fixture(scope="module")
def cluster_work(tmp_path_factory) -> dict:
    return _cluster_work(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="module")
def local_ref(cluster_work) -> DuckChain:
    """The reference chain on DuckDB (finished)."""
    return cluster_work["local_ref"]


@pytest.fixture(scope="module")
def cluster_chain(cluster_work) -> Chain:
    """The cluster chain with the driver kill and the worker kill (finished)."""
    return cluster_work["chain"]


def _assert_ok(run: Submitted) -> None:
    assert run.returncode == 0, run.tail()


# ======================================================================================================= tests
def test_driver_kill_leaves_no_partial_output(cluster_chain, local_ref):
    note = cluster_chain.notes["driver_kill"]
    # the kill landed mid-write: logs committed, decisions being staged, the driver still running
    assert note["line"], note["stdout"][-2000:] + note["stderr"][-2000:]
    assert note["staging_seen"] and note["alive_at_kill"], note
    assert note["returncode"] != 0 and note["killed_pids"], note
    assert note["cluster_idle"], "the master kept the killed driver's application"
    # no summary of the killed run, let alone a successful one
    assert note["result_json"] is None or note["result_json"]["status"] != "ok", note["result_json"]
    assert not note["ground_truth_exists"]
    assert any(d.startswith("decisions/_staging") for d in note["staging_dirs"]), note["staging_dirs"]

    ref = local_ref
    for run in ref.runs.values():
        _assert_ok(run)
    # every visible partition is whole: all its rows, equal to the reference partition
    visible = note["visible"]
    assert sorted(visible["logs"]) == [f"2026-01-0{d + 1}" for d in range(DAYS)], sorted(visible["logs"])
    checked = Report()
    expected_rows = {"logs": EVENTS_PER_DAY, "decisions": POLICIES * EVENTS_PER_DAY}
    keys = {"logs": ["event_id"], "decisions": ["policy_id", "event_id"]}
    for table, parts in visible.items():
        for dt, data in parts.items():
            assert not isinstance(data, Exception), f"{table}/dt={dt} unreadable after the kill: {data!r}"
            assert data.num_rows == expected_rows[table], (table, dt, data.num_rows)
            checked.merge(compare_tables(read_table(ref.gen / table / f"dt={dt}"), data, f"{table}/dt={dt}",
                                         keys[table]))
    assert not checked.errors, checked.errors
    assert checked.rows == DAYS * EVENTS_PER_DAY + len(visible["decisions"]) * POLICIES * EVENTS_PER_DAY
    assert checked.floats > 0 and checked.max_rel <= RTOL

    # the re-run into the same --out is whole and identical to the reference
    rerun = cluster_chain.runs["generate"]
    _assert_ok(rerun)
    assert load_json(cluster_chain.gen / "result.json")["status"] == "ok"
    rep = compare_generate(ref.gen, cluster_chain.gen)
    assert not rep.errors, rep.errors
    assert rep.rows >= DAYS * EVENTS_PER_DAY * (1 + POLICIES) and rep.floats > 0 and rep.max_rel <= RTOL, rep
    print(f"\ndriver kill: visible after the kill {({t: sorted(p) for t, p in visible.items()})}, "
          f"checked {checked}; re-run vs local: {rep}")


def compare_generate(ref: Path, got: Path) -> Report:
    rep = Report()
    rep.merge(compare_partitioned(ref / "logs", got / "logs", "logs", ["dt", "event_id"]))
    rep.merge(compare_partitioned(ref / "decisions", got / "decisions", "decisions",
                                  ["dt", "policy_id", "event_id"]))
    for name in ("adc", "click_rates", "context_values"):
        rep.merge(compare_tables(read_table(ref / "truth" / name), read_table(got / "truth" / name),
                                 f"truth/{name}"))
    compare_json(load_json(ref / "ground_truth.json"), load_json(got / "ground_truth.json"), "ground_truth", rep,
                 RESULT_IGNORE)
    compare_json(load_json(ref / "result.json"), load_json(got / "result.json"), "generate/result.json", rep,
                 RESULT_IGNORE)
    return rep


def compare_gate_outputs(ref: Path, got: Path, job: str) -> Report:
    rep = compare_tables(read_table(ref / "validation"), read_table(got / "validation"), f"{job}/validation",
                         ["check", "scope", "verdict", "message"])
    for table, keys in (("logs", ["dt", "event_id"]), ("decisions", ["dt", "policy_id", "event_id"])):
        rep.merge(compare_partitioned(ref / "quarantine" / table, got / "quarantine" / table,
                                      f"{job}/quarantine/{table}", keys, ignore=("run_id",)))
    return rep


def test_cluster_matches_local(cluster_chain, local_ref):
    ref = local_ref
    for name, run in [*ref.runs.items(), *cluster_chain.runs.items()]:
        _assert_ok(run)
    summary = {}

    rep = compare_generate(ref.gen, cluster_chain.gen)
    summary["generate"] = rep
    assert rep.rows >= DAYS * EVENTS_PER_DAY * (1 + POLICIES)

    rep = compare_gate_outputs(ref.out("validate"), cluster_chain.out("validate"), "validate")
    compare_json(load_json(ref.out("validate") / "result.json"),
                 load_json(cluster_chain.out("validate") / "result.json"), "validate/result.json", rep,
                 RESULT_IGNORE)
    summary["validate"] = rep


    rep = compare_evaluate(ref.out("evaluate"), cluster_chain.out("evaluate"))
    rep.merge(compare_stats_store(ref.base / "stats_eval", cluster_chain.base / "stats_eval", "stats_eval"))
    summary["evaluate"] = rep

    errors = {job: r.errors for job, r in summary.items() if r.errors}
    assert not errors, errors
    for job, r in summary.items():
        assert r.rows > 0 and r.floats > 0, (job, r)
        assert r.max_rel <= RTOL, (job, r)
    # the jobs did what they should on both sides
    ev = load_json(cluster_chain.out("evaluate") / "result.json")
    assert ev["status"] == "ok" and ev["counts"]["logs"]["rows_used"] == DAYS * EVENTS_PER_DAY
    assert ev["counts"]["days_scanned"] == DAYS and ev["counts"]["policies"] == POLICIES
    assert read_table(cluster_chain.out("evaluate") / "estimates").num_rows == ev["counts"]["estimates"] > 0
    print("\ncluster vs local:", {job: r for job, r in summary.items()})


def compare_evaluate(ref: Path, got: Path) -> Report:
    rep = compare_tables(read_table(ref / "estimates"), read_table(got / "estimates"), "estimates",
                         ["policy_id", "estimator", "interval_kind"])
    rep.merge(compare_tables(read_table(ref / "diagnostics"), read_table(got / "diagnostics"), "diagnostics",
                             ["policy_id", "metric", "slot"]))
    if (ref / "adc").exists() or (got / "adc").exists():
        rep.merge(compare_tables(read_table(ref / "adc"), read_table(got / "adc"), "evaluate/adc",
                                 ["position", "method", "interval_kind"]))
    if (ref / "validation").exists() or (got / "validation").exists():   # when run with the gate
        rep.merge(compare_gate_outputs(ref, got, "evaluate"))
    compare_json(load_json(ref / "result.json"), load_json(got / "result.json"), "evaluate/result.json", rep,
                 RESULT_IGNORE)
    return rep


def test_worker_kill_during_evaluate(cluster_chain, local_ref):
    """The cluster evaluate of the comparison ran through the SIGKILL of worker 0 (Worker + executor JVM)."""
    note = cluster_chain.notes["worker_kill"]
    run = cluster_chain.runs["evaluate"]
    assert len(note["executors"]) == 2 and all(note["executors"].values()), note   # one executor per worker
    assert note["line"] and note["alive_at_kill"], run.tail()
    assert note["victim_tasks"], f"worker 0's executor was never seen running a task while frozen: {note}"
    assert note["victim_executor_pids"] and set(note["victim_executor_pids"]) <= set(note["killed_pids"]), note
    assert note["victim_pgid"] in note["killed_pids"] and note["victim_gone"], note
    _assert_ok(run)
    # the driver saw the executor go, and Spark re-ran the lost work
    assert "Lost executor" in run.stderr, run.tail(60)
    assert note["failed_tasks"] + note["stage_retries"] > 0, note

    ref = local_ref
    _assert_ok(ref.runs["evaluate"])
    rep = compare_evaluate(ref.out("evaluate"), cluster_chain.out("evaluate"))
    rep.merge(compare_stats_store(ref.base / "stats_eval", cluster_chain.base / "stats_eval", "stats_eval"))
    assert not rep.errors, rep.errors
    assert rep.rows > 0 and rep.floats > 0 and rep.max_rel <= RTOL, rep
    result = load_json(cluster_chain.out("evaluate") / "result.json")
    assert result["status"] == "ok" and result["counts"]["days_scanned"] == DAYS
    print(f"\nworker kill during evaluate: exit 0 after {run.seconds:.0f}s, {note['failed_tasks']} failed task(s), "
          f"{note['stage_retries']} stage retry(ies), {note['freezes']} freeze(s) to catch it busy; vs local: {rep}")


def test_atomic_dir_commit_survives_a_killed_writer(tmp_path):
    """lib/scavenger/result.py:atomic_dir, the temp-dir-then-rename commit for small result tables: a writer
    SIGKILLed halfway leaves the previous table whole; a finished one replaces it whole."""
    import signal
    import subprocess

    lib = Path(__file__).resolve().parents[1] / "lib"
    sys.path.insert(0, str(lib))
    from scavenger.result import atomic_dir

    target = tmp_path / "estimates"
    with atomic_dir(target) as tmp:
        (tmp / "part-0.parquet").write_bytes(b"v1" * 1000)
    code = (f"import os, signal, sys; sys.path.insert(0, {str(lib)!r})\n"
            "from scavenger.result import atomic_dir\n"
            f"with atomic_dir({str(target)!r}) as tmp:\n"
            "    open(tmp / 'part-0.parquet', 'wb').write(b'v2' * 10)\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert sorted(p.name for p in target.iterdir()) == ["part-0.parquet"]
    assert (target / "part-0.parquet").read_bytes() == b"v1" * 1000          # the old table, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".estimates.tmp-")]  # hidden leftover
    with atomic_dir(target) as tmp:
        (tmp / "part-0.parquet").write_bytes(b"v3")
    assert (target / "part-0.parquet").read_bytes() == b"v3"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".estimates.old-")]
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "part-0.parquet").write_bytes(b"v4")
            raise RuntimeError("job failed")
    assert (target / "part-0.parquet").read_bytes() == b"v3"
