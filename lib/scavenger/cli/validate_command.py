"""``scavenger validate``: the data gate alone, for the estimators a deployment runs: quarantine bad rows with
reasons, the assumption checks those estimators rely on, great-expectations suites and Data Docs.

Exit 0 when every check in use passes (or with --gate report), 3 when the quarantined share passes
--max-quarantine-share or a check fails, 2 on bad arguments."""
from __future__ import annotations

from . import shared_flags as C

NAME = "validate"
HELP = "check logs (and decisions): quarantine bad rows, test the estimators' assumptions, build Data Docs"


def add_arguments(parser) -> None:
    from .. import registry

    C.add_input_arguments(parser)
    C.add_engine_arguments(parser)
    C.add_gate_arguments(parser)
    C.add_output_arguments(parser, "OUT/validation/, OUT/quarantine/, OUT/data_docs/")
    parser.add_argument("--estimators", default=None,
                        help="the estimators in use (comma list of adc, " + ", ".join(registry.names()) + "); "
                             "validate runs and gates only their checks (default: the evaluate default set, "
                             "where a failed check that bears only on the IPS/PI family, c, d or e, reads 'PI "
                             "family not applicable' instead of failing, as evaluate leaves that family out; f, "
                             "reward interaction, likewise for the estimators that assume additive slots)")
    parser.add_argument("--checks", default=None, help="run exactly these checks instead, e.g. a,b")
    parser.add_argument("--no-gate", action="store_true", help="report only: exit 0 even when a check fails")
    parser.add_argument("--ge-row-sample", type=int, default=0,
                        help="(reserved) row-level quality suites on a sample; the daily suites are exact")
    parser.add_argument("--seed", type=int, default=0)


def prepare(args, ctx):
    from .. import registry
    from ..errors import UsageError

    from ..pipelines.options import parse_checks

    checks = parse_checks(args.checks) if args.checks else None      # the API's too: did you mean c (support)?
    estimators = None
    if args.estimators:
        items = [e.strip() for e in args.estimators.split(",") if e.strip()]
        rest = [e for e in items if e != "adc"]
        # `--estimators adc` is ADC alone (registry.resolve of nothing would be the whole default set)
        estimators = (["adc"] if "adc" in items else []) + (registry.resolve(rest) if rest else [])
    if args.ge_row_sample < 0:
        raise UsageError(f"--ge-row-sample must be >= 0, got {args.ge_row_sample}")
    if args.no_gate:
        args.gate = "report"
    inputs = C.prepare_inputs(args)
    ctx.result.inputs = {"logs": args.logs, "decisions": args.decisions, "from": args.date_from, "to": args.date_to,
                         "estimators": estimators, "checks": checks, "stats_dir": args.stats_dir}
    return inputs, C.gate_config(args), estimators, checks


def run(args, ctx, prepared) -> None:
    from ..errors import DataCheckFailed
    from ..io import fs
    from ..pipelines.validate import validate

    inputs, gate, estimators, checks = prepared
    engine = ctx.engine(inputs)
    from ..io import manifest

    docs = fs.join(args.out, "data_docs") if fs.is_local(args.out) else None
    if docs and fs.exists(docs):
        manifest.unmark(docs)               # GE rewrites the site in place: the old mark no longer vouches for it
    with ctx.result.timed("validate"):
        v = validate(engine, inputs, estimators, checks, gate, args.stats_dir, C.quarantine_dir(args),
                     ctx.result.run_id, C.batch_days(args, engine), docs_dir=docs, max_policies=args.max_policies,
                     stop_on_quarantine=False)     # validation/ and data_docs/ are written before exit 3
    r = ctx.result
    r.outputs.update(C.write_results(args, ctx, {"validation": v.verdict_frame()}, max(v.window.stats.dates)))
    r.outputs["quarantine"] = C.quarantine_dir(args)
    if docs and fs.exists(fs.join(docs, "index.html")):
        r.outputs["data_docs"] = fs.join(docs, "index.html")
        manifest.stamp("data_docs", docs)
    stats = v.window.stats
    r.counts.update(v.window.record())
    r.verdicts = v.verdicts
    r.summary.update({"window": stats.window, "estimators": v.estimators, "checks": v.window.check_verdicts,
                      "failed_checks": v.failed, "gate": gate.mode, "message": v.message})
    if v.not_applicable:
        r.summary["not_applicable"] = v.not_applicable
        r.summary.setdefault("notes", []).extend(v.not_applicable)
    if v.failed and gate.enforce:
        raise DataCheckFailed(v.message, verdicts=r.verdicts)
    if v.failed:
        r.message = f"--gate {gate.mode}: {v.message}"
