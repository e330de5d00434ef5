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

from .. import errors
from .command_modules import COMMAND_MODULES
from .job_context import JobContext
from .job_endings import (
    _bounded,
    _classify,
    _interrupted,
    _one_line,
    _record_counts,
    _refused,
    _say,
)
from ..result import RunResult


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so the job reports exit 2 uniformly."""

    def error(self, message):  # noqa: D401
        from .arguments import with_suggestion

        exc = errors.UsageError(with_suggestion(message, self))
        exc.prog = self.prog           # "scavenger evaluate: error: argument --gate: ...", as argparse words it
        raise exc


def _load_commands():
    modules = []
    for name in COMMAND_MODULES:
        try:
            modules.append(importlib.import_module(f"scavenger.cli.{name}_command"))
        except ModuleNotFoundError as exc:
            if exc.name != f"scavenger.cli.{name}_command":
                raise
    return modules


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("spark")
    group.add_argument("--master", default=None,
                       help="Spark master URL (default: whatever spark-submit/defaults say, else local[*])")
    group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                       help="extra Spark configuration; repeatable; wins over built-in defaults")


def build_parser(command: str | None = "*") -> argparse.ArgumentParser:
    """The parser; ``command``: the subcommand whose flags are built ("*": every one; None: none, for the list
    of commands alone, so that ``scavenger --help`` reads no registry and loads no plugin)."""
    parser = _Parser(prog="scavenger", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in _load_commands():
        p = sub.add_parser(module.NAME.replace("_", "-"), help=module.HELP, description=module.HELP)
        if command not in ("*", module.NAME.replace("_", "-")):
            continue
        module.add_arguments(p)
        add_spark_arguments(p)
        p.add_argument("--run-id", default=None, help="id recorded in result.json and quarantine rows")
        p.add_argument("--overwrite", action="store_true",
                       help="replace what --out holds even when another job, or this job for another window, wrote "
                            "it (without: exit 2; a re-run of the same job and window replaces its output)")
        p.set_defaults(_module=module, _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .streams import pipe_safe

    with pipe_safe():          # a reader that goes away (| head) never turns a job into an internal error
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("SCAVENGER_DEBUG") == "1"
    try:
        parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
        if not argv or argv[0] in ("-h", "--help"):
            parser.print_help()
            return errors.EXIT_OK if argv else errors.EXIT_USAGE
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help of a subcommand
            return int(exc.code or 0)
    except errors.ScavengerError as exc:
        print(f"{getattr(exc, 'prog', 'scavenger')}: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code

    module = args._module
    from .arguments import job_window

    result = RunResult(job=module.NAME, window=job_window(args))
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
    from . import shared_flags as C
    from ..engines import check_environment

    C.check_text_args(args, _flags(args))
    C.check_job_paths(args)
    check_environment(getattr(args, "engine", "auto"))


def _run(module, args, ctx, prepared, out, guard, debug) -> int:
    """The job itself and how it ended (status, message, exit code), stop requests included."""
    from . import lifecycle
    from ..io import manifest

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
    from ..safe import bound

    for line in lines:
        print(bound(line))


def run_job(name: str, argv: list[str]) -> int:
    """Entry used by ``jobs/<name>.py`` under spark-submit."""
    return main([name, *argv])


if __name__ == "__main__":
    sys.exit(main())
