"""``result.json``: the summary every job writes beside its tables (which job and window, inputs, counts, timings,
verdicts): what a later run into the same --out reads to tell its own output from another's."""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            value = value.item()
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rename_exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Build a whole directory, then commit it as ``target`` at once (temp dir + rename).

    Yields a hidden, empty sibling directory (``.<name>.tmp-<token>``); write every file of the table there. On
    success it replaces ``target``: swapped in one step where the OS can (Linux renameat2), otherwise the old
    directory is renamed aside and the new one renamed in, so a reader (or a process killed at any moment) finds
    the old complete directory, the new complete one, or -- in the instant between those two renames -- none;
    never a half-written one. On an exception the temp directory is removed and ``target`` is left untouched.
    Leftovers of a killed process are hidden siblings (``.<name>.tmp-*``/``.<name>.old-*``) that readers skip.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:12]
    tmp = target.parent / f".{target.name}.tmp-{token}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.is_dir() and _rename_exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)   # now holds the previous version
        return
    old = target.parent / f".{target.name}.old-{token}"
    if target.exists() or target.is_symlink():
        os.replace(target, old)
    os.replace(tmp, target)
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    elif old.exists() or old.is_symlink():
        old.unlink()


MAX_VERDICTS = 1000


def _capped(verdicts) -> tuple[list, int]:
    """At most MAX_VERDICTS rows, failures then warnings then the rest, each group in its order; and how many
    were left out."""
    rows = list(verdicts or [])
    if len(rows) <= MAX_VERDICTS:
        return rows, 0
    rank = {"fail": 0, "warn": 1}
    order = sorted(range(len(rows)), key=lambda i: (rank.get(rows[i].get("verdict") if isinstance(rows[i], dict)
                                                              else None, 2), i))
    keep = sorted(order[:MAX_VERDICTS])
    return [rows[i] for i in keep], len(rows) - MAX_VERDICTS


@dataclass
class RunResult:
    """Accumulates what a job did; ``write`` puts it in ``<out>/result.json``."""

    job: str
    run_id: str = field(default_factory=new_run_id)
    window: dict = field(default_factory=dict)     # the window flags of the run (cli/arguments.job_window)
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    verdicts: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    status: str = "running"
    exit_code: int | None = None
    message: str | None = None
    started_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat())

    @contextlib.contextmanager
    def timed(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - start, 3)

    def to_dict(self) -> dict:
        """The JSON of result.json. Every string is bounded (safe.bound: values cut to a few hundred characters
        with their length stated, control characters escaped) and at most ``MAX_VERDICTS`` verdict rows are kept
        (failures first; the full list is the validation table)."""
        from .safe import bound_json

        verdicts, omitted = _capped(self.verdicts)
        out = {
            "job": self.job, "window": self.window, "run_id": self.run_id, "status": self.status,
            "exit_code": self.exit_code,
            "message": self.message, "started_at": self.started_at,
            "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "engine": self.engine, "inputs": self.inputs, "outputs": self.outputs, "counts": self.counts,
            "timings_seconds": self.timings, "verdicts": verdicts, "summary": self.summary,
        }
        if omitted:
            out["verdicts_omitted"] = omitted
        return bound_json(_jsonable(out))

    def write(self, out_dir: str | os.PathLike) -> str:
        """Write ``<out>/result.json`` at once (a hidden temporary file, then a move), on any URI pyarrow.fs
        opens, so a reader never sees half a file."""
        from .io import fs

        target = fs.join(str(out_dir), "result.json")
        fs.write_bytes(target, (json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n").encode("utf-8"))
        return target
