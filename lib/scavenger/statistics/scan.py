"""One scan of the logs (joined with the decisions on (dt, event_id)) -> small additive tables.

Everything on the row path is built-in Spark SQL (higher-order functions ``filter``/``aggregate``/``transform``,
``explode``, ``xxhash64``); no Python UDFs, nothing row-level reaches the driver. The prepared input of the
requested days is persisted once and every table below is an aggregation of that one scan. All tables carry
``dt`` so a multi-day scan splits into per-day tables, and every value column is a count, a sum, or a max: a
window is the sum (max) over its days (``statistics.tables.merge``).

Tables (value columns; keys in ``statistics.tables.TABLES``):

- ``log_summary``  (dt, logging_policy): n_events, n_slots, s_r, s_r2, n_missing_propensity, n_null_reward, k_max,
  r_max, r_min (max/min slate reward).
  Also T_a for the "base policy" action of seed 001 section 3.3 (T_a = n_events of logging policy a).
- ``ad_position``  (dt, logging_policy, ad_id, position): m = impressions M(a,i), c = sum of slot rewards C(a,i),
  c2 = sum of squared slot rewards; with ``bootstrap = B > 0`` also m_boot[b], c_boot[b] (Poisson(1) weights per
  *event*, seeded from xxhash64(seed, b, event_id), so replicates are partition-independent and reproducible).
- ``slate_actions`` (dt, slate_key): t = T_s, number of events whose logged slate (position:ad list) hashes to the key.
- ``slate_targets`` (dt, policy_id, slate_key): for deterministic targets, keyed by the slate the target chooses:
  n_target, n_match (logged slate == target slate), s_r, s_r2 (sums of r, r^2 over matching events).
- ``base_targets`` (dt, policy_id, base_policy): n_target, n_match (logging_policy == base_policy), s_r, s_r2.
- ``policy_events`` (dt, policy_id): n_events (events with a decision), n_deterministic, n_with_base, n_reorder
  (deterministic decisions that show exactly the logged ads, i.e. re-orderings of the logged slate).
- ``factored`` (dt, policy_id, ad_id, pos_i, pos_j): s_rp = sum r_{t,i} pi(ad at j | x_t), s_r2p = sum r^2 pi(..)
  over logged slots with nonzero reward whose ad the target may show at position j.
- ``factored_sq`` (dt, policy_id, ad_id, pos_i, pos_j, pos_j2): s_r2pp = sum r^2 pi(ad at j) pi(ad at j2); with it the
  impression-level variance of the factored estimator is exact for any ADC vector (see estimators/factored.py).
- ``target_placements`` (dt, policy_id, ad_id, pos_j): s_p = sum_t pi(ad at j | x_t) (the target's expected
  placements; with T_a it gives the share of the target's attention on ads never logged).
- ``slate_moments`` (dt, policy_id, logging_policy): the sums of estimators/slate.py:SlateMoments, Y_k = pi_k(a_k|x) /
  mu_k(a_k|x), W = prod_k Y_k; arrays of length K (YY-type arrays are K*K, row-major j*K + k).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

STATS_VERSION = 1


@dataclass(frozen=True)
class StatsConfig:
    """What (besides the input files) determines the statistics of a day; part of the per-dt fingerprint."""

    bootstrap: int = 0          # Poisson bootstrap replicates for the ADC table (0: none)
    seed: int = 0               # bootstrap seed (combined with event_id)
    slate_actions: bool = True  # direct-approach slate tables (can be as large as the number of events)
    n_positions: int | None = None  # K for the slate moments; None: the max position seen in the scanned days
    version: int = STATS_VERSION

    def to_dict(self) -> dict:
        return asdict(self)


def _poisson1_cdf(jmax: int = 15) -> list[float]:
    """P(N <= j) for N ~ Poisson(1), j = 0..jmax."""
    out, term, acc = [], math.exp(-1.0), 0.0
    for j in range(jmax + 1):
        acc += term
        out.append(acc)
        term /= (j + 1)
    return out


def poisson_weight(u):
    """Poisson(1) draw from a uniform column by inverse CDF: sum_j 1[u > F(j)] (built-in comparisons only)."""
    from pyspark.sql import functions as F

    terms = [F.when(u > F.lit(cdf), F.lit(1)).otherwise(F.lit(0)) for cdf in _poisson1_cdf()]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def hash_uniform(*cols):
    """Uniform in [0, 1) from xxhash64 of the given columns: (h & (2^53 - 1)) / 2^53."""
    from pyspark.sql import functions as F

    return (F.xxhash64(*cols).bitwiseAND(F.lit((1 << 53) - 1)).cast("double") / F.lit(float(1 << 53)))


def slate_reward_col(slots: str = "slots", slate_reward: str = "slate_reward"):
    """r_t = slate_reward if not null else the sum of slot rewards (null slot rewards count as 0)."""
    from pyspark.sql import functions as F

    slot_sum = F.aggregate(F.col(slots), F.lit(0.0), lambda acc, s: acc + F.coalesce(s["reward"], F.lit(0.0)))
    return F.coalesce(F.col(slate_reward), slot_sum)


def slate_key_col(slots_col, prob_filter: bool = False):
    """xxhash64 of the ordered 'position:ad_id' list of a slate (deterministic decisions: entries with p > 0)."""
    from pyspark.sql import functions as F

    arr = F.filter(slots_col, lambda s: s["probability"] > 0) if prob_filter else slots_col
    pairs = F.sort_array(F.transform(arr, lambda s: F.struct(s["position"].alias("p"), s["ad_id"].alias("a"))))
    text = F.concat_ws("\u0001", F.transform(pairs, lambda x: F.concat(x["p"].cast("string"), F.lit(":"), x["a"])))
    return F.xxhash64(text)


def prepare_events(logs):
    """Per event: dt, event_id, logging_policy, slots, r, missing-propensity flag, k (slate size)."""
    from pyspark.sql import functions as F

    return logs.select(
        F.col("dt"), F.col("event_id"), F.col("context_id"), F.col("logging_policy"), F.col("slots"),
        slate_reward_col().alias("r"),
        F.exists(F.col("slots"), lambda s: s["propensity"].isNull()).alias("missing_prop"),
        F.size(F.col("slots")).alias("k"),
    )


def _log_summary(events):
    from pyspark.sql import functions as F

    return events.groupBy("dt", "logging_policy").agg(
        F.count(F.lit(1)).alias("n_events"),
        F.sum(F.col("k")).cast("long").alias("n_slots"),
        F.sum(F.col("r")).alias("s_r"),
        F.sum(F.col("r") * F.col("r")).alias("s_r2"),
        F.sum(F.col("missing_prop").cast("long")).alias("n_missing_propensity"),
        F.sum(F.aggregate(F.col("slots"), F.lit(0), lambda a, s: a + F.when(s["reward"].isNull(), 1).otherwise(0))
              ).cast("long").alias("n_null_reward"),
        F.max(F.col("k")).alias("k_max"),
        F.max(F.col("r")).alias("r_max"),
        F.min(F.col("r")).alias("r_min"),
    )


def _ad_position(events, config: StatsConfig):
    from pyspark.sql import functions as F

    B = config.bootstrap
    # one Poisson(1) weight per event and replicate (shared by the event's slots), drawn before the explode
    weights = (F.transform(F.sequence(F.lit(0), F.lit(B - 1)), lambda b: poisson_weight(
        hash_uniform(F.lit(config.seed), b, F.col("event_id")))) if B > 0 else F.lit(None).cast("array<int>"))
    slots = events.select(F.col("dt"), F.col("logging_policy"), weights.alias("w"),
                          F.explode(F.col("slots")).alias("s"))
    flat = slots.select(
        F.col("dt"), F.col("logging_policy"), F.col("w"),
        F.col("s.ad_id").alias("ad_id"), F.col("s.position").alias("position"),
        F.coalesce(F.col("s.reward"), F.lit(0.0)).alias("reward"),
    )
    aggs = [F.count(F.lit(1)).alias("m"), F.sum(F.col("reward")).alias("c"),
            F.sum(F.col("reward") * F.col("reward")).alias("c2")]
    if B > 0:
        aggs.append(F.array(*[F.sum(F.col("w")[b]) for b in range(B)]).cast("array<long>").alias("m_boot"))
        aggs.append(F.array(*[F.sum(F.col("w")[b] * F.col("reward")) for b in range(B)]).alias("c_boot"))
    return flat.groupBy("dt", "logging_policy", "ad_id", "position").agg(*aggs)


def join_decisions(events, decisions):
    """Events x decisions on (dt, event_id): one row per (event, policy)."""
    from pyspark.sql import functions as F

    dec = decisions.select(F.col("dt"), F.col("event_id"), F.col("policy_id"),
                           F.col("slots").alias("dslots"), F.col("base_policy"))
    joined = events.join(dec, on=["dt", "event_id"], how="inner")
    det = F.forall(F.col("dslots"), lambda d: (d["probability"] == 0.0) | (d["probability"] == 1.0))
    return joined.select(
        F.col("dt"), F.col("event_id"), F.col("logging_policy"), F.col("slots"), F.col("r"),
        F.col("missing_prop"), F.col("policy_id"), F.col("dslots"), F.col("base_policy"),
        det.alias("deterministic"),
    )


def _policy_events(joined):
    from pyspark.sql import functions as F

    return joined.groupBy("dt", "policy_id").agg(
        F.count(F.lit(1)).alias("n_events"),
        F.sum(F.col("deterministic").cast("long")).alias("n_deterministic"),
        F.sum(F.col("base_policy").isNotNull().cast("long")).alias("n_with_base"),
        F.sum((F.col("deterministic") & (
            F.sort_array(F.transform(F.filter(F.col("dslots"), lambda d: d["probability"] > 0), lambda d: d["ad_id"]))
            == F.sort_array(F.transform(F.col("slots"), lambda s: s["ad_id"])))).cast("long")).alias("n_reorder"),
    )


def _slate_actions(events):
    from pyspark.sql import functions as F

    return (events.select(F.col("dt"), slate_key_col(F.col("slots")).alias("slate_key"))
            .groupBy("dt", "slate_key").agg(F.count(F.lit(1)).alias("t")))


def _slate_targets(joined):
    from pyspark.sql import functions as F

    det = joined.where(F.col("deterministic"))
    keyed = det.select(
        F.col("dt"), F.col("policy_id"), F.col("r"),
        slate_key_col(F.col("dslots"), prob_filter=True).alias("slate_key"),
        slate_key_col(F.col("slots")).alias("logged_key"),
    )
    match = (F.col("slate_key") == F.col("logged_key")).cast("long")
    return keyed.groupBy("dt", "policy_id", "slate_key").agg(
        F.count(F.lit(1)).alias("n_target"),
        F.sum(match).alias("n_match"),
        F.sum(match * F.col("r")).alias("s_r"),
        F.sum(match * F.col("r") * F.col("r")).alias("s_r2"),
    )


def _base_targets(joined):
    from pyspark.sql import functions as F

    rows = joined.where(F.col("base_policy").isNotNull())
    match = (F.col("base_policy") == F.col("logging_policy")).cast("long")
    return rows.groupBy("dt", "policy_id", "base_policy").agg(
        F.count(F.lit(1)).alias("n_target"),
        F.sum(match).alias("n_match"),
        F.sum(match * F.col("r")).alias("s_r"),
        F.sum(match * F.col("r") * F.col("r")).alias("s_r2"),
    )


def _factored(joined):
    """Logged slots with nonzero reward x the target's entries for the same ad (its positions and probabilities)."""
    from pyspark.sql import functions as F

    slots = joined.select(F.col("dt"), F.col("policy_id"), F.col("dslots"), F.explode(F.col("slots")).alias("s"))
    clicked = slots.select(
        F.col("dt"), F.col("policy_id"), F.col("s.ad_id").alias("ad_id"), F.col("s.position").alias("pos_i"),
        F.coalesce(F.col("s.reward"), F.lit(0.0)).alias("reward"),
        F.filter(F.col("dslots"), lambda d: (d["ad_id"] == F.col("s.ad_id")) & (d["probability"] > 0)).alias("tgt"),
    ).where((F.col("reward") != 0.0) & (F.size(F.col("tgt")) > 0))
    single = (clicked.select(F.col("dt"), F.col("policy_id"), F.col("ad_id"), F.col("pos_i"), F.col("reward"),
                             F.explode(F.col("tgt")).alias("d"))
              .groupBy("dt", "policy_id", "ad_id", "pos_i", F.col("d.position").alias("pos_j"))
              .agg(F.sum(F.col("reward") * F.col("d.probability")).alias("s_rp"),
                   F.sum(F.col("reward") * F.col("reward") * F.col("d.probability")).alias("s_r2p")))
    pairs = F.flatten(F.transform(F.col("tgt"), lambda x: F.transform(F.col("tgt"), lambda y: F.struct(
        x["position"].alias("j"), y["position"].alias("j2"), (x["probability"] * y["probability"]).alias("pp")))))
    square = (clicked.select(F.col("dt"), F.col("policy_id"), F.col("ad_id"), F.col("pos_i"), F.col("reward"),
                             F.explode(pairs).alias("q"))
              .groupBy("dt", "policy_id", "ad_id", "pos_i", F.col("q.j").alias("pos_j"), F.col("q.j2").alias("pos_j2"))
              .agg(F.sum(F.col("reward") * F.col("reward") * F.col("q.pp")).alias("s_r2pp")))
    return single, square


def _target_placements(joined):
    """Expected placements of each ad by the target: sum over events of pi(ad at j | x_t)."""
    from pyspark.sql import functions as F

    return (joined.select(F.col("dt"), F.col("policy_id"), F.explode(F.col("dslots")).alias("d"))
            .where(F.col("d.probability") > 0)
            .groupBy("dt", "policy_id", F.col("d.ad_id").alias("ad_id"), F.col("d.position").alias("pos_j"))
            .agg(F.sum(F.col("d.probability")).alias("s_p")))


def _slate_moments(joined, K: int):
    """Sums of estimators/slate.py:SlateMoments per (dt, policy_id, logging_policy); Y_k = pi_k(a_k|x)/mu_k(a_k|x)."""
    from pyspark.sql import functions as F

    def y_at(k):
        logged = F.try_element_at(F.filter(F.col("slots"), lambda s: s["position"] == F.lit(k)), F.lit(1))
        pi = F.aggregate(
            F.filter(F.col("dslots"), lambda d: (d["position"] == F.lit(k)) & (d["ad_id"] == logged["ad_id"])),
            F.lit(0.0), lambda acc, d: acc + d["probability"])
        return pi / logged["propensity"]

    ys = joined.select(
        F.col("dt"), F.col("policy_id"), F.col("logging_policy"), F.col("r"),
        F.array(*[y_at(k) for k in range(1, K + 1)]).alias("Y"),
    )
    ys = ys.select(
        F.col("dt"), F.col("policy_id"), F.col("logging_policy"), F.col("r"), F.col("Y"),
        F.exists(F.col("Y"), lambda y: y.isNull()).alias("miss"),
    )
    ok = ~F.col("miss")

    def s(expr):
        return F.sum(F.when(ok, expr))

    r = F.col("r")
    Y = [F.col("Y")[k] for k in range(K)]
    W = Y[0]
    for y in Y[1:]:
        W = W * y
    pairs = [(j, k) for j in range(K) for k in range(K)]
    return ys.groupBy("dt", "policy_id", "logging_policy").agg(
        F.sum(ok.cast("long")).alias("n"),
        F.sum(F.col("miss").cast("long")).alias("n_missing_propensity"),
        s(r).alias("s_r"), s(r * r).alias("s_r2"),
        F.array(*[s(Y[k]) for k in range(K)]).alias("s_Y"),
        F.array(*[s(r * Y[k]) for k in range(K)]).alias("s_rY"),
        F.array(*[s(r * r * Y[k]) for k in range(K)]).alias("s_r2Y"),
        F.array(*[s(Y[j] * Y[k]) for j, k in pairs]).alias("s_YY"),
        F.array(*[s(r * Y[j] * Y[k]) for j, k in pairs]).alias("s_rYY"),
        F.array(*[s(r * r * Y[j] * Y[k]) for j, k in pairs]).alias("s_r2YY"),
        s(W).alias("s_W"), s(r * W).alias("s_rW"), s(W * W).alias("s_W2"), s(r * W * W).alias("s_rW2"),
        s(r * r * W * W).alias("s_r2W2"),
        F.sum(F.when(ok & (W > 0), 1).otherwise(0)).cast("long").alias("n_W_pos"),
        F.max(F.when(ok, W)).alias("max_W"),
        F.array(*[F.max(F.when(ok, Y[k])) for k in range(K)]).alias("max_Y"),
        F.array(*[F.sum(F.when(ok & (Y[k] > 0), 1).otherwise(0)).cast("long") for k in range(K)]).alias("n_Y_pos"),
    )


def scan(logs, decisions=None, config: StatsConfig = StatsConfig()) -> dict:
    """Aggregate the given logs (any number of days; conformed to the contract) into the statistics tables.

    ``decisions`` (conformed; may hold several policies) is joined on (dt, event_id). The prepared events are
    persisted so the input is read once; returns {table_name: pandas.DataFrame} with a ``dt`` column (dates as
    ``datetime.date``). Only aggregated rows are collected to the driver.
    """
    from pyspark import StorageLevel

    events = prepare_events(logs).persist(StorageLevel.MEMORY_AND_DISK)
    out = {}
    try:
        out["log_summary"] = _log_summary(events).toPandas()
        K = config.n_positions
        if K is None:
            K = int(out["log_summary"]["k_max"].max()) if len(out["log_summary"]) else 0
        out["ad_position"] = _ad_position(events, config).toPandas()
        if config.slate_actions:
            out["slate_actions"] = _slate_actions(events).toPandas()
        if decisions is not None:
            joined = join_decisions(events, decisions).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                out["policy_events"] = _policy_events(joined).toPandas()
                if config.slate_actions:
                    out["slate_targets"] = _slate_targets(joined).toPandas()
                out["base_targets"] = _base_targets(joined).toPandas()
                single, square = _factored(joined)
                out["factored"] = single.toPandas()
                out["factored_sq"] = square.toPandas()
                out["target_placements"] = _target_placements(joined).toPandas()
                if K > 0:
                    out["slate_moments"] = _slate_moments(joined, K).toPandas()
            finally:
                joined.unpersist()
    finally:
        events.unpersist()
    for name, df in out.items():
        out[name] = _normalize(df)
    return out


def _normalize(df):
    """Arrays -> numpy float/int arrays in object columns; dt -> datetime.date."""
    import numpy as np

    for col in df.columns:
        if df[col].dtype == object and len(df) and isinstance(df[col].iloc[0], (list, np.ndarray)):
            df[col] = [np.asarray(v, dtype=float) for v in df[col]]
    return df
