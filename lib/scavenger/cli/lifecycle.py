"""How a job ends when it is asked to stop: SIGTERM (Airflow, Kubernetes, systemd) and SIGINT (Ctrl-C).

Exit code 128 + the signal's number (143 for SIGTERM, 130 for SIGINT), as a shell reports a job killed by it,
with ``"status": "interrupted"`` and that exit code written to result.json and the run manifest first.

    guard = StopGuard(finish=..., cancel=...)    # finish(code) writes result.json + the manifest, once
    with guard:
        run the job                              # a signal raises Interrupted in the main thread

Python runs a signal handler in the main thread only between bytecodes, so a job inside a long engine call
(a DuckDB query, a wait on the JVM) would not notice. The C-level handler also writes the signal's number to a
wake-up pipe (``signal.set_wakeup_fd``), read at once by a watcher thread: it cancels the engine's work
(``cancel``: DuckDB's interrupt, Spark's cancelAllJobs) so the main thread gets control back, and if the main
thread has not finished within ``grace`` seconds (``SCAVENGER_STOP_GRACE``, default 20) it records the ending
itself and exits the process. A second signal exits at once, recorded the same way. A signal that arrives during
an import is raised when the import is over (an exception inside one can leave a C extension half-built).
"""
from __future__ import annotations

import os
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """Raised in the main thread by SIGTERM/SIGINT; a BaseException, so ``except Exception`` in library code does
    not swallow it. ``signum`` None: raised later by the watcher (see :meth:`StopGuard._deliver`); the guard
    knows which signal."""

    def __init__(self, signum: int | None = None):
        super().__init__(f"interrupted by {signal.Signals(signum).name}" if signum else "interrupted")
        self.signum = signum
        self.exit_code = 128 + int(signum) if signum else None


def _importing(frame) -> bool:
    """The main thread is inside an import: an exception raised there can leave a C extension half-initialized
    (seen: the process aborting), so the interruption waits until the import is over."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def exit_code_of(signum: int) -> int:
    return 128 + int(signum)


class StopGuard:
    """See the module docstring. ``finish(code)`` must be safe to call from the watcher thread."""

    def __init__(self, finish, cancel=None, grace: float | None = None):
        self._finish = finish
        self._cancel = cancel
        self.grace = float(os.environ.get("SCAVENGER_STOP_GRACE", "20")) if grace is None else grace
        self.signum: int | None = None
        self._quiet = False
        self._raised = False
        self._pending = False
        self._done = threading.Event()
        self._finished = threading.Lock()
        self._did_finish = False
        self._previous: dict = {}
        self._pipe = None
        self._old_wakeup = -1

    # ------------------------------------------------------------------ install / remove
    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self                      # signals are only delivered to the main thread: nothing to do
        for sig in STOP_SIGNALS:
            current = signal.getsignal(sig)
            if sig == signal.SIGINT and current == signal.SIG_IGN:
                continue                     # started with SIGINT ignored (nohup, a background job): keep it so
            self._previous[sig] = current
            signal.signal(sig, self._handler)
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        self._old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="scavenger-stop-watcher", daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """Restore the previous handlers (the job's work is over)."""
        self._done.set()
        if threading.current_thread() is not threading.main_thread() or self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_wakeup)
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        r, w = self._pipe
        self._pipe = None
        try:
            os.write(w, b"\0")               # wake the watcher so it ends
        except OSError:
            pass

    # ------------------------------------------------------------------ the two halves
    def quiet(self) -> None:
        """From now on a signal no longer interrupts the main thread: the job's ending is being recorded (a
        second signal, or the grace period, still ends the process)."""
        self._quiet = True

    def _handler(self, signum, frame):      # main thread, between bytecodes
        if self.signum is None:
            self.signum = signum
        if self._raised or self._quiet:
            return                           # a second signal while the job unwinds: the watcher exits the process
        if _importing(frame):
            self._pending = True             # raised from another thread once the import is over
            threading.Thread(target=self._deliver, name="scavenger-stop-deliver", daemon=True).start()
            return
        self._raised = True
        raise Interrupted(self.signum)

    def _deliver(self) -> None:
        """Watcher thread: raise Interrupted in the main thread once it is out of any import."""
        import ctypes
        import time

        main = threading.main_thread().ident
        while self._pending and not self._raised and not self._quiet and not self._done.is_set():
            if not _importing(sys._current_frames().get(main)):
                self._raised = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), ctypes.py_object(Interrupted))
                return
            time.sleep(0.02)

    def _watch(self) -> None:
        r, w = self._pipe
        seen = 0
        while not self._done.is_set() or seen:
            try:
                data = os.read(r, 64)
            except OSError:
                break
            sigs = [b for b in data if b in STOP_SIGNALS]
            if not sigs:
                if self._done.is_set():
                    break
                continue
            seen += len(sigs)
            if self.signum is None:
                self.signum = sigs[0]
            if seen >= 2:
                self.finish_once(exit_code_of(self.signum))
                os._exit(exit_code_of(self.signum))
            self._cancel_engine()
            threading.Thread(target=self._deadline, name="scavenger-stop-deadline", daemon=True).start()
        for fd in (r, w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _cancel_engine(self) -> None:
        if self._cancel is None:
            return
        try:
            self._cancel()
        except Exception:  # noqa: BLE001 - best effort: the deadline still ends the process
            pass

    def _deadline(self) -> None:
        if self._done.wait(self.grace):
            return
        self.finish_once(exit_code_of(self.signum))
        os._exit(exit_code_of(self.signum))

    def finish_once(self, code: int) -> None:
        """Record the ending once (whichever of the main thread and the watcher gets here first)."""
        with self._finished:
            if self._did_finish:
                return
            self._did_finish = True
        try:
            self._finish(code)
        except Exception:  # noqa: BLE001 - nothing more can be done on the way out
            pass


# ------------------------------------------------------------------------------------ what the CLI records
def record_ending(result, out, code: int, status: str) -> int | None:
    """result.json, then the manifest (last): the exit code and how the job ended. Returns an exit code to use
    instead when result.json cannot be written."""
    from .. import errors
    from ..io import manifest
    from ..safe import bound

    result.status = status
    result.exit_code = code
    if status == "interrupted" and not result.message:
        result.message = f"interrupted (exit {code}): stopped before the end; outputs may be partial"
    if not out:
        return None
    try:
        result.write(out)
    except OSError as exc:
        print(f"scavenger {result.job}: cannot write result.json to {out}: {bound(str(exc))}", file=sys.stderr)
        return code or errors.EXIT_INTERNAL
    finally:
        manifest.finish(result.status, code, result.outputs)
    return None


def cancel_work(ctx) -> None:
    """Called from the stop watcher: cancel what the engine is running so the main thread gets control back."""
    eng = ctx.engine_open
    if eng is not None:
        eng.interrupt()
    spark = ctx._spark              # the job's session (opened by the job context), with or without an engine
    if spark is not None:
        try:
            spark.interruptAll()    # classic Spark and Spark Connect alike (no SparkContext needed)
        except Exception:  # noqa: BLE001 - a session already stopping
            pass
