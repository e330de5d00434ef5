"""The command line's runtime: ``scavenger <command>`` and ``spark-submit jobs/<command>.py`` (both run
:func:`run_job`). Everything here is private to the command line except :func:`main`, :func:`run_job` and
:func:`build_parser`; notebooks call :mod:`scavenger.api` instead.

    main.py              parse, check flags before any engine starts, run a command, end with a summary
    arguments.py         the checks every command's flags share (exit 2, naming the flag)
    shared_flags.py      the flags and steps of the jobs that read logs (inputs, engine, gate, outputs)
    <name>_command.py    one module per subcommand (NAME, HELP, add_arguments, run)
    job_context.py       what a command's run is given (arguments, result record, engine on first use)
    job_endings.py       how a job ended: exit code, status, the one stderr line
    lifecycle.py         SIGTERM / SIGINT: exit 128 + signal, result.json written first
    streams.py           stdout/stderr whose reader may go away
    summary.py           the short summary every job prints
"""
from .main import build_parser, main, run_job

__all__ = ["build_parser", "main", "run_job"]
