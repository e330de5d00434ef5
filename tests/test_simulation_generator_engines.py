"""Two engines, one SQL, for the writers (issue 27): the generator's statements and the OBD ingest run on DuckDB
(through sqlglot) and on Spark and write the same rows; the portable hash gives the numpy reference's bits on both;
a re-run of a day replaces that day only."""
from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest

from scavenger.engines.duck import DuckDBEngine
from scavenger.engines.spark import SparkEngine
from scavenger.simulation import hashing
from scavenger.simulation import generator_sql as S
from scavenger.simulation.generator import GeneratorConfig, generate, true_policy_value
from scavenger.simulation.sampling import S_CLICK, S_TIME
from scavenger.simulation.world import build_world

_LOGS = ("SELECT event_id, epoch_us(CAST(event_time AS TIMESTAMP)) AS event_us, context_id, "
         "list_sort(map_entries(context)) AS context, logging_policy, slots, slate_reward, dt "
         "FROM read_parquet('{}/logs/*/*.parquet', hive_partitioning = true)")
_DECISIONS = "SELECT * FROM read_parquet('{}/decisions/*/*.parquet', hive_partitioning = true)"


def _one_sided(con, query: str, a: str, b: str) -> int:
    return con.execute(f"SELECT count(*) FROM ({query.format(a)} EXCEPT ALL {query.format(b)})").fetchall()[0][0]


def _same_rows(a: str, b: str, query: str) -> tuple[int, int, int]:
    """(rows of a, rows only in a, rows only in b); timestamps compared as instants (Spark writes INT96)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    n = con.execute(f"SELECT count(*) FROM ({query.format(a)})").fetchall()[0][0]
    return n, _one_sided(con, query, a, b), _one_sided(con, query, b, a)


# ------------------------------------------------------------------------------------------------------- the hash


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_hash_equals_numpy_reference_at_the_limits(engine, request):
    """The largest day index (2^32 - 2) and a seed above 2^32: every product stays below 2^63 (Spark's ANSI mode
    would raise), and both engines give the reference's uniforms bit for bit."""
    cfg = GeneratorConfig(layout="ranked", n_positions=2, n_ads=5, n_contexts=3, days=1,
                          events_per_day=hashing.M32, seed=2 ** 40 + 7)
    world = build_world(cfg)
    eng = DuckDBEngine("test") if engine == "duckdb" else SparkEngine(request.getfixturevalue("spark"), "test")
    epd = hashing.M32
    try:
        eng.view(S.WORLD, S.world_sql(world))
        eng.view(S.IDS, f"SELECT id FROM range(0, 50) AS _r(id) UNION ALL "
                        f"SELECT id FROM range({4 * epd - 50}, {4 * epd}) AS _r(id)")
        eng.view(S.EVENTS, S.events_sql(world))
        got = eng.fetch("SELECT _day, _idx, _u_time, _u_click FROM _gen_events ORDER BY _day, _idx")
    finally:
        eng.close()
    day, idx = got["_day"].to_numpy(), got["_idx"].to_numpy()
    assert list(np.unique(day)) == [0, 3] and idx.max() == epd - 1
    np.testing.assert_array_equal(got["_u_time"].to_numpy(), hashing.uniform_numpy(cfg.seed, day, idx, S_TIME))
    for j in range(2):
        np.testing.assert_array_equal(np.stack(got["_u_click"].to_numpy())[:, j],
                                      hashing.uniform_numpy(cfg.seed, day, idx, S_CLICK, j))
    assert 0.0 <= got["_u_time"].min() and got["_u_time"].max() < 1.0


def test_hash_streams_look_independent():
    """Uniform and pairwise independent across indices, days, streams and draws (chi-square on a 20 x 20 grid,
    p > 1e-4: a sound generator fails one of these 5 tests with probability 5e-4)."""
    from scipy import stats

    n = 200_000
    idx, day = np.arange(n), np.zeros(n, dtype=np.int64)
    u = hashing.uniform_numpy(3, day, idx, 5)
    others = {"next index": np.roll(u, 1), "next day": hashing.uniform_numpy(3, day + 1, idx, 5),
              "other stream": hashing.uniform_numpy(3, day, idx, 6), "other draw": hashing.uniform_numpy(3, day, idx, 5, 1)}
    assert stats.chisquare(np.histogram(u, bins=400, range=(0, 1))[0]).pvalue > 1e-4
    for name, v in others.items():
        grid = np.histogram2d(u, v, bins=20, range=[[0, 1], [0, 1]])[0].ravel()
        assert stats.chisquare(grid).pvalue > 1e-4, name


# ------------------------------------------------------------------------------------------ the generator's rows

CONFIGS = {
    "ranked-history": dict(layout="ranked", logging="history", n_positions=3, n_ads=7, n_contexts=6, days=2,
                           events_per_day=300, epsilon=0.3, seed=5),
    "slotted-multi": dict(layout="slotted", logging="multi", n_positions=3, slot_sizes=[2, 3, 4], n_contexts=9,
                          days=2, events_per_day=300, seed=11),
    "ranked-contextual-partial": dict(layout="ranked", logging="contextual", n_positions=2, n_ads=5, n_contexts=4,
                                      days=1, events_per_day=400, seed=2, partial_slates=0.4, propensities=False),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def both_engines(request, spark, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    cfg = GeneratorConfig(**CONFIGS[request.param])
    truth = {"duckdb": generate(None, cfg, str(root / "duckdb")), "spark": generate(spark, cfg, str(root / "spark"))}
    return {"root": root, "cfg": cfg.resolved(), "truth": truth}


def test_same_logs_decisions_and_truth(both_engines):
    g = both_engines
    duck, spark = str(g["root"] / "duckdb"), str(g["root"] / "spark")
    n, only_duck, only_spark = _same_rows(duck, spark, _LOGS)
    assert n == g["cfg"].days * g["cfg"].events_per_day and only_duck == only_spark == 0
    n, only_duck, only_spark = _same_rows(duck, spark, _DECISIONS)
    assert n >= 4 * g["cfg"].days * g["cfg"].events_per_day and only_duck == only_spark == 0
    t_duck, t_spark = ({k: v for k, v in t.items() if k != "paths"} for t in g["truth"].values())
    assert t_duck == t_spark
    for table in ("click_rates", "adc", "context_values"):
        import pandas as pd

        pd.testing.assert_frame_equal(pd.read_parquet(f"{duck}/truth/{table}"), pd.read_parquet(f"{spark}/truth/{table}"))


def test_written_files_pass_the_contract_check(both_engines):
    """Both writers' files are read by the project's own reader without complaint (schemas/ via contract.py)."""
    from scavenger.contract import DECISIONS, LOGS, load_contract
    from scavenger.io.sources import describe

    for engine in ("duckdb", "spark"):
        for name, contract in (("logs", LOGS), ("decisions", DECISIONS)):
            src = describe(str(both_engines["root"] / engine / name), load_contract(contract))
            assert len(src.days) == both_engines["cfg"].days, (engine, name)


def test_true_policy_value_same_on_both_engines(both_engines, spark):
    from scavenger.contract import read_decisions, read_logs

    spark_dir, duck = str(both_engines["root"] / "spark"), str(both_engines["root"] / "duckdb")
    on_duck = true_policy_value(None, f"{duck}/decisions", f"{duck}/logs", f"{duck}/truth")
    on_spark = true_policy_value(spark, read_decisions(spark, f"{spark_dir}/decisions"),
                                 read_logs(spark, f"{spark_dir}/logs"), f"{spark_dir}/truth")
    assert list(on_duck["policy_id"]) == list(on_spark["policy_id"])
    np.testing.assert_allclose(on_duck["true_value"], on_spark["true_value"], rtol=1e-12)
    assert (on_duck["n_events"] == on_spark["n_events"]).all()


# ------------------------------------------------------------------------------------------- the overwrite rules


def test_rerun_of_a_day_replaces_that_day_only(tmp_path):
    out = str(tmp_path / "gen")
    kw = dict(layout="ranked", logging="uniform", n_positions=2, n_ads=4, n_contexts=3, events_per_day=200)
    generate(None, GeneratorConfig(days=3, seed=1, **kw), out)
    first = str(tmp_path / "copy")
    generate(None, GeneratorConfig(days=3, seed=1, **kw), first)
    generate(None, GeneratorConfig(days=1, seed=2, start_date="2026-01-02", **kw), out)
    con = duckdb.connect()
    per_day = dict(con.execute(f"SELECT CAST(dt AS VARCHAR), count(*) FILTER (WHERE event_id LIKE '2-%') "
                               f"FROM ({_LOGS.format(out)}) GROUP BY ALL").fetchall())
    assert per_day == {"2026-01-01": 0, "2026-01-02": 200, "2026-01-03": 0}
    kept = f"SELECT * FROM ({_LOGS}) WHERE dt != DATE '2026-01-02'"
    assert _same_rows(out, first, kept) == (400, 0, 0)
    for table in ("logs", "decisions"):
        assert not any(p.name.startswith(("_", ".")) for p in (tmp_path / "gen" / table).iterdir())
    assert json.loads((tmp_path / "gen" / "ground_truth.json").read_text())["counts"]["events"] == 200


# ---------------------------------------------------------------------------------------------------- OBD ingest


def test_obd_ingest_same_rows_on_both_engines(spark, obd_dir, tmp_path):
    from scavenger import obd

    counts = {}
    for name, eng in (("duckdb", DuckDBEngine("test")), ("spark", SparkEngine(spark, "test"))):
        try:
            counts[name] = obd.ingest_obd_to(eng, obd_dir, str(tmp_path / name / "logs"), ("random", "bts"), ("men",))
        finally:
            eng.close()
    assert counts["duckdb"] == counts["spark"] and sum(v["rows"] for v in counts["duckdb"].values()) == 20000
    assert _same_rows(str(tmp_path / "duckdb"), str(tmp_path / "spark"), _LOGS) == (20000, 0, 0)
