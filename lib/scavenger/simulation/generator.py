"""`scavenger generate`: impression logs with exactly known ground truth (issue 2, item 3).

The world (contexts, ads, intrinsic click rates P(x, a), ADCs C_k, the logging and target policies) is a set of small
numpy arrays built on the driver from the seed (``model.py``). Spark samples the events: per day a
``spark.range(events_per_day)`` whose every random draw is a uniform from a hash,
``u = (xxhash64(seed, day, index, stream, j) & (2^53 - 1)) / 2^53``, so the rows do not depend on partitioning and the
same config gives the same rows. The world arrays travel as one broadcast row; nothing row-level comes back to the
driver (history mode reads back only the previous day's per-ad clicks and impressions; the truth reads back the
per-(dt, context) event counts).

Python API::

    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=4, n_ads=100, ...)
    truth = generate(spark, cfg, out_dir)     # out/logs, out/decisions, out/truth/, out/ground_truth.json
    values = true_policy_value(spark, decisions_df, logs_df, out_dir + "/truth")
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..contract import DECISIONS, LOGS, conform, load_contract, read_logs, write_partitioned
from ..progress import phase
from ..errors import UsageError
from . import model

LAYOUTS = ("ranked", "slotted")
LOGGING_MODES = ("uniform", "history", "contextual", "multi")
TARGET_POLICIES = ("oracle", "most_clicked", "uniform_random", "oracle_mix")
MULTI_BASES = ("uniform", "greedy_popular", "greedy_random")

# Random streams (the 4th hash argument); base policy b uses _BASE_STREAM + 2b (slate) and + 2b + 1 (explore coin).
_S_CONTEXT_J, _S_CONTEXT_U, _S_TIME, _S_CHOOSE, _S_CLICK, _S_UNIFORM_TARGET = 1, 2, 3, 4, 5, 6
_BASE_STREAM = 100
_DAY_MICROS = 86_400_000_000


@dataclass
class GeneratorConfig:
    """Everything that defines a generated data set; the same config (and seed) gives the same rows."""

    layout: str = "ranked"            # ranked: K distinct ads from one pool; slotted: slot k from its own pool
    logging: str = "uniform"          # uniform | history | contextual | multi
    n_positions: int = 4              # K
    n_ads: int = 100                  # ranked: pool size (>= K)
    slot_sizes: list | None = None    # slotted: d_k per slot (default [5] * K)
    n_contexts: int = 60
    days: int = 3
    events_per_day: int = 200_000
    start_date: str = "2026-01-01"
    adc: tuple | None = None          # C_1..C_K (default: the paper's 1, .613, .527, .433, extended geometrically)
    epsilon: float = 0.2              # exploration rate of the epsilon-greedy logging policies
    seed: int = 0
    context_skew: float = 0.5         # w_c proportional to exp(skew * N(0,1))
    base_ctr: float = 0.08            # sigmoid centre of P(x, a)
    ad_effect_sd: float = 0.6         # sd of the ad effect on the logit
    interaction: float = 1.0          # strength of the context-ad interaction on the logit
    latent_dim: int = 4
    contextual_noise: float = 0.5     # contextual mode: sd of the logit noise of its ranking
    multi_weights: tuple = (0.4, 0.3, 0.3)   # multi mode: probability of each base policy per event
    mix_weight: float = 0.8           # oracle_mix: probability of the oracle slate (else most_clicked)

    def resolved(self) -> "GeneratorConfig":
        """Validate (UsageError with one clear line) and fill the defaults that depend on K."""
        if self.layout not in LAYOUTS:
            raise UsageError(f"layout must be one of {', '.join(LAYOUTS)}; got {self.layout!r}")
        if self.logging not in LOGGING_MODES:
            raise UsageError(f"logging must be one of {', '.join(LOGGING_MODES)}; got {self.logging!r}")
        K = _int(self.n_positions, "positions")
        if K < 1:
            raise UsageError(f"positions must be >= 1; got {K}")
        n_ads = _int(self.n_ads, "ads")
        slot_sizes = None
        if self.layout == "ranked":
            if n_ads < K:
                raise UsageError(f"ads ({n_ads}) must be >= positions ({K}) for the ranked layout")
        else:
            slot_sizes = [5] * K if self.slot_sizes is None else [_int(d, "slot size") for d in self.slot_sizes]
            if len(slot_sizes) != K:
                raise UsageError(f"slot sizes must give one size per position ({K}); got {len(slot_sizes)}")
            if min(slot_sizes) < 1:
                raise UsageError(f"slot sizes must be >= 1; got {slot_sizes}")
        for name in ("n_contexts", "days", "events_per_day"):
            if _int(getattr(self, name), name) < 1:
                raise UsageError(f"{name.replace('_', '-')} must be >= 1; got {getattr(self, name)}")
        if _int(self.seed, "seed") < 0:
            raise UsageError(f"seed must be >= 0; got {self.seed}")
        try:
            start = _dt.date.fromisoformat(str(self.start_date))
        except ValueError:
            raise UsageError(f"start date must be YYYY-MM-DD; got {self.start_date!r}") from None
        adc = model.default_adc(K) if self.adc is None else tuple(float(c) for c in self.adc)
        if len(adc) < K:
            raise UsageError(f"adc must give at least {K} coefficients (one per position); got {len(adc)}")
        adc = adc[:K]
        if not math.isclose(adc[0], 1.0, abs_tol=1e-12):
            raise UsageError(f"adc must start with C_1 = 1; got {adc[0]}")
        if any(not (b < a) for a, b in zip(adc, adc[1:])) or adc[-1] <= 0:
            raise UsageError(f"adc must be strictly decreasing from 1 and positive; got {list(adc)}")
        eps = float(self.epsilon)
        if not 0.0 < eps <= 1.0:
            raise UsageError(f"epsilon must be in (0, 1]; got {eps}")
        weights = tuple(float(w) for w in self.multi_weights)
        if len(weights) != len(MULTI_BASES) or min(weights) <= 0 or not math.isclose(sum(weights), 1.0):
            raise UsageError(f"multi weights must be {len(MULTI_BASES)} positive numbers summing to 1; got {weights}")
        if not 0.0 <= float(self.mix_weight) <= 1.0:
            raise UsageError(f"mix weight must be in [0, 1]; got {self.mix_weight}")
        if not 0.0 < float(self.base_ctr) < 1.0:
            raise UsageError(f"base ctr must be in (0, 1); got {self.base_ctr}")
        return dataclasses.replace(self, n_positions=K, n_ads=n_ads, slot_sizes=slot_sizes, adc=adc,
                                   epsilon=eps, multi_weights=weights, start_date=start.isoformat(),
                                   n_contexts=int(self.n_contexts), days=int(self.days),
                                   events_per_day=int(self.events_per_day), seed=int(self.seed))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _int(value, name: str) -> int:
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be an integer; got {value!r}") from None
    if not as_float.is_integer():
        raise UsageError(f"{name} must be an integer; got {value!r}")
    return int(as_float)


# --------------------------------------------------------------------------------------------------------------------
# The world: numpy on the driver


@dataclass
class BasePolicy:
    """An epsilon-greedy slate policy: with prob. eps a uniform slate, else ``exploit`` (n_contexts x K ad indices).

    Per-position marginal (the logged propensity): mu_k(a|x) = (1 - eps) 1[a = e_k(x)] + eps / |pool_k|.
    """

    name: str
    epsilon: float
    exploit: np.ndarray | None  # None: uniform (epsilon = 1)


@dataclass
class World:
    cfg: GeneratorConfig
    pools: model.Pools
    P: np.ndarray                 # n_contexts x n_total_ads
    weights: np.ndarray           # context distribution (what the alias table samples)
    alias_prob: np.ndarray
    alias_idx: np.ndarray
    ctx_names: list
    ctx_features: list
    adc: np.ndarray
    bases: list                   # BasePolicy per base (history: day 0's; replaced per day)
    base_weights: tuple
    oracle: np.ndarray            # n_contexts x K
    most_clicked: np.ndarray      # n_contexts x K (same row for every context)
    random_order: np.ndarray      # seeded tie-break rank of every ad (history day 0, unseen ads)
    best_base: np.ndarray | None = None  # multi: per context, index of the base with the highest true value
    base_values: list = field(default_factory=list)


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(stream)])


def build_world(cfg: GeneratorConfig) -> World:
    """All exact quantities of the generated world, from the seed (small arrays; no Spark)."""
    cfg = cfg.resolved()
    K, n = cfg.n_positions, cfg.n_contexts
    pools = model.make_pools(cfg.layout, K, cfg.n_ads, cfg.slot_sizes)
    adc = np.asarray(cfg.adc, dtype=float)
    P = model.click_rates(n, pools.n_total, _rng(cfg.seed, 1), cfg.base_ctr, cfg.ad_effect_sd, cfg.interaction,
                          cfg.latent_dim, cap=1.0 / adc[0])
    alias_prob, alias_idx = model.alias_table(model.context_weights(n, cfg.context_skew, _rng(cfg.seed, 2)))
    weights = model.alias_probabilities(alias_prob, alias_idx)
    random_order = _rng(cfg.seed, 3).permutation(pools.n_total)
    rank_of = np.empty(pools.n_total, dtype=np.int64)
    rank_of[random_order] = np.arange(pools.n_total)
    oracle = model.top_slate(P, pools)
    popular = weights @ P
    most_clicked = np.repeat(model.top_slate(popular, pools), n, axis=0)
    random_slate = np.repeat(model.top_slate(np.zeros(pools.n_total), pools, tiebreak=rank_of), n, axis=0)
    eps = cfg.epsilon
    if cfg.logging == "uniform":
        bases, base_weights = [BasePolicy("uniform", 1.0, None)], (1.0,)
    elif cfg.logging == "history":
        bases, base_weights = [BasePolicy("history_eps_greedy", eps, random_slate)], (1.0,)
    elif cfg.logging == "contextual":
        noise = cfg.contextual_noise * _rng(cfg.seed, 4).standard_normal(P.shape)
        noisy = np.log(P / (1.0 - np.minimum(P, 1 - 1e-12))) + noise
        bases, base_weights = [BasePolicy("contextual_eps_greedy", eps, model.top_slate(noisy, pools))], (1.0,)
    else:
        bases = [BasePolicy(MULTI_BASES[0], 1.0, None), BasePolicy(MULTI_BASES[1], eps, most_clicked),
                 BasePolicy(MULTI_BASES[2], eps, random_slate)]
        base_weights = cfg.multi_weights
    world = World(cfg=cfg, pools=pools, P=P, weights=weights, alias_prob=alias_prob, alias_idx=alias_idx,
                  ctx_names=model.context_names(n), ctx_features=model.context_features(n), adc=adc,
                  bases=bases, base_weights=tuple(base_weights), oracle=oracle, most_clicked=most_clicked,
                  random_order=rank_of)
    world.base_values = [base_value(world, b) for b in bases]
    if cfg.logging == "multi":
        world.best_base = np.argmax(np.vstack(world.base_values), axis=0).astype(np.int64)
    return world


def base_value(world: World, base: BasePolicy) -> np.ndarray:
    """Per-context expected slate reward of an epsilon-greedy base policy (model.eps_greedy_value)."""
    return model.eps_greedy_value(world.P, world.adc, world.pools, base.exploit, base.epsilon)


def target_values(world: World) -> dict[str, np.ndarray]:
    """Per-context true value of every built-in target: v_c = sum_k sum_a pi_k(a|x=c) C_k P(c, a)."""
    v_oracle = model.slate_value(world.P, world.adc, world.oracle)
    v_mc = model.slate_value(world.P, world.adc, world.most_clicked)
    mix = float(world.cfg.mix_weight)
    values = {
        "oracle": v_oracle,
        "most_clicked": v_mc,
        "uniform_random": model.uniform_value(world.P, world.adc, world.pools),
        "oracle_mix": mix * v_oracle + (1.0 - mix) * v_mc,
    }
    if world.best_base is not None:
        stacked = np.vstack(world.base_values)
        values["best_base"] = stacked[world.best_base, np.arange(stacked.shape[1])]
    return values


def history_exploit(world: World, clicks: dict, impressions: dict) -> np.ndarray:
    """Context-free exploit slate from the previous day's empirical CTR per ad (clicks / impressions at any position);
    ties and unseen ads (score -1) are broken by the seeded random order."""
    idx = {name: i for i, name in enumerate(world.pools.names)}
    scores = np.full(world.pools.n_total, -1.0)
    for ad, m in impressions.items():
        if ad in idx and m > 0:
            scores[idx[ad]] = clicks.get(ad, 0.0) / m
    slate = model.top_slate(scores, world.pools, tiebreak=world.random_order)
    return np.repeat(slate, world.cfg.n_contexts, axis=0)


# --------------------------------------------------------------------------------------------------------------------
# Spark SQL expressions


def _dbl(x: float) -> str:
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _arr(values, kind: str = "int") -> str:
    if kind == "double":
        return "array(" + ", ".join(_dbl(v) for v in values) + ")"
    if kind == "string":
        return "array(" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) + ")"
    return "array(" + ", ".join(str(int(v)) for v in values) + ")"


class _Sql:
    """SQL text of the sampling steps; columns of the broadcast world row start with ``_w_``."""

    def __init__(self, world: World):
        self.w = world
        cfg = world.cfg
        self.K = cfg.n_positions
        self.NA = world.pools.n_total
        self.seed = cfg.seed

    def u(self, stream: int, j: str = "0") -> str:
        """A uniform in [0, 1) from a hash: (xxhash64(seed, day, index, stream, j) & (2^53-1)) / 2^53."""
        return (f"((xxhash64({self.seed}L, _day, _idx, {int(stream)}, {j}) & 9007199254740991L) "
                f"/ 9007199254740992D)")

    def context(self) -> str:
        """Alias sampling: j = floor(u1 n); c = j if u2 < prob[j] else alias[j]."""
        n = self.w.cfg.n_contexts
        j = f"CAST(floor({self.u(_S_CONTEXT_J)} * {n}) AS INT)"
        return f"IF({self.u(_S_CONTEXT_U)} < _w_alias_prob[{j}], {j}, _w_alias_idx[{j}])"

    def event_time(self) -> str:
        start = _dt.datetime.fromisoformat(self.w.cfg.start_date).replace(tzinfo=_dt.timezone.utc)
        micros = int(start.timestamp()) * 1_000_000
        offset = f"least(CAST(floor({self.u(_S_TIME)} * {_DAY_MICROS}D) AS BIGINT), {_DAY_MICROS - 1}L)"
        return f"timestamp_micros({micros}L + CAST(_day AS BIGINT) * {_DAY_MICROS}L + {offset})"

    def uniform_slate(self, stream: int) -> str:
        """Uniform slate as global ad indices. ranked: a uniform K-permutation without replacement, r_j =
        floor(u_j (n - j)) mapped to the r_j-th unused index (walk the sorted chosen ones: c <= r -> r + 1);
        slotted: an independent uniform draw per slot pool."""
        K, pools = self.K, self.w.pools
        if pools.layout == "ranked":
            n = int(pools.sizes[0])
            draw = f"CAST(floor({self.u(stream, 'j')} * ({n} - j)) AS INT)"
            return (f"aggregate(sequence(0, {K - 1}), CAST(array() AS ARRAY<INT>), (acc, j) -> concat(acc, array("
                    f"aggregate(array_sort(acc), {draw}, (r, x) -> IF(x <= r, r + 1, r)))))")
        off, size = _arr(pools.offsets), _arr(pools.sizes)
        return (f"transform(sequence(0, {K - 1}), j -> {off}[j] + "
                f"CAST(floor({self.u(stream, 'j')} * {size}[j]) AS INT))")

    def base_slate(self, b: int) -> str:
        base = self.w.bases[b]
        uniform = self.uniform_slate(_BASE_STREAM + 2 * b)
        if base.exploit is None or base.epsilon >= 1.0:
            return uniform
        exploit = f"slice(_w_exploit[{b}], _c * {self.K} + 1, {self.K})"
        return f"IF({self.u(_BASE_STREAM + 2 * b + 1)} < {_dbl(base.epsilon)}, {uniform}, {exploit})"

    def chosen(self) -> str:
        weights = self.w.base_weights
        if len(weights) == 1:
            return "0"
        cum = np.cumsum(weights)[:-1]
        u = self.u(_S_CHOOSE)
        cases = " ".join(f"WHEN {u} < {_dbl(c)} THEN {i}" for i, c in enumerate(cum))
        return f"CASE {cases} ELSE {len(weights) - 1} END"

    def logged_slots(self) -> str:
        """Slots of the logged slate: propensity = (1 - eps) 1[a = e_k(x)] + eps / |pool_k| of the chosen base;
        reward ~ Bernoulli(C_k P(x, a)) from the click stream."""
        K, NA = self.K, self.NA
        eps = _arr([b.epsilon for b in self.w.bases], "double")
        unif = _arr([1.0 / float(d) for d in self.w.pools.sizes], "double")
        adc = _arr(self.w.adc, "double")
        propensity = (f"(1D - {eps}[_chosen]) * IF(_slate[k] = _w_exploit[_chosen][_c * {K} + k], 1D, 0D) "
                      f"+ {eps}[_chosen] * {unif}[k]")
        reward = f"IF({self.u(_S_CLICK, 'k')} < {adc}[k] * _w_p[_c * {NA} + _slate[k]], 1D, 0D)"
        return (f"transform(sequence(0, {K - 1}), k -> named_struct('position', k + 1, "
                f"'ad_id', _w_ad_names[_slate[k]], 'propensity', {propensity}, 'reward', {reward}))")

    def deterministic(self, array_col: str) -> str:
        """Decision slots of a per-context deterministic slate stored flat as array_col[c * K + k]."""
        K = self.K
        return (f"transform(sequence(0, {K - 1}), k -> named_struct('position', k + 1, "
                f"'ad_id', _w_ad_names[{array_col}[_c * {K} + k]], 'probability', 1D))")

    def realized(self, slate_col: str) -> str:
        """Decision slots of a per-event slate (probability-1 choices)."""
        return (f"transform(sequence(0, {self.K - 1}), k -> named_struct('position', k + 1, "
                f"'ad_id', _w_ad_names[{slate_col}[k]], 'probability', 1D))")

    def mix(self, mix: float) -> str:
        """oracle_mix: per position mix * oracle + (1 - mix) * most_clicked, equal ads merged."""
        K = self.K
        o, m = f"_w_oracle[_c * {K} + k]", f"_w_most_clicked[_c * {K} + k]"
        one = f"array(named_struct('position', k + 1, 'ad_id', _w_ad_names[{o}], 'probability', 1D))"
        two = (f"array(named_struct('position', k + 1, 'ad_id', _w_ad_names[{o}], 'probability', {_dbl(mix)}), "
               f"named_struct('position', k + 1, 'ad_id', _w_ad_names[{m}], 'probability', {_dbl(1.0 - mix)}))")
        if mix >= 1.0:
            return self.deterministic("_w_oracle")
        return f"flatten(transform(sequence(0, {K - 1}), k -> IF({o} = {m}, {one}, {two})))"


def _world_columns(world: World) -> list:
    """The world's arrays as constant columns ``_w_*`` (from_json of one JSON literal, constant-folded by the
    optimizer into array literals that every row references: no join, no per-row copy, no Python worker)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (ArrayType, DoubleType, IntegerType, MapType, StringType, StructField,
                                   StructType)

    n, K = world.cfg.n_contexts, world.cfg.n_positions
    exploit = [(b.exploit.reshape(-1) if b.exploit is not None else np.full(n * K, -1)).astype(int).tolist()
               for b in world.bases]
    best = world.best_base if world.best_base is not None else np.zeros(n, dtype=np.int64)
    ints = ArrayType(IntegerType(), False)
    schema = StructType([
        StructField("_w_p", ArrayType(DoubleType(), False), False),
        StructField("_w_alias_prob", ArrayType(DoubleType(), False), False),
        StructField("_w_alias_idx", ints, False),
        StructField("_w_ad_names", ArrayType(StringType(), False), False),
        StructField("_w_ctx_names", ArrayType(StringType(), False), False),
        StructField("_w_ctx_maps", ArrayType(MapType(StringType(), StringType(), True), False), False),
        StructField("_w_exploit", ArrayType(ints, False), False),
        StructField("_w_oracle", ints, False),
        StructField("_w_most_clicked", ints, False),
        StructField("_w_best_base", ints, False),
    ])
    values = {"_w_p": world.P.reshape(-1).astype(float).tolist(),
              "_w_alias_prob": world.alias_prob.astype(float).tolist(),
              "_w_alias_idx": world.alias_idx.astype(int).tolist(),
              "_w_ad_names": list(world.pools.names), "_w_ctx_names": list(world.ctx_names),
              "_w_ctx_maps": [dict(f) for f in world.ctx_features], "_w_exploit": exploit,
              "_w_oracle": world.oracle.reshape(-1).astype(int).tolist(),
              "_w_most_clicked": world.most_clicked.reshape(-1).astype(int).tolist(),
              "_w_best_base": best.astype(int).tolist()}
    # One JSON literal parsed by from_json (constant-folded): no Python worker, no shuffle. Doubles round-trip
    # exactly through repr-based JSON.
    return [F.from_json(F.lit(json.dumps(values[f.name])), f.dataType).alias(f.name) for f in schema.fields]


def _events(spark, world: World, first_day: int, n_days: int = 1):
    """Events of days first_day .. first_day + n_days - 1 with their hidden sampling columns (_day, _idx, _c,
    _slates, _chosen, _slate, _urand). A row depends only on (seed, day, index), never on how days are grouped."""
    from pyspark.sql import functions as F

    sql = _Sql(world)
    cfg = world.cfg
    epd = int(cfg.events_per_day)
    base = (spark.range(int(first_day) * epd, (int(first_day) + int(n_days)) * epd)
            .select(F.expr(f"CAST(id DIV {epd} AS INT)").alias("_day"), F.expr(f"id % {epd}").alias("_idx"),
                    *_world_columns(world)))
    w_cols = [F.col(c) for c in base.columns if c.startswith("_w_")]
    stage1 = base.select(F.col("_day"), F.col("_idx"), F.expr(f"date_add(DATE'{cfg.start_date}', _day)").alias("dt"),
                         F.expr(sql.context()).alias("_c"), F.expr(sql.event_time()).alias("event_time"), *w_cols)
    slates = "array(" + ", ".join(sql.base_slate(b) for b in range(len(world.bases))) + ")"
    stage2 = stage1.select(*[F.col(c) for c in stage1.columns], F.expr(slates).alias("_slates"),
                           F.expr(sql.chosen()).alias("_chosen"),
                           F.expr(sql.uniform_slate(_S_UNIFORM_TARGET)).alias("_urand"))
    return stage2.select(*[F.col(c) for c in stage2.columns], F.expr("_slates[_chosen]").alias("_slate"),
                         F.expr(f"concat('{cfg.seed}-', CAST(dt AS STRING), '-', CAST(_idx AS STRING))")
                         .alias("event_id"))


def _logs(world: World, events):
    from pyspark.sql import functions as F

    sql = _Sql(world)
    names = _arr([b.name for b in world.bases], "string")
    df = events.select(
        F.col("event_id"), F.col("event_time"),
        F.expr("_w_ctx_names[_c]").alias("context_id"), F.expr("_w_ctx_maps[_c]").alias("context"),
        F.expr(f"{names}[_chosen]").alias("logging_policy"),
        F.expr(sql.logged_slots()).alias("slots"),
        F.lit(None).cast("double").alias("slate_reward"), F.col("dt"))
    return conform(df, load_contract(LOGS))


def _decisions(world: World, events):
    from pyspark.sql import functions as F

    sql = _Sql(world)
    null = "CAST(NULL AS STRING)"
    entries = [
        f"named_struct('policy_id', 'oracle', 'slots', {sql.deterministic('_w_oracle')}, 'base_policy', {null})",
        f"named_struct('policy_id', 'most_clicked', 'slots', {sql.deterministic('_w_most_clicked')}, "
        f"'base_policy', {null})",
        f"named_struct('policy_id', 'uniform_random', 'slots', {sql.realized('_urand')}, 'base_policy', {null})",
        f"named_struct('policy_id', 'oracle_mix', 'slots', {sql.mix(float(world.cfg.mix_weight))}, "
        f"'base_policy', {null})",
    ]
    if world.best_base is not None:
        names = _arr([b.name for b in world.bases], "string")
        entries.append(f"named_struct('policy_id', 'best_base', 'slots', {sql.realized('_slates[_w_best_base[_c]]')}, "
                       f"'base_policy', {names}[_w_best_base[_c]])")
    exploded = events.select(F.col("event_id"), F.col("dt"),
                             F.expr("explode(array(" + ", ".join(entries) + "))").alias("_d"))
    df = exploded.select(F.col("_d.policy_id").alias("policy_id"), F.col("event_id"),
                         F.col("_d.slots").alias("slots"), F.col("_d.base_policy").alias("base_policy"),
                         F.col("dt"))
    return conform(df, load_contract(DECISIONS))


# --------------------------------------------------------------------------------------------------------------------
# Driver


def _day_ad_counts(spark, logs_path: str, dt: _dt.date) -> tuple[dict, dict]:
    """Per-ad clicks and impressions (any position) of one written day: n_ads rows come back."""
    from pyspark.sql import functions as F

    rows = (read_logs(spark, logs_path, dt, dt)
            .select(F.explode(F.col("slots")).alias("s"))
            .groupBy(F.col("s.ad_id").alias("ad_id"))
            .agg(F.sum(F.coalesce(F.col("s.reward"), F.lit(0.0))).alias("clicks"),
                 F.count(F.lit(1)).alias("impressions"))
            .collect())
    return ({r["ad_id"]: float(r["clicks"]) for r in rows}, {r["ad_id"]: int(r["impressions"]) for r in rows})


def _context_counts(spark, logs_path: str, first: _dt.date, last: _dt.date) -> pd.DataFrame:
    """Events, slots and clicks per (dt, context_id): days x n_contexts rows come back."""
    from pyspark.sql import functions as F

    clicks = F.aggregate(F.col("slots"), F.lit(0.0), lambda acc, s: acc + F.coalesce(s["reward"], F.lit(0.0)))
    return (read_logs(spark, logs_path, first, last)
            .groupBy(F.col("dt"), F.col("context_id"))
            .agg(F.count(F.lit(1)).alias("events"), F.sum(F.size(F.col("slots"))).alias("slots"),
                 F.sum(clicks).alias("clicks"))
            .toPandas())


def _write_small_table(spark, pdf: pd.DataFrame, schema: str, path: str) -> None:
    """One small table as Parquet at any URI, committed whole (io.outputs.write_table: a hidden sibling swapped
    in), so a killed run leaves the previous table or the new one, never a half. ``schema`` documents the columns."""
    from ..io.outputs import write_table

    missing = [c.split()[0] for c in schema.split(",") if c.split()[0] not in pdf.columns]
    if missing:
        raise ValueError(f"truth table {path} lacks columns {missing}")
    write_table(pdf, path)


def _write_truth_tables(spark, world: World, truth_dir: str, per_context: dict) -> None:
    pools, n = world.pools, world.cfg.n_contexts
    slot_of = pools.slot_of_ad()
    ci, ai = np.meshgrid(np.arange(n), np.arange(pools.n_total), indexing="ij")
    rates = pd.DataFrame({
        "context_id": np.asarray(world.ctx_names, dtype=object)[ci.ravel()],
        "context_index": ci.ravel().astype("int32"),
        "ad_id": np.asarray(pools.names, dtype=object)[ai.ravel()],
        "slot": pd.array([None if s == 0 else int(s) for s in slot_of[ai.ravel()]], dtype="Int32"),
        "p": world.P.ravel().astype(float),
        "context_weight": world.weights[ci.ravel()].astype(float),
    })
    schema = ("context_id string, context_index int, ad_id string, slot int, p double, context_weight double")
    _write_small_table(spark, rates, schema, os.path.join(truth_dir, "click_rates"))
    adc = pd.DataFrame({"position": np.arange(1, len(world.adc) + 1, dtype="int32"),
                        "coefficient": world.adc.astype(float)})
    _write_small_table(spark, adc, "position int, coefficient double", os.path.join(truth_dir, "adc"))
    rows = []
    for (policy, dt), values in per_context.items():
        for c in range(n):
            rows.append((policy, dt, world.ctx_names[c], c, float(values[c]), float(world.weights[c])))
    values = pd.DataFrame(rows, columns=["policy_id", "dt", "context_id", "context_index", "value", "context_weight"])
    _write_small_table(spark, values, "policy_id string, dt string, context_id string, context_index int, "
                                      "value double, context_weight double",
                       os.path.join(truth_dir, "context_values"))


def _realized(values: np.ndarray, counts: np.ndarray) -> float:
    """Realized-context value: sum_c n_c v_c / sum_c n_c (exact expectation given the generated contexts)."""
    total = counts.sum()
    return float(counts @ values / total) if total else float("nan")


@contextlib.contextmanager
def _timed(timings: dict | None, name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[name] = round(time.perf_counter() - start, 3)


def generate(spark, cfg: GeneratorConfig, out_dir: str, timings: dict | None = None) -> dict:
    """Write out/logs, out/decisions (Parquet by dt), out/truth/ and out/ground_truth.json; return the truth dict.

    ``timings`` (optional dict) receives seconds per phase."""
    world = build_world(cfg)
    cfg = world.cfg
    logs_path = os.path.join(out_dir, "logs")
    decisions_path = os.path.join(out_dir, "decisions")
    truth_dir = os.path.join(out_dir, "truth")
    start = _dt.date.fromisoformat(cfg.start_date)
    dates = [start + _dt.timedelta(days=d) for d in range(cfg.days)]
    logging_per_day: dict[str, list] = {}   # dt -> per-base per-context values of that day
    # history mode: day by day (each day's ranking comes from the previous day's written logs); otherwise the
    # world does not change over days and one job per table writes every day.
    batches = [(d, 1) for d in range(cfg.days)] if cfg.logging == "history" else [(0, cfg.days)]
    for first, n_days in batches:
        if cfg.logging == "history" and first > 0:
            clicks, impressions = _day_ad_counts(spark, logs_path, dates[first - 1])
            world.bases = [BasePolicy(world.bases[0].name, cfg.epsilon, history_exploit(world, clicks, impressions))]
            world.base_values = [base_value(world, b) for b in world.bases]
        for d in range(first, first + n_days):
            logging_per_day[dates[d].isoformat()] = list(world.base_values)
        events = _events(spark, world, first, n_days)
        span = f"{dates[first]}..{dates[first + n_days - 1]}"
        with _timed(timings, f"write_logs_{dates[first].isoformat()}" if n_days == 1 else "write_logs"), \
                phase(spark, "generate", f"logs {span}"):
            write_partitioned(_logs(world, events), logs_path)
        with _timed(timings, f"write_decisions_{dates[first].isoformat()}" if n_days == 1 else "write_decisions"), \
                phase(spark, "generate", f"decisions {span}"):
            write_partitioned(_decisions(world, events), decisions_path)

    with _timed(timings, "count"):
        counts = _context_counts(spark, logs_path, dates[0], dates[-1])
    counts["dt"] = counts["dt"].astype(str)
    ctx_index = {name: i for i, name in enumerate(world.ctx_names)}
    n = cfg.n_contexts
    per_day_counts = {}
    for d in dates:
        key = d.isoformat()
        sub = counts[counts["dt"] == key]
        vec = np.zeros(n)
        vec[[ctx_index[c] for c in sub["context_id"]]] = sub["events"].to_numpy(dtype=float)
        per_day_counts[key] = vec
    all_counts = sum(per_day_counts.values())

    targets = target_values(world)
    per_context: dict = {}
    policies = {}
    for pid, v in targets.items():
        per_context[(pid, None)] = v
        policies[pid] = {
            "value": float(world.weights @ v),
            "realized_value": _realized(v, all_counts),
            "per_day": {d: _realized(v, c) for d, c in per_day_counts.items()},
        }

    weights = world.base_weights
    base_names = [b.name for b in world.bases]
    logging_info = {"name": base_names[0] if len(base_names) == 1 else "multi",
                    "base_policies": {}, "per_day": {}}
    total_realized = 0.0
    for d, base_vals in logging_per_day.items():
        mix = model.mixture_value(base_vals, weights)
        if cfg.logging == "history":
            per_context[(base_names[0], d)] = mix
        total_realized += float(per_day_counts[d] @ mix)
        logging_info["per_day"][d] = {"value": float(world.weights @ mix),
                                      "realized_value": _realized(mix, per_day_counts[d])}
    logging_info["value"] = float(np.mean([v["value"] for v in logging_info["per_day"].values()]))
    logging_info["realized_value"] = total_realized / all_counts.sum()
    if cfg.logging != "history":
        for name, w, b, vals in zip(base_names, weights, world.bases, world.base_values):
            per_context[(name, None)] = vals
            logging_info["base_policies"][name] = {
                "weight": float(w), "epsilon": float(b.epsilon), "value": float(world.weights @ vals),
                "realized_value": _realized(vals, all_counts)}
    else:
        logging_info["base_policies"][base_names[0]] = {"weight": 1.0, "epsilon": float(cfg.epsilon)}

    events_by_day = counts.groupby("dt")[["events", "slots", "clicks"]].sum()
    total = events_by_day.sum()
    truth = {
        "generator": "scavenger.simulation.generator",
        "config": cfg.to_dict(),
        "layout": cfg.layout,
        "logging": cfg.logging,
        "n_positions": cfg.n_positions,
        "adc": [float(c) for c in world.adc],
        "ads": {"n_total": world.pools.n_total,
                "pool_sizes": [int(s) for s in world.pools.sizes]},
        "contexts": {"n": n, "mean_click_rate": float(world.weights @ world.P.mean(axis=1))},
        "policies": policies,
        "logging_policy": logging_info,
        "mean_reward": {
            "overall": float(total["clicks"] / total["events"]),
            "per_day": {d: float(r["clicks"] / r["events"]) for d, r in events_by_day.iterrows()},
        },
        "counts": {
            "events": int(total["events"]), "slots": int(total["slots"]), "clicks": int(total["clicks"]),
            "per_day": {d: {"events": int(r["events"]), "slots": int(r["slots"]), "clicks": int(r["clicks"])}
                        for d, r in events_by_day.iterrows()},
        },
        "paths": {"logs": os.path.abspath(logs_path), "decisions": os.path.abspath(decisions_path),
                  "truth": os.path.abspath(truth_dir)},
        "notes": ("value = expected slate reward per event under the context distribution; realized_value = the "
                  "same expectation averaged over the generated events' contexts."),
    }
    with _timed(timings, "write_truth"):
        _write_truth_tables(spark, world, truth_dir, per_context)
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, f".ground_truth.json.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(truth, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, os.path.join(out_dir, "ground_truth.json"))
    return truth


def true_policy_value(spark, decisions_df, logs_df, truth_dir: str) -> pd.DataFrame:
    """True value of ANY decisions: per policy, the mean over its logged events of
    sum_k sum_a pi_k(a|x_t) C_k P(x_t, a) (seed 001, section 4), from out/truth. Returns pandas
    (policy_id, true_value, n_events). Ads unknown to the truth (or a slotted ad at another slot's position, or a
    position beyond K) contribute 0."""
    from pyspark.sql import functions as F

    adc_rows = spark.read.parquet(os.path.join(truth_dir, "adc")).orderBy("position").collect()
    adc = _arr([r["coefficient"] for r in adc_rows], "double")
    rates = spark.read.parquet(os.path.join(truth_dir, "click_rates")).select(
        F.col("context_id").alias("r_context_id"), F.col("ad_id").alias("r_ad_id"), F.col("slot").alias("r_slot"),
        F.col("p").alias("r_p"))
    events = logs_df.select(F.col("event_id"), F.col("context_id"))
    entries = (decisions_df.select(F.col("policy_id"), F.col("event_id"),
                                   F.explode_outer(F.col("slots")).alias("s"))
               .join(events, on="event_id", how="inner")
               .select(F.col("policy_id"), F.col("event_id"), F.col("context_id"),
                       F.col("s.position").alias("position"), F.col("s.ad_id").alias("ad_id"),
                       F.col("s.probability").alias("probability")))
    cond = ((F.col("context_id") == F.col("r_context_id")) & (F.col("ad_id") == F.col("r_ad_id"))
            & (F.col("r_slot").isNull() | (F.col("r_slot") == F.col("position"))))
    term = (F.coalesce(F.col("probability"), F.lit(0.0))
            * F.coalesce(F.expr(f"try_element_at({adc}, position)"), F.lit(0.0))
            * F.coalesce(F.col("r_p"), F.lit(0.0)))
    per_event = (entries.join(F.broadcast(rates), cond, how="left")
                 .groupBy(F.col("policy_id"), F.col("event_id")).agg(F.sum(term).alias("v")))
    out = (per_event.groupBy(F.col("policy_id"))
           .agg(F.avg(F.col("v")).alias("true_value"), F.count(F.lit(1)).alias("n_events"))
           .orderBy("policy_id").toPandas())
    return out
