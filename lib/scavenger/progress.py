"""Progress of long jobs: Spark stage names that say what is running, and the console progress bar.

Every phase of a job (the pass over a batch of days, the gate, ...) runs inside
``with phase(spark, "statistics", "one pass over 3 day(s)"):``: Spark jobs started inside carry the job tag
``scavenger-statistics`` (shown by the Spark UI; classic Spark and Spark Connect alike), and a one-line
"done in Xs" note goes to stderr (``SCAVENGER_PROGRESS=0`` silences it).

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



def console_progress_conf(stream=None) -> dict[str, str]:
    """Spark conf defaults that turn on the console progress bar when ``stream`` (default stderr) is a terminal
    or ``SCAVENGER_PROGRESS=1``; ``SCAVENGER_PROGRESS=0`` turns it off (e.g. for log files). Nothing under Spark
    Connect: the bar is a static setting of the server, which refused it with a warning on every job."""
    if os.environ.get("SPARK_REMOTE"):
        return {}
    stream = sys.stderr if stream is None else stream
    env = os.environ.get("SCAVENGER_PROGRESS")
    if env == "0":
        on = False
    elif env == "1":
        on = True
    else:
        on = bool(getattr(stream, "isatty", lambda: False)())
    return {"spark.ui.showConsoleProgress": "true" if on else "false"}


def _notes_enabled() -> bool:
    return os.environ.get("SCAVENGER_PROGRESS") != "0"


@contextlib.contextmanager
def phase(spark, name: str, detail: str = "", group: str | None = None, log: bool | None = None
          ) -> Iterator[str]:
    """Tag every Spark job started inside with ``scavenger-<name>`` (SparkSession job tags: the Spark UI and the
    History Server show them, and ``spark.interruptTag`` cancels the phase; the same call works under Spark
    Connect), and write a one-line ``[scavenger] ... done in`` note to stderr. Yields the description."""
    description = f"scavenger {name}" + (f": {detail}" if detail else "")
    tag = "scavenger-" + "".join(ch if ch.isalnum() else "-" for ch in (group or name))
    tagged = False
    if spark is not None:
        try:
            spark.addTag(tag)
            tagged = True
        except Exception:  # noqa: BLE001 - a session without job tags: the note below still says what runs
            pass
    log = _notes_enabled() if log is None else log
    if log:
        print(f"[scavenger] {description} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        yield description
    finally:
        if tagged:
            try:
                spark.removeTag(tag)
            except Exception:  # noqa: BLE001
                pass
        if log:
            print(f"[scavenger] {description} done in {time.perf_counter() - start:.1f}s", file=sys.stderr,
                  flush=True)


def note(text: str) -> None:
    """A one-line ``[scavenger]`` note on stderr (``SCAVENGER_PROGRESS=0`` silences it)."""
    if _notes_enabled():
        print(f"[scavenger] {text}", file=sys.stderr, flush=True)


__all__ = ["phase", "console_progress_conf", "note"]
