"""Small synthetic logs in the contract schema, built with numpy on the driver (tests and examples only).

``synthetic_logs`` draws n events with a categorical context (features f0, f1; context_id = both) and a slate
of K slots under one of the logging modes:
  uniform_ranked     K distinct ads out of n_ads, uniformly (sampling without replacement): marginal 1/n_ads
  uniform_slotted    slot k picks uniformly from its own pool of ``slot_size`` ads: marginal 1/slot_size
  contextual_ranked  with prob 1-eps the slate is a fixed function of the context, else uniform (marginal
                     (1-eps) 1[exploit] + eps/n_ads) -- breaks context independence on purpose
Rewards are Bernoulli(0.1) clicks. ``propensity_scale`` multiplies the logged propensities (miscalibration).
"""
from __future__ import annotations

import datetime as _dt

import numpy as np


def synthetic_logs(spark, n: int = 4000, mode: str = "uniform_ranked", n_ads: int = 8, k: int = 3,
                   slot_size: int = 4, eps: float = 0.2, seed: int = 0, days: int = 1,
                   propensity_scale: float = 1.0, start: str = "2026-01-01", policy: str | None = None):
    """Return (spark DataFrame in the impression_log contract, numpy dict of the drawn arrays)."""
    from ..contract import LOGS, load_contract

    rng = np.random.default_rng(seed)
    f0 = rng.integers(0, 3, n)
    f1 = rng.integers(0, 2, n)
    ctx = f0 * 2 + f1
    day = np.arange(n) % days
    if mode == "uniform_slotted":
        ads = np.stack([rng.integers(0, slot_size, n) for _ in range(k)], axis=1)
        names = [[f"s{j + 1}_a{a}" for j, a in enumerate(row)] for row in ads]
        props = np.full((n, k), 1.0 / slot_size)
    elif mode in ("uniform_ranked", "contextual_ranked"):
        ads = np.argsort(rng.random((n, n_ads)), axis=1)[:, :k]
        props = np.full((n, k), 1.0 / n_ads)
        if mode == "contextual_ranked":
            exploit = np.array([[(c + j) % n_ads for j in range(k)] for c in range(6)])
            greedy = rng.random(n) >= eps
            ads[greedy] = exploit[ctx[greedy]]
            is_exploit = ads == exploit[ctx]
            props = np.where(is_exploit, (1 - eps) + eps / n_ads, eps / n_ads)
        names = [[f"ad{a:02d}" for a in row] for row in ads]
    else:
        raise ValueError(mode)
    rewards = (rng.random((n, k)) < 0.1).astype(float)
    props = props * propensity_scale
    d0 = _dt.date.fromisoformat(start)
    rows = []
    for t in range(n):
        d = d0 + _dt.timedelta(days=int(day[t]))
        rows.append((f"{seed}-{t}", _dt.datetime(d.year, d.month, d.day, 12, 0, 0), f"c{ctx[t]}",
                     {"f0": str(f0[t]), "f1": str(f1[t])}, policy or mode,
                     [(j + 1, names[t][j], float(props[t, j]), float(rewards[t, j])) for j in range(k)], None, d))
    df = spark.createDataFrame(rows, load_contract(LOGS).struct_type())
    return df, {"f0": f0, "f1": f1, "ctx": ctx, "ads": np.array(names), "props": props, "rewards": rewards,
                "day": day}


def deterministic_decisions(spark, logs_df, policy_id: str, ads_by_position: dict):
    """Decisions of a context-free deterministic target: position -> ad, for every logged event."""
    from pyspark.sql import functions as F

    slots = F.array(*[F.struct(F.lit(int(p)).alias("position"), F.lit(a).alias("ad_id"),
                               F.lit(1.0).alias("probability"))
                      for p, a in sorted(ads_by_position.items())])
    return logs_df.select(F.lit(policy_id).alias("policy_id"), F.col("event_id"), slots.alias("slots"),
                          F.lit(None).cast("string").alias("base_policy"), F.col("dt"))
