"""Orchestration of ``scavenger train`` (also the notebook entry): train on one window, decide on a later one.

read logs -> training rows (Spark SQL) -> aggregated sufficient statistics -> Spark ML fit (regression and/or
cost-sensitive) -> scores of (context, candidate ad) -> per-event choice restricted to eligible ads -> decisions
(contract ``decisions``; policy_id = "<method>@<from>..<to>") under out/decisions, per-event notes for events
with fewer than m eligible ads / fallback-scored ads / replaced duplicates under out/decision_notes, models under
out/model/<method>/ (Spark ML persistence) with training metadata, and a summary (result.json via the caller).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from ..contract import DECISIONS, conform, load_contract, parse_date, read_logs, write_partitioned
from ..errors import DataCheckFailed, UsageError
from . import cost_sensitive as cs
from . import eligibility as el
from . import features as fe
from . import regression as rg

METHODS = ("regression", "cost_sensitive")


@dataclass
class TrainConfig:
    logs: str
    date_from: str
    date_to: str
    score_from: str
    score_to: str
    out: str
    method: str = "both"
    m: int = 4
    adc: str = "estimate"
    adc_method: str = "variance_optimal"
    eligibility: str | None = None
    seed: int = 0
    interactions: str = "2"
    reg_param: float = 1e-4
    max_iter: int = 25
    truth: str | None = None          # generator truth dir ('auto': <logs>/../truth when it exists; 'none': off)
    estimate: bool = True             # factored estimate of every learned policy on the scoring window
    dedup: str = "random"             # cost-sensitive duplicates: random | next_best | both (two policies)
    extra: dict = field(default_factory=dict)

    def methods(self) -> list[str]:
        if self.method == "both":
            return list(METHODS)
        if self.method not in METHODS:
            raise UsageError(f"--method must be regression, cost_sensitive or both; got {self.method!r}")
        return [self.method]

    def check(self) -> None:
        el.check_m(self.m)
        self.methods()
        f, t = parse_date(self.date_from, "--from"), parse_date(self.date_to, "--to")
        sf, st = parse_date(self.score_from, "--score-from"), parse_date(self.score_to, "--score-to")
        if f is None or t is None or sf is None or st is None:
            raise UsageError("--from, --to, --score-from and --score-to are required")
        if f > t or sf > st:
            raise UsageError("a window's start is after its end")
        if sf <= t:
            raise UsageError(f"the scoring window must start after the training window (--score-from {sf} <= --to {t})")
        if self.dedup not in ("random", "next_best", "both"):
            raise UsageError(f"--dedup must be random, next_best or both; got {self.dedup!r}")
        if self.interactions not in fe.INTERACTIONS:
            raise UsageError(f"--interactions must be one of {', '.join(fe.INTERACTIONS)}")


def policy_id(method: str, cfg: TrainConfig) -> str:
    return f"{method}@{cfg.date_from}..{cfg.date_to}"


def _truth_dir(cfg: TrainConfig) -> str | None:
    if cfg.truth in (None, "none"):
        return None
    if cfg.truth == "auto":
        cand = os.path.join(os.path.dirname(os.path.abspath(cfg.logs.rstrip("/"))), "truth")
        return cand if os.path.exists(os.path.join(cand, "click_rates")) else None
    if not os.path.exists(os.path.join(cfg.truth, "click_rates")):
        raise UsageError(f"--truth {cfg.truth} has no click_rates table (expected a generator truth/ directory)")
    return cfg.truth


def _save_metadata(spark, path: str, meta: dict) -> None:
    """Training metadata as a one-row JSON table beside the Spark ML model (any Hadoop filesystem)."""
    spark.createDataFrame([(json.dumps(meta, default=str),)], "metadata string").coalesce(1).write.mode(
        "overwrite").text(path)


def run_training(spark, cfg: TrainConfig, result=None) -> dict:
    """Train, decide, write; returns the summary dict (also filled into ``result`` when given)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    cfg.check()
    m = int(cfg.m)
    train_logs = read_logs(spark, cfg.logs, cfg.date_from, cfg.date_to)
    score_logs = read_logs(spark, cfg.logs, cfg.score_from, cfg.score_to)
    C, adc_source = fe.resolve_adc(spark, cfg.adc, train_logs, cfg.adc_method)

    slots = fe.slot_rows(train_logs, C, cfg.interactions)
    agg = fe.aggregate_slots(fe.usable(slots)).persist(StorageLevel.MEMORY_AND_DISK)
    slot_counts = slots.agg(
        F.countDistinct(F.col("event_id")).alias("events"), F.count(F.lit(1)).alias("slots"),
        F.sum(F.when(F.col("coef").isNull() | (F.col("coef") <= 0), 1).otherwise(0)).alias("no_adc"),
        F.sum(F.when(F.col("reward").isNull(), 1).otherwise(0)).alias("null_reward")).collect()[0]
    if not slot_counts["events"]:
        raise DataCheckFailed(f"no training events in {cfg.logs} for {cfg.date_from}..{cfg.date_to}")
    train_stats = agg.agg(F.sum("n").alias("n"), F.sum("s_r").alias("clicks"),
                          F.sum("n_no_propensity").alias("no_prop")).collect()[0]

    events = score_logs.select(F.col("dt"), F.col("event_id"), fe.context_key_col().alias("context_key"),
                               F.col("context")).persist(StorageLevel.MEMORY_AND_DISK)
    n_score = events.count()
    if not n_score:
        raise DataCheckFailed(f"no events to decide for in {cfg.score_from}..{cfg.score_to}")
    contexts = (events.select(F.col("context_key"), F.col("context")).dropDuplicates(["context_key"])
                .select(F.col("context_key"), fe.context_tokens_col(cfg.interactions).alias("ctx_tokens")))
    contexts = contexts.persist(StorageLevel.MEMORY_AND_DISK)

    train_ads = agg.select(F.col("ad_id")).distinct()
    eligibility, level = (None, None)
    if cfg.eligibility:
        eligibility, level = el.read_eligibility(spark, cfg.eligibility)
        elig_ads = eligibility.select(F.col("ad_id")).distinct()
        ads = (elig_ads.join(train_ads.select(F.col("ad_id"), F.lit(True).alias("known")), on="ad_id", how="left")
               .select(F.col("ad_id"), F.coalesce(F.col("known"), F.lit(False)).alias("known")))
    else:
        ads = train_ads.select(F.col("ad_id"), F.lit(True).alias("known"))
    ads = ads.persist(StorageLevel.MEMORY_AND_DISK)
    cands = el.candidates(events, train_ads, eligibility, level).persist(StorageLevel.MEMORY_AND_DISK)
    n_unknown_ads = ads.where(~F.col("known")).count()

    summary = {
        "train_window": [cfg.date_from, cfg.date_to], "score_window": [cfg.score_from, cfg.score_to],
        "m": m, "adc": [float(c) for c in C], "adc_source": adc_source, "interactions": cfg.interactions,
        "eligibility": {"source": cfg.eligibility, "level": level},
        "policies": {},
    }
    counts = {"train_events": int(slot_counts["events"]), "train_slots": int(slot_counts["slots"]),
              "train_slots_used": int(train_stats["n"] or 0), "train_clicks": float(train_stats["clicks"] or 0.0),
              "train_slots_without_adc": int(slot_counts["no_adc"] or 0),
              "train_slots_null_reward": int(slot_counts["null_reward"] or 0),
              "train_slots_without_propensity": int(train_stats["no_prop"] or 0),
              "score_events": int(n_score), "score_contexts": int(contexts.count()),
              "eligible_ads_unseen_in_training": int(n_unknown_ads)}

    decided, scores_by_policy, models, persisted = [], {}, {}, []
    for method in cfg.methods():
        model_dir = os.path.join(cfg.out, "model", method)
        variants = []   # (policy_id, dedup, chosen)
        if method == "regression":
            pid = policy_id(method, cfg)
            model, info = rg.fit_regression(agg, rg.RegressionConfig(reg_param=cfg.reg_param, max_iter=cfg.max_iter))
            scores = rg.score(model, contexts, ads).persist(StorageLevel.MEMORY_AND_DISK)
            variants.append((pid, None, el.top_m(cands.join(scores, on=["context_key", "ad_id"], how="inner"), m,
                                                 cfg.seed)))
            model.write().overwrite().save(os.path.join(model_dir, "pipeline"))
            scores.write.mode("overwrite").parquet(os.path.join(model_dir, "scores"))  # g(x, a) of the window
            scores_by_policy[pid] = scores
        else:
            model = cs.fit_cost_sensitive(agg, m, cs.CostSensitiveConfig(reg_param=cfg.reg_param))
            info = model.info
            scores = cs.score(model, contexts, ads, m).persist(StorageLevel.MEMORY_AND_DISK)
            scored = cands.join(scores, on=["context_key", "ad_id"], how="inner")
            for dedup in (["random", "next_best"] if cfg.dedup == "both" else [cfg.dedup]):
                name = method if dedup == "random" else f"{method}_{dedup}"
                variants.append((policy_id(name, cfg), dedup, el.set_select_test(scored, m, cfg.seed, dedup)))
            model.save(os.path.join(model_dir, "pipeline"))
        models[method] = model
        persisted.append(scores)
        for pid, dedup, chosen in variants:
            chosen = chosen.select(F.lit(pid).alias("policy_id"), *[F.col(c) for c in chosen.columns])
            chosen = chosen.persist(StorageLevel.MEMORY_AND_DISK)
            st = chosen.agg(
                F.count(F.lit(1)).alias("events"),
                F.sum(F.when(F.col("n_chosen") < F.lit(m), 1).otherwise(0)).alias("short"),
                F.sum(F.col("n_fallback_chosen")).alias("fallback"),
                F.sum(F.col("n_replaced")).alias("replaced")).collect()[0]
            meta = {"policy_id": pid, "method": method, "dedup": dedup, "learner": info, "config": asdict(cfg),
                    "adc": [float(c) for c in C], "adc_source": adc_source, "m": m, "seed": cfg.seed,
                    "counts": counts}
            _save_metadata(spark, os.path.join(model_dir, "training_metadata"), meta)
            summary["policies"][pid] = {
                "method": method, "dedup": dedup, "learner": info,
                "model_path": os.path.join(model_dir, "pipeline"),
                "events_decided": int(st["events"]),
                "events_with_fewer_than_m_eligible": int(st["short"] or 0),
                "events_without_eligible_ads": n_score - int(st["events"]),
                "fallback_scored_ads_chosen": int(st["fallback"] or 0),
                "duplicates_replaced": int(st["replaced"] or 0),
            }
            decided.append(chosen)

    union = decided[0]
    for d in decided[1:]:
        union = union.unionByName(d)
    # events without any eligible ad get an empty slate (so every scored event has a decision)
    missing = []
    for pid in summary["policies"]:
        got = union.where(F.col("policy_id") == F.lit(pid)).select(F.col("event_id"))
        missing.append(events.join(got, on="event_id", how="left_anti").select(
            F.lit(pid).alias("policy_id"), F.col("dt"), F.col("event_id"),
            F.array().cast("array<struct<position:int,ad_id:string,probability:double>>").alias("slots"),
            F.lit(0).alias("n_eligible"), F.lit(0).alias("n_chosen"), F.lit(0).alias("n_fallback_chosen"),
            F.lit(0).alias("n_replaced")))
    for extra in missing:
        union = union.unionByName(extra)
    contract = load_contract(DECISIONS)
    dec_path = os.path.join(cfg.out, "decisions")
    written = write_partitioned(conform(union, contract), dec_path)
    notes = union.where((F.col("n_chosen") < F.lit(m)) | (F.col("n_fallback_chosen") > 0) | (F.col("n_replaced") > 0))
    write_partitioned(notes.select(F.col("policy_id"), F.col("event_id"), F.col("n_eligible"), F.col("n_chosen"),
                                   F.col("n_fallback_chosen"), F.col("n_replaced"),
                                   (F.col("n_chosen") < F.lit(m)).alias("fewer_than_m"), F.col("dt")),
                      os.path.join(cfg.out, "decision_notes"))
    summary["decisions_path"] = dec_path
    summary["decision_dates"] = written

    decisions = spark.read.parquet(dec_path)
    decisions = conform(decisions.where(F.col("policy_id").isin(list(summary["policies"]))), contract)
    if cfg.estimate:
        from .judge import factored_values

        est = factored_values(spark, score_logs, decisions, cfg.adc_method)
        for _, row in est.iterrows():
            if row["policy_id"] in summary["policies"]:
                summary["policies"][row["policy_id"]]["factored_estimate"] = {
                    k: row[k] for k in ("value", "std_error", "ci_low", "ci_high", "supported_share", "adc")}
    truth_dir = _truth_dir(cfg)
    if truth_dir:
        from .judge import truth_report

        elig_rows = cands if eligibility is not None else None
        report = truth_report(spark, truth_dir, score_logs, decisions, m, elig_rows, scores_by_policy)
        summary["truth"] = {k: v for k, v in report.items() if k != "policies"}
        summary["truth"]["dir"] = truth_dir
        for pid, vals in report["policies"].items():
            if pid in summary["policies"]:
                summary["policies"][pid]["truth"] = vals
                fe_ = summary["policies"][pid].get("factored_estimate")
                if fe_:
                    fe_["covers_true_value"] = bool(fe_["ci_low"] <= vals["true_value"] <= fe_["ci_high"])
                if "regret_bound" in vals:
                    vals["set_regret_under_bound"] = bool(vals["set_regret"] <= vals["regret_bound"] + 1e-12)

    for df in decided + [agg, events, contexts, ads, cands] + persisted:
        df.unpersist()
    if result is not None:
        result.summary.update(summary)
        result.counts.update(counts)
        result.inputs.update({"logs": cfg.logs, "eligibility": cfg.eligibility, "adc": cfg.adc})
        result.outputs.update({"decisions": dec_path, "model": os.path.join(cfg.out, "model"),
                               "decision_notes": os.path.join(cfg.out, "decision_notes")})
    summary["counts"] = counts
    return summary
