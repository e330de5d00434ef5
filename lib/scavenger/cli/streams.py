"""stdout and stderr whose reader may go away (``scavenger evaluate ... 2>&1 | head``): the first write that meets
a closed pipe points the stream's descriptor at /dev/null, and the job goes on to finish and write its outputs with
its own exit code (a BrokenPipeError used to end it as an internal error, exit 1)."""
from __future__ import annotations

import contextlib
import os
import sys


class PipeSafe:
    """A text stream that drops what it cannot deliver once its reader has gone."""

    def __init__(self, stream):
        self._stream = stream
        self._gone = False

    def _closed_pipe(self) -> None:
        self._gone = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())      # the interpreter's last flush finds a sink, not a pipe
            os.close(devnull)

    def write(self, text):
        if self._gone:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed_pipe()
            return len(text)

    def flush(self) -> None:
        if self._gone:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed_pipe()

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def pipe_safe():
    """sys.stdout and sys.stderr as :class:`PipeSafe` streams for the block (the originals restored after)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PipeSafe(saved[0]), PipeSafe(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
