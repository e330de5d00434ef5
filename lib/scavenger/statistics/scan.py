"""One scan of the logs (joined with the decisions on (dt, event_id)) -> small additive tables.

Everything on the row path is built-in Spark SQL; no Python UDFs, nothing row-level reaches the driver. Slates are
flattened first (``flatten_events``/``flatten_decisions``): slot k becomes scalar columns (a_k, mu_k, w_k; d_a_k,
d_p_k) read from the position-sorted array, so the hot path is code-generated expressions; per-row lambdas
(``filter``/``aggregate``, interpreted and slow) run only for rows off the contract's shape (gaps, stochastic
decisions with several entries per position). The flat events of the requested days are persisted and every
table below is an aggregation of them (joined with the decisions for the policy tables). All tables carry
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

STATS_VERSION = 2  # 2: slate keys hash (position, ad_id) pairs, not their text


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
    """xxhash64 of the slate's (position, ad_id) pairs in position order (deterministic decisions: the entries with
    p > 0). Hashing an array of structs chains the hash over its fields in order, so this equals
    :func:`_flat_slate_key` on the same slate (no string building on the row path). Written as
    array_sort(transform(..)): inside a CASE branch that form measured 3x cheaper per row than sort_array or
    arrays_zip of the struct array."""
    from pyspark.sql import functions as F

    arr = F.filter(slots_col, lambda s: s["probability"] > 0) if prob_filter else slots_col
    return F.xxhash64(F.array_sort(F.transform(arr, lambda s: F.struct(s["position"], s["ad_id"]))))


def _flat_slate_key(ads):
    """slate_key_col of a slate with exactly one entry per position 1..K, from its ad columns (same value):
    xxhash64(1, a_1, 2, a_2, ..., K, a_K)."""
    from pyspark.sql import functions as F

    return F.xxhash64(*[c for k, a in enumerate(ads) for c in (F.lit(k + 1), a)])


def _all(conds):
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _any(conds):
    out = conds[0]
    for c in conds[1:]:
        out = out | c
    return out


def _total(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _at_position(k: int):
    """Lambda for F.filter: the slot at position k (a factory, since PySpark reads a lambda's arity)."""
    from pyspark.sql import functions as F

    return lambda s: s["position"] == F.lit(k)


def _pi_adder(k: int, ad, positive: bool = False):
    """Lambda for F.aggregate over decision entries: acc + probability of the entries (position k, ad)."""
    from pyspark.sql import functions as F

    def add(acc, d):
        cond = (d["position"] == F.lit(k)) & (d["ad_id"] == ad)
        if positive:
            cond = cond & (d["probability"] > 0)
        return acc + F.when(cond, d["probability"]).otherwise(F.lit(0.0))
    return add


def k_max(logs) -> int:
    """Largest slate size in the logs (0 when empty): K of the slate moments when not configured."""
    from pyspark.sql import functions as F

    row = logs.select(F.max(F.size(F.col("slots"))).alias("k")).collect()[0]
    return int(row["k"] or 0)


def flatten_events(logs, K: int, keys: bool = False, ad_set: bool = False):
    """One row per event with the slate as scalar columns a_k (ad), mu_k (propensity), w_k (reward, nullable) for
    k = 1..K, so the hot path uses plain (code-generated) expressions instead of per-row lambdas.

    ``exact``: the slots are exactly positions 1..K (the contract's shape); then slot k is element k of the
    position-sorted array. Other rows (gaps, other sizes) take slot k as the first slot with position k and keep
    their original array in ``rest`` for the few statistics that need every slot. ``r`` = slate reward (or the sum
    of slot rewards), ``clicked`` = some slot reward is nonzero, ``lkey`` (``keys``) = the logged slate's key,
    ``lset`` (``ad_set``) = :func:`_ad_set_key` of the logged ads (a target showing the same set re-orders the slate).
    """
    from pyspark.sql import functions as F

    src = logs.select(F.col("dt"), F.col("event_id"), F.col("logging_policy"), F.col("slots"),
                      F.col("slate_reward"), F.sort_array(F.col("slots")).alias("_ss"))
    exact = _all([F.size(F.col("slots")) == F.lit(K)]
                 + [F.try_element_at(F.col("_ss"), F.lit(k)).getField("position") == F.lit(k)
                    for k in range(1, K + 1)])
    slot_cols = []
    for k in range(1, K + 1):
        fast = F.try_element_at(F.col("_ss"), F.lit(k))
        slow = F.try_element_at(F.filter(F.col("slots"), _at_position(k)), F.lit(1))
        slot_cols.append(F.when(F.col("_exact"), fast).otherwise(slow).alias(f"_s{k}"))
    staged = src.select(F.col("dt"), F.col("event_id"), F.col("logging_policy"), F.col("slots"),
                        F.col("slate_reward"), F.col("_ss"), exact.alias("_exact"))
    staged = staged.select(*[F.col(c) for c in staged.columns], *slot_cols)
    a = [F.col(f"_s{k}").getField("ad_id") for k in range(1, K + 1)]
    mu = [F.col(f"_s{k}").getField("propensity") for k in range(1, K + 1)]
    w = [F.col(f"_s{k}").getField("reward") for k in range(1, K + 1)]
    ex = F.col("_exact")
    slots = F.col("slots")
    slot_sum = F.aggregate(slots, F.lit(0.0), lambda acc, s: acc + F.coalesce(s["reward"], F.lit(0.0)))
    fast_sum = _total([F.coalesce(x, F.lit(0.0)) for x in w])
    r = F.coalesce(F.col("slate_reward"), F.when(ex, fast_sum).otherwise(slot_sum))
    missing = F.when(ex, _any([x.isNull() for x in mu])).otherwise(
        F.exists(slots, lambda s: s["propensity"].isNull()))
    n_null = F.when(ex, _total([F.when(x.isNull(), 1).otherwise(0) for x in w])).otherwise(
        F.aggregate(slots, F.lit(0), lambda acc, s: acc + F.when(s["reward"].isNull(), 1).otherwise(0)))
    clicked = F.when(ex, _any([F.coalesce(x, F.lit(0.0)) != F.lit(0.0) for x in w])).otherwise(
        F.exists(slots, lambda s: F.coalesce(s["reward"], F.lit(0.0)) != F.lit(0.0)))
    cols = [F.col("dt"), F.col("event_id"), F.col("logging_policy"), ex.alias("exact"),
            F.size(slots).alias("k"), r.alias("r"), missing.alias("missing_prop"), n_null.alias("n_null_reward"),
            clicked.alias("clicked"), F.when(~ex, slots).alias("rest")]
    if keys:
        cols.append(F.when(ex, _flat_slate_key(a)).otherwise(slate_key_col(slots)).alias("lkey"))
    if ad_set:
        cols.append(_ad_set_key(F.when(ex, F.array(*a)).otherwise(slots.getField("ad_id"))).alias("lset"))
    for k in range(K):
        cols += [a[k].alias(f"a_{k + 1}"), mu[k].alias(f"mu_{k + 1}"), w[k].alias(f"w_{k + 1}")]
    return staged.select(*cols)


def _ad_set_key(ads):
    """xxhash64(size, sorted ads) of an array of ad ids: equal for two slates that show the same ads in any order
    (one long carried through the join instead of two sorted string arrays compared per row)."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.size(ads), F.sort_array(ads))


def _pair_hash(position, ad):
    """xxhash64(position, ad_id): the lookup key of a decision entry (a long, compared without building structs)."""
    from pyspark.sql import functions as F

    return F.xxhash64(position, ad)


def _logged_slots(K: int):
    """The event's slots as an array (rebuilt from the flat columns when exact, else ``rest``)."""
    from pyspark.sql import functions as F

    rebuilt = F.array(*[F.struct(F.lit(k).alias("position"), F.col(f"a_{k}").alias("ad_id"),
                                 F.col(f"mu_{k}").alias("propensity"), F.col(f"w_{k}").alias("reward"))
                        for k in range(1, K + 1)])
    return F.when(F.col("exact"), rebuilt).otherwise(F.col("rest"))


def flatten_decisions(decisions, K: int, keys: bool = False):
    """One row per (policy, event) with the decision as scalar columns d_a_k, d_p_k when it has exactly one entry
    per position 1..K (``one``: every deterministic slate); other decisions keep their array in ``drest`` with the
    lookup keys ``_dh`` (:func:`_pair_hash` of each entry), probabilities ``_dp`` and ``_nodup`` (no two entries
    share a key, so a (position, ad) pair is found by one ``array_position`` over longs).
    ``deterministic``: every probability is 0 or 1; ``tset`` (deterministic decisions): :func:`_ad_set_key` of the
    ads it shows (probability 1); ``tkey`` (``keys``, deterministic decisions): the key of the slate of its
    probability-1 entries."""
    from pyspark.sql import functions as F

    src = decisions.select(F.col("dt"), F.col("event_id"), F.col("policy_id"), F.col("base_policy"),
                           F.col("slots"),
                           # sorted only when it can be one entry per position (stochastic decisions are longer)
                           F.when(F.size(F.col("slots")) == F.lit(K), F.sort_array(F.col("slots"))).alias("_ds"))
    one = _all([F.size(F.col("slots")) == F.lit(K)]
               + [F.try_element_at(F.col("_ds"), F.lit(k)).getField("position") == F.lit(k)
                  for k in range(1, K + 1)])
    staged = src.select(F.col("dt"), F.col("event_id"), F.col("policy_id"), F.col("base_policy"),
                        F.col("slots"), F.col("_ds"), one.alias("one"))
    d_a = [F.try_element_at(F.col("_ds"), F.lit(k)).getField("ad_id") for k in range(1, K + 1)]
    d_p = [F.try_element_at(F.col("_ds"), F.lit(k)).getField("probability") for k in range(1, K + 1)]
    on = F.col("one")
    det = F.when(on, _all([(p == F.lit(0.0)) | (p == F.lit(1.0)) for p in d_p])).otherwise(
        F.size(F.array_except(F.col("slots").getField("probability"), F.array(F.lit(0.0), F.lit(1.0)))) == F.lit(0))
    full = on & _all([p == F.lit(1.0) for p in d_p])
    shown = F.when(full, F.array(*d_a)).otherwise(
        F.filter(F.col("slots"), lambda d: d["probability"] > 0).getField("ad_id"))
    dh = F.transform(F.col("slots"), lambda d: _pair_hash(d["position"], d["ad_id"]))
    cols = [F.col("dt"), F.col("event_id"), F.col("policy_id"), F.col("base_policy"), on.alias("one"),
            det.alias("deterministic"), F.when(~on, F.col("slots")).alias("drest"),
            F.when(det, _ad_set_key(shown)).alias("tset"), F.when(~on, dh).alias("_dh"),
            F.when(~on, F.col("slots").getField("probability")).alias("_dp")]
    if keys:
        cols.append(F.when(full, _flat_slate_key(d_a)).otherwise(
            F.when(det, slate_key_col(F.col("slots"), prob_filter=True))).alias("tkey"))
    for k in range(K):
        cols += [F.when(on, d_a[k]).alias(f"d_a_{k + 1}"), F.when(on, d_p[k]).alias(f"d_p_{k + 1}")]
    flat = staged.select(*cols)
    nodup = F.size(F.array_distinct(F.col("_dh"))) == F.size(F.col("_dh"))
    return flat.select(*[F.col(c) for c in flat.columns], F.when(~F.col("one"), nodup).alias("_nodup"))


def _decision_slots(K: int):
    from pyspark.sql import functions as F

    rebuilt = F.array(*[F.struct(F.lit(k).alias("position"), F.col(f"d_a_{k}").alias("ad_id"),
                                 F.col(f"d_p_{k}").alias("probability")) for k in range(1, K + 1)])
    return F.when(F.col("one"), rebuilt).otherwise(F.col("drest"))


def _pi_lookup(k: int, ad):
    """pi(ad at position k | x) for a decision kept in ``drest`` whose entries have distinct keys (``_nodup``): the
    probability of the entry whose :func:`_pair_hash` ``array_position`` finds in ``_dh`` (0 if absent). The found
    entry is checked against (k, ad), so a hash collision with another entry reads 0, which is exact: with distinct
    keys the pair, if present, is the only entry with its key. Seed 002 section 2 (pi_k(a|x))."""
    from pyspark.sql import functions as F

    idx = F.array_position(F.col("_dh"), _pair_hash(F.lit(k), ad)).cast("int")
    entry = F.element_at(F.col("drest"), idx)
    found = (idx > 0) & (entry.getField("position") == F.lit(k)) & (entry.getField("ad_id") == ad)
    return F.when(ad.isNotNull() & found, F.element_at(F.col("_dp"), idx)).otherwise(F.lit(0.0))


def join_decisions(events, decisions, K: int, keys: bool = False):
    """Flat events x flat decisions on (dt, event_id): one row per (event, policy) with r, Y_k = pi_k(a_k|x) /
    mu_k(a_k|x) (null when the propensity is missing or zero), ``miss`` (some Y_k null), ``reorder`` (a
    deterministic decision showing exactly the logged ads) and the columns the factored tables need.

    pi_k(a_k|x) is read from the flat decision columns (``one``), else looked up by key (:func:`_pi_lookup`;
    ``_nodup``: no pair repeated), else summed by a per-row lambda (decisions off the contract that repeat a pair).
    ``reorder`` compares one long per side (``tset`` = ``lset``, :func:`_ad_set_key`) instead of sorted arrays.
    The events need ``flatten_events(.., ad_set=True)``."""
    from pyspark.sql import functions as F

    joined = events.join(decisions, on=["dt", "event_id"], how="inner")
    drest = F.col("drest")
    a = [F.col(f"a_{k}") for k in range(1, K + 1)]
    d_a = [F.col(f"d_a_{k}") for k in range(1, K + 1)]
    d_p = [F.col(f"d_p_{k}") for k in range(1, K + 1)]
    ys = []
    for k in range(1, K + 1):
        fast = F.when(d_a[k - 1] == a[k - 1], d_p[k - 1]).otherwise(F.lit(0.0))
        slow = F.aggregate(drest, F.lit(0.0), _pi_adder(k, F.col(f"a_{k}")))
        pi = F.when(F.col("one"), fast).when(F.col("_nodup"), _pi_lookup(k, a[k - 1])).otherwise(slow)
        ys.append(F.try_divide(pi, F.col(f"mu_{k}")).alias(f"Y_{k}"))
    reorder = F.col("deterministic") & (F.col("tset") == F.col("lset"))
    cols = [F.col("dt"), F.col("event_id"), F.col("policy_id"), F.col("logging_policy"), F.col("base_policy"),
            F.col("r"), F.col("deterministic"), reorder.alias("reorder"), F.col("clicked"),
            F.col("exact"), F.col("one"), F.col("rest"), F.col("drest"), F.col("_dh"), F.col("_dp"),
            F.col("_nodup"), *ys]
    if keys:
        cols += [F.col("lkey"), F.col("tkey")]
    for k in range(1, K + 1):
        cols += [F.col(f"a_{k}"), F.col(f"w_{k}"), F.col(f"mu_{k}"), F.col(f"d_a_{k}"), F.col(f"d_p_{k}")]
    staged = joined.select(*cols)
    miss = _any([F.col(f"Y_{k}").isNull() for k in range(1, K + 1)]) if K else F.lit(False)
    return staged.select(*[F.col(c) for c in staged.columns], miss.alias("miss"))


def _log_summary(events):
    from pyspark.sql import functions as F

    return events.groupBy("dt", "logging_policy").agg(
        F.count(F.lit(1)).alias("n_events"),
        F.sum(F.col("k")).cast("long").alias("n_slots"),
        F.sum(F.col("r")).alias("s_r"),
        F.sum(F.col("r") * F.col("r")).alias("s_r2"),
        F.sum(F.col("missing_prop").cast("long")).alias("n_missing_propensity"),
        F.sum(F.col("n_null_reward")).cast("long").alias("n_null_reward"),
        F.max(F.col("k")).alias("k_max"),
        F.max(F.col("r")).alias("r_max"),
        F.min(F.col("r")).alias("r_min"),
    )


def _ad_position(events, config: StatsConfig, K: int):
    from pyspark.sql import functions as F

    B = config.bootstrap
    # one Poisson(1) weight per event and replicate (shared by the event's slots), drawn before the explode
    weights = (F.transform(F.sequence(F.lit(0), F.lit(B - 1)), lambda b: poisson_weight(
        hash_uniform(F.lit(config.seed), b, F.col("event_id")))) if B > 0 else F.lit(None).cast("array<int>"))
    slots = events.select(F.col("dt"), F.col("logging_policy"), weights.alias("w"),
                          F.explode(_logged_slots(K)).alias("s"))
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


def _slate_actions(events):
    from pyspark.sql import functions as F

    return events.groupBy(F.col("dt"), F.col("lkey").alias("slate_key")).agg(F.count(F.lit(1)).alias("t"))


def _policy_groups(joined, K: int):
    """One aggregation per (dt, policy_id, logging_policy, base_policy) with everything the policy_events,
    base_targets and slate_moments tables need (split on the driver by :func:`_split_policy_groups`)."""
    from pyspark.sql import functions as F

    ok = ~F.col("miss")
    keys = [F.col(c) for c in ("dt", "policy_id", "logging_policy", "base_policy")]
    # r and Y_k of the rows with every propensity (null otherwise) are projected once, so each moment below is a
    # plain sum of products (a null product, i.e. a row missing a propensity, is skipped by the sum)
    narrow = joined.select(*keys, F.col("deterministic"), F.col("reorder"), F.col("miss"), F.col("r"),
                           F.when(ok, F.col("r")).alias("_ro"),
                           *[F.when(ok, F.col(f"Y_{k}")).alias(f"_Yo_{k}") for k in range(1, K + 1)])

    s = F.sum
    r = F.col("_ro")
    Y = [F.col(f"_Yo_{k}") for k in range(1, K + 1)]
    aggs = [F.count(F.lit(1)).alias("n_all"),
            F.sum(F.col("deterministic").cast("long")).alias("n_det"),
            F.sum(F.col("reorder").cast("long")).alias("n_reorder"),
            F.sum(F.col("r")).alias("s_r_all"), F.sum(F.col("r") * F.col("r")).alias("s_r2_all"),
            F.sum(ok.cast("long")).alias("n"),
            F.sum(F.col("miss").cast("long")).alias("n_missing_propensity"),
            s(r).alias("s_r"), s(r * r).alias("s_r2")]
    if K > 0:
        W = Y[0]
        for y in Y[1:]:
            W = W * y
        pairs = _upper_pairs(K)  # YY-type sums are symmetric in (j, k): K(K+1)/2 sums, expanded on the driver
        aggs += [
            F.array(*[s(Y[k]) for k in range(K)]).alias("s_Y"),
            F.array(*[s(r * Y[k]) for k in range(K)]).alias("s_rY"),
            F.array(*[s(r * r * Y[k]) for k in range(K)]).alias("s_r2Y"),
            F.array(*[s(Y[j] * Y[k]) for j, k in pairs]).alias("s_YY"),
            F.array(*[s(r * Y[j] * Y[k]) for j, k in pairs]).alias("s_rYY"),
            F.array(*[s(r * r * Y[j] * Y[k]) for j, k in pairs]).alias("s_r2YY"),
            s(W).alias("s_W"), s(r * W).alias("s_rW"), s(W * W).alias("s_W2"), s(r * W * W).alias("s_rW2"),
            s(r * r * W * W).alias("s_r2W2"),
            F.sum(F.when(W > 0, 1).otherwise(0)).cast("long").alias("n_W_pos"),
            F.max(W).alias("max_W"),
            F.array(*[F.max(Y[k]) for k in range(K)]).alias("max_Y"),
            F.array(*[F.sum(F.when(Y[k] > 0, 1).otherwise(0)).cast("long") for k in range(K)]).alias("n_Y_pos"),
        ]
    return narrow.groupBy("dt", "policy_id", "logging_policy", "base_policy").agg(*aggs)


def _upper_pairs(K: int) -> list:
    """(j, k) with j <= k: the distinct entries of a symmetric K x K matrix, row-major."""
    return [(j, k) for j in range(K) for k in range(j, K)]


def _symmetric_full(rows, K: int) -> list:
    """Row-major K*K arrays (j*K + k) from the upper-triangle sums of :func:`_upper_pairs` (nulls -> NaN)."""
    import numpy as np

    pairs = _upper_pairs(K)
    jj = np.array([j for j, _ in pairs], dtype=int)
    kk = np.array([k for _, k in pairs], dtype=int)
    out = []
    for v in rows:
        u = np.array([np.nan if x is None else x for x in v], dtype=float)
        full = np.empty(K * K)
        full[jj * K + kk] = u
        full[kk * K + jj] = u
        out.append(full)
    return out


_MOMENT_COLS = ("n", "n_missing_propensity", "s_r", "s_r2", "s_Y", "s_rY", "s_r2Y", "s_YY", "s_rYY", "s_r2YY",
                "s_W", "s_rW", "s_W2", "s_rW2", "s_r2W2", "n_W_pos", "max_W", "max_Y", "n_Y_pos")


def _split_policy_groups(groups, K: int) -> dict:
    """policy_events, base_targets and (K > 0) slate_moments from the per-(dt, policy, logging, base) rows."""
    import pandas as pd

    from .tables import merge

    g = groups
    out = {}
    keys = ["dt", "policy_id"]
    has_base = g["base_policy"].notna()
    pe = g.assign(n_with_base=g["n_all"].where(has_base, 0)).groupby(keys, sort=True).agg(
        n_events=("n_all", "sum"), n_deterministic=("n_det", "sum"), n_with_base=("n_with_base", "sum"),
        n_reorder=("n_reorder", "sum")).reset_index()
    out["policy_events"] = pe.astype({c: "int64" for c in ("n_events", "n_deterministic", "n_with_base",
                                                           "n_reorder")})
    b = g[has_base]
    match = (b["base_policy"] == b["logging_policy"]).to_numpy()
    bt = pd.DataFrame({"dt": b["dt"].to_numpy(), "policy_id": b["policy_id"].to_numpy(),
                       "base_policy": b["base_policy"].to_numpy(), "n_target": b["n_all"].to_numpy(),
                       "n_match": b["n_all"].to_numpy() * match,
                       "s_r": b["s_r_all"].fillna(0).to_numpy() * match,
                       "s_r2": b["s_r2_all"].fillna(0).to_numpy() * match})
    out["base_targets"] = (bt.groupby(["dt", "policy_id", "base_policy"], sort=True).sum().reset_index()
                           .astype({"n_target": "int64", "n_match": "int64"}))
    if K > 0 and len(g):
        g = g.assign(**{c: _symmetric_full(g[c], K) for c in ("s_YY", "s_rYY", "s_r2YY")})
        sm = merge("slate_moments", [g[["dt", "policy_id", "logging_policy", *_MOMENT_COLS]]], by_dt=True)
        out["slate_moments"] = sm.astype({"n": "int64", "n_missing_propensity": "int64", "n_W_pos": "int64"})
    return out


def _factored_groups(joined, K: int):
    """Per clicked logged slot i (reward != 0): q_j = pi(its ad at position j | x), j = 1..K; sums of r q_j,
    r^2 q_j and r^2 q_j q_j2 per (dt, policy, ad, position i) (unpivoted on the driver). Seed 001 section 4.

    The logged slots of clicked events are exploded first and the zero-reward ones dropped, so q is computed
    (K lookups) only for the slots that carry a reward, in a small code-generated projection."""
    from pyspark.sql import functions as F

    dec_cols = ["one", "drest", "_dh", "_dp", "_nodup"] + [f"d_{x}_{j}" for j in range(1, K + 1) for x in "ap"]
    per_event = joined.where(F.col("clicked")).select(
        F.col("dt"), F.col("policy_id"), *[F.col(c) for c in dec_cols], _logged_slots(K).alias("ls"))
    exploded = per_event.select(F.col("dt"), F.col("policy_id"), *[F.col(c) for c in dec_cols],
                                F.explode(F.col("ls")).alias("s"))
    slots = exploded.select(F.col("dt"), F.col("policy_id"), *[F.col(c) for c in dec_cols],
                            F.col("s.position").alias("pos_i"), F.col("s.ad_id").alias("ad_id"),
                            F.coalesce(F.col("s.reward"), F.lit(0.0)).alias("rew"))
    rewarded = slots.where(F.col("rew") != F.lit(0.0))
    ad = F.col("ad_id")
    q = []
    for j in range(1, K + 1):
        d_a, d_p = F.col(f"d_a_{j}"), F.col(f"d_p_{j}")
        fast = F.when((d_a == ad) & (d_p > 0), d_p).otherwise(F.lit(0.0))
        slow = F.aggregate(F.col("drest"), F.lit(0.0), _pi_adder(j, ad, positive=True))
        q.append(F.when(F.col("one"), fast).when(F.col("_nodup"), F.greatest(_pi_lookup(j, ad), F.lit(0.0)))
                 .otherwise(slow))
    clicked = rewarded.select(F.col("dt"), F.col("policy_id"), F.col("ad_id"), F.col("pos_i"), F.col("rew"),
                              F.array(*q).alias("q"))
    clicked = clicked.where(F.array_max(F.col("q")) > F.lit(0.0))
    rew, q = F.col("rew"), F.col("q")
    return clicked.groupBy("dt", "policy_id", "ad_id", "pos_i").agg(
        F.array(*[F.sum(rew * q[j]) for j in range(K)]).alias("s_rp"),
        F.array(*[F.sum(rew * rew * q[j]) for j in range(K)]).alias("s_r2p"),
        # symmetric in (j, j2): the upper triangle, expanded by _split_factored
        F.array(*[F.sum(rew * rew * q[j] * q[j2]) for j, j2 in _upper_pairs(K)]).alias("s_r2pp"))


def _split_factored(groups, K: int) -> dict:
    """Long ``factored`` (.., pos_j, s_rp, s_r2p) and ``factored_sq`` (.., pos_j, pos_j2, s_r2pp) tables; a row
    exists where some clicked slot's ad has target probability > 0 at j (exactly: s_r2p > 0, s_r2pp > 0)."""
    import numpy as np
    import pandas as pd

    keys = ["dt", "policy_id", "ad_id", "pos_i"]
    n = len(groups)
    if n == 0 or K == 0:
        return {"factored": pd.DataFrame(columns=keys + ["pos_j", "s_rp", "s_r2p"]),
                "factored_sq": pd.DataFrame(columns=keys + ["pos_j", "pos_j2", "s_r2pp"])}
    rp = np.vstack([np.asarray(v, dtype=float) for v in groups["s_rp"]])
    r2p = np.vstack([np.asarray(v, dtype=float) for v in groups["s_r2p"]])
    r2pp = np.vstack(_symmetric_full(groups["s_r2pp"], K))
    base = {c: groups[c].to_numpy() for c in keys}
    rows, cols = np.nonzero(r2p > 0)
    fac = pd.DataFrame({**{c: v[rows] for c, v in base.items()}, "pos_j": (cols + 1).astype("int32"),
                        "s_rp": rp[rows, cols], "s_r2p": r2p[rows, cols]})
    rows, cols = np.nonzero(r2pp > 0)
    sq = pd.DataFrame({**{c: v[rows] for c, v in base.items()}, "pos_j": (cols // K + 1).astype("int32"),
                       "pos_j2": (cols % K + 1).astype("int32"), "s_r2pp": r2pp[rows, cols]})
    return {"factored": fac, "factored_sq": sq}


def _target_placements(joined, K: int):
    """Expected placements of each ad by the target: sum over events of pi(ad at j | x_t)."""
    from pyspark.sql import functions as F

    return (joined.select(F.col("dt"), F.col("policy_id"), F.explode(_decision_slots(K)).alias("d"))
            .where(F.col("d.probability") > 0)
            .groupBy("dt", "policy_id", F.col("d.ad_id").alias("ad_id"), F.col("d.position").alias("pos_j"))
            .agg(F.sum(F.col("d.probability")).alias("s_p")))


def _slate_targets(joined):
    from pyspark.sql import functions as F

    det = joined.where(F.col("deterministic"))
    match = (F.col("tkey") == F.col("lkey")).cast("long")
    return det.groupBy(F.col("dt"), F.col("policy_id"), F.col("tkey").alias("slate_key")).agg(
        F.count(F.lit(1)).alias("n_target"),
        F.sum(match).alias("n_match"),
        F.sum(match * F.col("r")).alias("s_r"),
        F.sum(match * F.col("r") * F.col("r")).alias("s_r2"),
    )


def scan(logs, decisions=None, config: StatsConfig = StatsConfig()) -> dict:
    """Aggregate the given logs (any number of days; conformed to the contract) into the statistics tables.

    ``decisions`` (conformed; may hold several policies) is joined on (dt, event_id). The flat events are
    persisted (the logs are read twice when K is not configured: once for K, once here); returns
    {table_name: pandas.DataFrame} with a ``dt`` column (dates as ``datetime.date``). Only aggregated rows are
    collected to the driver.
    """
    K = config.n_positions if config.n_positions is not None else k_max(logs)
    keys = bool(config.slate_actions)
    from ..session import row_storage_level

    level = row_storage_level(logs.sparkSession)
    events = flatten_events(logs, K, keys=keys, ad_set=decisions is not None).persist(level)
    out = {}
    try:
        out["log_summary"] = _log_summary(events).toPandas()
        out["ad_position"] = _ad_position(events, config, K).toPandas()
        if keys:
            out["slate_actions"] = _slate_actions(events).toPandas()
        if decisions is not None:
            dec = flatten_decisions(decisions, K, keys=keys)
            # not persisted: caching the wide joined rows cost more CPU than redoing the join for each of the
            # aggregations (measured: the join of the cached events with the flat decisions is ~1 CPU-s per 1M
            # rows; the expressions and sums dominate), and a cache of events x policies would grow with the input
            joined = join_decisions(events, dec, K, keys=keys)
            groups = _policy_groups(joined, K).toPandas()
            out.update(_split_policy_groups(groups, K))
            if keys:
                out["slate_targets"] = _slate_targets(joined).toPandas()
            if K > 0:
                out.update(_split_factored(_factored_groups(joined, K).toPandas(), K))
            out["target_placements"] = _target_placements(joined, K).toPandas()
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
