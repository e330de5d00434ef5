"""Attention-decay coefficients: equality with a row-level numpy computation, the paper's DCG table, the naive
estimator's bias on ranked (x-independent) logs with the alpha-weighted estimators recovering C_i, bootstrap
replicates, the CLI, and the OBD sample."""
from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from conftest import background_call
from scavenger.estimators import adc as A
from scavenger.statistics import StatsConfig, merge, scan
from test_scavenging import simulate_tables
from test_statistics import build_random, frames, write_dataset


def test_dcg_matches_paper_table():
    assert np.allclose(A.dcg([1, 2, 3, 4], 2.0), [1, 0.6309297535714574, 0.5, 0.43067655807339306], rtol=1e-12)
    assert np.allclose(A.dcg([1, 2, 3], 10.0), [1, 1 / math.log10(11), 1 / math.log10(12)], rtol=1e-12)


def _row_level(data):
    M, Cc, C2 = defaultdict(float), defaultdict(float), defaultdict(float)
    for ev in data["logs"]:
        for s in ev["slots"]:
            x = s["reward"] or 0.0
            M[(s["ad_id"], s["position"])] += 1
            Cc[(s["ad_id"], s["position"])] += x
            C2[(s["ad_id"], s["position"])] += x * x
    return M, Cc, C2


def _ref_estimates(data, K, smoothing=1.0):
    """Row-level reference of every method (formulas of MATH.md) with its delta-method variance."""
    M, Cc, C2 = _row_level(data)
    ads = sorted({a for a, _ in M})
    out = {}
    pool = {j: (sum(M[(a, j)] for a in ads), sum(Cc[(a, j)] for a in ads), sum(C2[(a, j)] for a in ads))
            for j in range(1, K + 1)}

    def var_ctr(a, j):
        m = M[(a, j)]
        if m == 0:
            return 0.0
        p = Cc[(a, j)] / m
        return max(C2[(a, j)] / m - p * p, 0) / m

    def s2(a, j):
        mt, ct, qt = pool[j]
        pbar, qbar = ct / mt, qt / mt
        p = (Cc[(a, j)] + smoothing * pbar) / (M[(a, j)] + smoothing)
        q = (C2[(a, j)] + smoothing * qbar) / (M[(a, j)] + smoothing)
        return max(q - p * p, 1e-12)

    for i in range(2, K + 1):
        (mi, ci, qi), (m1, c1, q1) = pool[i], pool[1]
        pi_, p1 = ci / mi, c1 / m1
        R = pi_ / p1
        vi, v1 = (qi / mi - pi_ ** 2) / mi, (q1 / m1 - p1 ** 2) / m1
        out[("naive", i)] = (R, R * R * (vi / pi_ ** 2 + v1 / p1 ** 2))
        for method in ("uniform", "heuristic", "variance_optimal"):
            N = D = VN = VD = 0.0
            for a in ads:
                if M[(a, i)] == 0 or M[(a, 1)] == 0:
                    continue
                if method == "uniform":
                    al = 1.0
                elif method == "heuristic":
                    al = M[(a, i)] * M[(a, 1)] / (M[(a, i)] + M[(a, 1)])
                else:
                    al = 2 * M[(a, i)] * M[(a, 1)] / (M[(a, i)] * s2(a, 1) + M[(a, 1)] * s2(a, i))
                N += al * Cc[(a, i)] / M[(a, i)]
                D += al * Cc[(a, 1)] / M[(a, 1)]
                VN += al * al * var_ctr(a, i)
                VD += al * al * var_ctr(a, 1)
            R = N / D
            out[(method, i)] = (R, (VN + R * R * VD) / (D * D))
    return out


@pytest.fixture(scope="module")
def rand_stats(spark):
    data = build_random(seed=5, K=3, n_ads=6, days=(0, 1), per_day=150)
    L, D = frames(spark, data)
    tables = scan(L, D, StatsConfig(bootstrap=30, seed=2))
    return data, merge("ad_position", [tables["ad_position"]])


def test_adc_equals_row_level_numpy(rand_stats):
    data, ap = rand_stats
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


def test_bootstrap_interval_equals_numpy_on_replicates(rand_stats):
    data, ap = rand_stats
    table = A.adc_table(ap, methods=("heuristic",), level=0.8)
    boot = table[table["interval_kind"] == "bootstrap"].set_index("position")
    ads = np.array(sorted(ap["ad_id"].unique()))
    reps = {i: [] for i in (2, 3)}
    for b in range(30):
        sub = ap.assign(m=[v[b] for v in ap["m_boot"]], c=[v[b] for v in ap["c_boot"]])
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


def test_cli_adc(spark, tmp_path):
    from scavenger.cli import main

    data = build_random(seed=9, K=3, n_ads=5, days=(0, 1), per_day=40, with_nulls=False)
    logs, _ = write_dataset(spark, data, str(tmp_path / "in"))
    out = tmp_path / "out"
    code = main(["adc", "--logs", logs, "--stats-dir", str(tmp_path / "st"), "--out", str(out), "--bootstrap", "5"])
    assert code == 0
    table = pd.read_parquet(out / "adc")
    assert {"position", "method", "coefficient", "ci_low", "ci_high", "ads_used", "impressions_used",
            "dcg"} <= set(table.columns)
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "ok" and res["counts"]["events"] == 80 and res["counts"]["days_scanned"] == 2
    ref = _ref_estimates(data, 3)
    got = table[(table["method"] == "heuristic") & (table["position"] == 2)]["coefficient"].iloc[0]
    assert math.isclose(got, ref[("heuristic", 2)][0], rel_tol=1e-9)
    # second run reuses the stored days; a bad flag exits 2
    assert main(["adc", "--logs", logs, "--stats-dir", str(tmp_path / "st"), "--out", str(out),
                 "--bootstrap", "5"]) == 0
    assert json.loads((out / "result.json").read_text())["counts"]["days_loaded"] == 2
    assert main(["adc", "--logs", logs, "--out", str(out), "--bootstrap", "-1"]) == 2
    assert main(["adc", "--logs", str(tmp_path / "nope"), "--out", str(out)]) == 2


def _history_work(work) -> dict:
    """Generator 'history' logs and their ADC table, in their own process in the background (tests/conftest.py,
    BACKGROUND); the test below checks the numbers."""
    from conftest import background_spark
    from scavenger.evaluation import adc_statistics, estimate_adc
    from scavenger.simulation.generator import GeneratorConfig, generate

    spark = background_spark()
    out = str(work / "gen")
    truth = generate(spark, GeneratorConfig(logging="history", n_positions=4, n_ads=12, days=2,
                                            events_per_day=40000, epsilon=0.3, seed=5), out)
    return {"adc": list(truth["adc"]), "table": estimate_adc(adc_statistics(spark, f"{out}/logs"))}


BACKGROUND = {"history_run": background_call(__file__, "_history_work")}


@pytest.fixture(scope="module")
def history_run(background_run) -> dict:
    return background_run("history_run").value()


@pytest.mark.slow
def test_generator_history_naive_biased_alpha_recovers(history_run):
    """Generator 'history' logs: epsilon-greedy around yesterday's context-free CTR ranking."""
    C, table = history_run["adc"], history_run["table"]
    for i in range(2, 5):
        rows = table[(table["position"] == i) & (table["interval_kind"] == "delta")].set_index("method")
        assert rows.loc["naive", "coefficient"] < C[i - 1] - 3 * rows.loc["naive", "std_error"], i
        for m in ("heuristic", "variance_optimal"):
            assert rows.loc[m, "ci_low"] - 0.5 * rows.loc[m, "std_error"] <= C[i - 1] \
                <= rows.loc[m, "ci_high"] + 0.5 * rows.loc[m, "std_error"], (m, i)


@pytest.mark.slow
def test_obd_random_adc_and_most_clicked(spark, obd_dir, tmp_path):
    """OBD 'random' logs (items placed at random positions): ADCs with intervals; the value of always showing the
    item most clicked in the first days, evaluated on the later days at position 1 (scavenging with action = ad)."""
    from pyspark.sql import functions as F

    from scavenger.contract import write_partitioned
    from scavenger.evaluation import EvaluateOptions, adc_statistics, estimate_adc, evaluate
    from scavenger.obd import ingest_obd

    logs = ingest_obd(spark, obd_dir, ("random",), ("all",))
    write_partitioned(logs, str(tmp_path / "obd_logs"))
    stats = adc_statistics(spark, str(tmp_path / "obd_logs"))
    table = estimate_adc(stats)
    vo = table[(table["method"] == "variance_optimal") & (table["interval_kind"] == "delta")].sort_values("position")
    assert len(vo) == 3 and vo["coefficient"].iloc[0] == 1.0
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
    ev = evaluate(spark, str(tmp_path / "p1_logs"), str(tmp_path / "p1_dec"),
                  options=EvaluateOptions(estimators=["scavenging_slate", "ips"], uniform_logging=True))
    est = ev.estimates
    print("OBD most clicked", est[["estimator", "interval_kind", "value", "ci_low", "ci_high", "supported_share"]])
    scav = est[(est["estimator"] == "scavenging_ad") & (est["interval_kind"] == "clt")].iloc[0]
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
