"""Running a command cold and measuring it: wall seconds and the peak resident memory of its whole process tree
(the Python process and any JVM it starts), sampled from /proc every 0.2 s."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def tree_rss_mb(root: int) -> float:
    """The resident memory of a process and all its descendants now."""
    total, todo, seen = 0.0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss_mb(pid)
        todo += _children(pid)
    return total


@dataclass
class Run:
    cmd: list
    returncode: int = 0
    seconds: float = 0.0
    peak_mb: float = 0.0
    stdout: str = ""
    stderr: str = ""
    extra: dict = field(default_factory=dict)

    def json_line(self) -> dict:
        """The last JSON line the command printed (the reference queries print one)."""
        for line in reversed(self.stdout.strip().splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return {}

    def tail(self, n: int = 2000) -> str:
        return (self.stdout + self.stderr)[-n:]


def run(cmd: list, env: dict | None = None, cwd: str | None = None, timeout: float | None = None) -> Run:
    """Run ``cmd`` to the end; its wall time and the peak RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, cwd=cwd)
    peak = [0.0]
    done = threading.Event()

    def sample():
        # every 20 ms for the first 2 s (a short command ends between two 0.2 s samples), then every 0.2 s; the
        # root process's own high-water mark (VmHWM) bounds the peak from below when a sample misses it
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss_mb(proc.pid), _rss_mb(proc.pid, "VmHWM"))
            done.wait(0.02 if time.perf_counter() - start < 2.0 else 0.2)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        t.join()
    return Run(cmd=cmd, returncode=proc.returncode, seconds=time.perf_counter() - start, peak_mb=peak[0],
               stdout=out, stderr=err)
