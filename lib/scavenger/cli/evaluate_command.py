"""`scavenger evaluate`: off-policy estimates of target policies (scavenging, factored, re-ordering, slate OPE)."""
from __future__ import annotations

from . import shared_flags as C

NAME = "evaluate"
HELP = "Estimate the value of target policies from impression logs (one pass per new day; intervals per estimator)"


def add_arguments(parser):
    import argparse

    from .. import registry

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "estimators (built-in and plugins):\n" + "\n".join("  " + line for line in registry.help_lines())

    C.add_input_arguments(parser)
    C.add_engine_arguments(parser)
    C.add_gate_arguments(parser)
    C.add_output_arguments(parser, "OUT/estimates/, OUT/diagnostics/, OUT/adc/ (and OUT/estimates_by_day/, "
                                   "OUT/running/, OUT/differences/)")
    parser.add_argument("--estimators", default=None,
                        help="comma list of " + ", ".join(registry.names()) + " (default: every estimator that "
                             "applies; one the data cannot support is left out with a note; each is listed below)")
    parser.add_argument("--by-day", action="store_true",
                        help="also one estimate per day of the window (OUT/estimates_by_day/) and each estimate "
                             "over the first day through each day (OUT/running/), from the same per-day "
                             "statistics: no extra scan; a day with no clean logged event says so")
    parser.add_argument("--baseline", default=None, metavar="POLICY",
                        help="also each target minus POLICY on the same events (OUT/differences/): another target "
                             "of --decisions, or 'logging' for what the logs earned; paired interval and "
                             "anytime-valid confidence sequence (IPS/PI family)")
    parser.add_argument("--adc", default="estimate",
                        help="'estimate' (from the window's logs) or the path of a stored ADC table (scavenger adc)")
    parser.add_argument("--adc-method", default="heuristic",
                        help="which ADC row factored and reorder use: naive, uniform, heuristic (default: as "
                             "precise as the cross-fitted variance_optimal on every shape measured, issue 30), "
                             "variance_optimal "
                             "(with --adc PATH: any method the stored table holds)")
    parser.add_argument("--delta", type=float, default=0.05, help="Theorem 3/4 bounds hold w.p. 1 - delta")
    parser.add_argument("--level", type=float, default=0.95, help="level of the intervals")
    parser.add_argument("--uniform-logging", action="store_true",
                        help="logging is uniform over actions: add the Theorem 4 estimates")
    parser.add_argument("--n-ads", type=int, default=None, help="ad catalogue size n for k of Theorems 3/4: k = n!/(n-P)! over the P positions the "
                             "logs hold (every ad allowed at every position); default: the slates the logged "
                             "layout allows")
    parser.add_argument("--prior-mean", type=float, default=None, help="PI++ prior P' (default: logged mean reward)")
    parser.add_argument("--reorder", action="append", default=[],
                        help="add a re-ordering policy: random[:seed], ctr:FIT_FROM:FIT_TO, scores:PATH "
                             "(csv/parquet with ad_id,score or context_id,ad_id,score); repeatable")


def prepare(args, ctx):
    from .. import registry
    from ..errors import UsageError
    from ..pipelines.evaluate import EvaluateOptions
    from ..pipelines.running import check_baseline_name
    from ..statistics.reorder import parse_reorder_specs

    C.check_level(args)
    C.check_adc_option(args.adc, args.adc_method)
    estimators = registry.resolve(args.estimators) if args.estimators else None
    _check_numbers(args)
    reorder = _distinct_policies(args.reorder, parse_reorder_specs(args.reorder))
    for spec in reorder:
        if spec["kind"] == "ctr" and spec["fit_from"] > spec["fit_to"]:
            raise UsageError(f"--reorder ctr:{spec['fit_from']}:{spec['fit_to']}: the fit window ends before it "
                             f"starts; give ctr:FROM:TO with FROM <= TO")
        if spec["kind"] == "scores":
            _check_score_table(spec["path"])
    if args.decisions is None and not reorder:
        raise UsageError("evaluate needs --decisions or at least one --reorder policy")
    inputs = C.prepare_inputs(args)
    check_baseline_name(args.baseline, inputs.policies, inputs.decisions)     # a catalog table's: after the pass
    gate = C.gate_config(args)
    options = EvaluateOptions(
        estimators=[e.strip() for e in args.estimators.split(",") if e.strip()] if args.estimators else None,
        adc=args.adc, adc_method=args.adc_method, delta=args.delta, level=args.level,
        uniform_logging=args.uniform_logging, prior_mean=args.prior_mean, n_ads=args.n_ads, reorder=reorder,
        policies=inputs.policies, by_day=args.by_day, baseline=args.baseline)
    ctx.result.inputs = {"logs": args.logs, "decisions": args.decisions, "from": args.date_from, "to": args.date_to,
                         "stats_dir": args.stats_dir, "estimators": estimators or registry.resolve(None),
                         "adc": args.adc, "adc_method": args.adc_method, "delta": args.delta, "level": args.level,
                         "reorder": reorder, "gate": args.gate, "by_day": args.by_day, "baseline": args.baseline}
    return inputs, gate, options


def run(args, ctx, prepared):
    from ..errors import DataCheckFailed
    from ..pipelines.evaluate import evaluate
    from ..statistics.scan import StatsConfig

    inputs, gate, options = prepared
    engine = ctx.engine(inputs)
    config = StatsConfig(rules=gate.rules, max_policies=args.max_policies,
                         policies=tuple(inputs.policies) if inputs.policies else None,
                         calibration_key=_calibration_key(gate))
    with ctx.result.timed("evaluate"):
        ev = evaluate(engine, inputs, options, gate, config, args.stats_dir, C.quarantine_dir(args),
                      ctx.result.run_id, C.batch_days(args, engine))
    held = adc_table_positions(args.adc, args.adc_method)
    if held is not None and ev.stats.K and held < int(ev.stats.K):
        from ..errors import UsageError
        from ..pipelines.common import counted

        with counted(ev.window):        # found after the pass: result.json keeps its counts and quarantine
            raise UsageError(f"--adc {args.adc} (method {args.adc_method}) gives {held} position(s) but the logs "
                             f"show {int(ev.stats.K)}: give an ADC table estimated on logs with every position")
    r = ctx.result
    r.outputs.update(C.write_results(args, ctx, {"estimates": ev.estimates, "diagnostics": ev.diagnostics,
                                                 "adc": ev.adc, "estimates_by_day": ev.estimates_by_day,
                                                 "differences": ev.differences, "running": ev.running},
                                     max(ev.stats.dates)))
    r.outputs["quarantine"] = C.quarantine_dir(args)
    stats = ev.stats
    r.counts.update({**ev.window.record(), "policies": int(ev.estimates["policy_id"].nunique()),
                     "estimates": len(ev.estimates)})
    r.verdicts = ev.verdicts
    r.summary.update({"window": stats.window, "checks": ev.window.check_verdicts, "notes": ev.notes,
                      "estimates": _summary_rows(ev.estimates), "differences": _difference_rows(ev.differences)})
    if ev.warnings:
        import sys

        from ..safe import bound

        r.summary["warnings"] = ev.warnings
        for w in ev.warnings:
            print(f"scavenger evaluate: warning: {bound(w)}", file=sys.stderr)
    if ev.refused:
        raise DataCheckFailed("not identified from these data: " + "; ".join(ev.refused), verdicts=ev.verdicts)


def _difference_rows(diffs) -> list:
    if diffs is None:
        return []
    cols = ("policy_id", "baseline_id", "estimator", "value", "ci_low", "ci_high", "cs_low", "cs_high", "n_events",
            "reason", "cs_reason")
    return [{k: r.get(k) for k in cols} for r in diffs.to_dict("records")]


def adc_table_positions(adc: str, method: str) -> int | None:
    """How many positions the stored ADC table gives for ``method`` (None for estimated ADCs)."""
    if adc in (None, "", "estimate"):
        return None
    from ..estimators.adc_family import read_adc_table

    table = read_adc_table(adc)
    return int((table["method"].astype(str) == method).sum())


MAX_N_ADS = 2 ** 53     # Theorem 3's k: exactly representable as a float (gammaln)


def _check_numbers(args) -> None:
    """--n-ads a whole number 1..2**53, --prior-mean finite (exit 2 naming the flag)."""
    from ..errors import UsageError

    if args.n_ads is not None and not 1 <= args.n_ads <= MAX_N_ADS:
        raise UsageError(f"--n-ads is the size of the ad catalogue: a whole number from 1 to {MAX_N_ADS}; got "
                         f"{args.n_ads}")
    C.finite_number(args.prior_mean, "--prior-mean")


def _distinct_policies(texts: list, reorder: list) -> list:
    """Each --reorder its own policy: the same policy given twice is refused (it would be counted twice under
    one id: doubled n_events, a wrong lift); score tables from different files get ids of their own
    (reorder_scores_<file stem>, a suffix when still equal)."""
    import os
    import re

    from ..errors import UsageError

    seen = {}
    for text, spec in zip(texts, reorder):
        key = (spec["kind"], os.path.realpath(spec["path"]) if spec["kind"] == "scores" and "://" not in spec["path"]
               else spec.get("path"), spec.get("seed"), spec.get("fit_from"), spec.get("fit_to"))
        if key in seen:
            same = f"--reorder {text} is given twice" if text == seen[key] else \
                f"--reorder {text} is the same policy as --reorder {seen[key]}"
            raise UsageError(f"{same}: each --reorder is one policy; give it once")
        seen[key] = text
    scores = [s for s in reorder if s["kind"] == "scores"]
    if len(scores) > 1:
        taken = {s["policy_id"] for s in reorder if s["kind"] != "scores"}
        for spec in scores:
            stem = os.path.splitext(os.path.basename(spec["path"].rstrip("/")))[0] or "table"
            base = "reorder_scores_" + re.sub(r"[^0-9A-Za-z_.-]+", "_", stem)
            pid, n = base, 1
            while pid in taken:
                n += 1
                pid = f"{base}_{n}"
            taken.add(pid)
            spec["policy_id"] = pid
    return reorder


def _check_score_table(path: str) -> None:
    """A --reorder scores table that can be read and holds scores: exit 2 naming the file and the problem (not
    UTF-8, not CSV/Parquet, empty, no finite score, an infinite score), before the pass. Remote URIs are read
    by the pass."""
    import numpy as np
    import pandas as pd

    from ..errors import UsageError
    from ..io import fs
    from ..statistics.reorder import check_scores, read_scores

    if not fs.is_local(path):
        return
    where = f"--reorder scores:{path}"
    try:
        scores = read_scores(path)
    except UnicodeDecodeError:
        raise UsageError(f"{where}: the file is not UTF-8 text; save the CSV as UTF-8") from None
    except pd.errors.EmptyDataError:
        raise UsageError(f"{where}: the file is empty; a score table needs columns ad_id,score") from None
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow/pandas readers: anything they cannot read is the file's
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{where}: cannot read it as {'CSV' if path.endswith('.csv') else 'Parquet'} "
                         f"({type(exc).__name__}: {first[:200]}); give a .csv file or a Parquet file or "
                         f"directory") from None
    if not len(scores):
        raise UsageError(f"{where}: the table has no rows; give one score per ad_id (or context_id, ad_id)")
    try:
        check_scores(scores)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    values = pd.to_numeric(scores["score"], errors="coerce").to_numpy(dtype=float)
    if np.isinf(values).any():
        raise UsageError(f"{where}: {int(np.isinf(values).sum())} score(s) are infinite; give finite numbers")
    if not np.isfinite(values).any():
        raise UsageError(f"{where}: no score is a number (all empty or NaN); give one number per key")


def _calibration_key(gate) -> str:
    from ..checks.assumptions import parse_calibration_scope

    mode, key = parse_calibration_scope(gate.assumptions.calibration_scope)
    return key if mode == "auto" and key else "context_id"


def _summary_rows(est) -> list:
    from ..run_summary import estimate_rows     # the notebook API's results list the same fields

    return estimate_rows(est)
