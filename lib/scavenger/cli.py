"""``scavenger`` command line: one subcommand per job; ``spark-submit jobs/<name>.py`` runs the same code.

Exit codes: 0 ok, 1 internal error, 2 bad arguments or config, 3 a data check failed.
A wrong path or malformed flag gives one clear line on stderr, never a Java stack trace
(set ``SCAVENGER_DEBUG=1`` for the full traceback).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from dataclasses import dataclass, field

from . import errors
from .commands import COMMAND_MODULES
from .result import RunResult


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so the job reports exit 2 uniformly."""

    def error(self, message):  # noqa: D401
        raise errors.UsageError(f"{self.prog}: {message}")


@dataclass
class JobContext:
    args: argparse.Namespace
    result: RunResult
    _spark: object = field(default=None, repr=False)
    _engine: object = field(default=None, repr=False)

    @property
    def spark(self):
        if self._spark is None:
            from .progress import console_progress_conf
            from .session import get_spark, parse_conf_pairs

            conf = {**console_progress_conf(), **parse_conf_pairs(getattr(self.args, "conf", None))}
            self._spark = get_spark(app_name=f"scavenger-{self.result.job}",
                                    master=getattr(self.args, "master", None), conf=conf,
                                    quiet=not getattr(self.args, "verbose", False))
        return self._spark

    def engine(self, inputs):
        """The engine for these inputs (--engine and the auto rule), recorded in result.json."""
        if self._engine is None:
            from .engines import choose, open_engine

            hint = "--master or --conf given" if getattr(self.args, "master", None) or \
                getattr(self.args, "conf", None) else None
            if getattr(self.args, "catalog", None):
                hint = "--catalog given (catalog tables are Spark's)"
            name, why = choose(getattr(self.args, "engine", "auto"), inputs.all(), hint)
            self._engine = open_engine(name, why, spark=self.spark if name == "spark" else None)
            self.result.engine = self._engine.info.to_dict()
            from .commands._common import check_catalog

            check_catalog(self.args, self, self._engine)
        return self._engine

    def output_engine(self, out: str):
        """The engine of a job that writes ``out`` without reading logs (generate, ingest-obd, demo): --engine and
        the auto rule with the output as the location (DuckDB for a local path), recorded in result.json."""
        if self._engine is None:
            from .engines import choose_for_output, open_engine

            hint = "--master or --conf given" if getattr(self.args, "master", None) or \
                getattr(self.args, "conf", None) else None
            name, why = choose_for_output(getattr(self.args, "engine", "auto"), out, hint)
            self._engine = open_engine(name, why, spark=self.spark if name == "spark" else None)
            self.result.engine = self._engine.info.to_dict()
        return self._engine

    @property
    def engine_open(self):
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            try:
                self._engine.close()
            except Exception:  # noqa: BLE001 - best effort at the end of a job
                pass


def _load_commands():
    modules = []
    for name in COMMAND_MODULES:
        try:
            modules.append(importlib.import_module(f"scavenger.commands.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"scavenger.commands.{name}":
                raise
    return modules


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("spark")
    group.add_argument("--master", default=None,
                       help="Spark master URL (default: whatever spark-submit/defaults say, else local[*])")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark configuration; repeatable; wins over built-in defaults")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="scavenger", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in _load_commands():
        p = sub.add_parser(module.NAME.replace("_", "-"), help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        add_spark_arguments(p)
        p.add_argument("--run-id", default=None, help="id recorded in result.json and quarantine rows")
        p.set_defaults(_module=module, _parser=p)
    return parser


def _one_line(exc: BaseException) -> str:
    from .safe import one_line

    text = str(exc).strip()
    return one_line(text) if text else type(exc).__name__


def _bounded(exc: BaseException) -> str:
    """An exception's message as shown and recorded: values cut, control characters escaped (safe.bound)."""
    from .safe import bound

    return bound(str(exc))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("SCAVENGER_DEBUG") == "1"
    try:
        parser = build_parser()
        if not argv or argv[0] in ("-h", "--help"):
            parser.print_help()
            return errors.EXIT_OK if argv else errors.EXIT_USAGE
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help of a subcommand
            return int(exc.code or 0)
    except errors.ScavengerError as exc:
        print(f"scavenger: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code

    module = args._module
    result = RunResult(job=module.NAME)
    ctx = JobContext(args=args, result=result)
    out = getattr(args, "out", None)
    code = errors.EXIT_OK
    out_checked = False
    try:
        # every check a user can fail (flags, dates, names, paths, --out, the engine's environment) before an
        # engine starts or --out is touched: the shared ones here, the command's own in its prepare
        _check_arguments(args)
        out_checked = True
        if args.run_id:
            result.run_id = args.run_id
        prepared = module.prepare(args, ctx) if hasattr(module, "prepare") else None
    except Exception as exc:  # noqa: BLE001 - the job boundary, before the job: classified as in _run
        return _refused(module, result, out if out_checked else None, exc, debug)
    from . import lifecycle

    guard = lifecycle.StopGuard(finish=lambda c: lifecycle.record_ending(result, out, c, "interrupted"),
                                cancel=lambda: lifecycle.cancel_work(ctx))
    with guard:
        try:
            code = _run(module, args, ctx, prepared, out, guard, debug)
        except lifecycle.Interrupted as exc:      # a stop request while another ending was being handled
            code = _interrupted(module, result, exc.signum or guard.signum)
        guard.quiet()
        if result.status == "interrupted":
            guard.finish_once(code)               # recorded before the engine is closed (Spark may take a while)
        ctx.close()
        code = lifecycle.record_ending(result, out, code, result.status) or code
    _report(module, args, result)
    return code


def _flags(args) -> dict:
    """dest -> the flag a user typed (--from for date_from) of the parsed subcommand."""
    parser = getattr(args, "_parser", None)
    names = {}
    for action in getattr(parser, "_actions", []):
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs:
            names[action.dest] = longs[0]
    return names


def _check_arguments(args) -> None:
    """The checks every command shares (UsageError, exit 2): flag values that are not valid UTF-8 (bytes a path may
    hold but no engine can), empty or unusable paths, --out (and --stats-dir) writable and outside the inputs, and
    the engine settings of the environment."""
    from .commands import _common as C
    from .engines import check_environment

    C.check_text_args(args, _flags(args))
    C.check_job_paths(args)
    check_environment(getattr(args, "engine", "auto"))


def _refused(module, result, out, exc, debug) -> int:
    """A job refused before it started (prepare and the shared checks): the same classification as the job
    boundary; result.json is written only into an --out that already exists and passed its checks (``out`` None
    otherwise: a refused run creates nothing, and never writes into an input)."""
    code, result.status, result.message = _classify(exc, before_run=True)
    _say(module, code, _one_line(result.message), debug)
    result.exit_code = code
    try:
        from .io import fs

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
    from .io import fs

    path = os.path.join(out, "result.json")
    if not os.path.exists(path):
        return True
    try:
        return fs.read_json(path).get("job") == job
    except (OSError, ValueError, AttributeError):
        return False


def _run(module, args, ctx, prepared, out, guard, debug) -> int:
    """The job itself and how it ended (status, message, exit code), stop requests included."""
    from . import lifecycle
    from .io import manifest

    result = ctx.result
    code = errors.EXIT_OK
    try:
        if out:
            # say "running" before touching any output: a run killed midway must not leave the previous run's
            # "ok" (or its manifest) beside tables it may already have replaced
            try:
                result.write(out)
            except OSError:
                pass  # reported at the end if it still fails
            manifest.begin(out, result.run_id, module.NAME)
        with result.timed("total"):
            if hasattr(module, "prepare"):
                module.run(args, ctx, prepared)
            else:
                module.run(args, ctx)
        result.status = "ok"
    except lifecycle.Interrupted as exc:
        code = _interrupted(module, result, exc.signum or guard.signum)
    except KeyboardInterrupt:                 # SIGINT delivered before the guard was in place
        import signal

        code = _interrupted(module, result, signal.SIGINT)
    except errors.ScavengerError as exc:
        if guard.signum is not None:          # an engine call cancelled by the stop request
            code = _interrupted(module, result, guard.signum)
        else:
            code = exc.exit_code
            result.status = "data_check_failed" if code == errors.EXIT_DATA_CHECK else "bad_arguments"
            result.message = _bounded(exc)
            verdicts = getattr(exc, "verdicts", None)
            if verdicts:
                result.verdicts = verdicts
            _record_counts(result, args, getattr(exc, "counts", None))
            print(f"scavenger {module.NAME}: error: {result.message}", file=sys.stderr)
            if debug:
                traceback.print_exc()
    except Exception as exc:  # noqa: BLE001 - the job boundary
        if guard.signum is not None:
            code = _interrupted(module, result, guard.signum)
        else:
            code, result.status, result.message = _classify(exc)
            _say(module, code, result.message, debug)
    return code


def _say(module, code: int, message: str, debug: bool) -> None:
    """The one stderr line of a job that ended with an error (the traceback with SCAVENGER_DEBUG=1)."""
    print(f"scavenger {module.NAME}: {'error' if code != errors.EXIT_INTERNAL else 'internal error'}: {message}",
          file=sys.stderr)
    if debug:
        traceback.print_exc()
    elif code == errors.EXIT_INTERNAL:
        print("  (set SCAVENGER_DEBUG=1 for the full traceback)", file=sys.stderr)


def _record_counts(result, args, counts) -> None:
    """A data check that failed after the rows were read: result.json keeps the row counts (rows in = used +
    quarantined) and names the quarantine the pass wrote."""
    if not counts or result.counts:
        return
    from .commands._common import quarantine_dir

    result.counts.update(counts)
    if any((c or {}).get("rows_quarantined") for c in counts.values() if isinstance(c, dict)):
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
    if "Map keys must be unique" in str(exc) and type(exc).__module__.startswith(("duckdb", "_duckdb")):
        return errors.EXIT_DATA_CHECK, "data_check_failed", _bounded(
            "a map column of the input (context) holds the same key twice in one row, which DuckDB's Parquet "
            "reader refuses for the whole file: write each key once per row (the writer's map builder), or run "
            "with --engine spark")
    if before_run and isinstance(exc, UnicodeError):
        return errors.EXIT_USAGE, "bad_arguments", _bounded(f"a path or value given is not valid UTF-8: {exc}")
    return errors.EXIT_INTERNAL, "internal_error", f"{type(exc).__name__}: {_one_line(exc)}"


def _report(module, args, result) -> None:
    """The run summary on stdout (or result.json with --json)."""
    import json

    if getattr(args, "json", False):
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    from .summary import summary_lines

    try:
        lines = summary_lines(result)
    except Exception as exc:  # noqa: BLE001 - the summary never changes how a job ended
        lines = [f"scavenger {result.job}: {result.status} (summary unavailable: {type(exc).__name__}; "
                 f"see result.json)"]
    from .safe import bound

    for line in lines:
        print(bound(line))


def run_job(name: str, argv: list[str]) -> int:
    """Entry used by ``jobs/<name>.py`` under spark-submit."""
    return main([name, *argv])


if __name__ == "__main__":
    sys.exit(main())
