"""The generator's world, as small numpy arrays on the driver (no Spark here).

Contexts c = 0..n-1 with weights w_c; ads in pools (ranked: one pool of n_ads; slotted: slot k has its own pool
of d_k ads, all pools disjoint, global ad index = offset_k + j); intrinsic click rates P[c, a]; attention-decay
coefficients C_1 = 1 > C_2 > ... (seed 001, section 4: P(click | x, a at position i) = C_i P(x, a)).

Every value here is an exact expectation; the Spark side only samples from these arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Paper's measured ADCs on ~20M Yahoo! impressions (seed 001, section 4; MATH.md).
PAPER_ADC = (1.0, 0.613, 0.527, 0.433)
# Mixed-radix cardinalities of the categorical features f0, f1, f2, ...; the last feature takes what is left.
FEATURE_CARDINALITIES = (4, 3)


@dataclass(frozen=True)
class Pools:
    """Where each position draws its ads from. ``offsets[k]``, ``sizes[k]``: slot k's pool (ranked: one pool)."""

    layout: str
    n_positions: int
    offsets: np.ndarray
    sizes: np.ndarray
    names: list

    @property
    def n_total(self) -> int:
        return len(self.names)

    def slot_of_ad(self) -> np.ndarray:
        """Slot (1-based) of every global ad index; 0 for the ranked layout (one shared pool)."""
        if self.layout == "ranked":
            return np.zeros(self.n_total, dtype=np.int64)
        return np.repeat(np.arange(1, self.n_positions + 1), self.sizes)


def default_adc(n_positions: int) -> tuple[float, ...]:
    """The paper's ADCs, extended geometrically with the last ratio (.433/.527) when K > 4."""
    adc = list(PAPER_ADC)
    ratio = PAPER_ADC[-1] / PAPER_ADC[-2]
    while len(adc) < n_positions:
        adc.append(adc[-1] * ratio)
    return tuple(adc[:max(n_positions, 1)])


def make_pools(layout: str, n_positions: int, n_ads: int, slot_sizes) -> Pools:
    if layout == "ranked":
        names = [f"ad{a:04d}" for a in range(n_ads)]
        return Pools(layout, n_positions, np.zeros(n_positions, dtype=np.int64),
                     np.full(n_positions, n_ads, dtype=np.int64), names)
    sizes = np.asarray(slot_sizes, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    names = [f"s{k + 1}_a{j:02d}" for k in range(n_positions) for j in range(int(sizes[k]))]
    return Pools(layout, n_positions, offsets, sizes, names)


def context_names(n_contexts: int) -> list[str]:
    width = max(4, len(str(n_contexts - 1)))
    return [f"ctx{c:0{width}d}" for c in range(n_contexts)]


def context_features(n_contexts: int) -> list[dict]:
    """Categorical features of context c by mixed-radix digits: f0 = c mod 4, f1 = (c div 4) mod 3, f2 = c div 12."""
    out = []
    for c in range(n_contexts):
        rest, feats = c, {}
        for i, card in enumerate(FEATURE_CARDINALITIES):
            feats[f"f{i}"] = f"v{rest % card}"
            rest //= card
        feats[f"f{len(FEATURE_CARDINALITIES)}"] = f"v{rest}"
        out.append(feats)
    return out


def context_weights(n_contexts: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Mildly skewed context distribution: w_c proportional to exp(skew * g_c), g_c ~ N(0, 1)."""
    w = np.exp(skew * rng.standard_normal(n_contexts))
    return w / w.sum()


def alias_table(weights) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias method: c = j if u2 < prob[j] else alias[j], j = floor(u1 n), samples c with P = weights."""
    w = np.asarray(weights, dtype=float)
    n = len(w)
    scaled = w * n / w.sum()
    prob = np.ones(n)
    alias = np.arange(n, dtype=np.int64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        (small if scaled[g] < 1.0 else large).append(g)
    for i in small + large:
        prob[i] = 1.0
        alias[i] = i
    return prob, alias


def alias_probabilities(prob: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """The distribution an alias table samples: q_c = (prob_c + sum_{j: alias_j = c} (1 - prob_j)) / n."""
    n = len(prob)
    q = prob.copy()
    np.add.at(q, alias, 1.0 - prob)
    return q / n


def click_rates(n_contexts: int, n_ads: int, rng: np.random.Generator, base_ctr: float, ad_effect_sd: float,
                interaction: float, latent_dim: int, cap: float = 1.0) -> np.ndarray:
    """P[c, a] = sigmoid(logit(base_ctr) + b_a + interaction * <z_c, v_a> / sqrt(dim)), clipped to (0, cap].

    b_a ~ N(0, ad_effect_sd^2), z_c, v_a ~ N(0, I_dim): an ad effect plus a context-ad interaction.
    """
    b = ad_effect_sd * rng.standard_normal(n_ads)
    z = rng.standard_normal((n_contexts, latent_dim))
    v = rng.standard_normal((n_ads, latent_dim))
    logit = np.log(base_ctr / (1.0 - base_ctr)) + b[None, :] + interaction * (z @ v.T) / np.sqrt(latent_dim)
    p = 1.0 / (1.0 + np.exp(-logit))
    return np.clip(p, 1e-9, cap)


def top_slate(scores: np.ndarray, pools: Pools, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Best slate per row of ``scores`` (rows x n_total ads) -> (rows x K) global ad indices.

    ranked: the K highest-scoring distinct ads, best first (optimal for a row of P because C_1 > C_2 > ...);
    slotted: the argmax within each slot's pool. Ties go to the smaller ``tiebreak`` rank (default: ad index).
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=float))
    rows, n_total = scores.shape
    tb = np.arange(n_total) if tiebreak is None else np.asarray(tiebreak)
    K = pools.n_positions
    out = np.empty((rows, K), dtype=np.int64)
    for r in range(rows):
        if pools.layout == "ranked":
            order = np.lexsort((tb, -scores[r]))
            out[r] = order[:K]
        else:
            for k in range(K):
                lo, d = int(pools.offsets[k]), int(pools.sizes[k])
                order = np.lexsort((tb[lo:lo + d], -scores[r, lo:lo + d]))
                out[r, k] = lo + order[0]
    return out


def slate_value(P: np.ndarray, adc: np.ndarray, slate: np.ndarray) -> np.ndarray:
    """Expected slate reward of a deterministic slate per context: v_c = sum_k C_k P[c, a_k(c)] (seed 001, sec. 4)."""
    P = np.asarray(P)
    slate = np.asarray(slate)
    if slate.ndim == 1:
        slate = np.broadcast_to(slate, (P.shape[0], slate.shape[0]))
    K = slate.shape[1]
    rows = np.arange(P.shape[0])[:, None]
    return (P[rows, slate] * np.asarray(adc)[None, :K]).sum(axis=1)


def uniform_value(P: np.ndarray, adc: np.ndarray, pools: Pools) -> np.ndarray:
    """Uniform logging per context: v_c = sum_k C_k mean_{a in pool_k} P[c, a] (ranked: marginal 1/n_ads)."""
    v = np.zeros(P.shape[0])
    for k in range(pools.n_positions):
        lo, d = int(pools.offsets[k]), int(pools.sizes[k])
        v += adc[k] * P[:, lo:lo + d].mean(axis=1)
    return v


def eps_greedy_value(P: np.ndarray, adc: np.ndarray, pools: Pools, exploit: np.ndarray, eps: float) -> np.ndarray:
    """epsilon-greedy: v_c = (1 - eps) sum_k C_k P[c, e_k(c)] + eps * uniform value (linear in the marginals)."""
    if eps >= 1.0:
        return uniform_value(P, adc, pools)
    return (1.0 - eps) * slate_value(P, adc, exploit) + eps * uniform_value(P, adc, pools)


def slate_marginals(P: np.ndarray, adc: np.ndarray, slate: np.ndarray) -> np.ndarray:
    """m[c, k] = C_k P[c, a_k(c)]: the click probability of position k of a deterministic slate, if examined."""
    slate = np.asarray(slate)
    if slate.ndim == 1:
        slate = np.broadcast_to(slate, (P.shape[0], slate.shape[0]))
    rows = np.arange(P.shape[0])[:, None]
    return P[rows, slate] * np.asarray(adc)[None, :slate.shape[1]]


def uniform_marginals(P: np.ndarray, adc: np.ndarray, pools: Pools) -> np.ndarray:
    """m[c, k] = C_k mean_{a in pool_k} P[c, a]: uniform independent slots (slotted layout)."""
    return np.column_stack([adc[k] * P[:, int(pools.offsets[k]):int(pools.offsets[k] + pools.sizes[k])].mean(axis=1)
                            for k in range(pools.n_positions)])


def cascade_value(m: np.ndarray) -> np.ndarray:
    """Cascade click model: the user examines positions 1..K in order, clicks at k with probability m_k (C_k P(x,
    a_k)) and stops at the first click, so r_k = c_k prod_{j<k} (1 - c_j) and the slate's value is
    v_c = sum_k m_k prod_{j<k} (1 - m_j) = 1 - prod_k (1 - m_k). Exact for a slate whose positions are drawn
    independently given the context (a factorized policy) with m_k the expected C_k P at k."""
    m = np.atleast_2d(np.asarray(m, dtype=float))
    above = np.cumprod(np.column_stack([np.ones(m.shape[0]), 1.0 - m[:, :-1]]), axis=1)
    return (m * above).sum(axis=1)


def mixture_value(values: list[np.ndarray], weights) -> np.ndarray:
    """A per-event random choice among policies with fixed weights: v_c = sum_b w_b v_b(c)."""
    return sum(w * v for w, v in zip(weights, values))
