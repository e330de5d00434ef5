"""great-expectations 1.x suites (kept as JSON in ``schemas/expectations/``): the runner and its Data Docs site.

GE reports, the pass quarantines: the row-level quarantine is :mod:`scavenger.checks.rules`, evaluated in the one
pass that reads a day. :mod:`.ge_window` runs the suites on what that pass computed (pandas batches, the same on
both engines):
 - ``<table>.contract`` on the inputs' schemas: required columns exist and every column has the contract's type
   (schema only, no scan; :func:`scavenger.checks.ge_window.schema_suite_spec`);
 - ``<table>.daily`` on the small per-dt table of the pass: rows, quarantined share (<= the gate's threshold), the
   count of every reason code (expected 0), and min/max of propensities, rewards, probabilities, sum deviations
   (:func:`daily_suite_spec`) -- exact, at no extra cost.
Suite parameters (``{"$PARAMETER": name}``) are filled from the job's config (reward range, tolerance, share).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from ..contract import LOGS, schema_dir
from .verdict import FAIL, PASS, WARN, row

SITE = "scavenger"


def suite_dir() -> Path:
    return schema_dir() / "expectations"


def load_suite_spec(name: str) -> dict:
    path = suite_dir() / f"{name}.json"
    with open(path) as fh:
        return json.load(fh)


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
        self.pandas_source = self.ctx.data_sources.add_pandas(name="pandas")

    def run(self, suite_name: str, frame, parameters: dict | None = None, fail_verdict: str = WARN) -> list[dict]:
        """Verdict rows of the pandas ``frame`` validated against ``schemas/expectations/<suite_name>.json``."""
        gx = self.gx
        spec = load_suite_spec(suite_name)
        present = set(frame.columns)
        expectations = [e for e in spec["expectations"]
                        if not (e.get("meta", {}).get("optional") and e["kwargs"].get("column") not in present)]
        asset = self.pandas_source.add_dataframe_asset(name=suite_name)
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
        return [_verdict(suite_name, r, fail_verdict) for vr in res.run_results.values() for r in vr.results]


def _verdict(suite_name: str, r, fail_verdict: str) -> dict:
    """The verdict row of one expectation's result (scope: the expectation and its column arguments)."""
    cfg = r.expectation_config
    kw = {k: v for k, v in cfg.kwargs.items() if k in ("column", "column_A", "column_B", "column_list", "type_")}
    scope = f"{cfg.type}({', '.join(f'{k}={v}' for k, v in kw.items())})"
    result = r.result or {}
    share = result.get("unexpected_percent")
    share = None if share is None else float(share) / 100.0
    reason = (cfg.meta or {}).get("reason_code")
    if r.exception_info and r.exception_info.get("raised_exception"):
        verdict, msg = FAIL, f"expectation raised: {r.exception_info.get('exception_message')}"
    elif r.success:
        n = result.get("element_count")
        verdict, msg = PASS, (f"ok on {n} rows" if n is not None else "ok")
    else:
        verdict = fail_verdict
        observed = result.get("observed_value")
        msg = (f"{result.get('unexpected_count', observed)} unexpected of {result.get('element_count', '?')} rows"
               + (f"; rows are quarantined as {reason}" if reason else "")
               + (f"; observed {observed}" if observed is not None and share is None else ""))
    return row(f"ge.{suite_name}", scope, share, None, verdict, msg)


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
