"""Attention-decay coefficients: equality with a row-level numpy computation (the one pass on DuckDB), the paper's
DCG table, the naive estimator's bias on ranked (x-independent) logs with the alpha-weighted estimators recovering
C_i, bootstrap replicates, positions the data cannot identify, the CLI, generator 'history' logs and the OBD
sample."""
from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from helpers.reference import build_random, clean, write_parquet
from scavenger.estimators import attention_decay as A
from scavenger.statistics.scan import ScanPlan, StatsConfig
from scavenger.statistics.tables import merge
from scavenger.statistics.window import WindowStats
from scavenger.estimators import adc_family as E
from test_estimators_scavenging import duck_window, main_row, simulate_tables


def test_dcg_matches_paper_table():
    assert np.allclose(A.dcg([1, 2, 3, 4], 2.0), [1, 0.6309297535714574, 0.5, 0.43067655807339306], rtol=1e-12)
    assert np.allclose(A.dcg([1, 2, 3], 10.0), [1, 1 / math.log10(11), 1 / math.log10(12)], rtol=1e-12)


def fold_of(event_id: str) -> int:
    """The pass's fair coin per event (statistics/sql/logs.py): parity of the 16th hex digit of md5(event_id)."""
    return int(hashlib.md5(event_id.encode()).hexdigest()[15] in "13579bdf")


def _row_level(data, by_fold=False):
    """M, C, C2 by (ad, position) -- or (fold, ad, position) -- over the clean events (the rows the pass keeps) and
    their slots with a known reward (a null one beside a slate_reward is unknown, no 0 click)."""
    M, Cc, C2 = defaultdict(float), defaultdict(float), defaultdict(float)
    for ev in clean(data)[0]:
        f = (fold_of(ev["event_id"]),) if by_fold else ()
        for s in ev["slots"]:
            if s["reward"] is None:
                continue
            x = s["reward"]
            key = (*f, s["ad_id"], s["position"])
            M[key] += 1
            Cc[key] += x
            C2[key] += x * x
    return M, Cc, C2


def _ref_estimates(data, K, smoothing=1.0):
    """Row-level reference of every method (formulas of MATH.md) with its delta-method variance (alpha methods: the
    smoothed click variance s2 of each cell over its impressions; naive: the pooled plug-in). variance_optimal
    is cross-fitted (estimators/attention_decay.py): a cell is (fold, ad), its alpha uses the cell's impressions and the other
    fold's smoothed click variances s2, each fold's s2 shrunk toward that fold's pooled means."""
    ads = sorted({a for a, _ in _row_level(data)[0]})
    out = {}

    def pools(M, Cc, C2, keys):
        return {j: (sum(M[(*k, j)] for k in keys), sum(Cc[(*k, j)] for k in keys), sum(C2[(*k, j)] for k in keys))
                for j in range(1, K + 1)}

    def s2(M, Cc, C2, pool, key, j):
        mt, ct, qt = pool[j]
        pbar, qbar = (ct / mt, qt / mt) if mt > 0 else (0.0, 0.0)
        p = (Cc[(*key, j)] + smoothing * pbar) / (M[(*key, j)] + smoothing)
        q = (C2[(*key, j)] + smoothing * qbar) / (M[(*key, j)] + smoothing)
        return max(q - p * p, 1e-12)

    M, Cc, C2 = _row_level(data)
    pool = pools(M, Cc, C2, [(a,) for a in ads])
    Mf, Cf, C2f = _row_level(data, by_fold=True)
    fpool = {f: pools(Mf, Cf, C2f, [(f, a) for a in ads]) for f in (0, 1)}
    for i in range(2, K + 1):
        (mi, ci, qi), (m1, c1, q1) = pool[i], pool[1]
        pi_, p1 = ci / mi, c1 / m1
        R = pi_ / p1
        vi, v1 = (qi / mi - pi_ ** 2) / mi, (q1 / m1 - p1 ** 2) / m1
        out[("naive", i)] = (R, R * R * (vi / pi_ ** 2 + v1 / p1 ** 2))
        for method in ("uniform", "heuristic", "variance_optimal"):
            N = D = VN = VD = 0.0
            if method == "variance_optimal":
                cells, (Mx, Cx, C2x) = [(f, a) for f in (0, 1) for a in ads], (Mf, Cf, C2f)
            else:
                cells, (Mx, Cx, C2x) = [(a,) for a in ads], (M, Cc, C2)
            for c in cells:
                mi_c, m1_c = Mx[(*c, i)], Mx[(*c, 1)]
                if mi_c == 0 or m1_c == 0:
                    continue
                if method == "uniform":
                    al = 1.0
                elif method == "heuristic":
                    al = mi_c * m1_c / (mi_c + m1_c)
                else:
                    g, a = 1 - c[0], c[1]             # the other fold's click variances
                    al = 2 * mi_c * m1_c / (mi_c * s2(Mf, Cf, C2f, fpool[g], (g, a), 1)
                                            + m1_c * s2(Mf, Cf, C2f, fpool[g], (g, a), i))
                N += al * Cx[(*c, i)] / mi_c
                D += al * Cx[(*c, 1)] / m1_c
                # Var CTR(cell, j) = s2(cell, j) / M(cell, j), s2 smoothed toward the position's pooled rate (the
                # pool of every cell, folds included, is the window's): the plug-in is 0 for a cell without a click
                VN += al * al * s2(Mx, Cx, C2x, pool, c, i) / mi_c
                VD += al * al * s2(Mx, Cx, C2x, pool, c, 1) / m1_c
            R = N / D
            out[(method, i)] = (R, (VN + R * R * VD) / (D * D))
    return out


@pytest.fixture(scope="module")
def rand_window():
    data = build_random(seed=5, K=3, n_ads=6, days=(0, 1), per_day=150)
    stats = duck_window(data, ScanPlan(False, False, False), StatsConfig(bootstrap=30, seed=2))
    yield data, stats
    stats.engine.close()


@pytest.fixture(scope="module")
def rand_stats(rand_window):
    data, stats = rand_window
    return data, stats.table("ad_position")


def test_adc_equals_row_level_numpy(rand_stats, rand_window):
    data, ap = rand_stats
    assert len(clean(data)[0]) < len(data["logs"])    # quarantined rows (null rewards) are not counted
    table = A.adc_table(ap, level=0.9, bootstrap=False)
    ref = _ref_estimates(data, 3)
    z = norm.ppf(0.95)
    for (method, i), (coef, var) in ref.items():
        row = table[(table["method"] == method) & (table["position"] == i)].iloc[0]
        assert math.isclose(row["coefficient"], coef, rel_tol=1e-9), (method, i)
        assert math.isclose(row["std_error"], math.sqrt(var), rel_tol=1e-9), (method, i)
        assert math.isclose(row["ci_high"], coef + z * math.sqrt(var), rel_tol=1e-9)
    p1 = table[table["position"] == 1]
    assert (p1["coefficient"] == 1.0).all() and (p1["ci_low"] == 1.0).all()
    # ads and impressions used (alpha methods: ads shown at both i and 1)
    M, _, _ = _row_level(data)
    ads = {a for a, _ in M}
    both = [a for a in ads if M[(a, 3)] > 0 and M[(a, 1)] > 0]
    row = table[(table["method"] == "heuristic") & (table["position"] == 3)].iloc[0]
    assert row["ads_used"] == len(both)
    assert row["impressions_used"] == sum(M[(a, 3)] + M[(a, 1)] for a in both)
    # the folds of the cross-fitting are the events' md5 coins
    Mf, _, _ = _row_level(data, by_fold=True)
    by_fold = ap.groupby(["fold", "ad_id", "position"])["m_r"].sum()
    assert {k: v for k, v in by_fold.items() if v > 0} == {k: v for k, v in Mf.items() if v > 0}
    # the pipeline's table (identification beside the numbers): every position identified, the same numbers
    rows = E.adc_rows(rand_window[1], A.METHODS, 0.9, 2.0, 1.0)
    assert rows["identified"].all() and rows["reason"].isna().all()
    want = A.adc_table(ap, level=0.9)
    # where the logged propensities differ between ads (a ranker placed them), the naive ratio is confounded:
    # its number stays, its interval goes, and the note says why
    confounded = (rows["method"] == "naive") & rows["position"].isin(A.ranker_positions(ap))
    keep = [c for c in A.ADC_COLUMNS if c not in ("ci_low", "ci_high", "interval_kind")]
    pd.testing.assert_frame_equal(rows[keep], want[keep])
    pd.testing.assert_frame_equal(rows.loc[~confounded, list(A.ADC_COLUMNS)], want.loc[~confounded,
                                                                                      list(A.ADC_COLUMNS)])
    assert (rows.loc[confounded, "interval_kind"] == "none").all() and rows.loc[confounded, "ci_low"].isna().all()
    assert rows.loc[rows["method"] == "naive", "note"].str.contains("confounded").all() == bool(confounded.any())


def test_bootstrap_interval_equals_numpy_on_replicates(rand_stats):
    data, ap = rand_stats
    table = A.adc_table(ap, methods=("heuristic",), level=0.8)
    boot = table[table["interval_kind"] == "bootstrap"].set_index("position")
    ads = np.array(sorted(ap["ad_id"].unique()))
    reps = {i: [] for i in (2, 3)}
    for b in range(30):
        sub = ap.assign(m_r=[v[b] for v in ap["m_boot"]], c=[v[b] for v in ap["c_boot"]])
        sub = sub.assign(c2=sub["c"])  # 0/1 rewards: c2 = c
        t = A.adc_table(sub.drop(columns=["m_boot", "c_boot"]), methods=("heuristic",), bootstrap=False)
        for i in (2, 3):
            reps[i].append(t[(t["position"] == i)]["coefficient"].iloc[0])
    for i in (2, 3):
        x = np.array(reps[i])
        x = x[np.isfinite(x)]
        lo, hi = np.quantile(x, [0.1, 0.9])
        assert math.isclose(boot.loc[i, "ci_low"], lo, rel_tol=1e-9)
        assert math.isclose(boot.loc[i, "ci_high"], hi, rel_tol=1e-9)
        assert math.isclose(boot.loc[i, "std_error"], x.std(ddof=1), rel_tol=1e-9)
    assert len(ads) >= 5


def test_naive_biased_low_alpha_recovers_on_ranked_logs():
    """x-independent epsilon-greedy logging around a ranking that puts the best ads first (the paper's setting):
    the naive estimator is far below C_i; every alpha-weighted estimator is within 3.5 delta-method sd."""
    stats, _, _, C = simulate_tables(seed=1, T=200_000, K=4, n_ads=8, n_ctx=4, logging="ranked", eps=0.3)
    table = A.adc_table(stats.table("ad_position"), bootstrap=False)
    for i in range(2, 5):
        rows = table[table["position"] == i].set_index("method")
        assert rows.loc["naive", "coefficient"] < C[i - 1] - 5 * rows.loc["naive", "std_error"], i
        for m in ("uniform", "heuristic", "variance_optimal"):
            assert abs(rows.loc[m, "coefficient"] - C[i - 1]) <= 3.5 * rows.loc[m, "std_error"], (m, i)


@pytest.mark.slow
def test_adc_interval_coverage_over_seeds():
    """95% delta-method intervals of the alpha-weighted ADCs cover the true C_i 90-99% of the time (150 seeds x 3
    positions x 3 methods on ranked logs)."""
    hits = n = 0
    for seed in range(150):
        stats, _, _, C = simulate_tables(seed=100 + seed, T=6000, K=4, n_ads=6, n_ctx=3, logging="ranked", eps=0.5)
        t = A.adc_table(stats.table("ad_position"), methods=("uniform", "heuristic", "variance_optimal"),
                        bootstrap=False)
        t = t[t["position"] > 1]
        truth = np.asarray(C)[t["position"].to_numpy() - 1]
        hits += int(((t["ci_low"] <= truth) & (truth <= t["ci_high"])).sum())
        n += len(t)
    assert 0.90 <= hits / n <= 0.99, hits / n


def test_positions_missing_some_days_and_any_ids():
    ap = pd.DataFrame({"logging_policy": ["x"] * 5, "ad_id": ["b", "a", "a", "b", "zz"],
                       "position": [1, 1, 3, 3, 1], "m": [10, 20, 5, 7, 3], "c": [5, 8, 1, 2, 0],
                       "c2": [5, 8, 1, 2, 0]})
    t = A.adc_table(ap, bootstrap=False)
    p2 = t[t["position"] == 2]
    assert p2["coefficient"].isna().all() and (p2["ads_used"] == 0).all()
    row = t[(t["position"] == 3) & (t["method"] == "uniform")].iloc[0]
    assert math.isclose(row["coefficient"], (1 / 5 + 2 / 7) / (8 / 20 + 5 / 10), rel_tol=1e-12)
    assert row["ads_used"] == 2 and row["impressions_used"] == 5 + 7 + 20 + 10
    # the pipeline's table: position 2 (no impressions) is not identified and says why; 3 keeps its number
    rows = E.adc_rows(WindowStats(tables={"ad_position": ap}, per_day={}, dates=[]), A.METHODS, 0.95, 2.0, 1.0)
    p2 = rows[rows["position"] == 2]
    assert not p2["identified"].any() and p2["coefficient"].isna().all()
    assert p2["reason"].str.contains("no impressions at position 2").all()
    p3 = rows[(rows["position"] == 3) & (rows["method"] == "uniform")].iloc[0]
    assert p3["identified"] and math.isclose(p3["coefficient"], row["coefficient"], rel_tol=1e-12)
    # no clicks at position 1: every ratio is undefined, so not identified (never a NaN called identified)
    rows = E.adc_rows(WindowStats(tables={"ad_position": ap.assign(c=np.where(ap["position"] == 1, 0, ap["c"]))},
                                  per_day={}, dates=[]), A.METHODS, 0.95, 2.0, 1.0)
    p3 = rows[rows["position"] == 3]
    assert not p3["identified"].any() and p3["coefficient"].isna().all()
    assert p3["reason"].str.contains("at position 1 of the ads shown at both position 1 and 3 sum to 0 or less").all()


def test_cli_adc(tmp_path):
    from scavenger.cli import main

    data = build_random(seed=9, K=3, n_ads=5, days=(0, 1), per_day=40, with_nulls=False)
    logs, _ = write_parquet(data, str(tmp_path / "in"))
    out = tmp_path / "out"
    code = main(["adc", "--logs", logs, "--stats-dir", str(tmp_path / "st"), "--out", str(out), "--bootstrap", "5"])
    assert code == 0
    table = pd.read_parquet(out / "adc")
    assert {"position", "method", "coefficient", "ci_low", "ci_high", "ads_used", "impressions_used",
            "dcg", "identified", "reason"} <= set(table.columns)
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["counts"]["logs"]["rows_used"] == 80 and res["counts"]["days_scanned"] == 2
    assert res["engine"]["name"] == "duckdb"
    ref = _ref_estimates(data, 3)
    got = table[(table["method"] == "heuristic") & (table["position"] == 2)]["coefficient"].iloc[0]
    assert math.isclose(got, ref[("heuristic", 2)][0], rel_tol=1e-9)
    # second run reuses the stored days; a bad flag exits 2
    assert main(["adc", "--logs", logs, "--stats-dir", str(tmp_path / "st"), "--out", str(out),
                 "--bootstrap", "5"]) == 0
    assert json.loads((out / "result.json").read_text())["counts"]["days_loaded"] == 2
    assert main(["adc", "--logs", logs, "--out", str(out), "--bootstrap", "-1"]) == 2
    assert main(["adc", "--logs", str(tmp_path / "nope"), "--out", str(out)]) == 2


@pytest.fixture(scope="module")
def history_run(tmp_path_factory) -> dict:
    """Generator 'history' logs and their ADC table (DuckDB, the notebook API)."""
    from scavenger import api
    from scavenger.simulation.generator import GeneratorConfig, generate

    out = str(tmp_path_factory.mktemp("history") / "gen")
    truth = generate("duckdb", GeneratorConfig(logging="history", n_positions=4, n_ads=12, days=2,
                                            events_per_day=40000, epsilon=0.3, seed=5), out)
    return {"adc": list(truth["adc"]), "table": api.adc(f"{out}/logs", gate="off", engine="duckdb").pandas}


@pytest.mark.slow
def test_generator_history_naive_biased_alpha_recovers(history_run):
    """Generator 'history' logs: epsilon-greedy around yesterday's context-free CTR ranking."""
    C, table = history_run["adc"], history_run["table"]
    assert table["identified"].all()
    for i in range(2, 5):
        rows = table[(table["position"] == i) & (table["interval_kind"] != "bootstrap")].set_index("method")
        assert rows.loc["naive", "coefficient"] < C[i - 1] - 3 * rows.loc["naive", "std_error"], i
        # the ranker is seen in the logged propensities: the naive ratio is flagged confounded, with no interval
        assert rows.loc["naive", "interval_kind"] == "none" and "confounded" in rows.loc["naive", "note"], i
        for m in ("heuristic", "variance_optimal"):
            assert rows.loc[m, "ci_low"] - 0.5 * rows.loc[m, "std_error"] <= C[i - 1] \
                <= rows.loc[m, "ci_high"] + 0.5 * rows.loc[m, "std_error"], (m, i)


@pytest.mark.slow
def test_obd_random_adc_and_most_clicked(spark, obd_dir, tmp_path):
    """OBD 'random' logs (items placed at random positions): ADCs with intervals; the value of always showing the
    item most clicked in the first days, evaluated on the later days at position 1 (scavenging with action = ad).
    Spark ingests the CSVs; the statistics and estimates run on DuckDB."""
    from pyspark.sql import functions as F

    from scavenger import api
    from scavenger.contract import write_partitioned
    from scavenger.engines.duck import DuckDBEngine
    from scavenger.obd import ingest_obd
    from scavenger.pipelines import adc as P
    from scavenger.pipelines.common import GateConfig, describe_inputs

    logs = ingest_obd(spark, obd_dir, ("random",), ("all",))
    write_partitioned(logs, str(tmp_path / "obd_logs"))
    eng = DuckDBEngine("test")
    try:
        res = P.adc(eng, describe_inputs(str(tmp_path / "obd_logs")), P.AdcOptions(),
                    GateConfig(mode="off", great_expectations=False))
    finally:
        eng.close()
    stats, table = res.stats, res.table
    vo = table[(table["method"] == "variance_optimal") & (table["interval_kind"] == "delta")].sort_values("position")
    assert len(vo) == 3 and vo["coefficient"].iloc[0] == 1.0 and vo["identified"].all()
    assert (vo["ci_low"] <= vo["coefficient"]).all() and (vo["std_error"].iloc[1:] > 0).all()
    print("OBD ADC", vo[["position", "coefficient", "ci_low", "ci_high", "ads_used", "impressions_used"]])
    dates = sorted(stats.dates)
    assert len(dates) >= 2
    fit_days, eval_days = dates[: len(dates) // 2], dates[len(dates) // 2:]
    ap = stats.per_day
    fit = merge("ad_position", [ap[d]["ad_position"] for d in fit_days])
    fit = fit.groupby("ad_id")[["m", "c"]].sum()  # clicks at any position in the fit days
    best = (fit["c"] / fit["m"]).idxmax()
    # position-1 impressions of the later days; the target always shows `best` there
    p1 = (spark.read.parquet(str(tmp_path / "obd_logs"))
          .where(F.col("dt").isin(eval_days) & (F.element_at(F.col("slots"), 1)["position"] == 1)))
    write_partitioned(p1, str(tmp_path / "p1_logs"))
    dec = p1.select(F.lit("most_clicked").alias("policy_id"), F.col("event_id"),
                    F.array(F.struct(F.lit(1).alias("position"), F.lit(best).alias("ad_id"),
                                     F.lit(1.0).alias("probability"))).alias("slots"),
                    F.lit(None).cast("string").alias("base_policy"), F.col("dt"))
    write_partitioned(dec, str(tmp_path / "p1_dec"))
    ev = api.evaluate(str(tmp_path / "p1_logs"), str(tmp_path / "p1_dec"), estimators=["scavenging_slate", "ips"],
                      uniform_logging=True, gate="off", engine="duckdb")
    est = ev.pandas
    print("OBD most clicked", est[["estimator", "interval_kind", "value", "ci_low", "ci_high", "supported_share"]])
    scav = main_row(est[est["estimator"] == "scavenging_ad"].set_index("interval_kind"))
    ips = est[est["estimator"] == "slate_ips"].iloc[0]
    # both estimate the CTR of `best` at position 1; direct check: its empirical CTR on the evaluation days
    ev_ap = merge("ad_position", [ap[d]["ad_position"] for d in eval_days])
    row = ev_ap[(ev_ap["position"] == 1) & (ev_ap["ad_id"] == best)]
    ctr = row["c"].sum() / row["m"].sum()
    assert math.isclose(scav["value"], ctr, rel_tol=1e-9)  # T_a-normalized scavenging = empirical CTR of best
    assert abs(ips["value"] - ctr) <= 4 * ips["std_error"]
    assert scav["supported_share"] == 1.0 and scav["ci_low"] <= ctr <= scav["ci_high"]
    bound = est[(est["estimator"] == "scavenging_ad") & (est["interval_kind"] == "bound")].iloc[0]
    assert bound["ci_low"] < ctr < bound["ci_high"]
