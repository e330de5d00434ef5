"""The gate every evaluation goes through: quarantine bad rows, check the estimators' assumptions, decide.

    from scavenger.checks import GateConfig, run_gate, ESTIMATOR_CHECKS
    gate = run_gate(spark, logs_df, decisions_df, checks=ESTIMATOR_CHECKS["pi"], config=GateConfig(out_dir=out))
    gate.raise_if_failed()              # DataCheckFailed (exit 3) when config.gate and a check failed
    estimate(gate.clean_logs, gate.clean_decisions) ...
    ctx.result.counts.update(gate.counts); ctx.result.verdicts += gate.verdict_records()
    row["checks"] = gate.verdicts_for("pi")   # {"b": "pass", "c": "fail", ...} on every estimate
    gate.release()

Which checks each estimator relies on (:data:`ESTIMATOR_CHECKS`):
  scavenging, adc, factored, reordering: a (context independence, seed 001 Theorem 3) and b (exploration).
  ips, snips, pi, wpi, pipp (PI++), beta (control variates): b, c (support), d (factorized logging, seed 002) and
  e (calibrated propensities).
The gate fails when the quarantined share of either table passes ``max_quarantine_share`` (default 0.1%) or
when a requested assumption check has a ``fail`` verdict; below, evaluation proceeds on the clean rows and
``counts`` says how many were set aside (rows_in = rows_used + rows_quarantined, exactly).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import pandas as pd

from ..contract import DECISIONS, LOGS
from ..errors import DataCheckFailed, UsageError
from . import assumptions as A
from . import rules as R

ALL_CHECKS = ("a", "b", "c", "d", "e")
_SCAV, _SLATE = ("a", "b"), ("b", "c", "d", "e")
ESTIMATOR_CHECKS = {
    # seed 001: exploration independent of the current context + enough of it
    "scavenging": _SCAV, "scavenging_slate": _SCAV, "scavenging_base": _SCAV, "adc": _SCAV,
    "factored": _SCAV, "reordering": _SCAV, "reorder": _SCAV,
    # seed 002: importance weights need support, a factorized logger and calibrated propensities
    "ips": _SLATE, "snips": _SLATE, "pi": _SLATE, "wpi": _SLATE, "pipp": _SLATE, "pi_plus_plus": _SLATE,
    "beta": _SLATE, "pi_beta": _SLATE,
}
CHECK_NAMES = {"a": "context independence", "b": "enough exploration", "c": "support",
               "d": "factorized logging", "e": "propensity calibration"}


@dataclass
class GateConfig:
    rules: R.RuleConfig = field(default_factory=R.RuleConfig)
    assumptions: A.AssumptionConfig = field(default_factory=A.AssumptionConfig)
    max_quarantine_share: float = 0.001
    gate: bool = True                     # False: report only, never fail
    great_expectations: bool = True
    ge_row_sample: int = 0                # > 0: also run the row-level GE quality suites on ~this many rows
    out_dir: str | None = None            # writes quarantine/, validation/, data_docs/ under it
    run_id: str = "adhoc"
    persist: bool = True
    seed: int = 0


@dataclass
class GateResult:
    clean_logs: object
    clean_decisions: object | None
    verdicts: pd.DataFrame                # check, scope, statistic, threshold, verdict, message
    counts: dict
    failed: bool
    message: str
    check_verdicts: dict                  # {"a": "pass", ...} worst verdict per requested check
    failed_checks: list
    outputs: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    _persisted: list = field(default_factory=list, repr=False)

    def verdict_records(self) -> list[dict]:
        return [{k: (None if (isinstance(v, float) and pd.isna(v)) else v) for k, v in r.items()}
                for r in self.verdicts.to_dict("records")]

    def verdicts_for(self, estimator: str) -> dict:
        """Verdicts of the checks ``estimator`` relies on, to attach to each estimate it writes."""
        return {c: self.check_verdicts.get(c, "not_run") for c in ESTIMATOR_CHECKS[estimator]}

    def verdicts_df(self, spark):
        return spark.createDataFrame(self.verdicts.astype(object).where(self.verdicts.notna(), None),
                                     "check string, scope string, statistic double, threshold double, "
                                     "verdict string, message string")

    def raise_if_failed(self) -> None:
        if self.failed:
            raise DataCheckFailed(self.message, verdicts=self.verdict_records())

    def release(self) -> None:
        for df in self._persisted:
            try:
                df.unpersist()
            except Exception:  # noqa: BLE001 - best effort
                pass
        self._persisted.clear()


def parse_checks(text: str | None) -> tuple:
    if text is None or text.strip() == "":
        return ALL_CHECKS
    items = tuple(sorted({t.strip().lower() for t in text.split(",") if t.strip()}))
    bad = [t for t in items if t not in ALL_CHECKS]
    if bad:
        raise UsageError(f"--checks expects letters from a,b,c,d,e; got {', '.join(bad)}")
    return items


def _table_counts(pdf: pd.DataFrame, codes: list[str], extra: list[str] = ()) -> dict:
    rows_in = int(pdf["rows"].sum())
    q = int(pdf["quarantined"].sum())
    out = {"rows_in": rows_in, "rows_used": rows_in - q, "rows_quarantined": q,
           "quarantined_share": (q / rows_in) if rows_in else 0.0,
           "by_reason": {c: int(pdf[c].sum()) for c in codes if int(pdf[c].sum()) > 0},
           "by_dt": [{"dt": str(r["dt"]), "rows": int(r["rows"]), "quarantined": int(r["quarantined"])}
                     for r in pdf.to_dict("records")]}
    for e in extra:
        out[e] = int(pdf[e].sum())
    return out


def _quarantine_row(table: str, c: dict, cfg: GateConfig) -> dict:
    share = c["quarantined_share"]
    reasons = ", ".join(f"{k}: {v}" for k, v in sorted(c["by_reason"].items(), key=lambda kv: -kv[1])) or "none"
    if share > cfg.max_quarantine_share:
        return A.row("quarantine", table, share, cfg.max_quarantine_share, A.FAIL,
                     f"{c['rows_quarantined']} of {c['rows_in']} rows quarantined ({share:.4%}) > "
                     f"{cfg.max_quarantine_share:.4%} (reasons: {reasons}); fix the upstream data (see quarantine/) "
                     f"or raise --max-quarantine-share")
    verdict = A.WARN if c["rows_quarantined"] else A.PASS
    return A.row("quarantine", table, share, cfg.max_quarantine_share, verdict,
                 f"{c['rows_quarantined']} of {c['rows_in']} rows set aside (reasons: {reasons}); "
                 f"proceeding on {c['rows_used']} clean rows")


def run_gate(spark, logs_df, decisions_df=None, checks=ALL_CHECKS, config: GateConfig | None = None) -> GateResult:
    """Quarantine, assumption checks a-e (those in ``checks``), GE suites and the verdict; see module doc.

    ``logs_df``/``decisions_df`` may be raw (as read; conformed here with try_cast) or already conformed.

    Cost (issue 5 item 5): the logs are read once (plus their event ids for the duplicate count) into one
    persisted frame that carries the reason codes; its one aggregation per dt gives the counts (rows in = rows
    used + rows quarantined), the daily GE profile and the quarantine decision. The decisions are flagged where
    they lie (the day's events are broadcast to them) and persisted once. Every assumption check is one or two
    aggregations of those persisted frames into small tables. ``timings`` holds the seconds of each phase.
    """
    from pyspark.sql import functions as F

    from ..progress import phase
    from ..session import row_storage_level
    from .expectations import daily_aggs

    cfg = config or GateConfig()
    checks = tuple(sorted(set(checks)))
    timings, outputs, persisted = {}, {}, []

    level = row_storage_level(spark)

    def _keep(df):
        if cfg.persist:
            df = df.persist(level)
            persisted.append(df)
        return df

    def _phase(detail):
        return phase(spark, "gate", detail, log=False)

    t0 = time.perf_counter()
    with _phase("row rules: impression logs (one pass, counts per dt)"):
        logs = R.conform_lenient(logs_df, LOGS)
        flagged_logs = _keep(R.flag_logs(logs, cfg.rules))
        extra = {"null_propensity_events": R.null_propensity_condition()}
        log_pdf = R.reason_counts(flagged_logs, R.LOG_REASONS, extra=extra, aggs=daily_aggs(LOGS))
    counts = {"logs": _table_counts(log_pdf, R.LOG_REASONS, extra=list(extra))}
    timings["rules_logs"] = round(time.perf_counter() - t0, 3)
    flagged_dec, dec_pdf = None, None
    if decisions_df is not None:
        t = time.perf_counter()
        with _phase("row rules: decisions (one pass, counts per dt)"):
            unique = counts["logs"]["by_reason"].get("DUPLICATE_EVENT_ID", 0) == 0
            small = counts["logs"]["rows_in"] <= R.BROADCAST_KEYS
            flagged_dec = _keep(R.flag_decisions(R.conform_lenient(decisions_df, DECISIONS), flagged_logs, cfg.rules,
                                                 log_keys_unique=unique, broadcast_events=small))
            dec_pdf = R.reason_counts(flagged_dec, R.DECISION_REASONS,
                                     aggs=daily_aggs(DECISIONS, flagged_dec.columns))
        counts["decisions"] = _table_counts(dec_pdf, R.DECISION_REASONS)
        timings["rules_decisions"] = round(time.perf_counter() - t, 3)
    timings["quarantine_pass"] = round(time.perf_counter() - t0, 3)

    if counts["logs"]["rows_in"] == 0:
        verdicts = pd.DataFrame([A.row("input", LOGS, 0, None, A.FAIL,
                                       "no impression-log rows in the window: check --logs, --from, --to")],
                                columns=A.VERDICT_COLUMNS)
        return GateResult(clean_logs=R.clean(flagged_logs, LOGS), clean_decisions=None, verdicts=verdicts,
                          counts=counts, failed=cfg.gate, message="no impression-log rows in the window",
                          check_verdicts={"input": A.FAIL}, failed_checks=["input"], outputs=outputs,
                          timings=timings, _persisted=persisted)
    rows = [_quarantine_row(LOGS, counts["logs"], cfg)]
    if decisions_df is not None:
        rows.append(_quarantine_row(DECISIONS, counts["decisions"], cfg))

    if cfg.out_dir:
        t = time.perf_counter()
        qpath = f"{cfg.out_dir.rstrip('/')}/quarantine"
        with _phase("write quarantine"):
            R.write_quarantine(spark, flagged_logs, LOGS, f"{qpath}/logs", cfg.run_id, log_pdf["dt"].tolist(),
                               n_quarantined=counts["logs"]["rows_quarantined"])
            outputs["quarantine_logs"] = f"{qpath}/logs"
            if flagged_dec is not None:
                R.write_quarantine(spark, flagged_dec, DECISIONS, f"{qpath}/decisions", cfg.run_id,
                                   dec_pdf["dt"].tolist(), n_quarantined=counts["decisions"]["rows_quarantined"])
                outputs["quarantine_decisions"] = f"{qpath}/decisions"
        timings["quarantine_write"] = round(time.perf_counter() - t, 3)

    clean_logs = R.clean(flagged_logs, LOGS)
    clean_dec = R.clean(flagged_dec, DECISIONS) if flagged_dec is not None else None
    clean_dec_lp = (flagged_dec.where(F.size(F.col(R.REASON)) == 0)
                    .select(F.col("policy_id"), F.col("slots"), F.col(R.LOGGING_POLICY))
                    if flagged_dec is not None else None)

    t = time.perf_counter()
    with _phase(f"assumption checks {','.join(checks) or '-'}"):
        rows += assumption_rows(spark, clean_logs, clean_dec_lp, checks, cfg.assumptions, _keep, timings=timings)
    timings["assumption_checks"] = round(time.perf_counter() - t, 3)

    if cfg.great_expectations:
        t = time.perf_counter()
        from . import expectations as G

        docs = None
        if cfg.out_dir:
            docs = f"{cfg.out_dir.rstrip('/')}/data_docs"
            if "://" not in docs:
                docs = os.path.abspath(docs)          # GE wants an absolute base_directory
        with _phase("great-expectations suites"):
            runner = G.GERunner(docs)
            params = {"reward_min": cfg.rules.reward_min, "reward_max": cfg.rules.reward_max,
                      "sum_tolerance": cfg.rules.sum_tolerance, "max_quarantine_share": cfg.max_quarantine_share}
            rows += G.run_suites(runner, logs_df, log_pdf, params, raw_decisions=decisions_df, dec_daily=dec_pdf,
                                 flagged_logs=flagged_logs, n_logs=counts["logs"]["rows_in"],
                                 flagged_decisions=flagged_dec,
                                 n_decisions=counts.get("decisions", {}).get("rows_in", 0),
                                 row_sample=cfg.ge_row_sample, seed=cfg.seed)
        if runner.index_path():
            outputs["data_docs"] = runner.index_path()
        timings["great_expectations"] = round(time.perf_counter() - t, 3)

    verdicts = pd.DataFrame(rows, columns=A.VERDICT_COLUMNS)
    check_verdicts = {}
    for c in checks:
        sub = verdicts[verdicts["check"].str.startswith(f"{c}.")]
        check_verdicts[c] = A.worst(sub["verdict"]) if not sub.empty else "not_run"
    check_verdicts["quarantine"] = A.worst(verdicts.loc[verdicts["check"] == "quarantine", "verdict"])
    failed_checks = [c for c, v in check_verdicts.items() if v == A.FAIL]
    failed = cfg.gate and bool(failed_checks)
    if failed_checks:
        first = verdicts[(verdicts["verdict"] == A.FAIL) & ~verdicts["check"].str.startswith("ge.")]
        detail = "; ".join(f"{r['check']} [{r['scope']}]: {r['message']}" for r in first.head(3).to_dict("records"))
        names = ", ".join(f"{c} ({CHECK_NAMES.get(c, c)})" for c in failed_checks)
        message = f"data checks failed: {names}. {detail}"
    else:
        ql = counts["logs"]
        message = (f"data checks passed; {ql['rows_quarantined']} of {ql['rows_in']} log rows set aside"
                   + (f", {counts['decisions']['rows_quarantined']} of {counts['decisions']['rows_in']} decision "
                      f"rows" if "decisions" in counts else ""))

    if cfg.out_dir:
        t = time.perf_counter()
        path = f"{cfg.out_dir.rstrip('/')}/validation"
        res = GateResult(None, None, verdicts, counts, failed, message, check_verdicts, failed_checks)
        with _phase("write validation table"):
            res.verdicts_df(spark).coalesce(1).write.mode("overwrite").parquet(path)
        outputs["validation"] = path
        timings["validation_write"] = round(time.perf_counter() - t, 3)
    timings["total"] = round(time.perf_counter() - t0, 3)
    return GateResult(clean_logs=clean_logs, clean_decisions=clean_dec, verdicts=verdicts, counts=counts,
                      failed=failed, message=message, check_verdicts=check_verdicts, failed_checks=failed_checks,
                      outputs=outputs, timings=timings, _persisted=persisted)


def assumption_rows(spark, clean_logs, clean_dec, checks, acfg: A.AssumptionConfig, keep=lambda d: d,
                    timings: dict | None = None) -> list:
    """Spark aggregates -> small pandas tables -> verdict rows for the requested checks.

    Spark work: the slot table (one aggregation; b, c, e and the time rows of a), the target mass (b, c), the
    context table (a), the slot-pair marginals and cells (d, two aggregations), a stratified slot table only
    when check e's scope is a key the user fixed; nothing is persisted here (``keep`` is kept for callers).
    ``timings`` (if given) receives the seconds of each."""
    if not checks:
        return []
    timings = {} if timings is None else timings
    rows = []

    def _timed(name, fn):
        t = time.perf_counter()
        out = fn()
        timings[f"check_{name}"] = round(timings.get(f"check_{name}", 0.0) + time.perf_counter() - t, 3)
        return out

    cal_mode, cal_key = A.parse_calibration_scope(acfg.calibration_scope) if "e" in checks else ("policy", None)
    need_slot = bool(set(checks) & {"a", "b", "c", "e"})
    slot_pdf = None
    if need_slot:
        slot_pdf = _timed("slot_table", lambda: A.slot_table(
            clean_logs, cal_key if cal_mode == "auto" else None).toPandas())
        slot_pdf["dt"] = slot_pdf["dt"].astype(str)
    mass_pdf = None
    if clean_dec is not None and set(checks) & {"b", "c"}:
        def _mass():
            support = (slot_pdf.groupby(["logging_policy", "position", "ad_id"], as_index=False)
                       .agg(n=("n", "sum"), max_p=("max_p", "max")))
            support_sdf = spark.createDataFrame(
                support.astype(object).where(support.notna(), None),
                "logging_policy string, position int, ad_id string, n long, max_p double")
            return A.target_mass(clean_dec, clean_logs, support_sdf).toPandas()
        mass_pdf = _timed("target_mass", _mass)
    plain_slot = (slot_pdf.drop(columns=[c for c in ("stratum_min", "stratum_max") if c in slot_pdf.columns])
                  if slot_pdf is not None else None)
    if "a" in checks:
        ctx_pdf = _timed("a", lambda: A.context_table(clean_logs, acfg.include_context_id).toPandas())
        rows += _timed("a", lambda: A.check_a(ctx_pdf, plain_slot, acfg))
    if "b" in checks:
        rows += A.check_b(plain_slot, mass_pdf, acfg)
    if "c" in checks:
        if mass_pdf is None:
            rows.append(A.row("c.support", "all", None, acfg.support_max, A.WARN,
                              "no decisions given: the target's support cannot be checked"))
        else:
            rows += A.check_c(mass_pdf, acfg)
    if "d" in checks:
        strata = _timed("d", lambda: A.pair_strata_from_logs(clean_logs, spark))
        rows += A.check_d(strata, acfg)
    if "e" in checks:
        def _e():
            # the cells of check e: (policy, stratum, dt, position, ad); N(policy, stratum, dt, position) = the
            # slates showing position k there = the sum of M over its ads (one ad per shown position; also right
            # for partial one-slot rows such as OBD's)
            if cal_mode == "fixed":
                cal = A.stratified_slot_table(clean_logs, cal_key).toPandas()
                cal["dt"] = cal["dt"].astype(str)
                note = f"within each value of {cal_key}"
            else:
                strata_of = A.partition_strata(slot_pdf) if cal_mode == "auto" else {}
                cal = A.calibration_slot(slot_pdf, strata_of)
                note = {p: f"within each of the {s.nunique()} values of {cal_key}, which partition its ads"
                        for p, s in strata_of.items()}
            events = cal.groupby(["logging_policy", "stratum", "dt", "position"], as_index=False).agg(
                events=("n", "sum"))
            return A.check_e(cal, events, acfg, scope_note=note)
        rows += _timed("e", _e)
    return rows
