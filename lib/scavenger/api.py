"""The notebook API: the functions the jobs call, on what a user already has, gate included.

    import scavenger
    a = scavenger.adc("gen/logs")                                  # a path: DuckDB, no JVM
    e = scavenger.evaluate(logs_df, decisions_df, estimators=["pi", "pi_plus_plus"])   # Spark DataFrames: Spark
    v = scavenger.validate("gen/logs", "gen/decisions", estimators=["pi"])
    t = scavenger.train("gen/logs", date_from=..., date_to=..., score_from=..., score_to=..., out="policies")
    e                      # a short summary, as the CLI prints it; the full tables one attribute away:
    e.estimates; e.diagnostics; e.adc; e.by_day; e.plot(); a.adc; v.validation; v.counts; t.policies; t.summary

Inputs may be paths or URIs (Parquet partitioned by dt), catalog table names, Spark DataFrames, or pandas /
pyarrow tables (a path or a pyarrow table is read as it is; a pandas frame is converted to Arrow once, its slots
and contexts the slow part: ``pd.read_parquet(path, dtype_backend="pyarrow")`` gives frames that need none,
benchmarks/api_frames.py). ``engine`` is auto|duckdb|spark, with the CLI's rule (Spark for DataFrames, tables,
remote URIs, SPARK_REMOTE; DuckDB for local files and in-memory tables). ``gate`` is enforce|report|off as in the CLI, its
options the CLI's gate flags as keywords (``reward_max=5``, ``cramers_v_max=0.2``, ``duplicates="quarantine_all"``): with
enforce, a failed assumption of an estimator asked for by name raises DataCheckFailed; estimates the data cannot
identify carry ``identified = False`` and the reason. ``stats_dir`` reuses a statistics store like the jobs.
What the CLI refuses with exit 3 the API raises (DataCheckFailed, the same message): estimates refused by the
gate, ADCs no position past the first of which is identified; ``validate`` returns its verdicts and warns
(DataCheckWarning) with the message the CLI exits 3 with; the CLI's warnings are DataCheckWarnings too.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import pandas as pd

from .api_results import AdcResult, EvaluationResult, Result, TrainResult, ValidationResult  # noqa: F401

__all__ = ["Result", "AdcResult", "EvaluationResult", "ValidationResult", "TrainResult", "adc", "evaluate",
           "validate", "train"]


def _engine(engine: str, inputs):
    from .engines import open_for

    return open_for(engine, inputs.all())


# the CLI's gate flags as keywords (--reward-max -> reward_max), checked by the code the CLI's flags go through
GATE_OPTIONS = ("max_quarantine_share", "reward_min", "reward_max", "cramers_v_max", "calibration_scope",
                "duplicates", "max_slots", "require_full_slates", "quarantine_null_propensity", "great_expectations")


def _gate(gate: str, **config):
    """The gate of the CLI from its flags given as keywords (``reward_max=5``, ``cramers_v_max=0.2``,
    ``calibration_scope="policy"``, ``duplicates="quarantine_all"``, ...): the same defaults and the same checks
    (UsageError naming the option; pipelines/options.py); ``rules``/``assumptions`` objects are taken as they are."""
    import dataclasses

    from .errors import UsageError
    from .pipelines import options as O
    from .pipelines.common import GATE_MODES, GateConfig

    O.check_choice("gate", gate, GATE_MODES)
    as_is = {k: config.pop(k) for k in [k for k in config if k in {f.name for f in dataclasses.fields(GateConfig)}
                                         and k not in GATE_OPTIONS]}
    unknown = sorted(set(config) - set(GATE_OPTIONS))
    if unknown:
        raise UsageError(f"unknown gate option(s) {', '.join(unknown)}; the gate takes {', '.join(GATE_OPTIONS)} "
                         f"(the CLI's gate flags)")
    try:
        g = O.gate_config(gate, **config)
    except TypeError as exc:           # a value of the wrong type (e.g. a string for a number)
        raise UsageError(f"gate options: {exc}") from None
    return dataclasses.replace(g, **{k: v for k, v in as_is.items() if k != "mode"})


def adc(logs, *, methods: Sequence[str] | None = None, level: float = 0.95, dcg_base: float = 2.0,
        smoothing: float = 10.0, bootstrap: int = 0, seed: int = 0, date_from=None, date_to=None,
        gate: str = "enforce", engine: str = "auto", stats_dir: str | None = None, by_day: bool = False,
        **gate_config) -> AdcResult:
    """Attention-decay coefficients C_i (seed 001 section 4.3): naive Est(i) = [sum_a C(a,i)/sum_a M(a,i)] /
    [sum_a C(a,1)/sum_a M(a,1)] and alpha-weighted Est(i) = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1), with
    intervals and the DCG reference; the same code as ``scavenger adc``."""
    from .estimators.attention_decay import METHODS
    from .pipelines import adc as P
    from .pipelines import options as O
    from .pipelines.common import describe_inputs
    from .run_summary import adc_run

    for method in methods or ():
        O.check_choice("methods", method, METHODS)              # as --adc-method: exit 2, did you mean
    inputs = describe_inputs(logs, None, date_from, date_to)
    eng = _engine(engine, inputs)
    try:
        res = P.adc(eng, inputs, P.AdcOptions(tuple(methods) if methods else METHODS, level, dcg_base, smoothing,
                                              bootstrap, seed, by_day), _gate(gate, **gate_config), stats_dir)
        run = adc_run(res, eng.info.to_dict(), bootstrap)
        if res.refused:                 # `scavenger adc` exits 3 with this message
            from .errors import DataCheckFailed

            raise DataCheckFailed("; ".join(res.refused), verdicts=res.window.verdicts, counts=run.counts)
        return AdcResult(pandas=res.table, summary={**run.summary, "impressions": run.counts["impressions"]},
                         engine=eng.info.to_dict(), _ran_on=eng, _run=run, by_day=res.by_day,
                         verdicts=res.window.verdicts)
    finally:
        eng.close()


def evaluate(logs, decisions=None, *, estimators: Sequence[str] | None = None, adc: str = "estimate",
             adc_method: str = "heuristic", delta: float = 0.05, level: float = 0.95,
             uniform_logging: bool = False, prior_mean: float | None = None, n_ads: int | None = None,
             policies: Sequence[str] | None = None, reorder: Sequence[str] = (), date_from=None, date_to=None,
             gate: str = "enforce", engine: str = "auto", stats_dir: str | None = None, by_day: bool = False,
             baseline: str | None = None, **gate_config) -> EvaluationResult:
    """Off-policy estimates of every target policy in ``decisions`` (the same code as ``scavenger evaluate``):
    scavenging V = sum_a S_a/T_a (seed 001 sec. 3), factored and re-ordering (sec. 4), slate IPS mean(r prod_k
    Y_k), PI mean(r G) with G = 1 - K + sum_k Y_k, PI++ (seed 002), SNIPS, wPI, pi_beta. ``baseline``: another
    target of the decisions, or "logging": each target minus it on the same events (``differences``), with paired
    intervals and anytime-valid confidence sequences; ``by_day`` adds ``running`` (each estimate over the first
    day through each day)."""
    from .pipelines import evaluate as P
    from .pipelines.running import check_baseline_name
    from .pipelines.common import describe_inputs
    from .statistics.reorder import parse_reorder_specs

    options = P.EvaluateOptions(estimators=list(estimators) if estimators else None, adc=adc, adc_method=adc_method,
                                delta=delta, level=level, uniform_logging=uniform_logging, prior_mean=prior_mean,
                                n_ads=n_ads, reorder=parse_reorder_specs(reorder),
                                policies=list(policies) if policies else None, by_day=by_day, baseline=baseline)
    options.wanted()   # unknown names fail before any work
    from .pipelines.options import check_adc_option

    check_adc_option(adc, adc_method)   # as the CLI's prepare: an unknown method, an unreadable table (exit 2)
    inputs = describe_inputs(logs, decisions, date_from, date_to, policies)
    check_baseline_name(baseline, options.policies, inputs.decisions)
    g = _gate(gate, **gate_config)
    eng = _engine(engine, inputs)
    try:
        from .statistics.scan import StatsConfig

        # the policies selected before the join, as the CLI does: the stored days' key says which were read
        config = StatsConfig(rules=g.rules, policies=tuple(inputs.policies) if inputs.policies else None)
        ev = P.evaluate(eng, inputs, options, g, config, stats_dir)
        if ev.refused:
            from .errors import DataCheckFailed

            raise DataCheckFailed("not identified from these data: " + "; ".join(ev.refused), verdicts=ev.verdicts)
        est = ev.estimates
        from .run_summary import evaluation_run

        run = evaluation_run(ev, eng.info.to_dict())
        _warn(ev.warnings)              # `scavenger evaluate` prints them on stderr
        return EvaluationResult(pandas=est, summary={"window": ev.stats.window,
                                                     "policies": sorted(est["policy_id"].unique().tolist())},
                                engine=eng.info.to_dict(), _ran_on=eng, _run=run, diagnostics_pandas=ev.diagnostics,
                                adc_pandas=ev.adc, by_day=ev.estimates_by_day, verdicts=ev.verdicts,
                                notes=ev.notes, stats=ev.stats, differences=ev.differences, running=ev.running)
    finally:
        eng.close()


def validate(logs, decisions=None, *, estimators: Sequence[str] | None = None, checks=None,
             max_quarantine_share: float = 0.001, date_from=None, date_to=None, gate: str = "enforce",
             engine: str = "auto", stats_dir: str | None = None, great_expectations: bool = False,
             docs_dir: str | None = None, **gate_config) -> ValidationResult:
    """Row rules (quarantine) and the assumption checks a-f the estimators in use rely on (or ``checks``): a
    context independence, b exploration, c support, d factorized logging, e propensity calibration (seed 001
    Theorem 3, seed 002), f reward interaction (additive slots) -- the same code as ``scavenger validate``."""
    from .pipelines import validate as P
    from .pipelines.common import describe_inputs

    from .pipelines.options import parse_checks

    checks = parse_checks(checks, "checks")
    inputs = describe_inputs(logs, decisions, date_from, date_to)
    g = _gate(gate, max_quarantine_share=max_quarantine_share, great_expectations=great_expectations,
              **gate_config)
    eng = _engine(engine, inputs)
    try:
        # as the CLI: a quarantined share past the threshold is one more failed check, the verdicts still made
        v = P.validate(eng, inputs, estimators, checks, g, stats_dir, docs_dir=docs_dir, stop_on_quarantine=False)
        from .run_summary import validation_run

        run = validation_run(v, g.mode, eng.info.to_dict())
        if v.failed and g.mode != "off":
            _warn([v.message])          # `scavenger validate` exits 3 with it under enforce (raise_if_failed())
        return ValidationResult(pandas=v.verdict_frame(), summary={"message": v.message,
                                                                   "checks": v.window.check_verdicts},
                                engine=eng.info.to_dict(), _ran_on=eng, _run=run, counts=v.window.counts,
                                failed=v.failed, message=v.message)
    finally:
        eng.close()


def _warn(messages) -> None:
    """The CLI's warnings (stderr, the summary's "warning:" lines) as DataCheckWarnings."""
    from .errors import DataCheckWarning

    for message in messages or ():
        warnings.warn(message, DataCheckWarning, stacklevel=3)


def train(logs, *, date_from, date_to, score_from, score_to, out: str, method: str = "both", m: int = 4,
          adc: str = "estimate", adc_method: str = "heuristic", eligibility: str | None = None, seed: int = 0,
          interactions: str = "2", reg_param: float = 1e-4, max_iter: int = 25, truth: str | None = "auto",
          estimate: bool = True, dedup: str = "random", engine: str = "auto",
          gate: str = "enforce", max_id_length: int = 1000) -> TrainResult:
    """Learn m-ad policies on one window and write their decisions for a later one (seed 000): the regression
    reduction (Poisson GLM of clicks with offset log C_i; the m best eligible ads by g) and the cost-sensitive
    reduction (Set Select Train/Test), the same code as ``scavenger train``; the same models and decisions on
    DuckDB and Spark. ``gate``: the estimate's, evaluate's (enforce: an estimate whose check failed is left out,
    ``summary['warnings']`` says why; report: kept, its checks column and ``summary['notes']`` mark it).
    ``max_id_length``: rows holding a longer id, context key or value are left out and counted."""
    from .engines import open_for
    from .policies.train import TrainConfig, prepare, run_training

    cfg = TrainConfig(logs=logs, date_from=date_from, date_to=date_to, score_from=score_from, score_to=score_to,
                      out=out, method=method, m=m, adc=adc, adc_method=adc_method, eligibility=eligibility, seed=seed,
                      interactions=interactions, reg_param=reg_param, max_iter=max_iter, truth=truth,
                      estimate=estimate, dedup=dedup, gate=gate, max_id_length=max_id_length)
    from .result import RunResult

    inputs = prepare(cfg)
    eng = open_for(engine, inputs.all())
    run = RunResult(job="train", engine={"name": eng.info.name, "why": eng.info.why}, status="ok")
    try:
        summary = run_training(eng, cfg, run, inputs=inputs)
    finally:
        eng.close()
    _warn(summary.get("warnings"))      # the CLI's summary says them as "warning:" lines
    rows = []
    for pid, pol in summary["policies"].items():
        est, tr = pol.get("factored_estimate") or {}, pol.get("truth") or {}
        rows.append({"policy_id": pid, "method": pol["method"], "dedup": pol["dedup"],
                     "events_decided": pol["events_decided"], "estimate": est.get("value"),
                     "ci_low": est.get("ci_low"), "ci_high": est.get("ci_high"), "true_value": tr.get("true_value")})
    return TrainResult(pandas=pd.DataFrame(rows), summary=summary, engine=summary["engine"],
                       _ran_on=eng, _run=run, decisions=summary["decisions_path"])
