"""Shared fixtures: one SparkSession for the whole suite, paths to the OBD sample, background runs."""
from __future__ import annotations

import collections
import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
OBD_DIR = Path(os.environ.get("SCAVENGER_OBD_DIR", REPO.parent / "shared" / "data" / "obd"))

# Every Spark driver JVM the tests start in a subprocess -- the spark-submits of the jobs and the Airflow DAGs, the
# notebook's kernel, benchmarks/run's worker, the cluster tests' drivers -- goes through Spark's launcher, which
# adds $SPARK_SUBMIT_OPTS to the java command line. The C1 JIT only and the serial GC cut the CPU time of these
# short, small-data jobs by about a third on few cores; they change how fast the JVM runs, never what Spark
# computes. This process's own session runs for the whole suite, where the full JIT pays off (measured: 185 s
# against 200 s with C1 only for train + evaluate + demo + numerics), so the ``spark`` fixture starts it without
# them. An explicit SPARK_SUBMIT_OPTS (even " ", to opt out) wins everywhere.
FAST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_FAST_JVM_OPTS_SET = "SPARK_SUBMIT_OPTS" not in os.environ
os.environ.setdefault("SPARK_SUBMIT_OPTS", FAST_JVM_OPTS)


SESSION_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
    "spark.sql.adaptive.enabled": "true",
}


def _session_without_fast_jvm_opts(get_spark, **kwargs):
    """get_spark(**kwargs) with this process's JVM launched without FAST_JVM_OPTS (when the suite set them)."""
    if not _FAST_JVM_OPTS_SET:
        return get_spark(**kwargs)
    os.environ.pop("SPARK_SUBMIT_OPTS", None)
    try:
        return get_spark(**kwargs)
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = FAST_JVM_OPTS


@pytest.fixture(scope="session")
def spark():
    from scavenger.session import get_spark

    session = _session_without_fast_jvm_opts(
        get_spark, app_name="scavenger-tests", master=os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
        conf={**SESSION_CONF, "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="scavenger-warehouse-")})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def obd_dir() -> Path:
    if not OBD_DIR.exists():
        pytest.skip(f"OBD sample not found at {OBD_DIR}")
    return OBD_DIR


# ---------------------------------------------------------------------------------------------- background runs
# A few tests wait on long, self-contained work -- one subprocess (the Airflow DAG runs, benchmarks/run, the example
# notebook in its own kernel, a fixture's generate-and-run moved out of this process with ``background_call``) or
# a set of them (the standalone-cluster chain) -- and then check its outputs. The in-process tests keep about one
# core busy, so that work is started when collection ends and runs beside them, SCAVENGER_TEST_BACKGROUND (default
# 2) pieces at a time in collection order, while the modules that use it run last; the fixture that needs it waits
# for it and the tests make the same assertions as if the fixture had done the work itself. A test module opts in
# with a module-level ``BACKGROUND = {name: builder}``: ``name`` is the module's fixture that consumes the work (it
# is started only if a selected test uses that fixture), ``builder(workdir)`` returns a ``BackgroundSpec`` (or None
# when the tests will skip), and the fixture gets the finished run with ``background_run(name)``.
# SCAVENGER_TEST_BACKGROUND=0 starts each piece only when its fixture asks for it (same code path, nothing
# overlaps).
BACKGROUND_NICE = 10


def _lower_priority() -> None:
    """In a background subprocess before exec: a lower CPU priority (``nice`` +10, inherited by its JVMs), so the
    in-process tests -- the suite's critical path -- keep their cores and the background work fills the gaps."""
    try:
        os.nice(BACKGROUND_NICE)
    except OSError:
        pass


def _subprocess_env(extra: dict | None) -> dict:
    env = {**os.environ, **(extra or {})}
    if _FAST_JVM_OPTS_SET:
        env.setdefault("SPARK_SUBMIT_OPTS", FAST_JVM_OPTS)
    return env


VALUE_FILE = "value.pkl"
BACKGROUND_CALL = Path(__file__).with_name("background_call.py")


def background_call(module_file: str, fn_name: str, timeout: float = 900.0, env: dict | None = None) -> Callable:
    """A ``BACKGROUND`` builder for in-process work moved out of the suite's process: ``fn_name(workdir)`` of the test
    module ``module_file``, run by tests/background_call.py in its own Python process (Spark session from
    :func:`background_spark`); the fixture gets the pickled return value with ``background_run(name).value()``."""
    def builder(workdir: Path) -> BackgroundSpec:
        return BackgroundSpec(cmd=[sys.executable, BACKGROUND_CALL, module_file, fn_name, workdir], cwd=REPO,
                              timeout=timeout, env=env)

    return builder


def background_spark():
    """The SparkSession of a ``background_call`` process: the ``spark`` fixture's settings, 2g of driver memory."""
    from scavenger.session import get_spark

    return get_spark(app_name="scavenger-tests-background",
                     master=os.environ.get("SCAVENGER_TEST_MASTER", "local[2]"),
                     conf={**SESSION_CONF, "spark.driver.memory": "2g",
                           "spark.sql.warehouse.dir": tempfile.mkdtemp(prefix="scavenger-warehouse-")})


@dataclass
class BackgroundSpec:
    cmd: list | None = None      # a subprocess (own process group, stdout/stderr to files in the workdir) ...
    fn: Callable | None = None   # ... or fn(workdir, on_cancel) -> result in a thread; on_cancel(callback) registers
    cwd: Path | None = None      # what stops its subprocesses if the session ends first
    env: dict | None = None      # added to os.environ (cmd only)
    timeout: float = 900.0       # cmd only


@dataclass
class BackgroundRun:
    name: str
    spec: BackgroundSpec
    workdir: Path
    proc: subprocess.Popen | None = None
    returncode: int | None = None
    timed_out: bool = False
    seconds: float | None = None
    started: float | None = None   # time.monotonic() at start
    waited: float | None = None    # how long the consuming fixture waited for it
    result: object = None
    error: BaseException | None = None
    _started: bool = False
    _done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _on_cancel: list = field(default_factory=list)

    stdout_path = property(lambda self: self.workdir / f"{self.name}.stdout")
    stderr_path = property(lambda self: self.workdir / f"{self.name}.stderr")
    stdout = property(lambda self: self.stdout_path.read_text(errors="replace"))
    stderr = property(lambda self: self.stderr_path.read_text(errors="replace"))

    def run(self) -> None:
        """Do the work unless it was started already or cancelled; return when it is finished."""
        with self._lock:
            if self._started or self._done.is_set():
                return
            self._started = True
            if self.spec.cmd is not None:
                with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
                    self.proc = subprocess.Popen([str(c) for c in self.spec.cmd], stdout=out, stderr=err,
                                                 stdin=subprocess.DEVNULL, cwd=self.spec.cwd,
                                                 env=_subprocess_env(self.spec.env),
                                                 start_new_session=True, preexec_fn=_lower_priority)
        start = self.started = time.monotonic()
        try:
            if self.proc is None:
                self.result = self.spec.fn(self.workdir, self._on_cancel.append)
            else:
                try:
                    self.returncode = self.proc.wait(timeout=self.spec.timeout)
                except subprocess.TimeoutExpired:
                    self.timed_out = True
                    self._kill()
                    self.returncode = self.proc.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the fixture that waits for the run
            self.error = exc
        finally:
            self.seconds = time.monotonic() - start
            self._done.set()

    def wait(self) -> "BackgroundRun":
        """The finished run (done here and now if the background thread has not reached it yet); re-raises what
        ``fn`` raised."""
        t = time.monotonic()
        self.run()
        self._done.wait()
        self.waited = time.monotonic() - t
        if self.error is not None:
            raise self.error
        return self

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10)
                    return

    def cancel(self) -> None:
        """Session end: never start it; stop it if it is running."""
        with self._lock:
            started = self._started
            if not started:
                self._done.set()
        if started and not self._done.is_set():
            self._kill()
            for callback in self._on_cancel:
                with contextlib.suppress(Exception):
                    callback()
            self._done.wait(timeout=60)

    def value(self):
        """What the ``background_call`` function returned (its exit status checked first)."""
        assert self.returncode == 0 and not self.timed_out, self.tail()
        with open(self.workdir / VALUE_FILE, "rb") as fh:
            return pickle.load(fh)

    def tail(self, n: int = 4000) -> str:
        state = "timed out" if self.timed_out else f"exit {self.returncode}"
        return (f"$ {' '.join(map(str, self.spec.cmd or []))}\n{state} after {self.seconds or 0:.0f}s\n"
                f"--- stdout\n{self.stdout[-n:]}\n--- stderr\n{self.stderr[-n:]}")


_RUNS = pytest.StashKey[dict]()
_T0 = pytest.StashKey[float]()


def _mktemp(config, name: str) -> Path:
    factory = getattr(config, "_tmp_path_factory", None)
    return factory.mktemp(name) if factory is not None else Path(tempfile.mkdtemp(prefix=f"{name}-"))


def pytest_collection_modifyitems(session, config, items):
    """Modules with background work run last (their order otherwise kept), so the in-process tests run while the
    background works instead of waiting for it."""
    items.sort(key=lambda item: bool(getattr(getattr(item, "module", None), "BACKGROUND", None)))


def pytest_collection_finish(session):
    runs: dict = {}
    session.config.stash[_RUNS] = runs
    session.config.stash[_T0] = time.monotonic()
    if session.config.option.collectonly:
        return
    queue = []
    for item in session.items:
        module = getattr(item, "module", None)
        for name, builder in (getattr(module, "BACKGROUND", None) or {}).items():
            key = (module.__name__, name)
            if key in runs or name not in getattr(item, "fixturenames", ()):
                continue
            workdir = _mktemp(session.config, name)
            spec = builder(workdir)
            runs[key] = None if spec is None else BackgroundRun(name, spec, workdir)
            if spec is not None:
                queue.append(runs[key])
    lanes = _background_lanes()
    if queue and lanes:
        pending = collections.deque(queue)

        def lane() -> None:
            while True:
                try:
                    run = pending.popleft()
                except IndexError:
                    return
                run.run()

        for i in range(lanes):
            threading.Thread(target=lane, name=f"background-runs-{i}", daemon=True).start()


def _background_lanes() -> int:
    """SCAVENGER_TEST_BACKGROUND: how many background runs go at once (default 2: with the in-process tests that
    keeps two cores busy, as most of this work waits on JVM start-up and small-task latency); 0 runs each one only
    when its fixture asks for it."""
    raw = os.environ.get("SCAVENGER_TEST_BACKGROUND", "2")
    try:
        return max(0, int(raw))
    except ValueError:
        raise pytest.UsageError(f"SCAVENGER_TEST_BACKGROUND must be a whole number, got {raw!r}") from None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per background run: when it started (after collection), how long it took, how long a test waited."""
    runs = [r for r in config.stash.get(_RUNS, {}).values() if r is not None and r.started is not None]
    if not runs:
        return
    t0 = config.stash.get(_T0, min(r.started for r in runs))
    parts = [f"{r.name} +{r.started - t0:.0f}s {r.seconds or 0:.0f}s"
             + (f" (waited {r.waited:.0f}s)" if r.waited and r.waited >= 1 else "") for r in runs]
    terminalreporter.write_line("background runs: " + ", ".join(parts))


def pytest_sessionfinish(session):
    for run in session.config.stash.get(_RUNS, {}).values():
        if run is not None:
            run.cancel()


@pytest.fixture(scope="module")
def background_run(request, tmp_path_factory):
    """``background_run(name)``: the finished BackgroundRun of this module's ``BACKGROUND[name]`` (done now if it
    was not started in the background), or None when its builder returned None."""
    runs = request.config.stash.get(_RUNS, {})

    def get(name: str) -> BackgroundRun | None:
        key = (request.module.__name__, name)
        if key not in runs:
            workdir = tmp_path_factory.mktemp(name)
            spec = request.module.BACKGROUND[name](workdir)
            runs[key] = None if spec is None else BackgroundRun(name, spec, workdir)
        return None if runs[key] is None else runs[key].wait()

    return get
