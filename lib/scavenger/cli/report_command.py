"""`scavenger report`: one self-contained static HTML page (plots embedded) of the adc/evaluate/validate outputs."""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "report"
HELP = "Write a self-contained HTML report (ADCs, estimates, PI/PI++ diagnostics, validation, trends) to OUT"


def add_arguments(parser):
    parser.add_argument("--out", required=True, help="output directory: OUT/report.html and OUT/result.json")
    parser.add_argument("--adc", default=None, help="ADC table: `scavenger adc` --out directory or its adc/ table")
    parser.add_argument("--estimates", default=None,
                        help="`scavenger evaluate` --out directory or its estimates/ table (diagnostics/ beside it "
                             "are read too)")
    parser.add_argument("--diagnostics", default=None, help="diagnostics table (default: beside --estimates)")
    parser.add_argument("--validation", default=None,
                        help="`scavenger validate` --out directory (validation/, quarantine/, data_docs/)")
    parser.add_argument("--history", default=None,
                        help="root of daily outputs with dt=YYYY-MM-DD/estimates/ below (e.g. the daily DAG's "
                             "{root}/evaluate): the trend of each policy's estimates")
    parser.add_argument("--ground-truth", default=None, help="the generator's ground_truth.json (optional)")
    parser.add_argument("--root", default=None,
                        help="the daily DAG's output root {root}/<job>/dt=<ds>/ (with --dt): reads adc, every "
                             "evaluate dataset and validate of that dt, and the trend from {root}/evaluate")
    parser.add_argument("--dt", default=None, help="the run date to show with --root (YYYY-MM-DD)")
    parser.add_argument("--title", default="scavenger evaluation report", help="page title")
    parser.add_argument("--engine", default="auto", choices=("auto", "duckdb", "spark"),
                        help="local tables are read without Spark whatever the engine; catalog tables and remote "
                             "URIs need Spark: auto and spark start it for them, duckdb refuses them (exit 2)")


def _engine_factory(args, ctx):
    """The Spark engine on the job's session, opened on first use, for inputs only Spark reads (catalog tables,
    remote URIs); none with --engine duckdb (the Airflow DAGs' engine duckdb passes it to every job)."""
    opened = []

    def engine():
        if args.engine == "duckdb":
            raise UsageError("report --engine duckdb reads local tables only; a catalog table or remote URI needs "
                             "--engine spark (or auto)")
        if not opened:
            from ..engines import open_engine

            opened.append(open_engine("spark", "report: a remote input", spark=ctx.spark))
        return opened[0]
    return engine


def prepare(args, ctx):
    """Every check a user can fail before --out is touched (the CLI writes result.json and _manifest.json there
    first): the flags, --out writable, and --out not one of the input directories (a report written into an
    evaluate --out would replace that run's result.json and manifest, then refuse to read it)."""
    from ..io import fs
    from ..report.preflight import check_out, input_dirs

    if not any([args.adc, args.estimates, args.validation, args.history, args.root]):
        raise UsageError("report needs at least one of --adc, --estimates, --validation, --history, --root")
    if args.dt is not None and args.root is None:
        raise UsageError("--dt is only used with --root")
    fs.check_writable(args.out)
    check_out(args.out, input_dirs(adc=args.adc, estimates=args.estimates, diagnostics=args.diagnostics,
                                   validation=args.validation, history=args.history,
                                   ground_truth=args.ground_truth, root=args.root, dt=args.dt))
    return None


def run(args, ctx, prepared=None):
    from ..report import load_inputs, write_report

    result = ctx.result
    result.inputs = {k: getattr(args, k) for k in ("adc", "estimates", "diagnostics", "validation", "history",
                                                   "ground_truth", "root", "dt")}
    with result.timed("read"):
        inputs = load_inputs(adc=args.adc, estimates=args.estimates, diagnostics=args.diagnostics,
                             validation=args.validation, history=args.history, ground_truth=args.ground_truth,
                             root=args.root, dt=args.dt, engine_factory=_engine_factory(args, ctx))
    with result.timed("render"):
        path = write_report(inputs, args.out, args.title)
    from ..io import manifest

    manifest.record_file("report", str(path))
    result.outputs = {"report": os.path.abspath(path)}
    result.counts = {
        "adc_rows": 0 if inputs.adc is None else len(inputs.adc),
        "estimate_rows": 0 if inputs.estimates is None else len(inputs.estimates),
        "policies": 0 if inputs.estimates is None else int(inputs.estimates["policy_id"].nunique()),
        "validation_rows": 0 if inputs.validation is None else len(inputs.validation),
        "history_runs": 0 if inputs.history is None else int(inputs.history["run_dt"].nunique()),
        "quarantined_rows": 0 if inputs.quarantine is None or not len(inputs.quarantine)
        else int(inputs.quarantine["rows"].sum()),
        "report_bytes": path.stat().st_size,
    }
    result.summary = {"report": str(path), "sources": inputs.sources,
                      "sections_missing": [s for s, v in (("adc", inputs.adc), ("estimates", inputs.estimates),
                                                          ("validation", inputs.validation),
                                                          ("trend", inputs.history)) if v is None]}
    print(f"report: {path} ({path.stat().st_size:,} bytes)")
