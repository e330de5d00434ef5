"""The notebook API: the functions the jobs call, on what a user already has, gate included.

    import scavenger
    a = scavenger.adc("gen/logs")                                  # a path: DuckDB, no JVM
    e = scavenger.evaluate(logs_df, decisions_df, estimators=["pi", "pi_plus_plus"])   # Spark DataFrames: Spark
    v = scavenger.validate("gen/logs", "gen/decisions", estimators=["pi"])
    t = scavenger.train("gen/logs", date_from=..., date_to=..., score_from=..., score_to=..., out="policies")
    e.to_pandas(); e.plot(); e.by_day; v.table; v.counts; t.summary

Inputs may be paths or URIs (Parquet partitioned by dt), catalog table names, Spark DataFrames, or pandas /
pyarrow tables. ``engine`` is auto|duckdb|spark, with the CLI's rule (Spark for DataFrames, tables, remote URIs,
SPARK_REMOTE; DuckDB for local files and in-memory tables). ``gate`` is enforce|report|off as in the CLI, its
options the CLI's gate flags as keywords (``reward_max=5``, ``cramers_v_max=0.2``, ``duplicates="quarantine_all"``): with
enforce, a failed assumption of an estimator asked for by name raises DataCheckFailed; estimates the data cannot
identify carry ``identified = False`` and the reason. ``stats_dir`` reuses a statistics store like the jobs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

__all__ = ["Result", "AdcResult", "EvaluationResult", "ValidationResult", "TrainResult", "adc", "evaluate",
           "validate", "train"]


@dataclass
class Result:
    """A job's output table as pandas (``pandas``/``to_pandas()``), with a Spark DataFrame view when Spark ran."""

    pandas: pd.DataFrame
    summary: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    _spark: object = field(default=None, repr=False)

    def to_pandas(self) -> pd.DataFrame:
        return self.pandas.copy()

    @property
    def table(self):
        """The table as a Spark DataFrame when the Spark engine ran, else the pandas frame."""
        if self._spark is None:
            return self.pandas
        from .io.catalog import spark_frame

        return spark_frame(self._spark, self.pandas)

    def _repr_html_(self) -> str:
        return self.pandas._repr_html_()


@dataclass
class AdcResult(Result):
    by_day: pd.DataFrame | None = None
    verdicts: list = field(default_factory=list)

    def plot(self, true_adc=None):
        from .report import figures

        return figures.adc_figure(self.pandas, "delta", true_adc)


@dataclass
class EvaluationResult(Result):
    diagnostics_pandas: pd.DataFrame | None = None
    adc_pandas: pd.DataFrame | None = None
    by_day: pd.DataFrame | None = None
    verdicts: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    stats: object = None

    def plot(self, policy_id: str | None = None):
        """Forest plot (one row per estimator with its interval, the logged value as reference) of a policy."""
        from .report import figures
        from .report.build import OFF_SCALE, diag_value

        est = self.pandas
        policy_id = policy_id or est["policy_id"].iloc[0]
        rows = est[(est["policy_id"] == policy_id) & ~est["estimator"].isin(OFF_SCALE) & est["identified"]]
        logged = diag_value(self.diagnostics_pandas, policy_id, "logged_value")
        return figures.forest_figure(rows, policy_id, logged, "logged mean reward")


@dataclass
class ValidationResult(Result):
    counts: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    message: str = ""

    def raise_if_failed(self) -> None:
        from .errors import DataCheckFailed

        if self.failed:
            raise DataCheckFailed(self.message, verdicts=self.pandas.to_dict("records"))


def _engine(engine: str, inputs):
    from .engines import choose, open_engine

    name, why = choose(engine, inputs.all())
    spark = None
    if name == "spark":
        for s in inputs.all():
            if s.kind == "spark":
                spark = s.obj.sparkSession
    return open_engine(name, why, spark=spark)


# the CLI's gate flags as keywords (--reward-max -> reward_max), read and checked by the CLI's own code
GATE_OPTIONS = ("max_quarantine_share", "reward_min", "reward_max", "cramers_v_max", "calibration_scope",
                "duplicates", "max_slots", "require_full_slates", "quarantine_null_propensity", "great_expectations")


def _gate(gate: str, **config):
    """The gate of the CLI from its flags given as keywords (``reward_max=5``, ``cramers_v_max=0.2``,
    ``calibration_scope="policy"``, ``duplicates="quarantine_all"``, ...): the same defaults and the same checks
    (UsageError naming the option); ``rules``/``assumptions`` objects are taken as they are."""
    import argparse
    import dataclasses

    from .cli import shared_flags as C
    from .errors import UsageError
    from .pipelines.common import GATE_MODES, GateConfig

    if gate not in GATE_MODES:
        raise UsageError(f"gate must be one of {', '.join(GATE_MODES)}, got {gate!r}")
    as_is = {k: config.pop(k) for k in [k for k in config if k in {f.name for f in dataclasses.fields(GateConfig)}
                                         and k not in GATE_OPTIONS]}
    unknown = sorted(set(config) - set(GATE_OPTIONS))
    if unknown:
        raise UsageError(f"unknown gate option(s) {', '.join(unknown)}; the gate takes {', '.join(GATE_OPTIONS)} "
                         f"(the CLI's gate flags)")
    parser = argparse.ArgumentParser(add_help=False)
    C.add_gate_arguments(parser)
    args = parser.parse_args([])
    args.gate = gate
    for action in parser._actions:      # the flags' fixed choices (argparse checks them on a command line)
        if action.dest in config and action.choices and config[action.dest] not in action.choices:
            raise UsageError(f"{action.dest} must be one of {', '.join(action.choices)}, got "
                             f"{config[action.dest]!r}")
    for key, value in config.items():
        if key == "great_expectations":
            args.no_great_expectations = not value
        else:
            setattr(args, key, value)
    try:
        g = C.gate_config(args)
    except TypeError as exc:           # a value of the wrong type (e.g. a string for a number)
        raise UsageError(f"gate options: {exc}") from None
    return dataclasses.replace(g, **{k: v for k, v in as_is.items() if k != "mode"})


def _spark_of(eng):
    return getattr(eng, "spark", None)


def adc(logs, *, methods: Sequence[str] | None = None, level: float = 0.95, dcg_base: float = 2.0,
        smoothing: float = 10.0, bootstrap: int = 0, seed: int = 0, date_from=None, date_to=None,
        gate: str = "enforce", engine: str = "auto", stats_dir: str | None = None, by_day: bool = False,
        **gate_config) -> AdcResult:
    """Attention-decay coefficients C_i (seed 001 section 4.3): naive Est(i) = [sum_a C(a,i)/sum_a M(a,i)] /
    [sum_a C(a,1)/sum_a M(a,1)] and alpha-weighted Est(i) = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1), with
    intervals and the DCG reference; the same code as ``scavenger adc``."""
    from .estimators.attention_decay import METHODS
    from .pipelines import adc as P
    from .pipelines.common import describe_inputs

    inputs = describe_inputs(logs, None, date_from, date_to)
    eng = _engine(engine, inputs)
    try:
        res = P.adc(eng, inputs, P.AdcOptions(tuple(methods) if methods else METHODS, level, dcg_base, smoothing,
                                              bootstrap, seed, by_day), _gate(gate, **gate_config), stats_dir)
        ap = res.stats.table("ad_position")
        return AdcResult(pandas=res.table, summary={"window": res.stats.window,
                                                    "impressions": int(ap["m"].sum()) if len(ap) else 0},
                         engine=eng.info.to_dict(), _spark=_spark_of(eng), by_day=res.by_day,
                         verdicts=res.window.verdicts)
    finally:
        eng.close()


def evaluate(logs, decisions=None, *, estimators: Sequence[str] | None = None, adc: str = "estimate",
             adc_method: str = "heuristic", delta: float = 0.05, level: float = 0.95,
             uniform_logging: bool = False, prior_mean: float | None = None, n_ads: int | None = None,
             policies: Sequence[str] | None = None, reorder: Sequence[str] = (), date_from=None, date_to=None,
             gate: str = "enforce", engine: str = "auto", stats_dir: str | None = None, by_day: bool = False,
             **gate_config) -> EvaluationResult:
    """Off-policy estimates of every target policy in ``decisions`` (the same code as ``scavenger evaluate``):
    scavenging V = sum_a S_a/T_a (seed 001 sec. 3), factored and re-ordering (sec. 4), slate IPS mean(r prod_k
    Y_k), PI mean(r G) with G = 1 - K + sum_k Y_k, PI++ (seed 002), SNIPS, wPI, pi_beta."""
    from .pipelines import evaluate as P
    from .pipelines.common import describe_inputs
    from .statistics.reorder import parse_reorder_specs

    options = P.EvaluateOptions(estimators=list(estimators) if estimators else None, adc=adc, adc_method=adc_method,
                                delta=delta, level=level, uniform_logging=uniform_logging, prior_mean=prior_mean,
                                n_ads=n_ads, reorder=parse_reorder_specs(reorder),
                                policies=list(policies) if policies else None, by_day=by_day)
    options.wanted()   # unknown names fail before any work
    inputs = describe_inputs(logs, decisions, date_from, date_to, policies)
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
        return EvaluationResult(pandas=est, summary={"window": ev.stats.window,
                                                     "policies": sorted(est["policy_id"].unique().tolist())},
                                engine=eng.info.to_dict(), _spark=_spark_of(eng), diagnostics_pandas=ev.diagnostics,
                                adc_pandas=ev.adc, by_day=ev.estimates_by_day, verdicts=ev.verdicts,
                                notes=ev.notes, stats=ev.stats)
    finally:
        eng.close()


def validate(logs, decisions=None, *, estimators: Sequence[str] | None = None, checks=None,
             max_quarantine_share: float = 0.001, date_from=None, date_to=None, gate: str = "enforce",
             engine: str = "auto", stats_dir: str | None = None, great_expectations: bool = False,
             docs_dir: str | None = None, **gate_config) -> ValidationResult:
    """Row rules (quarantine) and the assumption checks a-e the estimators in use rely on (or ``checks``): a
    context independence, b exploration, c support, d factorized logging, e propensity calibration (seed 001
    Theorem 3, seed 002) -- the same code as ``scavenger validate``."""
    from .pipelines import validate as P
    from .pipelines.common import describe_inputs

    if isinstance(checks, str):
        checks = tuple(c.strip() for c in checks.split(",") if c.strip())
    inputs = describe_inputs(logs, decisions, date_from, date_to)
    g = _gate(gate, max_quarantine_share=max_quarantine_share, great_expectations=great_expectations,
              **gate_config)
    eng = _engine(engine, inputs)
    try:
        v = P.validate(eng, inputs, estimators, checks, g, stats_dir, docs_dir=docs_dir)
        return ValidationResult(pandas=v.verdict_frame(), summary={"message": v.message,
                                                                   "checks": v.window.check_verdicts},
                                engine=eng.info.to_dict(), _spark=_spark_of(eng), counts=v.window.counts,
                                failed=v.failed, message=v.message)
    finally:
        eng.close()


@dataclass
class TrainResult(Result):
    """One row per learned policy (value estimate and, on generator logs, the truth); ``summary`` as result.json."""

    decisions: str = ""


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
    from .engines import choose, open_engine
    from .policies.train import TrainConfig, prepare, run_training

    cfg = TrainConfig(logs=logs, date_from=date_from, date_to=date_to, score_from=score_from, score_to=score_to,
                      out=out, method=method, m=m, adc=adc, adc_method=adc_method, eligibility=eligibility, seed=seed,
                      interactions=interactions, reg_param=reg_param, max_iter=max_iter, truth=truth,
                      estimate=estimate, dedup=dedup, gate=gate, max_id_length=max_id_length)
    inputs = prepare(cfg)
    name, why = choose(engine, inputs.all())
    spark = next((s.obj.sparkSession for s in inputs.all() if s.kind == "spark"), None)
    eng = open_engine(name, why, spark=spark)
    try:
        summary = run_training(eng, cfg, inputs=inputs)
    finally:
        eng.close()
    rows = []
    for pid, pol in summary["policies"].items():
        est, tr = pol.get("factored_estimate") or {}, pol.get("truth") or {}
        rows.append({"policy_id": pid, "method": pol["method"], "dedup": pol["dedup"],
                     "events_decided": pol["events_decided"], "estimate": est.get("value"),
                     "ci_low": est.get("ci_low"), "ci_high": est.get("ci_high"), "true_value": tr.get("true_value")})
    return TrainResult(pandas=pd.DataFrame(rows), summary=summary, engine=summary["engine"],
                       _spark=_spark_of(eng), decisions=summary["decisions_path"])
