"""great-expectations 1.x suites (kept as JSON in ``schemas/expectations/``) run on Spark; Data Docs site.

GE reports, Spark quarantines: the row-level quarantine is :mod:`scavenger.checks.rules`; GE validates
 - ``<table>.contract`` on the frame as read (before conforming): required columns exist and every column has
   the contract's Spark type -- schema-only expectations, no scan;
 - ``<table>.daily`` on the small per-dt table that the quarantine pass computes anyway (one aggregation):
   rows, quarantined share (<= the gate's threshold), the count of every reason code (expected 0), and
   min/max of propensities, rewards, probabilities, sum deviations -- exact, at no extra Spark cost;
 - ``<table>.quality`` (opt-in, ``row_sample`` > 0) on a per-row *profile* of the conformed frame (one scalar per
   nested rule: number of slots, min/max position, distinct ads, min/max propensity, UTC day of event_time ...),
   each rule a stock GE expectation; above ``row_sample`` rows GE sees a seeded Bernoulli sample of that
   expected size. Off by default because GE issues ~one Spark job per expectation (measured: ~200 s for 40k
   rows on a loaded 2-core box vs ~70 s for the whole quarantine pass).
Suite parameters (``{"$PARAMETER": name}``) are filled from the job's config (reward range, tolerance, share).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..contract import DECISIONS, LOGS, load_contract, schema_dir
from .assumptions import FAIL, PASS, WARN, row

SITE = "scavenger"


def suite_dir() -> Path:
    return schema_dir() / "expectations"


def load_suite_spec(name: str) -> dict:
    path = suite_dir() / f"{name}.json"
    with open(path) as fh:
        return json.load(fh)


def profile_logs(flagged):
    """One row per event: scalars the quality suite checks (built-in SQL only)."""
    from pyspark.sql import functions as F

    slots = F.col("slots")
    pos = F.transform(slots, lambda s: s["position"])
    props = F.transform(slots, lambda s: s["propensity"])
    rewards = F.filter(F.transform(slots, lambda s: s["reward"]), lambda r: r.isNotNull())
    finite = F.filter(rewards, lambda r: ~(F.isnan(r) | (F.abs(r) == F.lit(float("inf")))))
    return flagged.select(
        F.col("event_id"), F.col("logging_policy"), F.col("event_time"), F.col("dt"),
        F.date_from_unix_date(F.floor(F.unix_seconds(F.col("event_time")) / F.lit(86400)).cast("int"))
         .alias("event_day"),
        F.size(slots).alias("n_slots"),
        F.array_min(pos).alias("min_position"), F.array_max(pos).alias("max_position"),
        F.size(F.array_distinct(pos)).alias("n_distinct_positions"),
        F.size(F.array_distinct(F.transform(slots, lambda s: s["ad_id"]))).alias("n_distinct_ads"),
        F.array_min(props).alias("min_propensity"), F.array_max(props).alias("max_propensity"),
        F.size(F.filter(props, lambda p: p.isNull())).alias("n_null_propensity"),
        (F.size(rewards) - F.size(finite)).alias("n_nonfinite_reward"),
        F.array_min(finite).alias("min_reward"), F.array_max(finite).alias("max_reward"),
    )


def profile_decisions(flagged):
    from pyspark.sql import functions as F

    slots = F.col("slots")
    probs = F.transform(slots, lambda s: s["probability"])
    positions = F.array_distinct(F.transform(slots, lambda s: s["position"]))
    sums = F.transform(positions, lambda p: F.abs(F.aggregate(
        F.filter(slots, lambda s: s["position"] == p), F.lit(0.0),
        lambda acc, s: acc + F.coalesce(s["probability"], F.lit(0.0))) - F.lit(1.0)))
    return flagged.select(
        F.col("policy_id"), F.col("event_id"), F.col("dt"),
        F.size(slots).alias("n_entries"), F.array_min(probs).alias("min_probability"),
        F.array_max(probs).alias("max_probability"), F.array_max(sums).alias("max_sum_deviation"),
        (~F.array_contains(F.col("reason_codes"), F.lit("UNKNOWN_EVENT"))).alias("event_exists"),
    )


@dataclass
class GEOutcome:
    rows: list            # verdict rows
    success: bool
    docs_index: str | None
    statistics: dict


class GERunner:
    """An ephemeral GE context whose Data Docs site is ``<docs_dir>`` (nothing else written)."""

    def __init__(self, docs_dir: str | None):
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        self.gx = gx
        self.ctx = gx.get_context(mode="ephemeral")
        try:
            self.ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # noqa: BLE001 - cosmetic only
            pass
        self.docs_dir = docs_dir
        if docs_dir:
            self.ctx.add_data_docs_site(site_name=SITE, site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
        self._spark_source = None   # added on first use: a Spark data source starts a JVM
        self.pandas_source = self.ctx.data_sources.add_pandas(name="pandas")
        self.results = []

    @property
    def spark_source(self):
        if self._spark_source is None:
            self._spark_source = self.ctx.data_sources.add_spark(name="spark")
        return self._spark_source

    def run(self, suite_name: str, frame, parameters: dict | None = None, fail_verdict: str = WARN,
            note: str = "") -> GEOutcome:
        """Validate ``frame`` (Spark or pandas) against ``schemas/expectations/<suite_name>.json``."""
        gx = self.gx
        spec = load_suite_spec(suite_name)
        present = set(frame.columns)
        expectations = [e for e in spec["expectations"]
                        if not (e.get("meta", {}).get("optional") and e["kwargs"].get("column") not in present)]
        source = self.pandas_source if hasattr(frame, "iloc") else self.spark_source
        asset = source.add_dataframe_asset(name=suite_name)
        batch_def = asset.add_batch_definition_whole_dataframe(f"{suite_name}.whole")
        suite = self.ctx.suites.add(gx.ExpectationSuite(name=suite_name, expectations=expectations,
                                                         meta=spec.get("meta", {})))
        vd = self.ctx.validation_definitions.add(gx.ValidationDefinition(name=suite_name, data=batch_def,
                                                                         suite=suite))
        actions = [gx.checkpoint.UpdateDataDocsAction(name="docs", site_names=[SITE])] if self.docs_dir else []
        cp = self.ctx.checkpoints.add(gx.Checkpoint(name=suite_name, validation_definitions=[vd],
                                                    actions=actions, result_format="SUMMARY"))
        from .ge_safe import safe_frame

        # Data Docs show unexpected values as raw HTML: give GE only values that are inert there (ge_safe.py)
        res = cp.run(batch_parameters={"dataframe": safe_frame(frame, expectations)},
                     expectation_parameters=parameters or {})
        rows = []
        for vr in res.run_results.values():
            for r in vr.results:
                cfg = r.expectation_config
                kw = {k: v for k, v in cfg.kwargs.items() if k in ("column", "column_A", "column_B",
                                                                   "column_list", "type_")}
                scope = f"{cfg.type}({', '.join(f'{k}={v}' for k, v in kw.items())})"
                result = r.result or {}
                share = result.get("unexpected_percent")
                share = None if share is None else float(share) / 100.0
                reason = (cfg.meta or {}).get("reason_code")
                if r.exception_info and r.exception_info.get("raised_exception"):
                    verdict, msg = FAIL, f"expectation raised: {r.exception_info.get('exception_message')}"
                elif r.success:
                    n = result.get("element_count")
                    verdict, msg = PASS, (f"ok on {n} rows{note}" if n is not None else "ok")
                else:
                    verdict = fail_verdict
                    observed = result.get("observed_value")
                    msg = (f"{result.get('unexpected_count', observed)} unexpected of "
                           f"{result.get('element_count', '?')} rows{note}"
                           + (f"; rows are quarantined as {reason}" if reason else "")
                           + (f"; observed {observed}" if observed is not None and share is None else ""))
                rows.append(row(f"ge.{suite_name}", scope, share, None, verdict, msg))
        self.results.append(res)
        stats = {"evaluated": len(rows), "successful": sum(1 for r in rows if r["verdict"] == PASS)}
        return GEOutcome(rows=rows, success=bool(res.success), docs_index=self.index_path(), statistics=stats)

    def index_path(self) -> str | None:
        if not self.docs_dir:
            return None
        p = Path(self.docs_dir) / "index.html"
        return str(p) if p.exists() else None


def daily_aggs(name: str, columns=None) -> dict:
    """Aggregates computed per dt in the quarantine pass (over all rows, clean or not) for the daily suite;
    ``columns``: those of the frame they will run on (flagged decisions carry their sum deviation).

    Code-generated array expressions (see :mod:`scavenger.checks.rules`); a lambda runs only on the rare rows
    that need it (a non-finite reward; several entries or a null at one position of a decision)."""
    from pyspark.sql import functions as F

    from .rules import SUM_DEVIATION, any_not_finite, max_sum_deviation

    slots = F.col("slots")
    if name == LOGS:
        props, rewards = slots["propensity"], slots["reward"]
        finite = F.filter(rewards, lambda r: r.isNotNull() & ~(F.isnan(r) | (F.abs(r) == F.lit(float("inf")))))
        bad = any_not_finite(rewards)
        low = F.when(bad, F.array_min(finite)).otherwise(F.array_min(rewards))
        high = F.when(bad, F.array_max(finite)).otherwise(F.array_max(rewards))
        return {"min_propensity": F.min(F.array_min(props)), "max_propensity": F.max(F.array_max(props)),
                "min_reward": F.min(low), "max_reward": F.max(high),
                "min_slots": F.min(F.size(slots)), "max_slots": F.max(F.size(slots))}
    probs = slots["probability"]
    # flagged decisions carry the deviation (computed once for PROBABILITY_SUM); any other frame computes it
    dev = F.col(SUM_DEVIATION) if columns is not None and SUM_DEVIATION in columns else max_sum_deviation(slots)
    return {"min_probability": F.min(F.array_min(probs)), "max_probability": F.max(F.array_max(probs)),
            "max_sum_deviation": F.max(dev)}


def daily_suite_spec(name: str) -> dict:
    """The daily suite of a table (written to ``schemas/expectations/<name>.daily.json``)."""
    from .rules import DECISION_REASONS, LOG_REASONS

    def e(t, meta=None, **kw):
        return {"type": t, "kwargs": kw, "meta": meta or {}}

    par = lambda n: {"$PARAMETER": n}  # noqa: E731
    exps = [e("expect_column_values_to_not_be_null", column="dt"),
            e("expect_column_values_to_be_between", {"notes": "a day without rows is suspicious"},
              column="rows", min_value=1),
            e("expect_column_values_to_be_between", {"notes": "the gate: quarantined share per day"},
              column="quarantined_share", min_value=0, max_value=par("max_quarantine_share"))]
    codes = LOG_REASONS if name == LOGS else DECISION_REASONS
    exps += [e("expect_column_values_to_be_between", {"reason_code": c, "notes": "rows with this reason per day"},
               column=c, min_value=0, max_value=0) for c in codes]
    if name == LOGS:
        exps += [e("expect_column_values_to_be_between", {"reason_code": "ZERO_PROPENSITY"},
                   column="min_propensity", min_value=0, strict_min=True),
                 e("expect_column_values_to_be_between", {"reason_code": "PROPENSITY_GT_1"},
                   column="max_propensity", max_value=1),
                 e("expect_column_values_to_be_between", {"reason_code": "REWARD_OUT_OF_RANGE"},
                   column="min_reward", min_value=par("reward_min")),
                 e("expect_column_values_to_be_between", {"reason_code": "REWARD_OUT_OF_RANGE"},
                   column="max_reward", max_value=par("reward_max")),
                 e("expect_column_values_to_be_between", {"reason_code": "EMPTY_SLATE"},
                   column="min_slots", min_value=1)]
    else:
        exps += [e("expect_column_values_to_be_between", {"reason_code": "PROBABILITY_OUT_OF_RANGE"},
                   column="min_probability", min_value=0),
                 e("expect_column_values_to_be_between", {"reason_code": "PROBABILITY_OUT_OF_RANGE"},
                   column="max_probability", max_value=1),
                 e("expect_column_values_to_be_between", {"reason_code": "PROBABILITY_SUM"},
                   column="max_sum_deviation", max_value=par("sum_tolerance"))]
    return {"name": f"{name}.daily", "expectations": exps,
            "meta": {"description": f"Per dt of {name}: exact counts and ranges from the quarantine pass "
                                    f"(scavenger.checks.rules.reason_counts + expectations.daily_aggs)."}}


def daily_frame(pdf):
    """The per-dt counts table as the daily suite expects it (dt as string, quarantined_share)."""
    out = pdf.copy()
    out["dt"] = out["dt"].astype(str)
    out["quarantined_share"] = out["quarantined"] / out["rows"].where(out["rows"] > 0)
    return out


def run_suites(runner: GERunner, raw_logs, log_daily, params: dict, raw_decisions=None, dec_daily=None,
               flagged_logs=None, n_logs: int = 0, flagged_decisions=None, n_decisions: int = 0,
               row_sample: int = 0, seed: int = 0) -> list[dict]:
    """All suites of a validation run; returns verdict rows."""
    rows = []
    rows += runner.run(f"{LOGS}.contract", raw_logs, fail_verdict=WARN).rows
    rows += runner.run(f"{LOGS}.daily", daily_frame(log_daily), params).rows
    if row_sample > 0 and flagged_logs is not None:
        sample, note = _maybe_sample(profile_logs(flagged_logs), n_logs, row_sample, seed)
        rows += runner.run(f"{LOGS}.quality", sample, params, note=note).rows
    if raw_decisions is not None:
        rows += runner.run(f"{DECISIONS}.contract", raw_decisions, fail_verdict=WARN).rows
        rows += runner.run(f"{DECISIONS}.daily", daily_frame(dec_daily), params).rows
        if row_sample > 0 and flagged_decisions is not None:
            sample, note = _maybe_sample(profile_decisions(flagged_decisions), n_decisions, row_sample, seed)
            rows += runner.run(f"{DECISIONS}.quality", sample, params, note=note).rows
    return rows


def _maybe_sample(frame, n: int, max_rows: int, seed: int):
    if n <= max_rows or n == 0:
        return frame, ""
    fraction = max_rows / float(n)
    return frame.sample(withReplacement=False, fraction=fraction, seed=seed), \
        f" (Bernoulli sample, fraction {fraction:.4g} of {n} rows)"


def contract_suite_spec(name: str) -> dict:
    """The contract suite derived from ``schemas/<name>.schema.json`` (used to write/verify the JSON file)."""
    contract = load_contract(name)
    expectations = []
    for f in contract.struct_type().fields:
        optional = f.name not in contract.required_columns
        if not optional:
            expectations.append({"type": "expect_column_to_exist", "kwargs": {"column": f.name},
                                 "meta": {"contract": name}})
        expectations.append({"type": "expect_column_values_to_be_of_type",
                             "kwargs": {"column": f.name, "type_": type(f.dataType).__name__},
                             "meta": {"contract": name, "optional": optional}})
    return {"name": f"{name}.contract", "expectations": expectations,
            "meta": {"description": f"Generated from schemas/{name}.schema.json: required columns exist and every "
                                    f"column has the contract's Spark type (run on the frame as read). A missing "
                                    f"required column fails the job (exit 3); a wrong type is cast by the reader and "
                                    f"values that do not parse are quarantined."}}
