"""One module per CLI subcommand / spark-submit job.

Each module defines ``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args, ctx) -> None``, where ``ctx`` is a :class:`scavenger.cli.JobContext` (``ctx.spark`` creates the
SparkSession lazily, ``ctx.result`` is the :class:`scavenger.result.RunResult` written to ``--out``).
Modules keep logic out: they parse flags, call library functions and record results.
"""

# Order shown in ``scavenger --help``. A module that does not exist yet is skipped.
COMMAND_MODULES = [
    "generate",
    "ingest_obd",
    "obd_target",
    "validate",
    "adc",
    "evaluate",
    "simulate",
    "train",
    "report",
    "demo",
]
