"""Ingest of the Open Bandit Dataset (OBD) into the impression-log contract.

Each OBD row is one item shown at one position; the rows of one impression cannot be re-joined in the sample,
so each row becomes a one-slot impression at its logged position (``../shared/data/obd/README.md``).
Source: Saito, Aihara, Matsutani, Narita, "Open Bandit Dataset and Pipeline", NeurIPS 2021 Datasets and
Benchmarks (CC BY 4.0, ZOZO, Inc.).

Layout expected under the root: ``<policy>/<campaign>/<campaign>.csv`` for policy in {random, bts} and
campaign in {all, men, women}; the full dataset has the same layout.
"""
from __future__ import annotations

from pathlib import Path

from .contract import LOGS, conform, load_contract
from .errors import UsageError

POLICIES = ("random", "bts")
CAMPAIGNS = ("all", "men", "women")
USER_FEATURES = ("user_feature_0", "user_feature_1", "user_feature_2", "user_feature_3")


def obd_files(root: str | Path, policies=POLICIES, campaigns=CAMPAIGNS) -> list[tuple[str, str, Path]]:
    """(policy, campaign, csv path) for every file present; UsageError if none or the root is missing."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"no such OBD directory: {root}")
    found = []
    for policy in policies:
        for campaign in campaigns:
            path = root / policy / campaign / f"{campaign}.csv"
            if path.exists():
                found.append((policy, campaign, path))
    if not found:
        raise UsageError(f"no OBD files (<policy>/<campaign>/<campaign>.csv) under {root}")
    return found


def read_obd_file(spark, policy: str, campaign: str, path: Path):
    """One OBD CSV as contract rows: one-slot impressions; ad_id is ``<campaign>/<item_id>`` (item ids are
    per campaign), context_id is the campaign, user features go into ``context``."""
    from pyspark.sql import functions as F

    raw = spark.read.option("header", True).option("inferSchema", False).csv(str(path))
    index_col = raw.columns[0]  # the unnamed pandas index column
    event_time = F.to_timestamp(F.col("timestamp"))
    feature_entries = []
    for name in USER_FEATURES:
        feature_entries.extend([F.lit(name), F.col(name)])
    feature_entries.extend([F.lit("campaign"), F.lit(campaign)])
    slot = F.struct(
        F.col("position").cast("int").alias("position"),
        F.concat(F.lit(f"{campaign}/"), F.col("item_id")).alias("ad_id"),
        F.col("propensity_score").cast("double").alias("propensity"),
        F.col("click").cast("double").alias("reward"),
    )
    rows = raw.select(
        F.concat(F.lit(f"obd-{policy}-{campaign}-"), F.col(index_col)).alias("event_id"),
        event_time.alias("event_time"),
        F.lit(campaign).alias("context_id"),
        F.create_map(*feature_entries).alias("context"),
        F.lit(policy).alias("logging_policy"),
        F.array(slot).alias("slots"),
        F.lit(None).cast("double").alias("slate_reward"),
        F.to_date(event_time).alias("dt"),
    )
    return rows


def ingest_obd(spark, root: str | Path, policies=POLICIES, campaigns=CAMPAIGNS):
    """All OBD files under ``root`` as one contract DataFrame (union of the files)."""
    frames = [read_obd_file(spark, p, c, path) for p, c, path in obd_files(root, policies, campaigns)]
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return conform(combined, load_contract(LOGS))
