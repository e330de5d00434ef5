"""How a job ended, as the command line reports it: an exception classified into (exit code, status, message),
the one stderr line of an error, a stop request (exit 128 + signal), and a job refused before it started."""
from __future__ import annotations

import os
import sys
import traceback

from .. import errors


def _one_line(exc: BaseException) -> str:
    from ..safe import one_line

    text = str(exc).strip()
    return one_line(text) if text else type(exc).__name__


def _bounded(exc: BaseException) -> str:
    """An exception's message as shown and recorded: values cut, control characters escaped (safe.bound)."""
    from ..safe import bound

    return bound(str(exc))


def _refused(module, result, out, exc, debug) -> int:
    """A job refused before it started (prepare and the shared checks): the same classification as the job
    boundary; result.json is written only into an --out that already exists and passed its checks (``out`` None
    otherwise: a refused run creates nothing, and never writes into an input)."""
    code, result.status, result.message = _classify(exc, before_run=True)
    _say(module, code, _one_line(result.message), debug)
    result.exit_code = code
    try:
        from ..io import fs

        if out and fs.is_local(out) and os.path.isdir(fs.local_path(out)) and os.access(fs.local_path(out),
                                                                                        os.W_OK) \
                and _own_or_no_record(fs.local_path(out), module.NAME):
            result.write(out)
    except Exception:  # noqa: BLE001 - the refusal stands whether or not result.json can be written
        pass
    return code


def _own_or_no_record(out: str, job: str) -> bool:
    """Does ``out`` hold no result.json, or one of this job? A refused run never replaces another job's record
    (``report --out X --estimates X`` would have overwritten the evaluate run it was asked to read)."""
    from ..io import fs

    path = os.path.join(out, "result.json")
    if not os.path.exists(path):
        return True
    try:
        return fs.read_json(path).get("job") == job
    except (OSError, ValueError, AttributeError):
        return False


def _say(module, code: int, message: str, debug: bool) -> None:
    """The one stderr line of a job that ended with an error (the traceback with SCAVENGER_DEBUG=1)."""
    print(f"scavenger {module.NAME}: {'error' if code != errors.EXIT_INTERNAL else 'internal error'}: {message}",
          file=sys.stderr)
    if debug:
        traceback.print_exc()
    elif code == errors.EXIT_INTERNAL:
        print("  (set SCAVENGER_DEBUG=1 for the full traceback)", file=sys.stderr)


def _record_counts(result, args, counts) -> None:
    """A job stopped after the rows were read (a failed check, no estimator left): result.json keeps the row
    counts (rows in = used + quarantined) and names the quarantine the pass wrote (rows quarantined, or a
    quarantine table in this run's manifest)."""
    if not counts or result.counts:
        return
    from .shared_flags import quarantine_dir
    from ..io import manifest

    result.counts.update(counts)
    run = manifest.current()
    written = run is not None and any(str(t.get("name", "")).startswith("quarantine_") for t in run.tables)
    if written or any((c or {}).get("rows_quarantined") for c in counts.values() if isinstance(c, dict)):
        result.outputs.setdefault("quarantine", quarantine_dir(args))


def _interrupted(module, result, signum: int) -> int:
    """SIGTERM/SIGINT: exit 128 + the signal's number, recorded as "interrupted"."""
    import signal

    from .lifecycle import exit_code_of

    name = signal.Signals(signum).name
    result.status = "interrupted"
    result.message = f"interrupted by {name}: stopped before the end; outputs may be partial (see _manifest.json)"
    print(f"scavenger {module.NAME}: interrupted by {name} (exit {exit_code_of(signum)})", file=sys.stderr)
    return exit_code_of(signum)


def _classify(exc: BaseException, before_run: bool = False) -> tuple[int, str, str]:
    """(exit code, status, message) of an exception at the job boundary: running out of memory is the user's
    setting to raise (exit 2), not an internal error; so is a path this process may not read (permission denied),
    and, before the job starts (``before_run``: the checks of the inputs), any path that cannot be listed or read,
    or that holds bytes that are not UTF-8."""
    import errno as _errno

    from .summary import memory_advice

    if isinstance(exc, errors.ScavengerError):
        code = exc.exit_code
        status = "data_check_failed" if code == errors.EXIT_DATA_CHECK else \
            "bad_arguments" if code == errors.EXIT_USAGE else "internal_error"
        return code, status, _bounded(exc)
    advice = memory_advice(exc)
    if advice:
        return errors.EXIT_USAGE, "out_of_memory", _bounded(advice)
    if isinstance(exc, OSError) and (before_run or exc.errno in (_errno.EACCES, _errno.EPERM)):
        where = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
        return errors.EXIT_USAGE, "bad_arguments", _bounded(f"cannot read or write a path given: {where} (check "
                                                            f"the path and its permissions)")
    if ("Map keys must be unique" in str(exc) and type(exc).__module__.startswith(("duckdb", "_duckdb"))) or \
            "DUPLICATED_MAP_KEY" in str(exc):
        # a Parquet map that repeats a key is quarantined (CONTEXT_DUPLICATE_KEY); a context written as a list of
        # (key, value) pairs is made a map as it is read, which neither engine does with a key twice
        return errors.EXIT_DATA_CHECK, "data_check_failed", _bounded(
            "the context of some row, written as a list of (key, value) pairs, holds the same key twice, so it "
            "cannot be read as a map: write each key once per row (or write the column as a Parquet map, whose "
            "rows with a repeated key are quarantined as CONTEXT_DUPLICATE_KEY)")
    if ("Map keys can not be NULL" in str(exc) and type(exc).__module__.startswith(("duckdb", "_duckdb"))) or \
            "NULL_MAP_KEY" in str(exc):
        # the same for a pair whose key is null (or an empty list pair): no map holds a null key
        return errors.EXIT_DATA_CHECK, "data_check_failed", _bounded(
            "the context of some row, written as a list of (key, value) pairs, holds a pair with a null key (or an "
            "empty pair), so it cannot be read as a map: give every pair a key, or leave the pair out")
    if before_run and isinstance(exc, UnicodeError):
        return errors.EXIT_USAGE, "bad_arguments", _bounded(f"a path or value given is not valid UTF-8: {exc}")
    return errors.EXIT_INTERNAL, "internal_error", f"{type(exc).__name__}: {_one_line(exc)}"

