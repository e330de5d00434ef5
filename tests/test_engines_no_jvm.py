"""The DuckDB path needs no Java (issue 27): generate -> validate -> adc -> evaluate -> report, and ingest-obd,
through the CLI in subprocesses whose PATH has no java and whose JAVA_HOME is unset.

The PATH holds a trap instead: a ``java`` that records every call and fails. pyspark starts its JVM through
spark-submit, which runs ``$JAVA_HOME/bin/java`` or the ``java`` on PATH, so an attempt to start a JVM would leave a
record (and fail the job); the test asserts there is none, and that every job says it ran on DuckDB."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCAVENGER = Path(sys.executable).with_name("scavenger")
_JAVA = {"java", "javac", "jar", "jshell", "jrunscript", "keytool", "spark-submit", "spark-shell", "spark-class",
         "pyspark", "beeline"}


@pytest.fixture(scope="module")
def no_java_env(tmp_path_factory):
    """(environment without Java, file the trap writes when called)."""
    root = tmp_path_factory.mktemp("nojava")
    trap_dir, record = root / "bin", root / "java-called"
    trap_dir.mkdir()
    trap = trap_dir / "java"
    trap.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 1\n")
    trap.chmod(trap.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    # the system's PATH directories hold java (/usr/bin/java): their other programs are linked into one
    # directory without the JDK's and Spark's launchers
    sysbin = root / "sysbin"
    sysbin.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not Path(d).is_dir() or Path(d) == SCAVENGER.parent:
            continue
        for entry in Path(d).iterdir():
            if entry.name not in _JAVA and not (sysbin / entry.name).exists():
                (sysbin / entry.name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "SPARK_HOME", "SPARK_REMOTE", "PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS")}
    env["PATH"] = os.pathsep.join([str(trap_dir), str(SCAVENGER.parent), str(sysbin)])
    env["SCAVENGER_PROGRESS"] = "0"
    return env, record


def _run(env, *args, timeout=600):
    proc = subprocess.run([str(SCAVENGER), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout)
    assert proc.returncode == 0, f"scavenger {args[0]} exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _engine(out: Path) -> dict:
    return json.loads((out / "result.json").read_text())["engine"]


def test_environment_has_no_java(no_java_env):
    env, record = no_java_env
    found = subprocess.run(["/bin/sh", "-c", "command -v java"], capture_output=True, text=True,
                           env=env).stdout.strip()
    assert found.endswith("/bin/java") and "nojava" in found   # only the trap
    assert "JAVA_HOME" not in env


@pytest.mark.e2e
def test_duckdb_chain_runs_without_java(no_java_env, tmp_path):
    env, record = no_java_env
    gen, val, adc, ev, rep = (tmp_path / x for x in ("gen", "val", "adc", "eval", "rep"))
    _run(env, "generate", "--out", gen, "--layout", "ranked", "--positions", "3", "--ads", "8",
         "--contexts", "8", "--days", "2", "--events-per-day", "1500", "--seed", "3")
    logs, decisions = gen / "logs", gen / "decisions"
    _run(env, "validate", "--logs", logs, "--decisions", decisions, "--out", val, "--no-gate")
    _run(env, "adc", "--logs", logs, "--out", adc, "--gate", "report")
    _run(env, "evaluate", "--logs", logs, "--decisions", decisions, "--out", ev, "--gate", "report",
         "--estimators", "pi,ips")
    _run(env, "report", "--out", rep, "--estimates", ev / "estimates", "--adc", adc / "adc",
         "--validation", val / "validation")
    assert not record.exists(), f"a JVM start was attempted: java {record.read_text()}"
    for out in (gen, val, adc, ev):
        assert _engine(out)["name"] == "duckdb", out
    assert (rep / "report.html").stat().st_size > 1000
    truth = json.loads((gen / "ground_truth.json").read_text())
    assert truth["counts"]["events"] == 3000


def test_ingest_obd_runs_without_java(no_java_env, obd_dir, tmp_path):
    env, record = no_java_env
    out = tmp_path / "obd"
    proc = _run(env, "ingest-obd", "--obd-dir", obd_dir, "--out", out, "--policies", "random",
                "--campaigns", "men")
    assert not record.exists(), f"a JVM start was attempted: java {record.read_text()}"
    assert _engine(out)["name"] == "duckdb"
    assert "10000 rows" in proc.stdout
    assert sorted(p.name for p in (out / "logs").iterdir() if p.name.startswith("dt="))
