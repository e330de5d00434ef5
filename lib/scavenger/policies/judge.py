"""Judging learned policies offline: the estimators' values (always) and, on generator logs, the truth.

Truth (generator's ``truth/click_rates`` P(x, a) and ADCs C_k; ranked layout), per scoring-window event t with
eligible set A_t (all truth ads without an eligibility table) and the policy's ads h(x_t) at positions 1..m:

- true value           V(h)   = mean_t sum_k C_k P(x_t, h_k(x_t))                     (seed 001 section 4)
- oracle value         V*     = mean_t sum_k C_k P_(k)(x_t), P_(1) >= P_(2) >= ... over A_t, k <= m
- positional regret    V* - V(h)
- set value / regret   S(h) = mean_t sum_{a in h(x_t)} P(x_t, a);  r_ad = S* - S(h), S* = mean_t sum of the m
                       largest P over A_t (seed 000's position-free ASP regret, the one its bound is about)
- regression bound     r_ad <= sqrt(2 min(m, |A| - m)) sqrt(|A|) sqrt(eps),
                       eps = mean_t (1/|A|) sum_{a in A} (g(x_t, a) - P(x_t, a))^2 (A = all ads of the truth plus any
                       ad the policy scored, P = 0 for ads unknown to the truth; the L2 regret of g, P being the
                       minimum-error regressor); also the per-instance form before Jensen,
                       mean_t sqrt(2 min(m, |A| - m)) sqrt(sum_a (g - P)^2).
- logging policy       the same true value of the logged slates (sum_k C_k P(x_t, logged a_k)).

Estimators: the factored estimator (seed 001 section 4) of every learned policy on the scoring window, with the
ADCs estimated from the same window (alpha-weighted, variance-optimal), via ``statistics.scan`` and
``estimators.factored``; a CLT interval (ADC uncertainty not propagated).
"""
from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd


def regression_bound(m: int, n_ads: int, eps: float) -> float:
    """sqrt(2 min(m, |A| - m)) sqrt(|A|) sqrt(eps)   (seed 000, Theorem "ASP Regression Regret Bound")."""
    return math.sqrt(2 * min(m, n_ads - m)) * math.sqrt(n_ads) * math.sqrt(max(eps, 0.0))


def _truth(spark, truth_dir: str):
    from pyspark.sql import functions as F

    rates = spark.read.parquet(os.path.join(truth_dir, "click_rates")).select(
        F.col("context_id").alias("t_context"), F.col("ad_id").alias("t_ad"), F.col("p").alias("p"))
    adc = spark.read.parquet(os.path.join(truth_dir, "adc")).orderBy("position").toPandas()
    return rates, adc["coefficient"].to_numpy(float)


def _slate_values(spark, slates, rates, adc: np.ndarray):
    """Per event: v = sum_k prob C_k P, s = sum prob P (slates: event_id, context_id, slots(position, ad_id, probability))."""
    from pyspark.sql import functions as F

    from .features import adc_array_col

    flat = slates.select(F.col("event_id"), F.col("context_id"), F.explode_outer(F.col("slots")).alias("s"))
    j = flat.join(F.broadcast(rates), (F.col("context_id") == F.col("t_context")) & (F.col("s.ad_id") == F.col("t_ad")),
                  how="left")
    c = F.coalesce(F.try_element_at(adc_array_col(adc), F.col("s.position")), F.lit(0.0))
    p = F.coalesce(F.col("p"), F.lit(0.0)) * F.coalesce(F.col("s.probability"), F.lit(0.0))
    return j.groupBy(F.col("event_id")).agg(F.sum(c * p).alias("v"), F.sum(p).alias("s"))


def truth_report(spark, truth_dir: str, score_logs, decisions, m: int, eligible=None,
                 scores: dict | None = None) -> dict:
    """Per policy_id in ``decisions``: true value, oracle, regrets and (for policies in ``scores``: policy_id ->
    DataFrame(context_key, ad_id, score, known)) eps and the regression bound. ``eligible``: (dt, event_id,
    context_key, ad_id) candidate rows of the window, or None (all truth ads). Only aggregates are collected."""
    from pyspark.sql import functions as F

    from .features import adc_array_col, context_key_col

    rates, adc = _truth(spark, truth_dir)
    n_ads = rates.select("t_ad").distinct().count()
    events = score_logs.select(F.col("dt"), F.col("event_id"), F.col("context_id"),
                               context_key_col().alias("context_key"), F.col("slots"))
    n_events = events.count()
    # oracle: the m largest P among the event's eligible ads
    if eligible is None:
        cand = events.select(F.col("event_id"), F.col("context_id")).join(
            F.broadcast(rates), F.col("context_id") == F.col("t_context"), how="inner")
    else:
        cand = (eligible.select(F.col("event_id"), F.col("ad_id"))
                .join(events.select(F.col("event_id"), F.col("context_id")), on="event_id")
                .join(F.broadcast(rates), (F.col("context_id") == F.col("t_context")) & (F.col("ad_id") == F.col("t_ad")),
                      how="inner"))
    top = (cand.groupBy(F.col("event_id"))
           .agg(F.slice(F.sort_array(F.collect_list(F.col("p")), asc=False), 1, int(m)).alias("top")))
    C = adc_array_col(adc)
    oracle = top.select(
        F.aggregate(F.col("top"), F.lit(0.0), lambda acc, x: acc + x).alias("s_star"),
        F.aggregate(F.transform(F.col("top"), lambda x, i: x * F.coalesce(F.try_element_at(C, (i + 1).cast("int")),
                                                                           F.lit(0.0))),
                    F.lit(0.0), lambda acc, x: acc + x).alias("v_star"))
    o = oracle.agg(F.sum("s_star").alias("s"), F.sum("v_star").alias("v")).collect()[0]
    s_star, v_star = float(o["s"] or 0.0) / n_events, float(o["v"] or 0.0) / n_events

    logged = events.select(F.col("event_id"), F.col("context_id"), F.transform(
        F.col("slots"), lambda s: F.struct(s["position"].alias("position"), s["ad_id"].alias("ad_id"),
                                           F.lit(1.0).alias("probability"))).alias("slots"))
    lv = _slate_values(spark, logged, rates, adc).agg(F.sum("v").alias("v")).collect()[0]
    out = {"n_events": n_events, "n_ads": n_ads, "m": m, "oracle_value": v_star, "oracle_set_value": s_star,
           "logging_value": float(lv["v"] or 0.0) / n_events, "policies": {}}

    dec = decisions.select(F.col("policy_id"), F.col("event_id"), F.col("slots")).join(
        events.select(F.col("event_id"), F.col("context_id")), on="event_id", how="inner")
    per_policy = (_slate_values(spark, dec.select(F.concat_ws("\u0001", F.col("policy_id"), F.col("event_id"))
                                                   .alias("event_id"), F.col("context_id"), F.col("slots")),
                                rates, adc)
                  .select(F.split(F.col("event_id"), "\u0001").getItem(0).alias("policy_id"), F.col("v"), F.col("s"))
                  .groupBy("policy_id").agg(F.sum("v").alias("v"), F.sum("s").alias("s"),
                                            F.count(F.lit(1)).alias("n")).toPandas())
    for _, row in per_policy.iterrows():
        n = float(row["n"])
        v, s = float(row["v"]) / n, float(row["s"]) / n
        out["policies"][row["policy_id"]] = {
            "true_value": v, "set_value": s, "n_events": int(n),
            "regret": v_star - v, "set_regret": s_star - s,
            "regret_vs_oracle_share": (v_star - v) / v_star if v_star else math.nan,
            "beats_logging": v > out["logging_value"],
        }
    for pid, table in (scores or {}).items():
        if pid not in out["policies"]:
            continue
        out["policies"][pid].update(regression_error(spark, table, events, rates, n_ads, m))
    return out


def regression_error(spark, scores, events, rates, n_ads: int, m: int) -> dict:
    """eps = mean over events of (1/|A|) sum_{a in A} (g(x, a) - P(x, a))^2 and the bound, with the policy's scores g.

    A = the truth's ads plus every ad the policy scored (an ad unknown to the truth has P = 0, the value it is
    credited with in the true value); ads missing from ``scores`` get the context's fallback (mean score of the
    known ads), as at decision time. ``n_ads`` is unused (kept for the signature); |A| is returned."""
    from pyspark.sql import functions as F

    counts = events.groupBy(F.col("context_key"), F.col("context_id")).agg(F.count(F.lit(1)).alias("n"))
    prior = scores.where(F.col("known")).groupBy("context_key").agg(F.avg("score").alias("g_prior"))
    ads_all = (rates.select(F.col("t_ad").alias("ad")).union(scores.select(F.col("ad_id").alias("ad")))
               .distinct().persist())
    n_all = ads_all.count()
    grid = (counts.crossJoin(F.broadcast(ads_all))
            .join(F.broadcast(rates), (F.col("context_id") == F.col("t_context")) & (F.col("ad") == F.col("t_ad")),
                  how="left")
            .select(F.col("context_key"), F.col("n"), F.col("ad"), F.coalesce(F.col("p"), F.lit(0.0)).alias("p")))
    g = scores.select(F.col("context_key"), F.col("ad_id").alias("ad"), F.col("score"))
    per = (grid.join(g, on=["context_key", "ad"], how="left").join(prior, on="context_key", how="left")
           .select(F.col("context_key"), F.col("n"),
                   F.pow(F.coalesce(F.col("score"), F.col("g_prior"), F.lit(0.0)) - F.col("p"), 2).alias("d2"))
           .groupBy("context_key").agg(F.first("n").alias("n"), F.sum("d2").alias("sse")))
    agg = per.agg(F.sum(F.col("n") * F.col("sse")).alias("w_sse"), F.sum("n").alias("n"),
                  F.sum(F.col("n") * F.sqrt(F.col("sse"))).alias("w_rsse")).collect()[0]
    ads_all.unpersist()
    n = float(agg["n"])
    eps = float(agg["w_sse"]) / n / n_all
    kappa = 2 * min(m, n_all - m)
    return {"eps_l2": eps, "n_ads_bound": int(n_all), "regret_bound": regression_bound(m, n_all, eps),
            "regret_bound_per_instance": math.sqrt(kappa) * float(agg["w_rsse"]) / n}


def factored_values(spark, score_logs, decisions, method: str = "variance_optimal", level: float = 0.95) -> pd.DataFrame:
    """Factored estimate (estimated ADCs of the same window) of every policy in ``decisions``.

    Returns policy_id, estimator, value, std_error, ci_low, ci_high, supported_share, adc (list)."""
    from ..estimators.adc import adc_table, adc_vector
    from ..estimators.factored import ad_impressions, factored_estimate
    from ..statistics.window import tables_of

    tables = tables_of(score_logs, decisions)
    C = adc_vector(adc_table(tables["ad_position"], methods=(method,), bootstrap=False), method)
    T_a = ad_impressions(tables["ad_position"])
    rows = []
    for pid in sorted(tables["policy_events"]["policy_id"].unique()):
        def sub(name):
            t = tables.get(name)
            if t is None or not len(t):
                return t
            return t[t["policy_id"] == pid]
        est = factored_estimate(sub("factored"), sub("factored_sq"), T_a, C, sub("target_placements"), level)
        rows.append({"policy_id": pid, "estimator": "factored", **est, "adc_method": method,
                     "adc": [float(c) for c in C]})
    return pd.DataFrame(rows)
