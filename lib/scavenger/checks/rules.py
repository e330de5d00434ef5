"""Row rules: every rule of the contract that a single row can break, as built-in Spark SQL expressions.

One ``select`` per table adds ``reason_codes`` (array<string>, empty when the row is clean) to the conformed
frame; rows with a reason go to the quarantine table (``<out>/quarantine/<table>/dt=*/``), never silently dropped.
The only shuffle is the count of keys that finds duplicates across all partitions (days) of the window;
decisions additionally need one join with the log's event ids (a broadcast of a day's events: the decisions are
flagged where they lie). The rules are code-generated expressions over the arrays of slot fields
(``slots.propensity``: array_min/array_max/sort_array/array_distinct); a lambda (interpreted row by row) runs
only on the rare rows that need it (a non-finite reward; several decision entries at one position).

Reason codes (impression logs)
  NULL_EVENT_ID, NULL_LOGGING_POLICY, NULL_DT, EMPTY_SLATE, NULL_AD
  NULL_PROPENSITY     a slot without a logged propensity (contract allows it; quarantined only when
                      ``RuleConfig.quarantine_null_propensity`` -- the issue's default -- else only counted)
  ZERO_PROPENSITY     propensity <= 0 (no importance weight exists; seed 002 needs mu_k > 0)
  PROPENSITY_GT_1     propensity > 1 or NaN
  DUPLICATE_EVENT_ID  event_id seen more than once in the window (across dt partitions); with
                      ``duplicates="keep_first"`` the first copy (by dt, event_time) stays clean
  DUPLICATE_AD        an ad twice in one slate (seed 000: the slate is a set of distinct ads)
  DUPLICATE_POSITION  a position twice in one slate
  POSITION_GAP        positions are not exactly 1..K (with ``allow_partial_slates``: a position < 1)
  REWARD_NOT_FINITE   a slot or slate reward is NaN or +-inf
  REWARD_OUT_OF_RANGE a slot reward outside [reward_min, reward_max] or a slate reward outside
                      [K reward_min, K reward_max] (seed 001 Theorem 3 assumes rewards in [0, 1])
  MISSING_REWARD      slate_reward null and some slot reward null: the slate reward is unknown
  EVENT_TIME_UNPARSEABLE  event_time null (a raw string that does not parse becomes null via try_cast)
  EVENT_TIME_OUTSIDE_DT   the UTC date of event_time is not dt
Reason codes (decisions)
  NULL_POLICY_ID, NULL_EVENT_ID, NULL_DT, EMPTY_SLOTS, NULL_AD
  PROBABILITY_OUT_OF_RANGE  a probability null, NaN or outside [0, 1]
  BAD_POSITION              a position outside 1..K_max of the contract (null or < 1)
  PROBABILITY_SUM           per position the probabilities do not sum to 1 within ``sum_tolerance``
  DUPLICATE_DECISION        more than one row for (policy_id, event_id)
  UNKNOWN_EVENT             no logged event with this (event_id, dt)
  EVENT_QUARANTINED         the event exists but was quarantined (so the decision cannot be evaluated)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..contract import DECISIONS, LOGS, load_contract

REASON = "reason_codes"
BROADCAST_KEYS = 1_000_000           # duplicated keys joined back by broadcast up to this many
LOGGING_POLICY = "_logging_policy"   # flagged decisions carry the logging policy of their (clean) event
SUM_DEVIATION = "_max_sum_deviation"  # ... and max_k |sum_a pi_k(a|x) - 1| (PROBABILITY_SUM, the daily GE profile)

LOG_REASONS = [
    "NULL_EVENT_ID", "NULL_LOGGING_POLICY", "NULL_DT", "EMPTY_SLATE", "NULL_AD",
    "NULL_PROPENSITY", "ZERO_PROPENSITY", "PROPENSITY_GT_1",
    "DUPLICATE_EVENT_ID", "DUPLICATE_AD", "DUPLICATE_POSITION", "POSITION_GAP",
    "REWARD_NOT_FINITE", "REWARD_OUT_OF_RANGE", "MISSING_REWARD",
    "EVENT_TIME_UNPARSEABLE", "EVENT_TIME_OUTSIDE_DT",
]
DECISION_REASONS = [
    "NULL_POLICY_ID", "NULL_EVENT_ID", "NULL_DT", "EMPTY_SLOTS", "NULL_AD",
    "PROBABILITY_OUT_OF_RANGE", "BAD_POSITION", "PROBABILITY_SUM",
    "DUPLICATE_DECISION", "UNKNOWN_EVENT", "EVENT_QUARANTINED",
]


@dataclass(frozen=True)
class RuleConfig:
    """Knobs of the row rules (all per job)."""

    reward_min: float = 0.0
    reward_max: float = 1.0               # clicks; revenue needs a declared maximum (--reward-max)
    quarantine_null_propensity: bool = True
    duplicates: str = "keep_first"        # or "quarantine_all"
    sum_tolerance: float = 1e-6           # decisions: |sum_a pi_k(a|x) - 1| per position
    allow_partial_slates: bool = False    # True: a row may hold some positions only (e.g. OBD's one-slot rows
                                          # at position 2 or 3); POSITION_GAP then only flags positions < 1


def conform_lenient(df, name: str):
    """Like :func:`scavenger.contract.conform` but with ``try_cast``: a value that does not parse (e.g. an
    event_time string that is not a timestamp) becomes null -- and then a reason code -- instead of failing the
    job under ANSI mode. Missing required columns still raise ContractError."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    from ..contract import schema_dir
    from ..errors import ContractError

    contract = load_contract(name)
    present = set(df.columns)
    missing = [c for c in contract.required_columns if c not in present]
    if missing:
        raise ContractError(f"{contract.name}: missing column(s) {', '.join(missing)}; "
                            f"the contract is in {schema_dir() / (contract.name + '.schema.json')}")
    cols = []
    for field in contract.struct_type().fields:
        if field.name in present:
            src = F.col(field.name)
            have = df.schema[field.name].dataType
            if have.simpleString() == field.dataType.simpleString():      # same type up to nullability
                col = src
            elif isinstance(field.dataType, (ArrayType, MapType, StructType)):
                col = src.cast(field.dataType)                            # as contract.conform
            else:
                col = src.try_cast(field.dataType)                        # unparseable -> null -> reason
            cols.append(col.alias(field.name))
        else:
            cols.append(F.lit(None).cast(field.dataType).alias(field.name))
    return df.select(*cols)


def _codes(pairs):
    """array of the codes whose condition is true (conditions that are null count as false).

    A concat of one-element/empty arrays: plain code-generated expressions (``array_compact`` would be a
    ``filter`` lambda, interpreted row by row)."""
    from pyspark.sql import functions as F

    empty = F.array().cast("array<string>")
    return F.concat(*[F.when(cond, F.array(F.lit(code))).otherwise(empty) for code, cond in pairs])


def _not_finite(c):
    from pyspark.sql import functions as F

    return F.isnan(c) | (c == F.lit(math.inf)) | (c == F.lit(-math.inf))


# ---- array predicates as code-generated expressions --------------------------------------------------------
# Higher-order functions (exists/filter/transform/aggregate with a lambda) are interpreted row by row; the rules
# below use the array of one struct field (``slots.propensity``: GetArrayStructFields), array_min/array_max (they
# skip nulls; NaN sorts above every number in Spark) and sort_array (nulls first) instead. Each helper says which
# lambda it replaces; the semantics are the same (a null predicate counts as false, as in ``when``).
def has_null(arr):
    """exists(arr, x -> x is null) for a non-empty array: sort_array puts nulls first."""
    from pyspark.sql import functions as F

    return (F.size(arr) > 0) & F.try_element_at(F.sort_array(arr, asc=True), F.lit(1)).isNull()


def any_not_finite(arr):
    """exists(arr, x -> x is not null and (isnan(x) or x = +-inf)): NaN and +inf are the largest values, -inf
    the smallest."""
    from pyspark.sql import functions as F

    top = F.array_max(arr)
    return F.isnan(top) | (top == F.lit(math.inf)) | (F.array_min(arr) == F.lit(-math.inf))


def finite_out_of_range(arr, low, high):
    """exists(arr, x -> x is finite and (x < low or x > high)); the lambda runs only on the (rare) rows holding a
    non-finite value, where array_min/array_max would see the infinity instead of the finite extremes."""
    from pyspark.sql import functions as F

    slow = F.exists(arr, lambda x: x.isNotNull() & ~_not_finite(x) & ((x < low) | (x > high)))
    fast = (F.array_min(arr) < low) | (F.array_max(arr) > high)
    return F.when(any_not_finite(arr), slow).otherwise(fast)


def _dup_flag(count_col, rank_col, duplicates: str):
    if duplicates == "quarantine_all":
        return count_col > 1
    if duplicates == "keep_first":
        return rank_col > 1
    raise ValueError(f"duplicates must be keep_first or quarantine_all, got {duplicates!r}")


def _with_duplicates(df, key: list[str], order: list):
    """``df`` + ``_n`` (rows sharing the key in the whole frame) and ``_rank`` (1 = first by ``order``).

    Only the keys are shuffled to count them; without duplicates that is all (no join). Otherwise the duplicated
    keys are joined back (broadcast up to ``BROADCAST_KEYS`` keys) and only their rows go through the ranking
    window.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cols = df.columns
    has_key = None
    for k in key:
        has_key = F.col(k).isNotNull() if has_key is None else has_key & F.col(k).isNotNull()
    counts = (df.where(has_key).groupBy(*[F.col(k) for k in key]).agg(F.count(F.lit(1)).alias("_n"))
                .where(F.col("_n") > 1))
    n_dup = counts.count()           # a pass over the keys only
    if n_dup == 0:                   # the usual case: no join, no shuffle of the rows
        return df.select(*[F.col(c) for c in cols], F.lit(1).cast("long").alias("_n"), F.lit(1).alias("_rank"))
    joined = df.join(F.broadcast(counts) if n_dup <= BROADCAST_KEYS else counts, key, "left")
    single = joined.where(F.col("_n").isNull()).select(*[F.col(c) for c in cols], F.lit(1).cast("long").alias("_n"),
                                                       F.lit(1).alias("_rank"))
    ordered = Window.partitionBy(*[F.col(k) for k in key]).orderBy(*order)
    multi = joined.where(F.col("_n").isNotNull()).select(*[F.col(c) for c in cols], F.col("_n"),
                                                         F.row_number().over(ordered).alias("_rank"))
    return single.unionByName(multi)


def null_propensity_condition():
    """True for an event with a slot whose propensity was not logged."""
    from pyspark.sql import functions as F

    return has_null(F.col("slots")["propensity"])


def flag_logs(logs, config: RuleConfig = RuleConfig()):
    """Conformed impression logs + ``reason_codes``: one select (plus the window for duplicate event ids).

    Returns the contract columns followed by ``reason_codes``.
    """
    from pyspark.sql import functions as F

    contract = load_contract(LOGS)
    cols = contract.columns
    slots = F.col("slots")
    n = F.size(slots)
    positions, ads = slots["position"], slots["ad_id"]
    props, rewards = slots["propensity"], slots["reward"]
    rmin, rmax = F.lit(float(config.reward_min)), F.lit(float(config.reward_max))

    logs = _with_duplicates(logs, ["event_id"], [F.col("dt").asc_nulls_last(), F.col("event_time").asc_nulls_last(),
                                                  F.col("logging_policy").asc_nulls_last(),
                                                  F.col("context_id").asc_nulls_last()])
    dup_count, dup_rank = F.col("_n"), F.col("_rank")

    has_slots = slots.isNotNull() & (n > 0)
    slate = F.col("slate_reward")
    slate_bad = slate.isNotNull() & _not_finite(slate)
    slate_out = (slate.isNotNull() & ~_not_finite(slate) & ((slate < rmin * n) | (slate > rmax * n)))
    # days since epoch of the instant, independent of the session time zone
    event_day = F.floor(F.unix_seconds(F.col("event_time")) / F.lit(86400)).cast("int")

    pairs = [
        ("NULL_EVENT_ID", F.col("event_id").isNull()),
        ("NULL_LOGGING_POLICY", F.col("logging_policy").isNull()),
        ("NULL_DT", F.col("dt").isNull()),
        ("EMPTY_SLATE", ~has_slots | slots.isNull()),
        ("NULL_AD", has_null(ads)),
        ("NULL_PROPENSITY", has_null(props) if config.quarantine_null_propensity else F.lit(False)),
        ("ZERO_PROPENSITY", F.array_min(props) <= 0),                   # exists(p <= 0)
        ("PROPENSITY_GT_1", F.array_max(props) > 1),                    # exists(p > 1 or isnan(p)): NaN > 1
        ("DUPLICATE_EVENT_ID", _dup_flag(dup_count, dup_rank, config.duplicates)),
        ("DUPLICATE_AD", has_slots & (F.size(F.array_distinct(ads)) < n)),
        ("DUPLICATE_POSITION", has_slots & (F.size(F.array_distinct(positions)) < n)),
        ("POSITION_GAP", has_slots & ((has_null(positions) | (F.array_min(positions) < 1))
                                      if config.allow_partial_slates else
                                      ((F.array_min(positions) != 1)
                                       | (F.array_max(positions) != F.size(F.array_distinct(positions)))
                                       | has_null(positions)))),
        ("REWARD_NOT_FINITE", any_not_finite(rewards) | slate_bad),
        ("REWARD_OUT_OF_RANGE", finite_out_of_range(rewards, rmin, rmax) | slate_out),
        ("MISSING_REWARD", slate.isNull() & has_null(rewards)),
        ("EVENT_TIME_UNPARSEABLE", F.col("event_time").isNull()),
        ("EVENT_TIME_OUTSIDE_DT", F.col("event_time").isNotNull() & F.col("dt").isNotNull()
         & (event_day != F.unix_date(F.col("dt")))),
    ]
    assert [p[0] for p in pairs] == LOG_REASONS
    return logs.select(*[F.col(c) for c in cols], _codes(pairs).alias(REASON))


def max_sum_deviation(slots):
    """max over the row's positions of |sum of its probabilities - 1| (a null probability counts 0, a null
    position has an empty sum; null without entries). The usual row has one entry per position: then the
    deviations are |p - 1|, largest at min p or max p (x - 1 is monotone; NaN is the largest value), a
    code-generated expression; rows of stochastic targets (several entries at a position) or with a null position
    take the per-position sums (a lambda)."""
    from pyspark.sql import functions as F

    positions, probs = slots["position"], slots["probability"]
    one = F.lit(1.0)
    distinct = F.array_distinct(positions)
    simple = (F.size(distinct) == F.size(slots)) & ~has_null(positions)
    fast = F.greatest(F.abs(F.array_min(probs) - one), F.abs(F.array_max(probs) - one),
                      F.when(has_null(probs), F.abs(F.lit(0.0) - one)))
    slow = F.array_max(F.transform(distinct, lambda p: F.abs(F.aggregate(
        F.filter(slots, lambda s: s["position"] == p), F.lit(0.0),
        lambda acc, s: acc + F.coalesce(s["probability"], F.lit(0.0))) - one)))
    return F.when(simple, fast).otherwise(slow)


def flag_decisions(decisions, flagged_logs, config: RuleConfig = RuleConfig(), log_keys_unique: bool = False,
                   broadcast_events: bool = False):
    """Conformed decisions + ``reason_codes`` (+ ``_logging_policy`` of the event, for the assumption checks, and
    ``_max_sum_deviation``, see :func:`max_sum_deviation`);
    ``flagged_logs`` is the output of :func:`flag_logs` (its event ids and reason codes decide UNKNOWN_EVENT /
    EVENT_QUARANTINED, matched on (event_id, dt)).

    ``log_keys_unique``: the caller knows that no event id occurs twice in ``flagged_logs`` (no
    DUPLICATE_EVENT_ID), so the logs' (event_id, dt) rows are taken as they are instead of being aggregated.
    ``broadcast_events``: the logs' events are few enough to broadcast (a day's worth): the decisions are then
    flagged where they lie, without shuffling them."""
    from pyspark.sql import functions as F

    contract = load_contract(DECISIONS)
    cols = contract.columns
    # one row per (event_id, dt) of the logs: is there a clean copy, and its logging policy (for the checks)
    clean_row = F.size(F.col(REASON)) == 0
    keyed = flagged_logs.where(F.col("event_id").isNotNull())
    if log_keys_unique:
        events = keyed.select(F.col("event_id").alias("_ev"), F.col("dt").alias("_dt"),
                              clean_row.cast("int").alias("_clean"),
                              F.when(clean_row, F.col("logging_policy")).alias(LOGGING_POLICY))
    else:
        events = (keyed.groupBy(F.col("event_id").alias("_ev"), F.col("dt").alias("_dt"))
                       .agg(F.max(clean_row.cast("int")).alias("_clean"),
                            F.max(F.when(clean_row, F.col("logging_policy"))).alias(LOGGING_POLICY)))
    if broadcast_events:
        events = F.broadcast(events)
    decisions = _with_duplicates(decisions, ["policy_id", "event_id"],
                                 [F.col("dt").asc_nulls_last(), F.col("base_policy").asc_nulls_last()])
    joined = decisions.join(events, (F.col("event_id") == F.col("_ev")) & (F.col("dt") == F.col("_dt")), "left")
    # the per-position sums once per row: the flag and the daily profile both read this column
    joined = joined.select(*[F.col(c) for c in joined.columns], max_sum_deviation(F.col("slots")).alias(SUM_DEVIATION))

    slots = F.col("slots")
    n = F.size(slots)
    dup_count, dup_rank = F.col("_n"), F.col("_rank")
    has_slots = slots.isNotNull() & (n > 0)
    tol = F.lit(float(config.sum_tolerance))
    positions, probs = slots["position"], slots["probability"]

    pairs = [
        ("NULL_POLICY_ID", F.col("policy_id").isNull()),
        ("NULL_EVENT_ID", F.col("event_id").isNull()),
        ("NULL_DT", F.col("dt").isNull()),
        ("EMPTY_SLOTS", ~has_slots | slots.isNull()),
        ("NULL_AD", has_null(slots["ad_id"])),
        # exists(p is null or isnan(p) or p < 0 or p > 1): NaN is the largest value
        ("PROBABILITY_OUT_OF_RANGE", has_null(probs) | (F.array_min(probs) < 0) | (F.array_max(probs) > 1)),
        ("BAD_POSITION", has_null(positions) | (F.array_min(positions) < 1)),
        ("PROBABILITY_SUM", has_slots & (F.col(SUM_DEVIATION) > tol)),   # exists(position: |sum - 1| > tol)
        ("DUPLICATE_DECISION", _dup_flag(dup_count, dup_rank, config.duplicates)),
        ("UNKNOWN_EVENT", F.col("event_id").isNotNull() & F.col("_clean").isNull()),
        ("EVENT_QUARANTINED", F.col("_clean") == 0),
    ]
    assert [p[0] for p in pairs] == DECISION_REASONS
    return joined.select(*[F.col(c) for c in cols], _codes(pairs).alias(REASON), F.col(LOGGING_POLICY),
                         F.col(SUM_DEVIATION))


def reason_counts(flagged, codes: list[str], group_cols=("dt",), extra: dict | None = None,
                  aggs: dict | None = None):
    """Small pandas table: per group, rows, quarantined rows and rows per reason code (one aggregation);
    ``extra`` maps a name to a boolean Column counted the same way (e.g. events counted but not quarantined);
    ``aggs`` maps a name to any aggregate Column computed in the same pass (e.g. the daily GE profile)."""
    from pyspark.sql import functions as F

    extra = extra or {}
    columns = [F.count(F.lit(1)).alias("rows"),
               F.sum((F.size(F.col(REASON)) > 0).cast("long")).alias("quarantined")]
    columns += [F.sum(F.array_contains(F.col(REASON), code).cast("long")).alias(code) for code in codes]
    columns += [F.sum(cond.cast("long")).alias(name) for name, cond in extra.items()]
    columns += [agg.alias(name) for name, agg in (aggs or {}).items()]
    pdf = flagged.groupBy(*[F.col(c) for c in group_cols]).agg(*columns).toPandas()
    for c in ["rows", "quarantined", *codes, *extra]:
        pdf[c] = pdf[c].fillna(0).astype("int64")
    return pdf.sort_values(list(group_cols)).reset_index(drop=True)


def clean(flagged, name: str):
    """The rows without a reason code, in the contract's columns."""
    from pyspark.sql import functions as F

    return flagged.where(F.size(F.col(REASON)) == 0).select(*[F.col(c) for c in load_contract(name).columns])


def quarantined(flagged, name: str, run_id: str):
    """Quarantine rows: original columns + reason_codes + run_id (dt stays the partition column)."""
    from pyspark.sql import functions as F

    cols = [c for c in load_contract(name).columns if c != "dt"]
    return flagged.where(F.size(F.col(REASON)) > 0).select(
        *[F.col(c) for c in cols], F.col(REASON), F.lit(run_id).alias("run_id"), F.col("dt"))


def _delete_partitions(spark, path: str, dts) -> None:
    """Remove ``path/dt=<d>`` for each d (Hadoop FS, any scheme) so a re-run of a day replaces it exactly,
    also when the re-run quarantines nothing."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    base = jvm.org.apache.hadoop.fs.Path(path)
    fs = base.getFileSystem(conf)
    for d in dts:
        p = jvm.org.apache.hadoop.fs.Path(base, f"dt={d}")
        if fs.exists(p):
            fs.delete(p, True)


def write_quarantine(spark, flagged, name: str, path: str, run_id: str, dts, n_quarantined: int | None = None) -> None:
    """Write the quarantine table partitioned by dt, idempotently for the dts of this window.

    ``n_quarantined`` (the count from :func:`reason_counts`): when 0 there is nothing to write, so only the dts'
    old partitions are removed (no Spark job)."""
    from ..contract import write_partitioned

    _delete_partitions(spark, path, [str(d) for d in dts if d is not None])
    if n_quarantined == 0:
        jvm = spark._jvm
        base = jvm.org.apache.hadoop.fs.Path(path)
        base.getFileSystem(spark._jsc.hadoopConfiguration()).mkdirs(base)
        return
    q = quarantined(flagged, name, run_id)
    write_partitioned(q, path)


def raw_frame(spark, rows: list[dict], name: str = LOGS):
    """Test helper: build a frame from raw Python records where ``event_time``/``dt`` may be strings (as read
    from JSON/CSV), then conform it leniently -- an unparseable timestamp becomes null."""
    from pyspark.sql.types import StringType, StructField, StructType

    struct = load_contract(name).struct_type()
    fields = []
    for f in struct.fields:
        if f.name in ("event_time", "dt"):
            fields.append(StructField(f.name, StringType(), True))
        else:
            fields.append(StructField(f.name, f.dataType, True))
    full = [{f.name: r.get(f.name) for f in struct.fields} for r in rows]
    return conform_lenient(spark.createDataFrame(full, StructType(fields)), name)
