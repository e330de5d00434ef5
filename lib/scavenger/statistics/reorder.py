"""Built-in re-ordering policies as decisions (Spark, built-in SQL only).

A re-ordering keeps the logged ads of an event and sorts them by a score (descending; ties keep the logged
order). The result is a deterministic decisions DataFrame (policy_id, event_id, slots, base_policy, dt) that goes
through the same statistics scan as any other target.

Scores: ``ctr_scores`` (empirical CTR per ad, fitted on the ``ad_position`` statistics of an earlier window,
optionally position-normalised by an ADC vector: sum_i C(a,i) / sum_i M(a,i) C_i); ``random`` (a seeded hash of
(seed, event_id, ad_id)); a user table (ad_id, score) or (context_id, ad_id, score). Ads without a score go last.
Small score tables travel as one broadcast row holding a map, so the logs are not shuffled.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import UsageError
from .scan import hash_uniform

_SEP = "\u0001"


def ctr_scores(ad_position: pd.DataFrame, adc: np.ndarray | None = None) -> pd.DataFrame:
    """(ad_id, score): clicks / impressions per ad over all positions; with ``adc``: clicks / sum_i M(a,i) C_i."""
    df = ad_position.groupby(["ad_id", "position"])[["m", "c"]].sum().reset_index()
    if adc is not None:
        C = np.asarray(adc, dtype=float)
        df["m"] = df["m"] * C[np.clip(df["position"].to_numpy(int), 1, C.size) - 1]
    agg = df.groupby("ad_id")[["m", "c"]].sum()
    agg = agg[agg["m"] > 0]
    return pd.DataFrame({"ad_id": agg.index.to_numpy(), "score": (agg["c"] / agg["m"]).to_numpy(float)})


def _sorted_decisions(events, policy_id: str, score_of):
    """events: logs-like frame (dt, event_id, slots, ...); score_of(slot) -> score column expression."""
    from pyspark.sql import functions as F

    keyed = F.transform(F.col("slots"), lambda s: F.struct(
        (-F.coalesce(score_of(s), F.lit(float("-inf")))).alias("neg"), s["position"].alias("p"),
        s["ad_id"].alias("a")))
    ordered = F.sort_array(keyed)
    slots = F.transform(ordered, lambda x, i: F.struct(
        (i + 1).cast("int").alias("position"), x["a"].alias("ad_id"), F.lit(1.0).alias("probability")))
    return events.select(
        F.lit(policy_id).alias("policy_id"), F.col("event_id"), slots.alias("slots"),
        F.lit(None).cast("string").alias("base_policy"), F.col("dt"))


def random_reorder(logs, policy_id: str = "reorder_random", seed: int = 0):
    """Uniformly random order per event: score = hash_uniform(seed, event_id, ad_id)."""
    from pyspark.sql import functions as F

    return _sorted_decisions(logs, policy_id,
                             lambda s: hash_uniform(F.lit(seed), F.col("event_id"), s["ad_id"]))


def score_reorder(spark, logs, scores: pd.DataFrame, policy_id: str, max_entries: int = 500_000):
    """Order by a score table (ad_id, score) or (context_id, ad_id, score), broadcast as one map row."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, MapType, StringType, StructField, StructType

    cols = set(scores.columns)
    if not {"ad_id", "score"} <= cols:
        raise UsageError("a score table needs columns (ad_id, score) or (context_id, ad_id, score)")
    if len(scores) > max_entries:
        raise UsageError(f"score table has {len(scores)} rows; at most {max_entries} are supported")
    by_context = "context_id" in cols
    if by_context:
        keys = scores["context_id"].astype(str) + _SEP + scores["ad_id"].astype(str)
    else:
        keys = scores["ad_id"].astype(str)
    mapping = dict(zip(keys, scores["score"].astype(float)))
    schema = StructType([StructField("__scores", MapType(StringType(), DoubleType()))])
    row = spark.createDataFrame([(mapping,)], schema)
    joined = logs.crossJoin(F.broadcast(row))
    if by_context:
        def score_of(s):
            return F.try_element_at(F.col("__scores"), F.concat(F.col("context_id"), F.lit(_SEP), s["ad_id"]))
    else:
        def score_of(s):
            return F.try_element_at(F.col("__scores"), s["ad_id"])
    return _sorted_decisions(joined, policy_id, score_of)


def parse_reorder_specs(specs) -> list[dict]:
    """``--reorder`` values: ``random[:seed]``, ``ctr:FROM:TO`` (fit window), ``scores:PATH`` -> spec dicts."""
    out = []
    for spec in specs or []:
        parts = spec.split(":")
        kind = parts[0]
        if kind == "random":
            seed = int(parts[1]) if len(parts) > 1 and parts[1] else 0
            out.append({"kind": "random", "seed": seed, "policy_id": f"reorder_random_{seed}"})
        elif kind == "ctr":
            if len(parts) != 3:
                raise UsageError(f"--reorder ctr needs ctr:FROM:TO (the fit window), got {spec!r}")
            out.append({"kind": "ctr", "fit_from": parts[1], "fit_to": parts[2],
                        "policy_id": f"reorder_ctr_{parts[1]}_{parts[2]}"})
        elif kind == "scores":
            if len(parts) < 2:
                raise UsageError(f"--reorder scores needs scores:PATH, got {spec!r}")
            path = ":".join(parts[1:])
            out.append({"kind": "scores", "path": path, "policy_id": "reorder_scores"})
        else:
            raise UsageError(f"unknown --reorder kind {kind!r} (random[:seed], ctr:FROM:TO, scores:PATH)")
    return out
