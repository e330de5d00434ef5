"""A Spark standalone cluster on one machine (master + workers on 127.0.0.1) and spark-submit helpers.

Used by ``tests/test_session_cluster.py`` and reusable by benchmarks::

    from helpers.cluster_util import StandaloneCluster, submit

    with StandaloneCluster(workdir, n_workers=2) as cluster:
        run = submit("evaluate", ["--logs", ..., "--out", ...], master=cluster.master_url, logdir=workdir)
        assert run.returncode == 0, run.tail()

Everything comes from the installed pyspark (``pyspark/bin/spark-class`` and ``pyspark/bin/spark-submit``, found
from ``pyspark.__file__``), binds to 127.0.0.1 only and uses free ports picked at run time, so several clusters
(or test runs) can share a machine. Every daemon runs in its own process group: ``stop()`` (also on ``__exit__``)
kills the groups, and ``kill_worker(i)`` SIGKILLs one Worker JVM together with the executor JVMs it launched
(they inherit its process group). Linux only (process groups are read from ``/proc``).

Settings here are test/benchmark settings, passed on the command line; the library never sets a master or
cluster options itself.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOBS_DIR = REPO / "jobs"
LOG4J = REPO / "lib" / "scavenger" / "log4j2.properties"

# JVM options for short jobs on few cores: the C1 JIT only (about half the CPU time of a cold Spark job) and the
# serial collector. They change how fast the JVM runs, never what Spark computes. The tests' own session (the
# ``spark`` fixture) runs for the whole suite, where the full JIT pays off, so it starts without them.
FAST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# What conftest.py (spark_jvm.py) added to SPARK_SUBMIT_OPTS for every JVM: interpreted SQL and the class archive;
# the archive's options alone, for the cluster, which keeps Spark's generated code
TEST_JVM_OPTS = os.environ.get("SCAVENGER_TEST_JVM_OPTS", "")
CDS_OPTS = os.environ.get("SCAVENGER_TEST_CDS_OPTS", "")


def fast_jvm_env(env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) for a subprocess whose Spark JVMs are short-lived: Spark's
    launcher adds $SPARK_SUBMIT_OPTS to every java command line, so they start with FAST_JVM_OPTS besides the tests'
    own options. An explicit SPARK_SUBMIT_OPTS (even " ", to opt out) wins."""
    env = dict(os.environ if env is None else env)
    if _tests_own_submit_opts(env):
        env["SPARK_SUBMIT_OPTS"] = f"{FAST_JVM_OPTS} {env.get('SPARK_SUBMIT_OPTS', '')}".strip()
    return env


def _tests_own_submit_opts(env: dict) -> bool:
    """SPARK_SUBMIT_OPTS is unset or holds only what conftest.py put there (no developer's own options)."""
    opts = env.get("SPARK_SUBMIT_OPTS")
    return opts is None or bool(TEST_JVM_OPTS) and opts.strip() == TEST_JVM_OPTS


# --------------------------------------------------------------------------------------------------- locations
def pyspark_home() -> Path:
    """The installed pyspark package directory, which is a complete SPARK_HOME (bin/, jars/, sbin/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_class() -> Path:
    return pyspark_home() / "bin" / "spark-class"


def spark_submit_bin() -> Path:
    return pyspark_home() / "bin" / "spark-submit"


def java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def java_available() -> bool:
    java = java_executable()
    if not java:
        return False
    try:
        return subprocess.run([java, "-version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_env(extra: dict | None = None) -> dict:
    """Environment for spark-class / spark-submit: this pyspark as SPARK_HOME, this interpreter as the Python of
    driver and executors, everything bound to 127.0.0.1, no spark-defaults.conf from the host, Spark's own
    generated code (SPARK_SUBMIT_OPTS: the class archive of conftest.py only, not its interpreted settings)."""
    env = dict(os.environ)
    if "SPARK_SUBMIT_OPTS" in env and _tests_own_submit_opts(env):
        env["SPARK_SUBMIT_OPTS"] = CDS_OPTS
    for key in ("SPARK_CONF_DIR", "SPARK_MASTER_HOST", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS",
                "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(key, None)
    env.update({
        "SPARK_HOME": str(pyspark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
    })
    # The jobs print "[scavenger] <phase> ..." notes on stderr unless SCAVENGER_PROGRESS=0; stderr is a file here,
    # so Spark's console progress bar stays off.
    env.pop("SCAVENGER_PROGRESS", None)
    java = java_executable()
    if java and not env.get("JAVA_HOME"):
        env["JAVA_HOME"] = str(Path(java).resolve().parents[1])
    env.update(extra or {})
    return env


def get_json(url: str, timeout: float = 5.0):
    """GET a JSON document (never through a proxy); None when nothing answers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ process groups
def _pgid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[2])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def group_pids(pgid: int) -> list[int]:
    """Live processes of a process group (zombies excluded)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if _pgid_of(pid) == pgid:
            try:
                state = (entry / "stat").read_text()
                state = state[state.rindex(")") + 2]
            except OSError:
                continue
            if state != "Z":
                out.append(pid)
    return sorted(out)


def kill_group(pgid: int, sig: int = signal.SIGKILL, wait: float = 20.0) -> list[int]:
    """Send ``sig`` to a process group and wait (up to ``wait`` s) until none of its processes is alive.
    Returns the pids that were alive when the signal was sent."""
    pids = group_pids(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and group_pids(pgid):
        time.sleep(0.1)
    return pids


def terminate_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``proc`` (started with start_new_session=True), SIGKILL what is left."""
    pgid = proc.pid
    if group_pids(pgid):
        kill_group(pgid, signal.SIGTERM, wait=grace)
    if group_pids(pgid):
        kill_group(pgid, signal.SIGKILL, wait=grace)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


# ---------------------------------------------------------------------------------------------- the cluster
@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path
    webui_port: int
    args: list = field(default_factory=list)

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pids(self) -> list[int]:
        return group_pids(self.pgid)

    def executor_pids(self) -> list[int]:
        """Executor JVMs launched by this worker (same process group)."""
        return [p for p in self.pids() if "CoarseGrainedExecutorBackend" in _cmdline(p)]

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class ClusterError(RuntimeError):
    pass


class StandaloneCluster:
    """Master + ``n_workers`` workers (``cores`` cores, ``memory`` each) on 127.0.0.1, logs and work dirs under
    ``workdir``. ``start()`` returns once every worker is ALIVE in the master's JSON; ``stop()`` tears down."""

    def __init__(self, workdir: str | os.PathLike, n_workers: int = 2, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "384m", java_opts: str = f"{FAST_JVM_OPTS} {CDS_OPTS}".strip(),
                 start_timeout: float = 120.0):
        self.workdir = Path(workdir)
        self.n_workers = n_workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.java_opts = java_opts
        self.start_timeout = start_timeout
        self.master: Daemon | None = None
        self.workers: list[Daemon | None] = [None] * n_workers
        self.master_port: int | None = None

    # -- lifecycle
    def __enter__(self) -> "StandaloneCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.master.webui_port}"

    def _env(self, local_dirs: Path | None = None) -> dict:
        extra = {"SPARK_DAEMON_MEMORY": self.daemon_memory, "SPARK_DAEMON_JAVA_OPTS": self.java_opts,
                 "SPARK_LOG_DIR": str(self.workdir / "logs"), "SPARK_PID_DIR": str(self.workdir / "pids")}
        if local_dirs is not None:
            extra["SPARK_LOCAL_DIRS"] = str(local_dirs)   # executors' shuffle and spill files
        return spark_env(extra)

    def _spawn(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        log = self.workdir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            return subprocess.Popen([str(spark_class()), *args], stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=str(self.workdir),
                                    start_new_session=True)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master_port, webui = free_port(), free_port()
        args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.master_port),
                "--webui-port", str(webui)]
        self.master = Daemon("master", self._spawn("master", args, self._env()), self.workdir / "logs" /
                             "master.log", webui, args)
        self._wait(lambda s: s is not None, "the master's web UI")
        for i in range(self.n_workers):
            self.start_worker(i, wait=False)
        self.wait_for_workers(self.n_workers)

    def start_worker(self, i: int, wait: bool = True) -> Daemon:
        if self.workers[i] is not None and self.workers[i].alive():
            return self.workers[i]
        work = self.workdir / f"worker{i}"
        local = work / "local"
        local.mkdir(parents=True, exist_ok=True)
        webui = free_port()
        args = ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
                "--webui-port", str(webui), "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", str(work / "work"), self.master_url]
        proc = self._spawn(f"worker{i}", args, self._env(local))
        self.workers[i] = Daemon(f"worker{i}", proc, self.workdir / "logs" / f"worker{i}.log", webui, args)
        if wait:
            self.wait_for_workers(self.alive_worker_count())
        return self.workers[i]

    def stop(self) -> None:
        for daemon in [*self.workers, self.master]:
            if daemon is not None:
                terminate_group(daemon.proc, grace=5.0)

    # -- state
    def state(self) -> dict | None:
        """The master's /json/ (workers, apps), or None when it does not answer."""
        if self.master is None:
            return None
        return get_json(f"{self.webui_url}/json/")

    def worker_state(self, i: int) -> dict | None:
        """Worker ``i``'s /json/ (its executors with their ids and application ids), or None."""
        w = self.workers[i]
        return get_json(f"http://127.0.0.1:{w.webui_port}/json/") if w is not None and w.alive() else None

    def alive_worker_count(self) -> int:
        return sum(1 for w in self.workers if w is not None and w.alive())

    def registered_alive_workers(self) -> list[dict]:
        state = self.state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def _wait(self, ready, what: str) -> dict:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.master is not None and not self.master.alive():
                raise ClusterError(f"the master exited while waiting for {what}:\n{self.master.log_tail()}")
            dead = [w for w in self.workers if w is not None and not w.alive()]
            if dead:
                raise ClusterError(f"{dead[0].name} exited while waiting for {what}:\n{dead[0].log_tail()}")
            state = self.state()
            if ready(state):
                return state
            time.sleep(0.5)
        logs = "\n".join(d.log_tail(15) for d in [self.master, *self.workers] if d is not None)
        raise ClusterError(f"timed out after {self.start_timeout:.0f}s waiting for {what}\n{logs}")

    def wait_for_workers(self, n: int) -> dict:
        """Block until ``n`` workers are ALIVE in the master's JSON (and exactly the live ones we started)."""
        return self._wait(lambda s: s is not None and sum(1 for w in s.get("workers", [])
                                                          if w.get("state") == "ALIVE") >= n,
                          f"{n} ALIVE worker(s)")

    def ensure_workers(self) -> None:
        """(Re)start every worker that is not running and wait until all are registered."""
        for i, w in enumerate(self.workers):
            if w is None or not w.alive():
                self.start_worker(i, wait=False)
        self.wait_for_workers(self.n_workers)

    def wait_for_executors(self, timeout: float = 60.0) -> dict[int, list[int]]:
        """{worker index: executor pids} once every live worker runs an executor (an application is running)."""
        deadline = time.monotonic() + timeout
        while True:
            found = {i: w.executor_pids() for i, w in enumerate(self.workers) if w is not None and w.alive()}
            if found and all(found.values()):
                return found
            if time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until the master runs no application and no worker runs an executor (after a driver died)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state() or {}
            executors = [p for w in self.workers if w is not None for p in w.executor_pids()]
            if not state.get("activeapps") and not executors:
                return True
            time.sleep(0.2)
        return False

    def kill_worker(self, i: int) -> list[int]:
        """SIGKILL worker ``i``'s process group: the Worker JVM and the executor JVMs it launched."""
        w = self.workers[i]
        killed = kill_group(w.pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            w.proc.wait(timeout=10)
        return killed


# ----------------------------------------------------------------------------------------------- submitting
# Settings every test run passes (local and cluster alike, so both compute the same plan): few shuffle partitions
# for small data, no driver UI (no port clashes between concurrent runs), plain stderr.
TEST_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "768m",
    "spark.executor.extraJavaOptions": f"{FAST_JVM_OPTS} {CDS_OPTS}".strip(),
}


def submit_cmd(job: str, args: list[str], master: str, conf: dict | None = None,
               java_opts: str = FAST_JVM_OPTS) -> list[str]:
    """``spark-submit --master M --deploy-mode client [--conf k=v ...] jobs/<job>.py ARGS``."""
    cmd = [str(spark_submit_bin()), "--master", master, "--deploy-mode", "client",
           "--driver-java-options", f"-Dlog4j2.configurationFile=file:{LOG4J} {java_opts}".strip()]
    for key, value in {**TEST_CONF, **(conf or {})}.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(JOBS_DIR / f"{job}.py"), *args]


@dataclass
class Submitted:
    """A finished (or killed) spark-submit: exit code, wall time and where its output went."""
    cmd: list
    returncode: int
    seconds: float
    stdout_path: Path
    stderr_path: Path

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def tail(self, n: int = 30) -> str:
        lines = [ln for ln in self.stderr.splitlines() if not ln.lstrip().startswith("at ")]
        return f"$ {' '.join(self.cmd)}\nexit {self.returncode} after {self.seconds:.1f}s\n" + "\n".join(lines[-n:])


def start_submit(job: str, args: list[str], master: str, logdir: str | os.PathLike, name: str | None = None,
                 conf: dict | None = None, env: dict | None = None) -> tuple[subprocess.Popen, list, Path, Path]:
    """Start spark-submit in its own session (process group = the driver and all its children)."""
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    name = name or job
    out, err = logdir / f"{name}.stdout", logdir / f"{name}.stderr"
    cmd = submit_cmd(job, args, master, conf)
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=spark_env(env),
                                cwd=str(logdir), start_new_session=True)
    return proc, cmd, out, err


def submit(job: str, args: list[str], master: str, logdir: str | os.PathLike, name: str | None = None,
           conf: dict | None = None, env: dict | None = None, timeout: float = 600.0, on_start=None) -> Submitted:
    """Run ``spark-submit jobs/<job>.py ARGS`` to completion (the whole process group is killed on timeout).
    ``on_start(proc)`` is called once the process runs (e.g. to register it for an abort)."""
    start = time.monotonic()
    proc, cmd, out, err = start_submit(job, args, master, logdir, name, conf, env)
    if on_start is not None:
        on_start(proc)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = -signal.SIGKILL
    finally:
        terminate_group(proc, grace=5.0)     # leftovers (a Python worker, a stuck JVM) never outlive the run
    return Submitted(cmd, code, time.monotonic() - start, out, err)


def wait_for_line(path: Path, pattern: str, proc: subprocess.Popen, timeout: float = 300.0,
                  poll: float = 0.05) -> str | None:
    """The first line of ``path`` matching ``pattern`` (regex), or None when the process ends or time runs out."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for line in path.read_text(errors="replace").splitlines():
                if rx.search(line):
                    return line
        except OSError:
            pass
        if proc.poll() is not None:
            return None
        time.sleep(poll)
    return None
