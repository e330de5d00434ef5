"""The JVM options of every Spark the tests start, given through SPARK_SUBMIT_OPTS (Spark's launcher adds them to
each java command line: pyspark's own session, the CLI's, spark-submit under Airflow, the Spark Connect server):

* Spark's interpreted evaluation instead of generated code (``-Dspark.sql.codegen...``: Spark reads ``spark.*``
  system properties as settings; a job's ``--conf`` or a builder's ``.config`` still wins);
* a class-data-sharing archive of the classes a Spark job loads (``-XX:SharedArchiveFile``, JDK 13+): a JVM maps
  them instead of reading, parsing and verifying them from Spark's jars. Measured on 2 cores, a one-job
  ``spark-submit jobs/evaluate.py`` of small logs: interpreted with the C1-only JIT of cluster_util (as the tests'
  short-lived JVMs run) 29.8 s of CPU without it, 23.7 s with it; a bare session start 6.2 -> 3.4 s.

The archive is built once per JDK and pyspark install (a key of both, under the temp directory) by one small
``scavenger evaluate`` on Spark whose JVM dumps the classes it loaded at exit. A JVM that cannot use it (another
classpath: a SPARK_CONF_DIR or SPARK_HOME of the test's own) runs as without it; ``-Xlog:cds=off`` keeps that silent.
Set ``SCAVENGER_TEST_CDS=0`` to run without the archive.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"   # an archive the JVM cannot map is ignored without a word
# the options this module added to SPARK_SUBMIT_OPTS (all of them; the archive's alone), for cluster_util
OPTS_ENV, CDS_ENV = "SCAVENGER_TEST_JVM_OPTS", "SCAVENGER_TEST_CDS_OPTS"

# the archive's workload: one small evaluate on Spark in this JVM, then the JVM's own exit (which writes the archive)
_WORKLOAD = r"""
import sys
from pyspark import SparkContext
from scavenger.cli import main
work = sys.argv[1]
assert main(["generate", "--engine", "duckdb", "--out", work + "/gen", "--days", "2", "--events-per-day", "300",
             "--layout", "ranked", "--positions", "3", "--ads", "8", "--contexts", "4", "--seed", "1"]) == 0
code = main(["evaluate", "--engine", "spark", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
             "--logs", work + "/gen/logs", "--decisions", work + "/gen/decisions", "--out", work + "/ev",
             "--stats-dir", work + "/stats"])
assert code in (0, 3), code
gateway = SparkContext._gateway
if gateway is not None and getattr(gateway, "proc", None) is not None:
    gateway.proc.stdin.close()      # the gateway JVM exits on EOF; the archive is written during that exit
    gateway.proc.wait(timeout=300)
"""


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else shutil.which("java")
    return Path(os.path.realpath(java)) if java and Path(java).exists() else None


def archive_path() -> Path | None:
    """Where this JDK's and this pyspark's archive lives (None without Java or pyspark)."""
    java = _java()
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    key = hashlib.sha256()
    for path in [java, java.parent.parent / "lib" / "modules", *sorted(jars.glob("*.jar"))]:
        if path.exists():
            stat = path.stat()
            key.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    cache = Path(tempfile.gettempdir()) / f"scavenger-tests-{os.getuid()}"
    cache.mkdir(mode=0o700, exist_ok=True)
    if cache.stat().st_uid != os.getuid():      # somebody else's directory: no archive from there
        return None
    return cache / f"spark-classes-{key.hexdigest()[:16]}.jsa"


def build_archive(path: Path, jvm_opts: str = "", timeout: float = 600.0) -> bool:
    """Write the archive at ``path`` unless it exists (one builder at a time: a lock file beside it); the workload's
    JVM runs with ``jvm_opts`` besides (the tests' interpreted settings, so that it loads the classes they load)."""
    import fcntl

    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return True
        work = Path(tempfile.mkdtemp(prefix="scv-cds-"))
        partial = work / "classes.jsa"
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS")}
        env.update(SPARK_SUBMIT_OPTS=f"{jvm_opts} -XX:ArchiveClassesAtExit={partial}".strip(), SCAVENGER_PROGRESS="0",
                   PYTHONPATH=os.pathsep.join([str(REPO / "lib"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-c", _WORKLOAD, str(work)], env=env, capture_output=True,
                                  text=True, timeout=timeout, cwd=work)
            if proc.returncode == 0 and partial.exists() and partial.stat().st_size > 0:
                os.replace(partial, path)
                print(f"[tests] Spark class archive built in {time.monotonic() - start:.0f} s: {path}",
                      file=sys.stderr)
                return True
            print(f"[tests] no Spark class archive (exit {proc.returncode}): {proc.stderr[-500:]}", file=sys.stderr)
            return False
        except (OSError, subprocess.SubprocessError) as exc:
            print(f"[tests] no Spark class archive: {exc}", file=sys.stderr)
            return False
        finally:
            shutil.rmtree(work, ignore_errors=True)


_BUILDER: subprocess.Popen | None = None


def set_test_jvm_opts(codegen: dict, build: bool = True) -> None:
    """Add the tests' options to SPARK_SUBMIT_OPTS once per test run (a worker inherits the controller's). A missing
    archive is built (``build``) beside the tests, in a process of its own: the JVMs that start before it is there
    run without it (a JVM given an archive that does not exist yet runs as without one, silently)."""
    global _BUILDER
    if OPTS_ENV in os.environ:
        return
    interpreted = " ".join(f"-D{key}={value}" for key, (value, _) in codegen.items())
    cds = ""
    path = archive_path() if os.environ.get("SCAVENGER_TEST_CDS", "1") != "0" else None
    if path is not None:
        cds = f"-XX:SharedArchiveFile={path} {QUIET_CDS}"
        if build and not path.exists():
            with open(path.with_suffix(".log"), "w") as log:
                _BUILDER = subprocess.Popen([sys.executable, __file__, str(path), interpreted], stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
    ours = f"{interpreted} {cds}".strip()
    own = os.environ.get("SPARK_SUBMIT_OPTS", "").strip()
    os.environ["SPARK_SUBMIT_OPTS"] = f"{own} {ours}".strip()
    os.environ[OPTS_ENV], os.environ[CDS_ENV] = ours, cds


def stop_builder() -> None:
    """At the end of the test run: stop a build still running (it removes its partial archive)."""
    import signal

    if _BUILDER is not None and _BUILDER.poll() is None:
        os.killpg(_BUILDER.pid, signal.SIGTERM)     # its session: the builder, the workload and their JVM
        try:
            _BUILDER.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(_BUILDER.pid, signal.SIGKILL)


if __name__ == "__main__":
    # the builder process: python tests/helpers/spark_jvm.py ARCHIVE "JVM OPTIONS"
    import signal

    def _stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)
    sys.exit(0 if build_archive(Path(sys.argv[1]), sys.argv[2]) else 1)
