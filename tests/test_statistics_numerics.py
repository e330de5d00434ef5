"""Numerical care (issue 8, item 5): the statistics layer's sums over 1e7 rows with importance weights up to 1e4
agree with an exact sum of the same per-row values to 1e-9 relative, on DuckDB and on Spark (marked slow: the
draw and the reference sums of 1e7 rows take a while; 1e6 rows on DuckDB are the quick check).

The aggregation under test is the real one: the statement ``statistics/sql/decision_tables.policy_groups`` (the
slate-moment sums, one group per fold) run by the engine, split and merged over the folds as the store does
(``statistics/tables.py``). Its input, a synthetic joined relation of 1e7 rows drawn with numpy, is one Parquet
file that the engine reads (``engine.read_parquet``). Every summed term is non-negative when rewards are (r, Y_k,
W and their products), so plain double sums -- millions of terms per thread or task -- have a relative error
below n * 2^-53 ~ 1e-9 in the worst case and ~sqrt(n) * 2^-53 ~ 1e-13 in practice; the merge of partial sums
across folds and days adds a handful of terms. The reference sums: ``math.fsum`` (exactly rounded) for the
heaviest-tailed sum, and for every sum a pairwise sum in extended precision (x86 long double, 64-bit mantissa:
relative error below log2(n) * 2^-64 ~ 1e-18), or ``math.fsum`` where long double is plain double. Rewards are
0/1, so r * r * X is r * X bit for bit and each distinct term array is summed once.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

BIG = 10_000_000
REL = 1e-9
K = 2

# the per-row terms of the slate-moment sums (decision_tables.moment_columns), in the statement's product order
TERMS = {
    "s_r": lambda r, Y, W: r, "s_r2": lambda r, Y, W: r * r, "s_W": lambda r, Y, W: W,
    "s_rW": lambda r, Y, W: r * W, "s_W2": lambda r, Y, W: W * W, "s_rW2": lambda r, Y, W: r * W * W,
    "s_r2W2": lambda r, Y, W: r * r * W * W,
    **{f"s_Y_{k}": (lambda k: lambda r, Y, W: Y[k - 1])(k) for k in (1, 2)},
    **{f"s_rY_{k}": (lambda k: lambda r, Y, W: r * Y[k - 1])(k) for k in (1, 2)},
    **{f"s_r2Y_{k}": (lambda k: lambda r, Y, W: r * r * Y[k - 1])(k) for k in (1, 2)},
    **{f"s_YY_{j}_{k}": (lambda j, k: lambda r, Y, W: Y[j - 1] * Y[k - 1])(j, k) for j, k in ((1, 1), (1, 2), (2, 2))},
    **{f"s_rYY_{j}_{k}": (lambda j, k: lambda r, Y, W: r * Y[j - 1] * Y[k - 1])(j, k)
       for j, k in ((1, 1), (1, 2), (2, 2))},
    **{f"s_r2YY_{j}_{k}": (lambda j, k: lambda r, Y, W: r * r * Y[j - 1] * Y[k - 1])(j, k)
       for j, k in ((1, 1), (1, 2), (2, 2))},
}

SLOTS = "ARRAY<STRUCT<position: INT, ad_id: STRING, propensity: DOUBLE, reward: DOUBLE>>"
DSLOTS = "ARRAY<STRUCT<position: INT, ad_id: STRING, probability: DOUBLE>>"
# the joined relation as the pass builds it: a one-entry-per-position deterministic decision whose ad at slot 1 is
# always the logged one (Y_1 = 1/mu_1) and at slot 2 the logged one when hit_2 (Y_2 = 1/0.7, else 0)
JOINED = f"""
SELECT DATE '2026-01-01' AS dt, 'p' AS policy_id, 'lp' AS logging_policy, CAST(NULL AS STRING) AS base_policy,
  fold, true AS det, true AS simple, CAST(NULL AS {DSLOTS}) AS dslots, CAST(NULL AS {SLOTS}) AS xs, 2 AS n_slots,
  r, false AS miss, true AS clean, 'x' AS a_1, mu_1, 'x' AS d_a_1, 1D AS d_p_1,
  'x' AS a_2, 0.7D AS mu_2, CASE WHEN hit_2 THEN 'x' ELSE 'y' END AS d_a_2, 1D AS d_p_2
FROM scv_heavy"""


def exact_sum(terms: np.ndarray) -> float:
    """The sum of non-negative terms to far below 1e-9 relative (see the module doc)."""
    if np.finfo(np.longdouble).nmant >= 63:
        return float(np.sum(terms.astype(np.longdouble)))
    return math.fsum(terms.tolist())


@pytest.fixture(scope="module")
def heavy(request, tmp_path_factory):
    """(Parquet path, r, [Y_1, Y_2]) of N = request.param rows: r ~ Bernoulli(0.3); Y_1 = 1/mu with mu ~ U(0, 1)
    floored at 1e-4 (heavy tailed, up to 1e4); Y_2 in {0, 1/0.7}; the fold alternates. The file holds r, mu_1 and
    whether slot 2's ad is the target's; the statement computes Y_k = pi_k/mu_k itself."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    N = request.param
    rng = np.random.default_rng(2026)
    r = (rng.random(N) < 0.3).astype(float)
    mu_1 = np.maximum(rng.random(N), 1e-4)
    hit_2 = rng.random(N) < 0.7
    Y = [1.0 / mu_1, np.where(hit_2, 1.0 / 0.7, 0.0)]
    path = str(tmp_path_factory.mktemp("heavy") / "joined.parquet")
    pq.write_table(pa.table({"fold": (np.arange(N) % 2).astype(np.int32), "r": r, "mu_1": mu_1, "hit_2": hit_2}),
                   path, row_group_size=1 << 20)
    return path, r, Y


def _engine_sums(engine, path: str) -> dict:
    """The merged slate moments of the one policy, as the pass computes and the store merges them."""
    from scavenger.statistics.sql import decision_tables as DT
    from scavenger.statistics.tables import merge, split_policy_groups

    engine.read_parquet("scv_heavy", [path])
    engine.view("scv_joined", JOINED)
    groups = engine.fetch(DT.policy_groups(K, K), "policy_groups")
    assert len(groups) == 2                                   # one group per fold
    sm = split_policy_groups(groups)["slate_moments"]
    return merge("slate_moments", [sm.assign(fold=0)]).iloc[0].to_dict()


def _check(got: dict, r: np.ndarray, Y: list) -> float:
    N = len(r)
    assert Y[0].max() == pytest.approx(1e4) and Y[0].min() >= 1.0
    assert np.array_equal(r * r, r)                           # 0/1 rewards: r^2 terms equal r terms
    W = Y[0] * Y[1]
    assert got["n"] == N and got["n_missing_propensity"] == 0
    assert got["n_W_pos"] == int((W > 0).sum()) and got["n_Y_pos_2"] == int((Y[1] > 0).sum())
    assert got["max_W"] == W.max() and got["max_Y_1"] == Y[0].max()
    worst, exact_of = 0.0, {}
    for name in TERMS:
        key = name.replace("r2", "r")
        if key not in exact_of:
            exact_of[key] = exact_sum(TERMS[key](r, Y, W))
        exact = exact_of[key]
        rel = abs(got[name] - exact) / abs(exact)
        worst = max(worst, rel)
        assert rel <= REL, (name, got[name], exact, rel)
    heaviest = r * r * W * W
    assert abs(got["s_r2W2"] - math.fsum(heaviest.tolist())) <= REL * got["s_r2W2"]   # exactly rounded reference
    return worst


@pytest.mark.parametrize("heavy", [1_000_000, pytest.param(BIG, marks=pytest.mark.slow)], indirect=True,
                         ids=["1e6", "1e7"])
def test_sums_agree_with_exact_sums_duckdb(heavy):
    from scavenger.engines.duck import DuckDBEngine

    path, r, Y = heavy
    eng = DuckDBEngine("test")
    try:
        got = _engine_sums(eng, path)
    finally:
        eng.close()
    worst = _check(got, r, Y)
    print(f"DuckDB: worst relative difference to the exact sums over {len(TERMS)} sums of {len(r):,} rows: "
          f"{worst:.2e}")


@pytest.mark.slow
@pytest.mark.parametrize("heavy", [BIG], indirect=True, ids=["1e7"])
def test_sums_agree_with_exact_sums_spark(heavy, spark_codegen):
    from scavenger.engines import open_engine

    path, r, Y = heavy
    eng = open_engine("spark", "test", spark=spark_codegen)
    try:
        got = _engine_sums(eng, path)
    finally:
        eng.close()
    worst = _check(got, r, Y)
    print(f"Spark: worst relative difference to the exact sums over {len(TERMS)} sums of {len(r):,} rows: "
          f"{worst:.2e}")
