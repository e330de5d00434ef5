"""The notebook API: the operations the jobs run, on Spark DataFrames a user already has.

    import scavenger
    logs = scavenger.obd.ingest_obd(spark, "../shared/data/obd")       # or any DataFrame in the log contract
    a = scavenger.adc(logs)                      # a.table: Spark DataFrame; a.to_pandas(); a.plot()
    e = scavenger.evaluate(logs, decisions, estimators=["pi", "pi_plus_plus", "factored"])
    v = scavenger.validate(logs, decisions)      # v.table (verdicts), v.clean_logs, v.counts

These are thin wrappers: they call the very functions ``scavenger adc`` / ``evaluate`` / ``validate`` call
(:mod:`scavenger.statistics` scan and merge, :func:`scavenger.evaluation.estimates_from_stats`,
:func:`scavenger.evaluation.estimate_adc`, :func:`scavenger.checks.run_gate`), so on the same data a notebook and
the CLI give the same numbers. The only difference: the jobs read paths/tables and may reuse a per-dt statistics
store; here the statistics of the given DataFrames are computed in one scan (nothing row-level is collected;
the small statistics tables are).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from .contract import DECISIONS, LOGS, conform, load_contract

__all__ = ["Result", "AdcResult", "EvaluationResult", "ValidationResult", "statistics", "adc", "evaluate", "validate"]


def _spark_of(df):
    return df.sparkSession


def _column_type(values: pd.Series, numeric_dtype: bool):
    """Spark type of one small output column: boolean, long, double or string (by its non-null values)."""
    import numbers

    from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType

    vals = [v for v in values if v is not None]
    if not vals:
        return DoubleType() if numeric_dtype else StringType()
    if all(isinstance(v, (bool,)) for v in vals):
        return BooleanType()
    if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in vals):
        return LongType()
    if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in vals):
        return DoubleType()
    return StringType()


def _to_spark(spark, pdf: pd.DataFrame | None):
    """A small pandas output table as a Spark DataFrame with an explicit schema (missing values -> null)."""

    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    if pdf is None:
        return None
    clean = pdf.astype(object).where(pdf.notna(), None)
    for c in clean.columns:  # numpy scalars -> Python scalars
        clean[c] = [v.item() if hasattr(v, "item") and not isinstance(v, (list, dict, str)) else v for v in clean[c]]
    fields, casts = [], []
    for c in clean.columns:
        t = _column_type(clean[c], pd.api.types.is_numeric_dtype(pdf[c]))
        fields.append(StructField(str(c), t, True))
        if isinstance(t, StringType):
            casts.append(lambda v: None if v is None else str(v))
        elif isinstance(t, DoubleType):
            casts.append(lambda v: None if v is None else float(v))
        elif isinstance(t, LongType):
            casts.append(lambda v: None if v is None else int(v))
        else:
            casts.append(lambda v: v)
    rows = [tuple(f(v) for f, v in zip(casts, rec)) for rec in clean.itertuples(index=False, name=None)]
    return spark.createDataFrame(rows, StructType(fields))


@dataclass
class Result:
    """A job's output table: ``table`` (Spark DataFrame), ``pandas`` (the same rows), ``summary`` (dict)."""

    table: object
    pandas: pd.DataFrame
    summary: dict = field(default_factory=dict)

    def to_pandas(self) -> pd.DataFrame:
        """The output table as pandas (it is small: one row per position/method or per policy/estimator)."""
        return self.pandas.copy()

    def _repr_html_(self) -> str:  # notebooks show the table
        return self.pandas._repr_html_()


@dataclass
class AdcResult(Result):
    """The ADC table (position, method, coefficient, std_error, ci_low, ci_high, interval_kind, ads_used, ...)."""

    def plot(self, true_adc=None):
        """The report's ADC plot: C_i by position per method with intervals, DCG beside (matplotlib Figure)."""
        from .report import figures

        return figures.adc_figure(self.pandas, "delta", true_adc)


@dataclass
class EvaluationResult(Result):
    """Estimates (``table``/``pandas``) plus ``diagnostics`` (Spark) / ``diagnostics_pandas`` and the ADC used."""

    diagnostics: object = None
    diagnostics_pandas: pd.DataFrame | None = None
    adc_pandas: pd.DataFrame | None = None
    stats: object = None
    verdicts: list = field(default_factory=list)

    def plot(self, policy_id: str | None = None):
        """Forest plot (one row per estimator, interval, logged mean reward as reference) of one policy."""
        from .report import figures
        from .report.build import OFF_SCALE, diag_value

        est = self.pandas
        policy_id = policy_id or est["policy_id"].iloc[0]
        rows = est[(est["policy_id"] == policy_id) & ~est["estimator"].isin(OFF_SCALE)]
        return figures.forest_figure(rows, policy_id, diag_value(self.diagnostics_pandas, policy_id, "pbar_hat"),
                                     "logged mean reward")


@dataclass
class ValidationResult(Result):
    """Verdicts (``table``: check, scope, statistic, threshold, verdict, message), clean rows and counts."""

    clean_logs: object = None
    clean_decisions: object = None
    counts: dict = field(default_factory=dict)
    failed: bool = False
    message: str = ""
    gate: object = None

    def raise_if_failed(self) -> None:
        """DataCheckFailed (the CLI's exit 3) when the gate failed."""
        self.gate.raise_if_failed()


def statistics(logs, decisions=None, config=None):
    """The statistics layer on DataFrames: one scan -> per-dt tables -> merged window (additive sums).

    Same functions as the jobs (:func:`scavenger.statistics.scan`, ``split_by_dt``, ``merge``); the window is
    the set of ``dt`` values present in ``logs``. Returns a :class:`scavenger.statistics.WindowStats`.
    """
    from .progress import phase
    from .statistics import TABLES, StatsConfig, WindowStats, merge, scan, split_by_dt

    config = config or StatsConfig()
    logs = conform(logs, load_contract(LOGS))
    if decisions is not None:
        decisions = conform(decisions, load_contract(DECISIONS))
    with phase(_spark_of(logs), "statistics", "one scan of the logs" + (" joined with decisions" if decisions
                                                                         is not None else "")):
        per_day = split_by_dt(scan(logs, decisions, config))
    dates = sorted(per_day)
    merged = {name: merge(name, [per_day[d].get(name) for d in dates]) for name in TABLES}
    merged = {k: v for k, v in merged.items() if len(v)}
    return WindowStats(tables=merged, dates=dates, scanned=dates, loaded=[], per_day=per_day)


def adc(logs, *, methods: Sequence[str] | None = None, level: float = 0.95, dcg_base: float = 2.0,
        smoothing: float = 1.0, bootstrap: int = 0, seed: int = 0) -> AdcResult:
    """Attention-decay coefficients C_i from impression logs (seed 001 section 4.3; MATH.md "Factoring").

    naive: Est(i) = [sum_a C(a,i) / sum_a M(a,i)] / [sum_a C(a,1) / sum_a M(a,1)];
    alpha-weighted: Est(i) = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1) (uniform, heuristic,
    variance-optimal alpha, Theorem 6), with delta-method (and optional Poisson-bootstrap) intervals and the DCG
    reference 1/log_b(b+i-1). Same code as ``scavenger adc`` (:func:`scavenger.evaluation.estimate_adc`).
    """
    from .estimators.adc import METHODS
    from .evaluation import estimate_adc
    from .statistics import StatsConfig

    stats = statistics(logs, None, StatsConfig(bootstrap=bootstrap, seed=seed, slate_actions=False))
    table = estimate_adc(stats, tuple(methods) if methods else METHODS, level, dcg_base, smoothing)
    spark = _spark_of(logs)
    ls = stats.table("log_summary")
    summary = {"window": stats.window, "events": int(ls["n_events"].sum()) if len(ls) else 0,
               "impressions": int(stats.table("ad_position")["m"].sum())}
    return AdcResult(table=_to_spark(spark, table), pandas=table, summary=summary)


def evaluate(logs, decisions, *, estimators: Sequence[str] | None = None, adc: str | pd.DataFrame = "estimate",
             adc_method: str = "variance_optimal", delta: float = 0.05, level: float = 0.95,
             uniform_logging: bool = False, prior_mean: float | None = None, n_ads: int | None = None,
             policies: Sequence[str] | None = None, slate_actions: bool = True) -> EvaluationResult:
    """Off-policy estimates of every target policy in ``decisions`` (same code as ``scavenger evaluate``).

    Estimators (seed 001 sections 3-4, seed 002): scavenging V = sum_a T_a^{-1} sum_{t: a_t = a} r_t 1[pi(x_t)=a]
    with the Theorem 3 bound sum_a sqrt(2 ln(2kT/delta)/T_a); factored sum over (ad, i, j) of (r/C_i) C_j
    pi(a at j) / T_a; slate IPS mean(r prod_k Y_k), PI mean(r G) with G = 1 - K + sum_k Y_k,
    Y_k = pi_k(a_k|x)/mu_k(a_k|x); PI++ mean(rG) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k); SNIPS, wPI
    (ratio forms) and data-driven control variates (pi_beta). ``adc`` is "estimate" (from these logs), a stored
    ADC table path, or an ADC pandas table (e.g. ``scavenger.adc(logs).to_pandas()``).
    Returns the estimates table (policy_id, estimator, value, std_error, ci_low, ci_high, interval_kind, n_events,
    supported_share, window, ...) and the diagnostics (alpha_k, M, H, predicted n*MSE reduction, ESS, ...).
    """
    import numpy as np

    from .estimators import adc as adc_mod
    from .evaluation import EvaluateOptions, estimates_from_stats, gate
    from .statistics import StatsConfig

    table, C, source = None, None, None
    options = EvaluateOptions(estimators=list(estimators) if estimators else None, adc_method=adc_method,
                              delta=delta, level=level, uniform_logging=uniform_logging, prior_mean=prior_mean,
                              n_ads=n_ads, policies=list(policies) if policies else None)
    if isinstance(adc, pd.DataFrame):
        table, source = adc, "given"
    else:
        options.adc = adc
    options.normalized_estimators()  # UsageError on an unknown estimator before any Spark work
    stats = statistics(logs, decisions, StatsConfig(slate_actions=slate_actions))
    verdicts = gate("statistics", stats)
    if table is not None:
        ls = stats.table("log_summary")
        K = int(ls["k_max"].max()) if len(ls) else 0
        C = np.asarray(adc_mod.adc_vector(table, adc_method, K), dtype=float)
    est, diag, adc_used = estimates_from_stats(stats, options, table, C, source)
    verdicts += gate("estimates", est)
    spark = _spark_of(logs)
    summary = {"window": stats.window, "policies": sorted(est["policy_id"].unique().tolist()) if len(est) else [],
               "estimates": len(est)}
    return EvaluationResult(table=_to_spark(spark, est), pandas=est, summary=summary,
                            diagnostics=_to_spark(spark, diag), diagnostics_pandas=diag, adc_pandas=adc_used,
                            stats=stats, verdicts=verdicts)


def validate(logs, decisions=None, *, checks: Sequence[str] | str | None = None,
             max_quarantine_share: float = 0.001, out_dir: str | None = None, great_expectations: bool = False,
             gate: bool = True, run_id: str = "notebook", **config) -> ValidationResult:
    """Row rules (quarantine) and assumption checks a-e on DataFrames (same code as ``scavenger validate``:
    :func:`scavenger.checks.run_gate`).

    a: context independence (chi-square, Cramer's V = sqrt(chi2 / (n (min(r, c) - 1))) per slot), b: exploration
    (T_a, M(a,i) minimums), c: support (target mass on never-logged (slot, ad)), d: factorized logging (seed 002),
    e: propensity calibration (observed count vs sum of logged propensities) -- seed 001 Theorem 3, seed 002.
    ``config`` keys go to :class:`scavenger.checks.gate.GateConfig` (e.g. ``assumptions=AssumptionConfig(...)``).
    Great Expectations suites and Data Docs run only with ``great_expectations=True`` and an ``out_dir``.
    """
    from .checks.gate import ALL_CHECKS, GateConfig, parse_checks, run_gate
    from .progress import phase

    if checks is None:
        checks = ALL_CHECKS
    elif isinstance(checks, str):
        checks = parse_checks(checks)
    cfg = GateConfig(max_quarantine_share=max_quarantine_share, out_dir=out_dir, run_id=run_id,
                     great_expectations=great_expectations, gate=gate, **config)
    spark = _spark_of(logs)
    with phase(spark, "validate", "row rules, quarantine and checks " + ",".join(checks)):
        g = run_gate(spark, logs, decisions, checks=tuple(checks), config=cfg)
    return ValidationResult(table=g.verdicts_df(spark), pandas=g.verdicts, summary={"message": g.message},
                            clean_logs=g.clean_logs, clean_decisions=g.clean_decisions, counts=g.counts,
                            failed=g.failed, message=g.message, gate=g)
