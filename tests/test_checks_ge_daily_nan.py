"""The per-day great-expectations suites (``<table>.daily``): a NaN in a day must not hide an out-of-range value.

Spark and DuckDB order NaN above every number, so max() over a day holding a NaN propensity was NaN, and GE skips
a NaN cell: ``max_propensity <= 1`` passed ("ok") on a day that also held a propensity of 1.5. The NaN itself is
reported by its own rule (PROPENSITY_GT_1, PROBABILITY_OUT_OF_RANGE: rows quarantined), the ranges ignore it.
"""
from __future__ import annotations

import math

import pytest

from helpers.reference import arrow_tables, build_random
from scavenger.checks.judge import _per_day
from scavenger.engines.duck import DuckDBEngine
from scavenger.pipelines.common import GateConfig, describe_inputs
from scavenger.pipelines.validate import validate


@pytest.fixture(scope="module")
def validation():
    """One day (2026-03-01): an out-of-range value beside a NaN in propensities, rewards and probabilities; a
    second day (2026-03-02) whose only bad value is a NaN propensity."""
    data = build_random(seed=3, K=2, n_ads=4, days=(0, 1), per_day=50, with_nulls=False)
    day0 = [e for e in data["logs"] if e["dt"].day == 1]
    day1 = [e for e in data["logs"] if e["dt"].day == 2]
    day0[0]["slots"][0]["propensity"] = 1.5
    day0[1]["slots"][0]["propensity"] = float("nan")
    day0[2]["slots"][0]["reward"] = 5.0
    day0[3]["slots"][0]["reward"] = float("nan")
    day1[0]["slots"][0]["propensity"] = float("nan")
    det = [d for d in data["decisions"] if d["policy_id"] == "det" and d["dt"].day == 1]
    det[0]["slots"][0]["probability"] = 1.5
    det[5]["slots"][0]["probability"] = float("nan")
    logs, decs = arrow_tables(data)
    eng = DuckDBEngine("test")
    try:
        v = validate(eng, describe_inputs(logs, decs), None, ("a",),
                     GateConfig(mode="report", max_quarantine_share=1.0))
    finally:
        eng.close()
    return v


def _ge(v, suite: str, column: str) -> list:
    return [(r["verdict"], r["message"]) for r in v.ge_rows
            if r["check"] == f"ge.{suite}.daily" and f"column={column})" in r["scope"]]


def test_daily_ranges_leave_nan_out(validation):
    logs = _per_day(validation.window.stats, "log_counts").sort_values("dt").reset_index(drop=True)
    assert list(logs["max_propensity"])[0] == 1.5
    assert list(logs["max_reward"]) == [5.0, 1.0]
    assert not any(math.isnan(x) for x in logs["max_propensity"])   # day 2: its NaN is left out of the range
    assert list(logs["PROPENSITY_GT_1"]) == [2, 1]                   # ... and counted by its own rule
    assert list(logs["REWARD_NOT_FINITE"]) == [1, 0]
    decs = _per_day(validation.window.stats, "decision_counts").sort_values("dt").reset_index(drop=True)
    assert list(decs["max_probability"]) == [1.5, 1.0]
    assert list(decs["max_sum_deviation"]) == [pytest.approx(0.5, abs=1e-12), pytest.approx(0.0, abs=1e-12)]
    assert list(decs["PROBABILITY_OUT_OF_RANGE"]) == [2, 0]


def test_out_of_range_maximum_reported_beside_nan(validation):
    assert _ge(validation, "impression_log", "max_propensity") == [
        ("warn", "1 unexpected of 2 rows; rows are quarantined as PROPENSITY_GT_1")]
    assert _ge(validation, "impression_log", "max_reward") == [
        ("warn", "1 unexpected of 2 rows; rows are quarantined as REWARD_OUT_OF_RANGE")]
    assert _ge(validation, "impression_log", "PROPENSITY_GT_1") == [
        ("warn", "2 unexpected of 2 rows; rows are quarantined as PROPENSITY_GT_1")]
    assert _ge(validation, "decisions", "max_probability") == [
        ("warn", "1 unexpected of 2 rows; rows are quarantined as PROBABILITY_OUT_OF_RANGE")]
    assert _ge(validation, "decisions", "max_sum_deviation") == [
        ("warn", "1 unexpected of 2 rows; rows are quarantined as PROBABILITY_SUM")]
