"""The checks every command shares, run by ``cli`` before a command's own prepare (UsageError, exit 2, naming the
flag): path flags that may not be empty or hold bytes that are not UTF-8, an --out (and --stats-dir) that can be
written and lies outside the inputs, seeds, day spans and finite numbers."""
from __future__ import annotations

import math
import os

from ..errors import UsageError
from ..pipelines.options import MAX_ID_LENGTH, check_adc_option, check_id_length  # noqa: F401 - shared with the API


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
    check_out_owner(args)


# -- whose output --out holds ---------------------------------------------------------------------------------
WINDOW_FLAGS = (("date_from", "--from"), ("date_to", "--to"), ("score_from", "--score-from"),
                ("score_to", "--score-to"), ("dt", "--dt"), ("start_date", "--start-date"), ("days", "--days"))


def job_window(args) -> dict:
    """The window a run covers, as its flags give it ({"--from": "2026-01-01", ...}; dates as YYYY-MM-DD, a flag
    left out as None): recorded in result.json, and what tells a re-run of a job from a run of another window."""
    import datetime as _dt

    window = {}
    for dest, flag in WINDOW_FLAGS:
        if hasattr(args, dest):
            value = getattr(args, dest)
            try:
                value = _dt.date.fromisoformat(str(value).strip()).isoformat()
            except ValueError:
                value = None if value is None else str(value)
            window[flag] = value
    return window


def _recorded_window(record: dict) -> dict | None:
    """The window of a result.json: its own record, else (written before it had one) --from/--to of its inputs;
    None when it says neither."""
    if isinstance(record.get("window"), dict):
        return record["window"]
    inputs = record.get("inputs") if isinstance(record.get("inputs"), dict) else {}
    if "from" in inputs or "to" in inputs:
        return {"--from": inputs.get("from"), "--to": inputs.get("to")}
    return None


def _shown(window: dict | None) -> str:
    given = {k: v for k, v in (window or {}).items() if v is not None}
    return "window " + " ".join(f"{k} {v}" for k, v in given.items()) if given else "no window flags"


def _also_an_input(args, out: str) -> bool:
    """--out also given to another flag (``report --out X --estimates X``): the command's own check refuses it, saying
    why (an input directory), better than "holds the output of"."""
    from ..io import fs

    def same(value) -> bool:
        if fs.is_local(out) and fs.is_local(value):
            return os.path.realpath(fs.local_path(value)) == os.path.realpath(fs.local_path(out))
        return str(value).rstrip("/") == str(out).rstrip("/")

    return any(isinstance(getattr(args, d, None), str) and getattr(args, d).strip() and same(getattr(args, d))
               for d in INPUT_PATH_DESTS)


# the flags that name something a job reads (report's tables, train's eligibility and truth, ...)
INPUT_PATH_DESTS = ("logs", "decisions", "stats_dir", "adc", "estimates", "diagnostics", "validation", "history",
                    "root", "ground_truth", "eligibility", "truth", "obd_dir")


def check_out_owner(args) -> None:
    """--out holding another job's output, or the same job's for another window (its result.json says whose), is
    refused (UsageError, exit 2) unless --overwrite: the run would replace those tables and result.json. A re-run
    of the same job and window replaces its own output silently (an Airflow task re-run of a day passes the same
    --out). An --out without result.json is no run's output: nothing to ask."""
    from ..io import fs

    module, out = getattr(args, "_module", None), getattr(args, "out", None)
    if module is None or not out or getattr(args, "overwrite", False) or _also_an_input(args, out):
        return
    try:
        path = fs.join(str(out), "result.json")
        record = fs.read_json(path) if fs.exists(path) else None
    except Exception:  # noqa: BLE001 - an unreadable record is no owner to protect (the run replaces it)
        record = None
    if not isinstance(record, dict) or not record.get("job"):
        return
    job, mine = module.NAME, job_window(args)
    theirs = _recorded_window(record)
    same_window = theirs is None or {k: theirs.get(k) for k in mine} == mine
    if record["job"] == job and same_window:
        return
    whose = f"`scavenger {record['job']}`" + (f" ({_shown(theirs)})" if theirs is not None else "")
    mine_shown = f"this `scavenger {job}` ({_shown(mine)})"
    raise UsageError(f"--out {out} holds the output of {whose}, run {record.get('started_at') or '-'}; {mine_shown} "
                     f"would replace its tables and result.json: give another --out, or --overwrite to replace it")


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


# -- "did you mean" for what argparse refuses ------------------------------------------------------------------
def with_suggestion(message: str, parser) -> str:
    """argparse's message with the close choices (an unknown command, --engine duck) or flags (--form) named."""
    import re

    from ..errors import did_you_mean

    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if m:
        return message + did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
    m = re.match(r"unrecognized arguments: (.*)", message)
    if m:
        flags = set()
        for p in _parsers(parser):
            flags |= {o for o in p._option_string_actions if o.startswith("--")}
        bare = {f[2:]: f for f in flags}      # compared without the dashes every flag shares
        hints = []
        for word in m.group(1).split():
            name = word.split("=")[0]
            if name.startswith("--") and name not in flags:
                close = did_you_mean(name[2:], sorted(bare))
                for b in sorted(bare, key=len, reverse=True):
                    close = close.replace(f"'{b}'", f"'{bare[b]}'")
                hints += [f"{name}{close}"] if close else []
        return message + ("; " + "; ".join(hints) if hints else "")
    return message


def _parsers(parser) -> list:
    """``parser`` and every subcommand parser under it (whose flags were built)."""
    import argparse

    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _parsers(sub)
    return out

