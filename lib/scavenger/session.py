"""The SparkSession every job and notebook helper uses.

Embedded ``local[*]`` is the default only because spark-submit (and PySpark's own launcher) default to it:
this module never sets a master unless the caller passes one explicitly (``--master``). Settings given by
spark-submit, ``spark-defaults.conf`` or ``--conf`` always win over the defaults below.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Mapping

# Defaults applied only when nobody set the key (spark-submit --conf, spark-defaults.conf, --conf flag).
DEFAULT_SQL_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.parquet.compression.codec": "zstd",
    # timestamps as Parquet TIMESTAMP_MICROS (UTC), as DuckDB, pyarrow and pandas write them, not the legacy INT96:
    # the same schema whichever engine wrote a table
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # HotSpot does not JIT-compile methods over 8000 bytes of bytecode (HugeMethodLimit); the statistics
    # aggregations generate larger ones, which then run interpreted (2x slower measured on the scan). At 8000 Spark
    # splits such stages instead of generating one huge method (the value Spark's docs recommend on HotSpot).
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # adaptive execution runs a planned sort-merge join as a shuffled hash join when every shuffle partition of a
    # side holds at most this much (Spark's built-in 0: never), so the decisions' join to their events sorts
    # neither side (4M events, slow machine: one policy's join 40-47 s against 50 s, 8 policies' 227 s against
    # 237-253 s). A larger side keeps the sort-merge join, which spills where a hash table cannot
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": "64MB",
}

_LOG4J = Path(__file__).resolve().parent / "log4j2.properties"


def check_remote(url: str, timeout: float = 10.0) -> None:
    """SPARK_REMOTE must be ``sc://host[:port][/;param=value...]`` (or ``local``) with a server listening there: a
    malformed URL, or a port nobody answers on, is a setting to fix (exit 2), said at once instead of after
    minutes of the client's retries."""
    import socket
    from urllib.parse import urlsplit

    from .errors import UsageError

    if url == "local" or url.startswith("local["):
        return
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 15002
    except ValueError as exc:
        raise UsageError(f"SPARK_REMOTE={url!r} is not a Spark Connect URL ({exc}): expected "
                         f"sc://host:port, e.g. sc://localhost:15002") from None
    if parts.scheme != "sc" or not host:
        raise UsageError(f"SPARK_REMOTE={url!r} is not a Spark Connect URL: expected sc://host:port, e.g. "
                         f"sc://localhost:15002")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise UsageError(f"SPARK_REMOTE={url!r}: no Spark Connect server answers at {host}:{port} "
                         f"({exc.strerror or exc}); start the server or unset SPARK_REMOTE") from None


def embedded_defaults(master: str | None, conf: Mapping[str, str] | None) -> dict[str, str]:
    """Settings for a JVM this process starts itself (local master, not under spark-submit), each only when the
    user did not set it: the driver heap (half the machine's memory, at least 1g and at most 32g: Spark's own
    default of 1g runs out on a few million events), shuffle partitions (4 per core instead of 200 tiny tasks),
    and the local file system without checksum files (a Parquet file fixed in place with pandas beside Spark's
    stale ``.crc`` reads as it is now)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ or (master and not master.startswith("local")):
        return {}
    conf = conf or {}
    out = {}
    if "spark.driver.memory" not in conf and "--driver-memory" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            total = 2 << 30
        out["spark.driver.memory"] = f"{max(1, min(32, int(total / 2 ** 31)))}g"
    cores = os.cpu_count() or 2
    out.setdefault("spark.sql.shuffle.partitions", str(4 * cores))
    out["spark.hadoop.fs.file.impl"] = "org.apache.hadoop.fs.RawLocalFileSystem"
    out["spark.hadoop.fs.file.impl.disable.cache"] = "true"
    return {k: v for k, v in out.items() if k not in conf}


def get_spark(app_name: str = "scavenger", master: str | None = None,
              conf: Mapping[str, str] | None = None, quiet: bool = True, changed: dict | None = None):
    """Return the active SparkSession or build one (a Spark Connect session when SPARK_REMOTE is set).

    ``master`` and ``conf`` are explicit user choices and override everything; otherwise the session takes
    what spark-submit or the environment configured, then :func:`embedded_defaults`, then ``DEFAULT_SQL_CONF``.
    ``changed``: receives {key: previous value or None} of the settings changed on a session that was already
    active (a notebook's), which the engine restores when it closes.
    """
    from pyspark.sql import SparkSession

    remote = os.environ.get("SPARK_REMOTE")
    if remote:      # a SPARK_REMOTE set wrong is a setting, even beside a session already active in this process
        check_remote(remote)
    active = SparkSession.getActiveSession()
    if active is not None and master is None and not conf:
        _apply_defaults(active, changed=changed)
        return active

    # Python workers (only simulations use them) run the driver's interpreter unless the user chose one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master and not remote:
        builder = builder.master(master)
    conf = dict(conf or {})
    if not remote:
        for key, value in embedded_defaults(master, conf).items():
            builder = builder.config(key, value)
    if quiet and not remote and "PYSPARK_GATEWAY_PORT" not in os.environ and _LOG4J.exists():
        # A fresh JVM (not under spark-submit): start it with a quiet log4j config unless the user set one.
        if conf.get("spark.driver.extraJavaOptions") is None:
            builder = builder.config("spark.driver.extraJavaOptions",
                                     f"-Dlog4j2.configurationFile=file:{_LOG4J}")
    for key, value in conf.items():
        builder = builder.config(key, value)
    if quiet and not remote and "PYSPARK_GATEWAY_PORT" not in os.environ:
        with _filtered_jvm_stderr():
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    if quiet:
        # Spark's own log lines: the quiet log4j configuration above (--verbose keeps Spark's defaults); under
        # Spark Connect the server's logging applies
        _quiet_python_loggers()
    _apply_defaults(spark, explicit=set(conf.keys()))
    return spark


_NOISE = ("WARNING: Using incubator modules", "Setting default log level", "To adjust logging level",
          "Using Spark's default log4j profile", "WARNING: An illegal reflective", "WARNING: Please consider",
          "WARNING: All illegal access")
_LOG_LINE = __import__("re").compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR)\b")


def _keep(line: str) -> bool:
    """A line of the JVM's stderr worth showing: not the banner, not a log4j line (progress bars pass)."""
    text = line.lstrip("\r")
    return not (text.startswith(_NOISE) or _LOG_LINE.match(text) or text.startswith("\tat ")
                or text.startswith("Caused by:") or text.startswith("java.") or text.startswith("org.apache."))


@contextlib.contextmanager
def _filtered_jvm_stderr():
    """Start the JVM with its stderr through a pipe: a thread forwards what is worth showing (Spark's stage
    progress when the console shows it) and drops the banner and log lines. This process's own stderr is
    restored as soon as the JVM has started; SCAVENGER_DEBUG=1 or --verbose keeps everything."""
    import threading

    if os.environ.get("SCAVENGER_DEBUG") == "1":
        yield
        return
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    out = os.fdopen(os.dup(saved), "w", buffering=1)

    def pump():
        with os.fdopen(read_fd, "r", errors="replace", newline="") as src:
            buf = ""
            while True:
                chunk = src.read(1)
                if not chunk:
                    break
                buf += chunk
                if chunk in ("\n", "\r"):
                    if _keep(buf):
                        out.write(buf)
                        out.flush()
                    buf = ""
    threading.Thread(target=pump, name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _quiet_python_loggers() -> None:
    """PySpark 4 logs every analysis error as a JSON blob with a Java stack trace on stderr; the CLI reports
    errors itself in one line, so raise those loggers to CRITICAL (SCAVENGER_DEBUG=1 keeps them)."""
    import logging

    if os.environ.get("SCAVENGER_DEBUG") == "1":
        return
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pragma: no cover - older pyspark
        return
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


SCAN_BATCH_CONF = "spark.scavenger.scanBatchDays"


def scan_batch_days(spark) -> int:
    """Days per statistics scan when a job has several days to scan: ``--conf spark.scavenger.scanBatchDays=N``;
    default 0, every missing day in one pass. Daily statistics are additive, so batches give the same tables. A
    batch bounds the row-level cache and shuffle files to its own days (at 100M events the 30-day cache alone took
    15 GB of local disk), and each batch's days are stored before the next batch starts, so a job killed midway
    re-scans only the unfinished batch. Not the default because each batch pays job start-up and a partly idle
    last wave of tasks: 30 days of 10M events took 198 s in 7-day batches against 169 s in one scan (100M: 1,318 s
    against 1,282 s)."""
    from .errors import UsageError

    text = spark.conf.get(SCAN_BATCH_CONF, "0").strip()
    try:
        days = int(text)
    except ValueError:
        days = -1
    if days < 0:
        raise UsageError(f"{SCAN_BATCH_CONF}={text!r}: expected a whole number of days >= 0 (0 = one scan)")
    return days


# Spark's built-in values of the keys of DEFAULT_SQL_CONF: a key still at its built-in value was set by nobody
_BUILT_IN = {"spark.sql.sources.partitionOverwriteMode": ("STATIC", "static"),
             "spark.sql.parquet.compression.codec": ("snappy",),
             "spark.sql.codegen.hugeMethodLimit": ("65535",),
             "spark.sql.parquet.outputTimestampType": ("INT96",)}


def _apply_defaults(spark, explicit: set[str] | None = None, changed: dict | None = None) -> None:
    """Set each default SQL conf unless the user (``--conf``, spark-submit, spark-defaults.conf) set it: a key is
    changed only while it holds Spark's built-in value (``spark.conf`` alone: the same under Spark Connect, where
    the server's settings are left alone otherwise). ``changed`` receives the previous value of each key set."""
    remote = type(spark).__module__.startswith("pyspark.sql.connect")
    for key, value in DEFAULT_SQL_CONF.items():
        if explicit and key in explicit:
            continue
        try:
            current = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a key the server does not expose
            continue
        if key == "spark.sql.session.timeZone":
            if not remote and current != value:
                spark.conf.set(key, value)
                if changed is not None:
                    changed.setdefault(key, current)
            continue
        if current is None or current in _BUILT_IN.get(key, ()):
            try:
                spark.conf.set(key, value)
            except Exception:  # noqa: BLE001 - a static conf of a running server
                continue
            if changed is not None and current != value:
                changed.setdefault(key, current)


def restore_conf(spark, previous: dict) -> None:
    """Put back the settings a job changed on a session it did not start ({key: value before, None: unset})."""
    for key, value in previous.items():
        try:
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        except Exception:  # noqa: BLE001 - best effort: a session already stopped
            pass


def parse_conf_pairs(pairs: list[str] | None) -> dict[str, str]:
    """Parse repeated ``--conf key=value`` flags; raise UsageError on a malformed one."""
    from .errors import UsageError

    result: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair or pair.startswith("="):
            raise UsageError(f"--conf expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        result[key.strip()] = value.strip()
    return result
