"""``result.json``: the summary every job writes beside its tables (inputs, counts, timings, verdicts)."""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


@dataclass
class RunResult:
    """Accumulates what a job did; ``write`` puts it in ``<out>/result.json``."""

    job: str
    run_id: str = field(default_factory=new_run_id)
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    verdicts: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
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
        return _jsonable({
            "job": self.job, "run_id": self.run_id, "status": self.status, "exit_code": self.exit_code,
            "message": self.message, "started_at": self.started_at,
            "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "inputs": self.inputs, "outputs": self.outputs, "counts": self.counts,
            "timings_seconds": self.timings, "verdicts": self.verdicts, "summary": self.summary,
        })

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write atomically (temp file + rename) so a reader never sees half a file."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        target = out / "result.json"
        tmp = out / f".result.json.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, target)
        return target
