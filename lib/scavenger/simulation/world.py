"""The generated world as small numpy arrays (no engine here): pools, click rates, the context distribution, the
logging and target policies, and the exact value of every policy per context (``model.py`` holds the formulas)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import model
from .config import MULTI_BASES, GeneratorConfig

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


def _cascade(world: World) -> bool:
    return getattr(world.cfg, "click_model", "additive") == "cascade"


def base_value(world: World, base: BasePolicy) -> np.ndarray:
    """Per-context expected slate reward of an epsilon-greedy base policy (model.eps_greedy_value; cascade: the
    coin picks the whole slate, so the value is eps V(uniform) + (1 - eps) V(exploit), each model.cascade_value)."""
    if not _cascade(world):
        return model.eps_greedy_value(world.P, world.adc, world.pools, base.exploit, base.epsilon)
    uniform = model.cascade_value(model.uniform_marginals(world.P, world.adc, world.pools))
    if base.exploit is None or base.epsilon >= 1.0:
        return uniform
    exploit = model.cascade_value(model.slate_marginals(world.P, world.adc, base.exploit))
    return base.epsilon * uniform + (1.0 - base.epsilon) * exploit


def target_values(world: World) -> dict[str, np.ndarray]:
    """Per-context true value of every built-in target: v_c = sum_k sum_a pi_k(a|x=c) C_k P(c, a) (additive
    clicks); under the cascade v_c = sum_k m_k prod_{j<k} (1 - m_j) with m_k = sum_a pi_k(a|x=c) C_k P(c, a), the
    targets drawing each position independently (model.cascade_value)."""
    mix = float(world.cfg.mix_weight)
    if _cascade(world):
        m_oracle = model.slate_marginals(world.P, world.adc, world.oracle)
        m_mc = model.slate_marginals(world.P, world.adc, world.most_clicked)
        values = {
            "oracle": model.cascade_value(m_oracle),
            "most_clicked": model.cascade_value(m_mc),
            "uniform_random": model.cascade_value(model.uniform_marginals(world.P, world.adc, world.pools)),
            "oracle_mix": model.cascade_value(mix * m_oracle + (1.0 - mix) * m_mc),
        }
    else:
        v_oracle = model.slate_value(world.P, world.adc, world.oracle)
        v_mc = model.slate_value(world.P, world.adc, world.most_clicked)
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
