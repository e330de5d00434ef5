"""Progress of long jobs: Spark stage names that say what is running, and the console progress bar.

Every phase of a job (reading a window, the statistics scan of a day, writing quarantine, ...) runs inside
``with phase(spark, "statistics", "scan 2026-01-01..2026-01-03"):`` so the Spark UI, the History Server and the
console progress bar show ``scavenger statistics: scan 2026-01-01..2026-01-03`` as the job description of every
Spark job started inside, and a one-line "done in Xs" note goes to stderr (``SCAVENGER_PROGRESS=0`` silences it).

The console progress bar (``[Stage 3:=====>   (2 + 2) / 8]`` on stderr) is Spark's own
``spark.ui.showConsoleProgress``; it must be set before the SparkContext starts, so the CLI passes
:func:`console_progress_conf` as a default (the user's ``--conf`` still wins).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

DESCRIPTION_KEY = "spark.job.description"
GROUP_KEY = "spark.jobGroup.id"


def console_progress_conf(stream=None) -> dict[str, str]:
    """Spark conf defaults that turn on the console progress bar when ``stream`` (default stderr) is a terminal
    or ``SCAVENGER_PROGRESS=1``; ``SCAVENGER_PROGRESS=0`` turns it off (e.g. for log files)."""
    stream = sys.stderr if stream is None else stream
    env = os.environ.get("SCAVENGER_PROGRESS")
    if env == "0":
        on = False
    elif env == "1":
        on = True
    else:
        on = bool(getattr(stream, "isatty", lambda: False)())
    return {"spark.ui.showConsoleProgress": "true" if on else "false"}


def _spark_context(spark):
    """The SparkContext, or None under Spark Connect (no local properties there)."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect raises on .sparkContext
        return None


def _notes_enabled() -> bool:
    return os.environ.get("SCAVENGER_PROGRESS") != "0"


@contextlib.contextmanager
def phase(spark, name: str, detail: str = "", group: str | None = None, log: bool | None = None
          ) -> Iterator[str]:
    """Name every Spark job started inside: description ``scavenger <name>: <detail>``; restore afterwards.

    ``group`` also sets the job group (so ``sc.cancelJobGroup(group)`` cancels the phase). Yields the
    description. Nesting works: the inner phase's description is shown while it runs, the outer one after.
    """
    description = f"scavenger {name}" + (f": {detail}" if detail else "")
    sc = _spark_context(spark) if spark is not None else None
    previous_desc = previous_group = None
    if sc is not None:
        previous_desc = sc.getLocalProperty(DESCRIPTION_KEY)
        previous_group = sc.getLocalProperty(GROUP_KEY)
        if group is not None:
            sc.setJobGroup(group, description, interruptOnCancel=False)
        else:
            sc.setJobDescription(description)
    log = _notes_enabled() if log is None else log
    if log:
        print(f"[scavenger] {description} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        yield description
    finally:
        if sc is not None:
            if group is not None:
                sc.setLocalProperty(GROUP_KEY, previous_group)
            sc.setLocalProperty(DESCRIPTION_KEY, previous_desc)
        if log:
            print(f"[scavenger] {description} done in {time.perf_counter() - start:.1f}s", file=sys.stderr,
                  flush=True)


def note(text: str) -> None:
    """A one-line ``[scavenger]`` note on stderr (``SCAVENGER_PROGRESS=0`` silences it)."""
    if _notes_enabled():
        print(f"[scavenger] {text}", file=sys.stderr, flush=True)


__all__ = ["phase", "console_progress_conf", "note"]
