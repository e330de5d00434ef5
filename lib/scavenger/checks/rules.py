"""Row rules: every rule of the contract that a single row can break, as built-in Spark SQL expressions.

One ``select`` per table adds ``reason_codes`` (array<string>, empty when the row is clean) to the conformed
frame; rows with a reason go to the quarantine table (``<out>/quarantine/<table>/dt=*/``), never silently dropped.
The only shuffle is the window count that finds duplicate keys across all partitions (days) of the window;
decisions additionally need one join with the log's event ids.

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
    """array of the codes whose condition is true (conditions that are null count as false)."""
    from pyspark.sql import functions as F

    return F.array_compact(F.array(*[F.when(cond, F.lit(code)) for code, cond in pairs]))


def _not_finite(c):
    from pyspark.sql import functions as F

    return F.isnan(c) | (c == F.lit(math.inf)) | (c == F.lit(-math.inf))


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

    return F.exists(F.col("slots"), lambda s: s["propensity"].isNull())


def flag_logs(logs, config: RuleConfig = RuleConfig()):
    """Conformed impression logs + ``reason_codes``: one select (plus the window for duplicate event ids).

    Returns the contract columns followed by ``reason_codes``.
    """
    from pyspark.sql import functions as F

    contract = load_contract(LOGS)
    cols = contract.columns
    slots = F.col("slots")
    n = F.size(slots)
    positions = F.transform(slots, lambda s: s["position"])
    ads = F.transform(slots, lambda s: s["ad_id"])
    rmin, rmax = F.lit(float(config.reward_min)), F.lit(float(config.reward_max))

    logs = _with_duplicates(logs, ["event_id"], [F.col("dt").asc_nulls_last(), F.col("event_time").asc_nulls_last(),
                                                  F.col("logging_policy").asc_nulls_last(),
                                                  F.col("context_id").asc_nulls_last()])
    dup_count, dup_rank = F.col("_n"), F.col("_rank")

    has_slots = slots.isNotNull() & (n > 0)
    null_prop = F.exists(slots, lambda s: s["propensity"].isNull())
    slot_reward_bad = F.exists(slots, lambda s: s["reward"].isNotNull() & _not_finite(s["reward"]))
    slate_bad = F.col("slate_reward").isNotNull() & _not_finite(F.col("slate_reward"))
    slot_out = F.exists(slots, lambda s: s["reward"].isNotNull() & ~_not_finite(s["reward"])
                        & ((s["reward"] < rmin) | (s["reward"] > rmax)))
    slate_out = (F.col("slate_reward").isNotNull() & ~_not_finite(F.col("slate_reward"))
                 & ((F.col("slate_reward") < rmin * n) | (F.col("slate_reward") > rmax * n)))
    # days since epoch of the instant, independent of the session time zone
    event_day = F.floor(F.unix_seconds(F.col("event_time")) / F.lit(86400)).cast("int")

    pairs = [
        ("NULL_EVENT_ID", F.col("event_id").isNull()),
        ("NULL_LOGGING_POLICY", F.col("logging_policy").isNull()),
        ("NULL_DT", F.col("dt").isNull()),
        ("EMPTY_SLATE", ~has_slots | slots.isNull()),
        ("NULL_AD", F.exists(slots, lambda s: s["ad_id"].isNull())),
        ("NULL_PROPENSITY", null_prop if config.quarantine_null_propensity else F.lit(False)),
        ("ZERO_PROPENSITY", F.exists(slots, lambda s: s["propensity"] <= 0)),
        ("PROPENSITY_GT_1", F.exists(slots, lambda s: (s["propensity"] > 1) | F.isnan(s["propensity"]))),
        ("DUPLICATE_EVENT_ID", _dup_flag(dup_count, dup_rank, config.duplicates)),
        ("DUPLICATE_AD", has_slots & (F.size(F.array_distinct(ads)) < n)),
        ("DUPLICATE_POSITION", has_slots & (F.size(F.array_distinct(positions)) < n)),
        ("POSITION_GAP", has_slots & (F.exists(slots, lambda s: s["position"].isNull() | (s["position"] < 1))
                                      if config.allow_partial_slates else
                                      ((F.array_min(positions) != 1)
                                       | (F.array_max(positions) != F.size(F.array_distinct(positions)))
                                       | F.exists(slots, lambda s: s["position"].isNull())))),
        ("REWARD_NOT_FINITE", slot_reward_bad | slate_bad),
        ("REWARD_OUT_OF_RANGE", slot_out | slate_out),
        ("MISSING_REWARD", F.col("slate_reward").isNull() & F.exists(slots, lambda s: s["reward"].isNull())),
        ("EVENT_TIME_UNPARSEABLE", F.col("event_time").isNull()),
        ("EVENT_TIME_OUTSIDE_DT", F.col("event_time").isNotNull() & F.col("dt").isNotNull()
         & (event_day != F.unix_date(F.col("dt")))),
    ]
    assert [p[0] for p in pairs] == LOG_REASONS
    return logs.select(*[F.col(c) for c in cols], _codes(pairs).alias(REASON))


def flag_decisions(decisions, flagged_logs, config: RuleConfig = RuleConfig()):
    """Conformed decisions + ``reason_codes`` (+ ``_logging_policy`` of the event, for the assumption checks);
    ``flagged_logs`` is the output of :func:`flag_logs` (its event ids and reason codes decide UNKNOWN_EVENT /
    EVENT_QUARANTINED, matched on (event_id, dt))."""
    from pyspark.sql import functions as F

    contract = load_contract(DECISIONS)
    cols = contract.columns
    # one row per (event_id, dt) of the logs: is there a clean copy?
    # one row per (event_id, dt) of the logs: is there a clean copy, and its logging policy (for the checks)
    clean_row = F.size(F.col(REASON)) == 0
    events = (flagged_logs
              .where(F.col("event_id").isNotNull())
              .groupBy(F.col("event_id").alias("_ev"), F.col("dt").alias("_dt"))
              .agg(F.max(clean_row.cast("int")).alias("_clean"),
                   F.max(F.when(clean_row, F.col("logging_policy"))).alias(LOGGING_POLICY)))
    decisions = _with_duplicates(decisions, ["policy_id", "event_id"],
                                 [F.col("dt").asc_nulls_last(), F.col("base_policy").asc_nulls_last()])
    joined = decisions.join(events, (F.col("event_id") == F.col("_ev")) & (F.col("dt") == F.col("_dt")), "left")

    slots = F.col("slots")
    n = F.size(slots)
    dup_count, dup_rank = F.col("_n"), F.col("_rank")
    has_slots = slots.isNotNull() & (n > 0)
    tol = F.lit(float(config.sum_tolerance))
    positions = F.array_distinct(F.transform(slots, lambda s: s["position"]))
    sum_bad = F.exists(positions, lambda p: F.abs(
        F.aggregate(F.filter(slots, lambda s: s["position"] == p), F.lit(0.0),
                    lambda acc, s: acc + F.coalesce(s["probability"], F.lit(0.0))) - F.lit(1.0)) > tol)

    pairs = [
        ("NULL_POLICY_ID", F.col("policy_id").isNull()),
        ("NULL_EVENT_ID", F.col("event_id").isNull()),
        ("NULL_DT", F.col("dt").isNull()),
        ("EMPTY_SLOTS", ~has_slots | slots.isNull()),
        ("NULL_AD", F.exists(slots, lambda s: s["ad_id"].isNull())),
        ("PROBABILITY_OUT_OF_RANGE", F.exists(slots, lambda s: s["probability"].isNull()
                                              | F.isnan(s["probability"]) | (s["probability"] < 0)
                                              | (s["probability"] > 1))),
        ("BAD_POSITION", F.exists(slots, lambda s: s["position"].isNull() | (s["position"] < 1))),
        ("PROBABILITY_SUM", has_slots & sum_bad),
        ("DUPLICATE_DECISION", _dup_flag(dup_count, dup_rank, config.duplicates)),
        ("UNKNOWN_EVENT", F.col("event_id").isNotNull() & F.col("_clean").isNull()),
        ("EVENT_QUARANTINED", F.col("_clean") == 0),
    ]
    assert [p[0] for p in pairs] == DECISION_REASONS
    return joined.select(*[F.col(c) for c in cols], _codes(pairs).alias(REASON), F.col(LOGGING_POLICY))


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


def write_quarantine(spark, flagged, name: str, path: str, run_id: str, dts) -> None:
    """Write the quarantine table partitioned by dt, idempotently for the dts of this window."""
    from ..contract import write_partitioned

    _delete_partitions(spark, path, [str(d) for d in dts if d is not None])
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
