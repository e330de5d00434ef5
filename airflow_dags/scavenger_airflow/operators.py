"""The one operator every Spark task of the scavenger DAGs uses: spark-submit of ``jobs/<name>.py``.

It is the Apache Spark provider's SparkSubmitOperator (connection ``spark_default``: host ``local[*]`` for the
embedded master; point the connection at YARN/k8s/spark:// to move to a cluster) plus four things the jobs need:
  * idempotency: the task's ``--out`` directory is removed before the job runs, so a re-run of a dt replaces
    exactly that directory (local paths; on remote storage the job's own overwrite applies);
  * exit codes: 2 (bad arguments) and 3 (a data check failed) fail the task at once, without retries, with the
    job's message from ``result.json``; exit 1 (internal error) is retried with backoff;
  * ``step`` (templated, e.g. an XCom of the DAG's ``plan`` task): a dict with ``application``,
    ``application_args``, ``conf`` and ``skip_reason`` that replaces those arguments at run time;
  * ``skip_reason``: a non-empty value skips the task with that message in the log;
  * the job's ``result.json`` is logged and returned (XCom) when it can be read from the worker.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

EXIT_USAGE = 2
EXIT_DATA_CHECK = 3


def _flag_value(args, flag: str):
    args = list(args or [])
    for i, a in enumerate(args[:-1]):
        if a == flag:
            return str(args[i + 1])
    return None


def _local(path: str | None) -> Path | None:
    if not path:
        return None
    if path.startswith("file://"):
        path = path[len("file://"):]
    return Path(path) if path.startswith("/") else None


class ScavengerSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator for ``jobs/<name>.py`` with scavenger's exit codes, idempotent --out and skips."""

    template_fields = (*SparkSubmitOperator.template_fields, "skip_reason", "step")
    STEP_KEYS = frozenset({"application", "application_args", "conf", "skip_reason", "engine", "py_files"})
    ui_color = "#f4a460"

    def __init__(self, *, step: dict | None = None, skip_reason: str = "", **kwargs):
        kwargs.setdefault("name", "scavenger")
        super().__init__(**kwargs)
        self.skip_reason = skip_reason
        self.step = step
        self.engine = "spark"

    def _apply_step(self) -> None:
        step = self.step
        if step is None:
            return
        if not isinstance(step, dict) or set(step) - self.STEP_KEYS or "application" not in step:
            raise AirflowFailException(f"step must be a dict with keys {sorted(self.STEP_KEYS)}, got {step!r}")
        self.application = step["application"]
        self.application_args = [str(a) for a in step.get("application_args") or []]
        self.conf = dict(step.get("conf") or {})
        self.skip_reason = step.get("skip_reason") or ""
        self.engine = step.get("engine") or "spark"
        if step.get("py_files"):
            self.py_files = step["py_files"]

    def execute(self, context):
        self._apply_step()
        if self.skip_reason:
            self.log.warning("skipping: %s", self.skip_reason)
            raise AirflowSkipException(self.skip_reason)
        out = _local(_flag_value(self.application_args, "--out"))
        if out is not None and out.exists():
            self.log.info("removing the previous output of this dt: %s", out)
            shutil.rmtree(out)
        try:
            if self.engine == "duckdb":
                self._run_local()
            else:
                self._ensure_spark_submit_on_path()
                super().execute(context)
        except AirflowException as exc:
            code = getattr(exc, "returncode", None)
            if code is None:
                code = getattr(getattr(self._hook, "_submit_sp", None), "returncode", None)
            result = self._read_result(out)
            message = (result or {}).get("message") or ""
            if code in (EXIT_USAGE, EXIT_DATA_CHECK):
                kind = "data check failed" if code == EXIT_DATA_CHECK else "bad arguments"
                text = f"scavenger job {Path(self.application).stem} exited {code} ({kind}): {message}".rstrip(": ")
                for verdict in (result or {}).get("verdicts") or []:
                    failed = isinstance(verdict, dict) and verdict.get("verdict") == "fail"
                    (self.log.error if failed else self.log.info)("verdict: %s", json.dumps(verdict, default=str))
                self.log.error(text)
                raise AirflowFailException(text) from exc
            raise
        result = self._read_result(out)
        self._publish(context, result)
        if result is not None:
            self.log.info("result.json: status=%s counts=%s summary=%s", result.get("status"),
                          json.dumps(result.get("counts"), default=str),
                          json.dumps(result.get("summary"), default=str)[:2000])
            return {k: result.get(k) for k in ("job", "status", "exit_code", "counts", "outputs")}
        return None

    def _local_command(self) -> list[str]:
        job = Path(self.application).stem.replace("_", "-")
        return [sys.executable, "-m", "scavenger", job, *self.application_args]

    def _run_local(self) -> None:
        """engine duckdb: the job in a local process (``python -m scavenger <job> ...``), no spark-submit, no JVM;
        the same exit codes. Its output reaches the task log line by line while it runs (it was held until the
        end, and lost when the task was stopped); a task that is stopped (timeout, marked failed, killed) stops
        the job with SIGTERM first, so that it records "interrupted" (see :meth:`on_kill`)."""
        import subprocess

        cmd = self._local_command()
        self.log.info("running %s", " ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                errors="replace")
        self._local_proc = proc
        try:
            for line in proc.stdout:
                self.log.info("%s", line.rstrip("\n"))
            code = proc.wait()
        except BaseException:           # the task's timeout or a stop request, raised in this thread
            self._stop_local()
            raise
        finally:
            self._local_proc = None
        if code:
            exc = AirflowException(f"scavenger {cmd[3] if len(cmd) > 3 else 'job'} exited {code}")
            exc.returncode = code
            raise exc

    def _stop_local(self, grace: float = 30.0) -> None:
        proc = getattr(self, "_local_proc", None)
        if proc is None or proc.poll() is not None:
            return
        import subprocess

        proc.terminate()                # the job writes "interrupted" to result.json and its manifest, then exits
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def on_kill(self) -> None:
        if getattr(self, "_local_proc", None) is not None:
            self._stop_local()
            return
        super().on_kill()

    def _publish(self, context, result) -> None:
        """Every output the job wrote becomes an event of the task's outlet Assets, partitioned by the run's dt."""
        events = context.get("outlet_events") if hasattr(context, "get") else None
        ds = context.get("ds") if hasattr(context, "get") else None
        if not events or not ds or not self.outlets:
            return
        for asset in self.outlets:
            try:
                event = events[asset]
                event.add_partitions(str(ds))
                event.extra = {"dt": str(ds), "job": Path(self.application).stem,
                               "outputs": {k: str(v) for k, v in ((result or {}).get("outputs") or {}).items()}}
            except Exception as exc:  # noqa: BLE001 - an Airflow without asset partitions: the event stays whole
                self.log.info("asset %s: %s", getattr(asset, "name", asset), exc)

    def _read_result(self, out: Path | None):
        if out is None or not (out / "result.json").exists():
            return None
        try:
            return json.loads((out / "result.json").read_text())
        except (OSError, ValueError):
            return None

    def _ensure_spark_submit_on_path(self) -> None:
        """Local runs: if spark-submit is not on PATH but sits beside this Python (a venv), use that one."""
        if shutil.which("spark-submit"):
            return
        beside = Path(sys.executable).parent / "spark-submit"
        if beside.exists():
            self.log.info("spark-submit not on PATH; using %s", beside)
            os.environ["PATH"] = f"{beside.parent}{os.pathsep}{os.environ.get('PATH', '')}"
