"""Numerical care (issue 8, item 5): the statistics layer's Spark sums over 1e7 rows with importance weights up
to 1e4 agree with ``math.fsum`` (exactly rounded) of the same per-row values to 1e-9 relative.

The aggregation under test is the real one (``statistics.scan._policy_groups``, the slate-moment sums), fed with
a synthetic joined frame of 1e7 rows built from hashes (no input files). The per-row values are collected once
(Arrow) and summed with ``math.fsum`` on the driver. Every summed term of the scan is non-negative when rewards
are (r, Y_k, W, their products), so plain double sums in each task -- a few million terms each -- have a relative
error below n * 2^-53 ~ 1e-9 in the worst case and ~sqrt(n) * 2^-53 ~ 1e-13 in practice; the merge of partial
sums across tasks and days adds a handful of terms (pandas adds them with Kahan summation).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

N = 10_000_000
REL = 1e-9


@pytest.fixture(scope="module")
def heavy(spark):
    from pyspark.sql import functions as F

    from scavenger.statistics.scan import hash_uniform

    u = [hash_uniform(F.lit(s), F.col("id")) for s in range(4)]
    df = spark.range(N, numPartitions=4).select(
        F.lit("2026-01-01").cast("date").alias("dt"), F.lit("p").alias("policy_id"),
        F.lit("lp").alias("logging_policy"), F.lit(None).cast("string").alias("base_policy"),
        F.when(u[0] < 0.3, F.lit(1.0)).otherwise(F.lit(0.0)).alias("r"),
        F.lit(True).alias("deterministic"), F.lit(False).alias("reorder"), F.lit(False).alias("miss"),
        # Y_1 = 1 / mu with mu down to 1e-4: heavy-tailed weights up to 1e4; Y_2 in {0, 1/0.7}
        (F.lit(1.0) / F.greatest(u[1], F.lit(1e-4))).alias("Y_1"),
        F.when(u[2] < 0.7, F.lit(1.0 / 0.7)).otherwise(F.lit(0.0)).alias("Y_2"),
    )
    return df


def test_sums_agree_with_fsum(heavy):
    from scavenger.statistics.scan import _policy_groups, _upper_pairs

    got = _policy_groups(heavy, 2).toPandas().iloc[0]
    cols = heavy.select("r", "Y_1", "Y_2").toArrow()
    r = cols.column("r").to_numpy()
    Y = [cols.column("Y_1").to_numpy(), cols.column("Y_2").to_numpy()]
    assert len(r) == N and Y[0].max() == pytest.approx(1e4) and Y[0].min() >= 1.0
    W = Y[0] * Y[1]
    want = {
        "s_r": r, "s_W": W, "s_rW": r * W, "s_W2": W * W, "s_rW2": r * W * W, "s_r2W2": r * r * W * W,
    }
    for k in range(2):
        want[f"s_Y[{k}]"] = Y[k]
        want[f"s_rY[{k}]"] = r * Y[k]
    for i, (j, k) in enumerate(_upper_pairs(2)):  # the scan sums the upper triangle of the symmetric YY sums
        want[f"s_YY[{i}]"] = Y[j] * Y[k]
        want[f"s_r2YY[{i}]"] = r * r * Y[j] * Y[k]
    worst = 0.0
    for name, terms in want.items():
        exact = math.fsum(terms.tolist())
        col, _, idx = name.partition("[")
        value = got[col] if not idx else np.asarray(got[col])[int(idx[:-1])]
        rel = abs(value - exact) / abs(exact)
        worst = max(worst, rel)
        assert rel <= REL, (name, value, exact, rel)
    print(f"worst relative difference to fsum over {len(want)} sums of {N:,} rows: {worst:.2e}")
