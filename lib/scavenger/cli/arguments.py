"""The checks every command shares, run by ``cli`` before a command's own prepare (UsageError, exit 2, naming the
flag): path flags that may not be empty or hold bytes that are not UTF-8, an --out (and --stats-dir) that can be
written and lies outside the inputs, seeds, day spans and finite numbers."""
from __future__ import annotations

import math
import os

from ..errors import UsageError


# -- checks every command shares (cli._check_arguments runs them before a command's own prepare) ---------------

# path flags that may not be empty: ('' is the current directory to the filesystem, so `--out ''` would replace
# ./adc, ./estimates ... of wherever the job was started)
PATH_FLAGS = (("out", "--out"), ("logs", "--logs"), ("decisions", "--decisions"), ("stats_dir", "--stats-dir"),
              ("obd_dir", "--obd-dir"))
OUTPUT_FLAGS = (("out", "--out"), ("stats_dir", "--stats-dir"))
INPUT_FLAGS = (("logs", "--logs"), ("decisions", "--decisions"))
KERNEL_FILESYSTEMS = ("/proc", "/sys")     # accept no files: a directory there cannot hold outputs or spill files


def check_text_args(args, flags: dict | None = None) -> None:
    """Every string flag valid UTF-8 (UsageError naming the flag): a path may hold other bytes, but no engine,
    result.json or manifest can carry them. ``flags`` maps an argument's dest to the flag typed (--from)."""
    flags = flags or {}
    for dest, value in sorted(vars(args).items()):
        if dest.startswith("_"):
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, str):
                continue
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                flag = flags.get(dest, "--" + dest.replace("_", "-"))
                raise UsageError(f"{flag} {item!r}: holds bytes that are not UTF-8; rename the path (or give "
                                 f"another value) in UTF-8") from None


def _on_kernel_filesystem(path: str) -> str | None:
    real = os.path.realpath(path)
    return real if any(real == d or real.startswith(d + os.sep) for d in KERNEL_FILESYSTEMS) else None


def check_out(uri: str, flag: str = "--out") -> str:
    """The one check of an output location, for every command (UsageError, exit 2): not empty, a known scheme, not
    an existing file, and for a local path really writable: not on /proc or /sys, and a file can be created (and is
    removed at once) in the directory itself or its nearest existing ancestor. Nothing is created. Returns the
    normalized URI."""
    from ..io import fs

    if uri is None or not str(uri).strip():
        raise UsageError(f"{flag} is empty: give an output directory (use . for the current directory)")
    normalized = fs.check_writable(uri, flag)
    if not fs.is_local(uri):
        return normalized
    path = fs.local_path(uri)
    kernel = _on_kernel_filesystem(path)
    if kernel:
        raise UsageError(f"{flag} {uri}: {kernel} is on a kernel filesystem ({', '.join(KERNEL_FILESYSTEMS)}) "
                         f"that holds no files; choose a directory on a disk")
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe) or "."
        if parent == probe:
            break
        probe = parent
    try:
        fs.probe_writable(probe or ".")
    except OSError as exc:
        raise UsageError(f"{flag} {uri}: cannot write there ({probe}: {exc.strerror or type(exc).__name__}); "
                         f"choose a writable directory") from None
    return normalized


def check_out_outside_inputs(args) -> None:
    """--out and --stats-dir neither equal to nor inside --logs or --decisions (local paths, symbolic links
    resolved): a job writing there would change its own input for every later read (UsageError, exit 2).
    An input inside --out is fine."""
    from ..io import fs

    for out_dest, out_flag in OUTPUT_FLAGS:
        out = getattr(args, out_dest, None)
        if not out or not fs.is_local(out):
            continue
        real_out = os.path.realpath(fs.local_path(out))
        for in_dest, in_flag in INPUT_FLAGS:
            src = getattr(args, in_dest, None)
            if not src or not fs.is_local(src):
                continue
            real_in = os.path.realpath(fs.local_path(src))
            if real_out == real_in or real_out.startswith(real_in.rstrip(os.sep) + os.sep):
                where = "is the same directory as" if real_out == real_in else "is inside"
                raise UsageError(f"{out_flag} {out} {where} {in_flag} {src}: writing there would change the input "
                                 f"of this and every later run; choose a directory outside it")


def check_job_paths(args) -> None:
    """The path checks every command shares: no empty path flag, --out (and --stats-dir) really writable and
    outside the inputs. Run by cli.main before the command's own prepare."""
    for dest, flag in PATH_FLAGS:
        value = getattr(args, dest, None)
        if value is not None and not str(value).strip():
            raise UsageError(f"{flag} is empty: give a path (use . for the current directory)")
    from ..io import fs

    for dest, flag in INPUT_FLAGS:
        value = getattr(args, dest, None)
        if not value or not fs.is_local(value):
            continue
        kernel = _on_kernel_filesystem(fs.local_path(value))
        if kernel:
            raise UsageError(f"{flag} {value}: {kernel} is on a kernel filesystem ({', '.join(KERNEL_FILESYSTEMS)}), "
                             f"not a directory of data files")
        try:                                  # a partition (dt=...) that links there: listing it never ends well
            linked = [e.path for e in os.scandir(fs.local_path(value)) if e.is_symlink()]
        except OSError:
            linked = []                       # not a directory, or unreadable: the input check says which
        for path in linked:
            kernel = _on_kernel_filesystem(path)
            if kernel:
                raise UsageError(f"{flag} {value}: {path} links to {kernel}, on a kernel filesystem "
                                 f"({', '.join(KERNEL_FILESYSTEMS)}); remove the link")
    for dest, flag in OUTPUT_FLAGS:
        if getattr(args, dest, None) is not None:
            check_out(getattr(args, dest), flag)
    check_out_outside_inputs(args)


MAX_SEED = 2 ** 64 - 1


def parse_seed(value, flag: str = "--seed") -> int:
    """A seed as an exact integer (never through float, which would round a long one to another seed): 0 ..
    2**64 - 1, what numpy's SeedSequence and the generator's hash take (UsageError otherwise)."""
    text = str(value).strip()
    if not text.isdigit() or not text.isascii():
        raise UsageError(f"{flag} expects a whole number from 0 to {MAX_SEED}; got {value!r}")
    seed = int(text)
    if seed > MAX_SEED:
        raise UsageError(f"{flag} {value} is too large: at most {MAX_SEED}")
    return seed


MAX_ID_LENGTH = 1_000_000   # --max-id-length at most this: a limit is there to bound a row's cost


def check_id_length(value) -> int:
    """--max-id-length as a whole number in 1..MAX_ID_LENGTH (UsageError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID_LENGTH:
        raise UsageError(f"--max-id-length must be a whole number in 1..{MAX_ID_LENGTH:,}; got {value!r}")
    return value


def check_days_fit(start, days: int, flag: str = "--days") -> None:
    """The last day of ``days`` days from ``start`` (a date or YYYY-MM-DD) is a date (at most 9999-12-31)."""
    import datetime as _dt

    first = start if isinstance(start, _dt.date) else _dt.date.fromisoformat(str(start))
    try:
        first + _dt.timedelta(days=int(days) - 1)
    except (OverflowError, ValueError):
        raise UsageError(f"{flag} {days}: {days} days from {first} end after 9999-12-31, the last date there is; "
                         f"give fewer days or an earlier start") from None


def finite_number(value, flag: str, low: float | None = None, high: float | None = None):
    """``value`` (None passes) finite and within [low, high] (UsageError naming the flag)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{flag} expects a number; got {value!r}") from None
    if not math.isfinite(number) or (low is not None and number < low) or (high is not None and number > high):
        span = f" in [{low:g}, {high:g}]" if low is not None and high is not None else \
            f" >= {low:g}" if low is not None else f" <= {high:g}" if high is not None else ""
        raise UsageError(f"{flag} must be a finite number{span}; got {value}")
    return value


def check_adc_option(adc: str | None, method: str, table=None) -> None:
    """--adc with --adc-method, for evaluate and train alike (UsageError, exit 2): with estimated ADCs a method
    ``scavenger adc`` estimates; with --adc PATH a readable ADC table that holds ``method`` with one positive
    coefficient per position 1..n (``table``: that table, already read). ADC numbers (train's --adc 1,0.6,...) are
    parsed where they are used."""
    from ..estimators.attention_decay import METHODS
    from ..estimators.adc_table import check_adc_method_rows

    if adc in (None, "", "estimate"):
        if method not in METHODS:
            raise UsageError(f"--adc-method must be one of {', '.join(METHODS)} when ADCs are estimated; got "
                             f"{method!r}")
        return
    from ..estimators.families import read_adc_table

    table = read_adc_table(adc) if table is None else table
    held = sorted(str(m) for m in table["method"].dropna().unique())
    if method not in held:
        raise UsageError(f"--adc-method {method!r}: the ADC table {adc} holds the method(s) {', '.join(held)}")
    check_adc_method_rows(adc, method, table[table["method"].astype(str) == method])
