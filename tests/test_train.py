"""`scavenger train` (issue 7, seed 000): learned m-ad policies judged against the generator's exact truth.

One generated data set (ranked layout, uniform logging, 20 ads, 12 contexts, K = m = 4; 2 training days and 1
scoring day of 20k events each) and one training run with an event-level eligibility table (about 60% of the ads
per event, an ad never seen in training eligible everywhere, and 5% of the events with only 2 + 1 eligible ads).
"""
from __future__ import annotations

import json
import math
import os

import pandas as pd
import pytest

M = 4
TRAIN = ("2026-01-01", "2026-01-02")
SCORE = ("2026-01-03", "2026-01-03")
NEW_AD = "zz_new_ad"


def _world(spark, root: str) -> dict:
    from pyspark.sql import functions as F

    from scavenger.contract import read_logs
    from scavenger.simulation.generator import GeneratorConfig, generate

    gen_dir = os.path.join(root, "gen")
    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=4, n_ads=20, n_contexts=12, days=3,
                          events_per_day=20_000, seed=11)
    truth = generate("duckdb", cfg, gen_dir)   # the same rows as on Spark (portable hash), without its jobs
    logs = read_logs(spark, os.path.join(gen_dir, "logs"), *SCORE)
    ads = spark.read.parquet(os.path.join(gen_dir, "truth", "click_rates")).select("ad_id").distinct()
    u_ev = F.xxhash64(F.lit(5), F.col("event_id")).bitwiseAND(F.lit(1023)) / F.lit(1024.0)
    u_ad = F.xxhash64(F.lit(6), F.col("event_id"), F.col("ad_id")).bitwiseAND(F.lit(1023)) / F.lit(1024.0)
    grid = logs.select("event_id", "dt").crossJoin(ads).select("event_id", "dt", "ad_id", u_ev.alias("ue"),
                                                                u_ad.alias("ua"))
    # 5% of the events: only 2 of the 20 ads (+ the new ad) -> fewer than m eligible
    from pyspark.sql import Window

    w = Window.partitionBy("event_id").orderBy("ua", "ad_id")
    few2 = (grid.where(F.col("ue") < 0.05).select("event_id", "dt", "ad_id", F.row_number().over(w).alias("r"))
            .where(F.col("r") <= 2))
    normal = grid.where((F.col("ue") >= 0.05) & (F.col("ua") < 0.6)).select("event_id", "dt", "ad_id")
    new = logs.select("event_id", "dt", F.lit(NEW_AD).alias("ad_id"))
    elig = normal.unionByName(few2.select("event_id", "dt", "ad_id")).unionByName(new)
    elig_path = os.path.join(root, "eligibility")
    elig.write.mode("overwrite").parquet(elig_path)
    return {"root": root, "gen": gen_dir, "truth": truth, "elig": elig_path}


@pytest.fixture(scope="module")
def train_run(spark, tmp_path_factory) -> dict:
    """The data set and the training run, once for the module, on the suite's Spark session."""
    from scavenger.policies.train import TrainConfig, run_training

    world = _world(spark, str(tmp_path_factory.mktemp("train")))
    out = os.path.join(world["root"], "out")
    cfg = TrainConfig(logs=os.path.join(world["gen"], "logs"), date_from=TRAIN[0], date_to=TRAIN[1],
                      score_from=SCORE[0], score_to=SCORE[1], out=out, method="both", m=M, adc="estimate",
                      eligibility=world["elig"], seed=3, truth="auto", dedup="both")
    summary = run_training(spark, cfg)
    return {"world": world, "trained": {"summary": summary, "out": out, "cfg": cfg}}


@pytest.fixture(scope="module")
def world(train_run) -> dict:
    return train_run["world"]


@pytest.fixture(scope="module")
def trained(train_run) -> dict:
    return train_run["trained"]


def _pid(method):
    return f"{method}@{TRAIN[0]}..{TRAIN[1]}"


@pytest.fixture(scope="module")
def collected(spark, world, trained):
    """Small pandas copies (20k events) for the numpy cross-checks."""
    from scavenger.contract import read_decisions, read_logs

    dec = read_decisions(spark, os.path.join(trained["out"], "decisions")).toPandas()
    logs = read_logs(spark, os.path.join(world["gen"], "logs"), *SCORE).select("event_id", "context_id").toPandas()
    elig = spark.read.parquet(world["elig"]).toPandas()
    rates = pd.read_parquet(os.path.join(world["gen"], "truth", "click_rates"))
    adc = pd.read_parquet(os.path.join(world["gen"], "truth", "adc")).sort_values("position")
    return {"dec": dec, "logs": logs, "elig": elig, "rates": rates, "adc": adc["coefficient"].to_numpy(float)}


def _numpy_truth(collected, pid):
    """True value, set value, oracle values per event, with plain numpy/pandas."""
    P = {(c, a): p for c, a, p in collected["rates"][["context_id", "ad_id", "p"]].itertuples(index=False)}
    C = collected["adc"]
    ctx = dict(zip(collected["logs"]["event_id"], collected["logs"]["context_id"]))
    elig = collected["elig"].groupby("event_id")["ad_id"].apply(list).to_dict()
    dec = collected["dec"]
    dec = dec[dec["policy_id"] == pid]
    v = s = v_star = s_star = 0.0
    for eid, slots in zip(dec["event_id"], dec["slots"]):
        x = ctx[eid]
        for sl in slots:
            p = P.get((x, sl["ad_id"]), 0.0)
            v += C[sl["position"] - 1] * p
            s += p
        ps = sorted((P[(x, a)] for a in elig.get(eid, []) if (x, a) in P), reverse=True)[:M]
        s_star += sum(ps)
        v_star += sum(C[k] * p for k, p in enumerate(ps))
    n = len(dec)
    return v / n, s / n, v_star / n, s_star / n


# Stated tolerances on the positional regret V* - V(h) relative to V* (oracle restricted to the eligible ads):
# regression and cost-sensitive with next-best dedup 3%; cost-sensitive with the seed's random dedup 12%, because
# with 40% of the ads filtered out per event the round classifiers (trained with gamma_{k-1} over all ads) produce
# duplicates that random replacement fills with average ads (without an eligibility table it is within 0.1%).
TOLERANCE = {"regression": 0.03, "cost_sensitive_next_best": 0.03, "cost_sensitive": 0.12}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["regression", "cost_sensitive", "cost_sensitive_next_best"])
def test_learned_policy_beats_logging_and_is_near_oracle(trained, collected, method):
    summ = trained["summary"]
    pol = summ["policies"][_pid(method)]["truth"]
    tr = summ["truth"]
    v, s, v_star, s_star = _numpy_truth(collected, _pid(method))
    assert math.isclose(pol["true_value"], v, rel_tol=1e-9)
    assert math.isclose(pol["set_value"], s, rel_tol=1e-9)
    assert math.isclose(tr["oracle_value"], v_star, rel_tol=1e-9)
    assert math.isclose(tr["oracle_set_value"], s_star, rel_tol=1e-9)
    # uniform logging shows a random slate: ~0.25 per event; the oracle ~0.6 here
    assert pol["true_value"] > tr["logging_value"] + 0.2
    assert pol["regret"] >= -1e-12
    assert pol["regret"] <= TOLERANCE[method] * tr["oracle_value"]


@pytest.mark.slow
def test_true_value_agrees_with_generator(spark, world, trained):
    from scavenger.contract import read_decisions, read_logs
    from scavenger.simulation.generator import true_policy_value

    dec = read_decisions(spark, os.path.join(trained["out"], "decisions"))
    logs = read_logs(spark, os.path.join(world["gen"], "logs"), *SCORE)
    tv = true_policy_value(spark, dec, logs, os.path.join(world["gen"], "truth")).set_index("policy_id")
    for method in ("regression", "cost_sensitive", "cost_sensitive_next_best"):
        mine = trained["summary"]["policies"][_pid(method)]["truth"]["true_value"]
        assert math.isclose(tv.loc[_pid(method), "true_value"], mine, rel_tol=1e-9)


@pytest.mark.slow
def test_regression_regret_under_bound(trained, collected):
    pol = trained["summary"]["policies"][_pid("regression")]["truth"]
    assert trained["summary"]["truth"]["n_ads"] == 20
    n_ads = pol["n_ads_bound"]
    assert n_ads == 21  # the 20 ads of the truth and the new eligible ad (P = 0)
    bound = math.sqrt(2 * min(M, n_ads - M)) * math.sqrt(n_ads) * math.sqrt(pol["eps_l2"])
    assert math.isclose(pol["regret_bound"], bound, rel_tol=1e-9)
    assert pol["eps_l2"] > 0
    assert pol["set_regret"] <= pol["regret_bound_per_instance"] <= pol["regret_bound"] + 1e-12
    assert pol["set_regret_under_bound"]
    # eps by numpy from the stored scores g(x, a), the truth P and the scored events' contexts
    g = pd.read_parquet(os.path.join(trained["out"], "model", "regression", "scores"))
    P = collected["rates"].pivot(index="context_id", columns="ad_id", values="p")
    P[NEW_AD] = 0.0
    G = g.pivot(index="context_key", columns="ad_id", values="score").reindex(index=P.index, columns=P.columns)
    n_ctx = collected["logs"]["context_id"].value_counts().reindex(P.index).fillna(0).to_numpy(float)
    sse = ((G.to_numpy(float) - P.to_numpy(float)) ** 2).sum(axis=1)
    eps = float(n_ctx @ sse / n_ctx.sum() / P.shape[1])
    assert math.isclose(pol["eps_l2"], eps, rel_tol=1e-9)


@pytest.mark.slow
def test_m_distinct_eligible_ads(trained, collected):
    elig = collected["elig"].groupby("event_id")["ad_id"].apply(set).to_dict()
    dec = collected["dec"]
    short = {}
    for method in ("regression", "cost_sensitive", "cost_sensitive_next_best"):
        sub = dec[dec["policy_id"] == _pid(method)]
        assert len(sub) == len(collected["logs"])  # one decision per scored event
        n_short = 0
        for eid, slots in zip(sub["event_id"], sub["slots"]):
            ads = [s["ad_id"] for s in slots]
            e = elig.get(eid, set())
            assert len(set(ads)) == len(ads) == min(M, len(e))
            assert set(ads) <= e
            assert sorted(s["position"] for s in slots) == list(range(1, len(ads) + 1))
            assert all(s["probability"] == 1.0 for s in slots)
            n_short += len(e) < M
        short[method] = n_short
        pol = trained["summary"]["policies"][_pid(method)]
        assert pol["events_with_fewer_than_m_eligible"] == n_short > 0
    assert trained["summary"]["counts"]["eligible_ads_unseen_in_training"] == 1
    notes = pd.read_parquet(os.path.join(trained["out"], "decision_notes"))
    for method in ("regression", "cost_sensitive", "cost_sensitive_next_best"):
        assert int(notes[(notes["policy_id"] == _pid(method))]["fewer_than_m"].sum()) == short[method]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["regression", "cost_sensitive", "cost_sensitive_next_best"])
def test_factored_estimate_covers_true_value(trained, method):
    pol = trained["summary"]["policies"][_pid(method)]
    est, truth = pol["factored_estimate"], pol["truth"]["true_value"]
    assert est["std_error"] > 0
    assert est["ci_low"] <= truth <= est["ci_high"]
    assert pol["factored_estimate"]["covers_true_value"]


@pytest.mark.slow
def test_models_and_metadata_persisted(spark, trained):
    from pyspark.ml import PipelineModel

    out = trained["out"]
    model = PipelineModel.load(os.path.join(out, "model", "regression", "pipeline"))
    assert len(model.stages) == 2
    meta = json.loads(spark.read.text(os.path.join(out, "model", "regression", "training_metadata")).first()[0])
    assert meta["policy_id"] == _pid("regression") and meta["m"] == M
    from scavenger.policies.cost_sensitive import CostSensitiveModel

    cm = CostSensitiveModel.load(os.path.join(out, "model", "cost_sensitive", "pipeline"), M)
    assert len(cm.rounds) == M and len(cm.labels.labels) == 20


def test_set_select_test_dedup(spark):
    """Psi_1 = Psi_2 -> the duplicate is replaced by an unused eligible ad; fewer than m eligible -> all of them."""
    from scavenger.policies.eligibility import set_select_test, top_m

    rows = []
    # event e1: 4 eligible ads, rounds 1 and 2 both prefer a, round 3 prefers b -> a, <random unused>, b
    for ad, s1, s2, s3 in [("a", .9, .9, .1), ("b", .1, .1, .9), ("c", .0, .0, .0), ("d", .0, .0, .0)]:
        rows.append(("2026-01-01", "e1", ad, True, s1, s2, s3))
    # event e2: 2 eligible ads, m = 3 -> both, once each
    for ad, s in [("a", .5), ("b", .4)]:
        rows.append(("2026-01-01", "e2", ad, ad == "a", s, s, s))
    df = spark.createDataFrame(rows, "dt string, event_id string, ad_id string, known boolean, score_1 double, "
                                     "score_2 double, score_3 double")
    out = {r["event_id"]: r for r in set_select_test(df, 3, seed=1).collect()}
    e1 = [s["ad_id"] for s in out["e1"]["slots"]]
    assert e1[0] == "a" and e1[2] == "b" and e1[1] in ("c", "d")
    assert out["e1"]["n_replaced"] == 1 and out["e1"]["n_chosen"] == 3
    e2 = [s["ad_id"] for s in out["e2"]["slots"]]
    assert sorted(e2) == ["a", "b"] and out["e2"]["n_chosen"] == 2 and out["e2"]["n_eligible"] == 2
    assert out["e2"]["n_fallback_chosen"] == 1
    nb = {r["event_id"]: r for r in set_select_test(df, 3, seed=1, dedup="next_best").collect()}
    assert [s["ad_id"] for s in nb["e1"]["slots"]][:2] == ["a", "b"]
    assert [s["ad_id"] for s in nb["e1"]["slots"]][2] in ("c", "d") and nb["e1"]["n_replaced"] == 2
    assert [s["ad_id"] for s in nb["e2"]["slots"]] == ["a", "b"] and nb["e2"]["n_chosen"] == 2
    tm = {r["event_id"]: r for r in top_m(df.withColumnRenamed("score_3", "score"), 3, seed=1).collect()}
    assert [s["ad_id"] for s in tm["e1"]["slots"]][0] == "b"
    assert [s["position"] for s in tm["e1"]["slots"]] == [1, 2, 3]


def test_cli_bad_windows_exit_2(tmp_path):
    from scavenger.cli import main

    code = main(["train", "--logs", str(tmp_path), "--from", "2026-01-02", "--to", "2026-01-03",
                 "--score-from", "2026-01-03", "--score-to", "2026-01-03", "--out", str(tmp_path / "o")])
    assert code == 2
    code = main(["train", "--logs", str(tmp_path), "--from", "2026-01-01", "--to", "2026-01-01",
                 "--score-from", "2026-01-02", "--score-to", "2026-01-02", "--m", "0", "--out", str(tmp_path / "o")])
    assert code == 2
