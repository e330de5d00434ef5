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
    """Return (logs in the impression_log contract, numpy dict of the drawn arrays): a Spark DataFrame when
    ``spark`` is a session, a pyarrow Table (for DuckDB, no JVM) when it is None."""
    from ..contract import LOGS, arrow_schema, load_contract

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
    if spark is None:
        import pyarrow as pa

        names_ = [f.name for f in load_contract(LOGS).struct_type().fields]
        recs = [dict(zip(names_, r)) for r in rows]
        for rec in recs:
            rec["slots"] = [dict(zip(("position", "ad_id", "propensity", "reward"), s)) for s in rec["slots"]]
        df = pa.Table.from_pylist(recs, schema=arrow_schema(LOGS))
    else:
        df = spark.createDataFrame(rows, load_contract(LOGS).struct_type())
    return df, {"f0": f0, "f1": f1, "ctx": ctx, "ads": np.array(names), "props": props, "rewards": rewards,
                "day": day}


def deterministic_decisions(spark, logs_df, policy_id: str, ads_by_position: dict):
    """Decisions of a context-free deterministic target: position -> ad, for every logged event (a Spark
    DataFrame for Spark logs, a pyarrow Table for pyarrow logs)."""
    import pyarrow as pa

    if isinstance(logs_df, pa.Table):
        from ..contract import DECISIONS, arrow_schema

        slots = [{"position": int(p), "ad_id": a, "probability": 1.0} for p, a in sorted(ads_by_position.items())]
        recs = [{"policy_id": policy_id, "event_id": e, "slots": slots, "base_policy": None, "dt": d}
                for e, d in zip(logs_df["event_id"].to_pylist(), logs_df["dt"].to_pylist())]
        return pa.Table.from_pylist(recs, schema=arrow_schema(DECISIONS))
    from pyspark.sql import functions as F

    slots = F.array(*[F.struct(F.lit(int(p)).alias("position"), F.lit(a).alias("ad_id"),
                               F.lit(1.0).alias("probability"))
                      for p, a in sorted(ads_by_position.items())])
    return logs_df.select(F.lit(policy_id).alias("policy_id"), F.col("event_id"), slots.alias("slots"),
                          F.lit(None).cast("string").alias("base_policy"), F.col("dt"))
