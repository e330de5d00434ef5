"""Candidate ads per event and the per-event choice of m distinct eligible ads (seed 000).

Eligibility table (``--eligibility PATH``, Parquet or a catalog table): columns (dt, ad_id) -- the ads that may be
shown on that day -- or (event_id, ad_id) [dt optional] -- per event (frequency caps). Every argmax of a learned
policy is restricted to the event's eligible ads. Without a table, the candidates are the ads seen in training.

Choices (all per event, built-in Spark SQL, grouped by event; nothing row-level reaches the driver):
- ``top_m``: h_g(x) = the m eligible ads with the largest score g (ties broken by a seeded hash), positions 1..m
  in decreasing g (C decreasing, so the best ad goes first).
- ``set_select_test``: Psi_k(x) = argmax over eligible ads of round k's score; a duplicate of an earlier round's
  choice is replaced by an unused eligible ad drawn at random (seeded hash order), so the output is m distinct
  eligible ads (seed 000, Set Select Test).
With fewer than m eligible ads both output all of them (n_eligible < m is counted and flagged per event).
"""
from __future__ import annotations

from ..errors import UsageError

EVENT_LEVEL = "event"
DT_LEVEL = "dt"


def read_eligibility(spark, source: str):
    """(DataFrame, level): level 'event' if the table has event_id, else 'dt' (needs dt and ad_id)."""
    from pyspark.sql import functions as F

    from ..contract import read_source

    df = read_source(spark, source)
    cols = set(df.columns)
    if "ad_id" not in cols:
        raise UsageError(f"eligibility table {source} needs an ad_id column; has {sorted(cols)}")
    if "event_id" in cols:
        return (df.select(F.col("event_id").cast("string").alias("event_id"),
                          F.col("ad_id").cast("string").alias("ad_id")).dropDuplicates(), EVENT_LEVEL)
    if "dt" in cols:
        return (df.select(F.col("dt").cast("date").alias("dt"), F.col("ad_id").cast("string").alias("ad_id"))
                .dropDuplicates(), DT_LEVEL)
    raise UsageError(f"eligibility table {source} needs dt or event_id besides ad_id; has {sorted(cols)}")


def candidates(events, ads, eligibility=None, level: str | None = None):
    """(dt, event_id, context_key, ad_id): the eligible ads of every event (events without any are absent).

    ``events`` has dt, event_id, context_key; ``ads`` (one column ad_id) is the default candidate set."""
    from pyspark.sql import functions as F

    base = events.select(F.col("dt"), F.col("event_id"), F.col("context_key"))
    if eligibility is None:
        return base.crossJoin(F.broadcast(ads.select(F.col("ad_id")))).select(
            F.col("dt"), F.col("event_id"), F.col("context_key"), F.col("ad_id"))
    if level == DT_LEVEL:
        joined = base.join(eligibility, on="dt", how="inner")
    else:
        joined = base.join(eligibility, on="event_id", how="inner")
    return joined.select(F.col("dt"), F.col("event_id"), F.col("context_key"), F.col("ad_id"))


def tiebreak_col(seed: int, *cols):
    """A seeded uniform in [0, 1) per (event, ad): random tie-breaks and random fills, partition-independent."""
    from pyspark.sql import functions as F

    h = F.xxhash64(F.lit(int(seed)), F.lit("policies"), *[F.col(c) for c in cols])
    return h.bitwiseAND(F.lit((1 << 53) - 1)).cast("double") / F.lit(float(1 << 53))


def _slots_from_ads(ads_array):
    """[ad, ...] -> [struct(position = i + 1, ad_id, probability = 1.0)]."""
    from pyspark.sql import functions as F

    return F.transform(ads_array, lambda a, i: F.struct((i + 1).cast("int").alias("position"),
                                                         a.alias("ad_id"),
                                                         F.lit(1.0).alias("probability")))


def top_m(scored, m: int, seed: int):
    """Per event the m eligible ads with the largest ``score`` (columns of ``scored``: dt, event_id, ad_id,
    score, known). Returns dt, event_id, slots, n_eligible, n_chosen, n_fallback_chosen."""
    from pyspark.sql import functions as F

    ranked = scored.select(F.col("dt"), F.col("event_id"),
                           F.struct((-F.col("score")).alias("neg"), tiebreak_col(seed, "event_id", "ad_id").alias("u"),
                                    F.col("ad_id").alias("ad_id"), F.col("known").alias("known")).alias("c"))
    per_event = ranked.groupBy(F.col("dt"), F.col("event_id")).agg(
        F.slice(F.array_sort(F.collect_list(F.col("c"))), 1, int(m)).alias("best"),
        F.count(F.lit(1)).alias("n_eligible"))
    return per_event.select(
        F.col("dt"), F.col("event_id"),
        _slots_from_ads(F.transform(F.col("best"), lambda c: c["ad_id"])).alias("slots"),
        F.col("n_eligible").cast("int").alias("n_eligible"),
        F.size(F.col("best")).cast("int").alias("n_chosen"),
        F.size(F.filter(F.col("best"), lambda c: ~c["known"])).cast("int").alias("n_fallback_chosen"),
        F.lit(0).alias("n_replaced"),
    )


def set_select_test(scored, m: int, seed: int, dedup: str = "random"):
    """Set Select Test (seed 000). ``scored``: dt, event_id, ad_id, known, score_1..score_m (round k's
    cost-sensitive score, larger = lower cost). Psi_k = argmax over eligible ads of score_k; duplicates are
    replaced, in round order, by the unused eligible ads in a seeded random order (``dedup='random'``, the seed's
    rule) or by the unused eligible ads in decreasing order of that round's score (``dedup='next_best'``: better
    when eligibility filters many ads, since Psi_k was trained assuming gamma_{k-1} over all ads).
    Returns the columns of top_m."""
    from pyspark.sql import functions as F

    u = tiebreak_col(seed, "event_id", "ad_id")
    aggs = [F.max_by(F.col("ad_id"), F.struct(F.col(f"score_{k}"), u)).alias(f"psi_{k}") for k in range(1, m + 1)]
    if dedup not in ("random", "next_best"):
        raise UsageError(f"dedup must be random or next_best; got {dedup!r}")
    aggs += [F.array_sort(F.collect_list(F.struct(tiebreak_col(seed + 1, "event_id", "ad_id").alias("u"),
                                                  F.col("ad_id").alias("ad_id")))).alias("pool_sorted"),
             F.array_sort(F.collect_list(F.struct(*[(-F.col(f"score_{k}")).alias(f"s{k}") for k in range(1, m + 1)],
                                                  u.alias("u"), F.col("ad_id").alias("ad_id")))).alias("by_score"),
             F.collect_list(F.when(~F.col("known"), F.col("ad_id"))).alias("unknown"),
             F.count(F.lit(1)).alias("n_eligible")]
    per_event = scored.groupBy(F.col("dt"), F.col("event_id")).agg(*aggs)
    psi = F.array(*[F.col(f"psi_{k}") for k in range(1, m + 1)])
    step = per_event.select(
        F.col("dt"), F.col("event_id"), F.col("n_eligible"), F.col("unknown"), psi.alias("psi"), F.col("by_score"),
        F.transform(psi, lambda a, i: F.array_contains(F.slice(psi, 1, i), a)).alias("dup"),
        F.transform(F.col("pool_sorted"), lambda c: c["ad_id"]).alias("pool_all"))
    step = step.select(
        F.col("dt"), F.col("event_id"), F.col("n_eligible"), F.col("unknown"), F.col("psi"), F.col("dup"),
        F.col("by_score"),
        F.array_except(F.col("pool_all"), F.col("psi")).alias("pool"))
    if dedup == "random":
        filled = F.transform(F.col("psi"), lambda a, i: F.when(
            F.col("dup")[i],
            F.try_element_at(F.col("pool"), F.size(F.filter(F.slice(F.col("dup"), 1, i + 1), lambda d: d)))
        ).otherwise(a))
    else:  # sequential: Psi_k(x) if unused, else the best unused eligible ad by round k's own score
        def pick(acc, i):
            k_sorted = F.transform(
                F.array_sort(F.transform(F.col("by_score"), lambda c: F.struct(
                    F.element_at(F.array(*[c[f"s{k}"] for k in range(1, m + 1)]), (i + 1).cast("int")).alias("s"),
                    c["u"].alias("u"), c["ad_id"].alias("ad_id")))), lambda c: c["ad_id"])
            unused = F.filter(k_sorted, lambda a: ~F.array_contains(acc, a))
            own = F.col("psi")[i]
            choice = F.when(~F.array_contains(acc, own), own).otherwise(F.try_element_at(unused, F.lit(1)))
            return F.when(choice.isNull(), acc).otherwise(F.concat(acc, F.array(choice)))
        filled = F.aggregate(F.sequence(F.lit(0), F.lit(m - 1)), F.array().cast("array<string>"), pick)
    out = step.select(F.col("dt"), F.col("event_id"), F.col("n_eligible"), F.col("unknown"), F.col("psi"),
                      F.filter(filled, lambda a: a.isNotNull()).alias("chosen"),
                      F.size(F.filter(F.col("dup"), lambda d: d)).alias("n_dup"))
    if dedup == "random":   # filled duplicates = chosen - distinct Psi_k
        n_replaced = F.size(F.col("chosen")) - F.lit(m) + F.col("n_dup")
    else:                   # sequential: positions where Psi_k was already taken (chosen aligns with psi)
        n_replaced = F.size(F.filter(F.transform(F.col("chosen"), lambda a, i: a != F.col("psi")[i]), lambda d: d))
    return out.select(
        F.col("dt"), F.col("event_id"), _slots_from_ads(F.col("chosen")).alias("slots"),
        F.col("n_eligible").cast("int").alias("n_eligible"),
        F.size(F.col("chosen")).cast("int").alias("n_chosen"),
        F.size(F.filter(F.col("chosen"), lambda a: F.array_contains(F.col("unknown"), a))).cast("int")
        .alias("n_fallback_chosen"),
        n_replaced.cast("int").alias("n_replaced"),
    )


def check_m(m: int) -> int:
    if m is None or int(m) < 1:
        raise UsageError(f"--m must be >= 1; got {m}")
    return int(m)
