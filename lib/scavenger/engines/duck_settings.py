"""DuckDB's settings from the environment: the memory limit (``SCAVENGER_DUCKDB_MEMORY``, default 60% of the
machine's memory), the thread count (``SCAVENGER_DUCKDB_THREADS``) and the spill directory
(``SCAVENGER_DUCKDB_TEMP``), each checked before any engine starts (UsageError, exit 2, naming the variable)."""
from __future__ import annotations

import math
import os
import re

from ..io import fs


def _machine_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def default_memory_limit() -> str:
    env = os.environ.get("SCAVENGER_DUCKDB_MEMORY")
    if env:
        return check_memory_setting(env)
    return f"{max(1, int(_machine_memory_bytes() * 0.6) >> 20)}MB"


MIN_MEMORY = 16 * 1000 ** 2    # 16MB as DuckDB reads it: below this DuckDB cannot run a single statement of a pass
_UNITS = {"": None, "B": 1, "K": 1000, "KB": 1000, "M": 1000 ** 2, "MB": 1000 ** 2, "G": 1000 ** 3,
          "GB": 1000 ** 3, "T": 1000 ** 4, "TB": 1000 ** 4, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30,
          "TIB": 1 << 40}


def check_memory_setting(text: str, name: str = "SCAVENGER_DUCKDB_MEMORY") -> str:
    """The memory limit ``text`` as DuckDB reads it ('8GB', '512MB', '2GiB'), or UsageError (exit 2) naming the
    variable and what it accepts: a positive number with a unit, at least 16MB and at most the machine's memory."""
    from ..errors import UsageError

    accepts = ("a size such as 8GB, 512MB or 2GiB (units KB, MB, GB, TB, KiB, MiB, GiB, TiB), at least 16MB and at "
               f"most the machine's memory ({_machine_memory_bytes() >> 20}MB)")
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS or _UNITS[unit] is None:
        raise UsageError(f"{name}={text!r} is not a memory size: expected {accepts}")
    size = float(m.group(1)) * _UNITS[unit]
    if not math.isfinite(size) or size < MIN_MEMORY or size > _machine_memory_bytes():
        raise UsageError(f"{name}={text!r} is out of range: expected {accepts}")
    return f"{m.group(1)}{unit}"


def max_threads() -> int:
    """The largest SCAVENGER_DUCKDB_THREADS accepted: 4 threads per core of this machine."""
    return 4 * (os.cpu_count() or 1)


def check_threads_setting(text: str, name: str = "SCAVENGER_DUCKDB_THREADS") -> int:
    """The thread count ``text``, or UsageError (exit 2): a whole number from 1 to 4x the machine's cores."""
    return _count(text, name, "threads")


def check_workers_setting(text: str, name: str = "SCAVENGER_WINDOW_WORKERS") -> int:
    """The worker processes of the --by-day windows (pipelines/window_pool.py), or UsageError (exit 2): a whole
    number from 1 (one window at a time) to 4x the machine's cores."""
    return _count(text, name, "worker processes")


def _count(text: str, name: str, what: str) -> int:
    from ..errors import UsageError

    value = str(text).strip()
    if not re.fullmatch(r"[0-9]+", value) or not 1 <= int(value) <= max_threads():
        raise UsageError(f"{name}={text!r}: expected a whole number of {what} from 1 to {max_threads()} "
                         f"(4 x the {os.cpu_count() or 1} core(s) of this machine)")
    return int(value)


def check_temp_setting(path: str, name: str = "SCAVENGER_DUCKDB_TEMP") -> str:
    """The spill directory ``path`` (created when missing, then a file written and removed in it), or UsageError
    (exit 2) naming the variable: DuckDB spills there only when memory runs short, too late to fail cleanly."""
    from ..errors import UsageError

    text = str(path)
    if not text.strip():
        raise UsageError(f"{name} is empty: expected a directory DuckDB can create and write spill files in")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{name}={text!r}: the path is not valid UTF-8") from None
    real = os.path.realpath(text)
    if any(real == d or real.startswith(d + os.sep) for d in ("/proc", "/sys", "/dev")):
        raise UsageError(f"{name}={text}: {real} is on a kernel filesystem, not a directory for spill files")
    try:
        os.makedirs(text, exist_ok=True)
        fs.probe_writable(text)
    except OSError as exc:
        raise UsageError(f"{name}={text}: cannot create and write spill files there "
                         f"({exc.strerror or type(exc).__name__}); expected a writable directory") from None
    return text


def check_environment() -> dict:
    """SCAVENGER_DUCKDB_MEMORY, _THREADS and _TEMP and SCAVENGER_WINDOW_WORKERS checked (UsageError, exit 2,
    naming the variable) before any engine starts; returns the settings that are set (a blank one counts as
    unset)."""
    checked = {}
    for name, check in (("SCAVENGER_DUCKDB_MEMORY", check_memory_setting),
                        ("SCAVENGER_DUCKDB_THREADS", check_threads_setting),
                        ("SCAVENGER_DUCKDB_TEMP", check_temp_setting),
                        ("SCAVENGER_WINDOW_WORKERS", check_workers_setting)):
        value = os.environ.get(name)
        if value is not None and value.strip():          # set but blank: unset, as always
            checked[name] = check(value, name)
    return checked


ROW_BYTES = 600   # DuckDB's peak memory per input row (logs and decisions) over a pass, measured at 4M events


def _limit_bytes(text: str) -> int:
    """Bytes of a DuckDB memory limit such as '14463MB', '8GB' or '2GiB' (0 when it does not parse)."""
    import re

    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)(I?B)?\s*", text.upper())
    if not m:
        return 0
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * scale)
