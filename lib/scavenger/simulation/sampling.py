"""The generator's sampling steps as Spark SQL expressions (DuckDB runs them through sqlglot): one source of rows.

Columns of the world (the small numpy arrays of ``world.py``, bound once per statement) start with ``_w_``; the
event's uniforms (``hashing.py``) are the columns ``_u_<draw>`` (one value, or an array of K values indexed by
position or draw step). A statement never repeats a hash: each draw is computed once as a column in
``statements.py`` and referenced by name here.
"""
from __future__ import annotations

import datetime as _dt

import numpy as np

from ..statistics.sql.literals import text
from .world import World

# Random streams (hash constants of each draw); base policy b uses _BASE_STREAM + 2b (slate) and + 2b + 1 (coin).
S_CONTEXT_J, S_CONTEXT_U, S_TIME, S_CHOOSE, S_CLICK, S_UNIFORM_TARGET = 1, 2, 3, 4, 5, 6
S_HELD = 7   # partial slates: (coin, position) of the one slot a partial event holds
BASE_STREAM = 100
DAY_MICROS = 86_400_000_000


def dbl(x: float) -> str:
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def arr(values, kind: str = "int") -> str:
    if kind == "double":
        return "array(" + ", ".join(dbl(v) for v in values) + ")"
    if kind == "string":
        return "array(" + ", ".join(text(v) for v in values) + ")"
    return "array(" + ", ".join(str(int(v)) for v in values) + ")"


def at(array: str, index0: str) -> str:
    """Element ``index0`` (counted from 0) of an array: ``element_at`` counts from 1 in both engines (sqlglot
    shifts only literal subscripts of ``a[i]`` to DuckDB's 1-based lists, never a computed one)."""
    return f"element_at({array}, {index0} + 1)"


def draws(world: World) -> list[tuple[str, int, int]]:
    """(column, stream, count) of every uniform an event uses: count None is a scalar column, a number an array of
    that many (K = 1 gives an array of one)."""
    K = world.cfg.n_positions
    out = [("_u_ctx_j", S_CONTEXT_J, None), ("_u_ctx_u", S_CONTEXT_U, None), ("_u_time", S_TIME, None),
           ("_u_click", S_CLICK, K), ("_u_urand", S_UNIFORM_TARGET, K)]
    if len(world.base_weights) > 1:
        out.append(("_u_choose", S_CHOOSE, None))
    if float(getattr(world.cfg, "partial_slates", 0.0)) > 0:
        out.append(("_u_held", S_HELD, 2))
    for b, base in enumerate(world.bases):
        out.append((f"_u_base{b}", BASE_STREAM + 2 * b, K))
        if base.exploit is not None and base.epsilon < 1.0:
            out.append((f"_u_coin{b}", BASE_STREAM + 2 * b + 1, None))
    return out


class Sampling:
    """SQL text of the sampling steps of one world (see the module doc)."""

    def __init__(self, world: World):
        self.w = world
        self.K = world.cfg.n_positions
        self.NA = world.pools.n_total

    def context(self) -> str:
        """Alias sampling: j = floor(u1 n); c = j if u2 < prob[j] else alias[j]."""
        n = self.w.cfg.n_contexts
        j = f"CAST(floor(_u_ctx_j * {n}) AS INT)"
        return f"IF(_u_ctx_u < {at('_w_alias_prob', j)}, {j}, {at('_w_alias_idx', j)})"

    def event_time(self) -> str:
        start = _dt.datetime.fromisoformat(self.w.cfg.start_date).replace(tzinfo=_dt.timezone.utc)
        micros = int(start.timestamp()) * 1_000_000
        offset = f"least(CAST(floor(_u_time * CAST({DAY_MICROS} AS DOUBLE)) AS BIGINT), {DAY_MICROS - 1})"
        return f"timestamp_micros({micros} + CAST(_day AS BIGINT) * {DAY_MICROS} + {offset})"

    def uniform_slate(self, column: str) -> str:
        """Uniform slate as global ad indices from the K uniforms of ``column``. ranked: a uniform K-permutation
        without replacement, r_j = floor(u_j (n - j)) mapped to the r_j-th unused index (walk the sorted chosen
        ones: c <= r -> r + 1); slotted: an independent uniform draw per slot pool."""
        K, pools = self.K, self.w.pools
        if pools.layout == "ranked":
            n = int(pools.sizes[0])
            draw = f"CAST(floor({at(column, 'j')} * ({n} - j)) AS INT)"
            return (f"aggregate(sequence(0, {K - 1}), CAST(array() AS ARRAY<INT>), (acc, j) -> concat(acc, array("
                    f"aggregate(array_sort(acc), {draw}, (r, x) -> IF(x <= r, r + 1, r)))))")
        off, size = arr(pools.offsets), arr(pools.sizes)
        return (f"transform(sequence(0, {K - 1}), j -> {at(off, 'j')} + "
                f"CAST(floor({at(column, 'j')} * {at(size, 'j')}) AS INT))")

    def base_slate(self, b: int) -> str:
        base = self.w.bases[b]
        uniform = self.uniform_slate(f"_u_base{b}")
        if base.exploit is None or base.epsilon >= 1.0:
            return uniform
        exploit = f"slice({at('_w_exploit', str(b))}, _c * {self.K} + 1, {self.K})"
        return f"IF(_u_coin{b} < {dbl(base.epsilon)}, {uniform}, {exploit})"

    def chosen(self) -> str:
        weights = self.w.base_weights
        if len(weights) == 1:
            return "0"
        cum = np.cumsum(weights)[:-1]
        cases = " ".join(f"WHEN _u_choose < {dbl(c)} THEN {i}" for i, c in enumerate(cum))
        return f"CASE {cases} ELSE {len(weights) - 1} END"

    def logged_slots(self) -> str:
        """Slots of the logged slate: propensity = (1 - eps) 1[a = e_k(x)] + eps / |pool_k| of the chosen base;
        reward ~ Bernoulli(C_k P(x, a)) from the click draws (click model "cascade": the reward of the first click
        only, r_k = c_k prod_{j<k} (1 - c_j), from the same draws)."""
        K, NA = self.K, self.NA
        eps = arr([b.epsilon for b in self.w.bases], "double")
        unif = arr([1.0 / float(d) for d in self.w.pools.sizes], "double")
        adc = arr(self.w.adc, "double")
        slate_k, eps_c = at("_slate", "k"), at(eps, "_chosen")
        exploit_k = at(at("_w_exploit", "_chosen"), f"_c * {K} + k")
        propensity = (f"(CAST(1 AS DOUBLE) - {eps_c}) * IF({slate_k} = {exploit_k}, CAST(1 AS DOUBLE), "
                      f"CAST(0 AS DOUBLE)) + {eps_c} * {at(unif, 'k')}")
        p = at("_w_p", f"_c * {NA} + {slate_k}")
        reward = f"IF({at('_u_click', 'k')} < {at(adc, 'k')} * {p}, CAST(1 AS DOUBLE), CAST(0 AS DOUBLE))"
        if getattr(self.w.cfg, "click_model", "additive") == "cascade":
            # the same click draws c_j; the user stops at the first: r_k = c_k only if no c_j, j < k
            click_j = f"{at('_u_click', 'j')} < {at(adc, 'j')} * {at('_w_p', f'_c * {NA} + ' + at('_slate', 'j'))}"
            reward = (f"IF(size(filter(sequence(0, k), j -> j < k AND {click_j})) = 0, {reward}, "
                      f"CAST(0 AS DOUBLE))")
        return (f"transform(sequence(0, {K - 1}), k -> named_struct('position', k + 1, "
                f"'ad_id', {at('_w_ad_names', slate_k)}, 'propensity', {propensity}, 'reward', {reward}))")

    def held(self, slots: str) -> str:
        """The logged slots as written (a final projection of ``logged_slots``; the draws and the full slate are
        unchanged): with ``partial_slates`` F > 0 an event is, with probability F, logged as the one slot at a
        uniform position (as the Open Bandit Dataset's rows are); with ``propensities`` False every propensity
        is null."""
        cfg = self.w.cfg
        out = slots
        if not getattr(cfg, "propensities", True):
            out = (f"transform({out}, s -> named_struct('position', s.position, 'ad_id', s.ad_id, "
                   f"'propensity', CAST(NULL AS DOUBLE), 'reward', s.reward))")
        share = float(getattr(cfg, "partial_slates", 0.0))
        if share > 0:
            coin, pos = at("_u_held", "0"), at("_u_held", "1")
            keep = f"CAST(floor({pos} * {self.K}) AS INT) + 1"
            out = f"filter({out}, s -> {coin} >= {dbl(share)} OR s.position = {keep})"
        return out

    def realized(self, slate: str) -> str:
        """Decision slots of a per-event slate (probability-1 choices)."""
        return (f"transform(sequence(0, {self.K - 1}), k -> named_struct('position', k + 1, "
                f"'ad_id', {at('_w_ad_names', at(slate, 'k'))}, 'probability', CAST(1 AS DOUBLE)))")

    def decision_entries(self) -> list[str]:
        """One named_struct(policy_id, slots, base_policy) per built-in target policy. The deterministic ones
        (oracle, most_clicked, oracle_mix) depend on the context only: their slots are world constants
        (``context_slots``) picked by ``_c``, no per-event work."""
        null = "CAST(NULL AS STRING)"
        entries = [f"named_struct('policy_id', '{pid}', 'slots', {at(col, '_c')}, 'base_policy', {null})"
                   for pid, col in (("oracle", "_w_oracle_slots"), ("most_clicked", "_w_most_clicked_slots"))]
        entries.insert(2, f"named_struct('policy_id', 'uniform_random', 'slots', {self.realized('_urand')}, "
                          f"'base_policy', {null})")
        entries.append(f"named_struct('policy_id', 'oracle_mix', 'slots', {at('_w_mix_slots', '_c')}, "
                       f"'base_policy', {null})")
        if self.w.best_base is not None:
            names = arr([b.name for b in self.w.bases], "string")
            best = at("_w_best_base", "_c")
            entries.append(f"named_struct('policy_id', 'best_base', 'slots', "
                           f"{self.realized(at('_slates', best))}, 'base_policy', {at(names, best)})")
        return entries


def context_slots(world: World) -> dict[str, list]:
    """Decision slots of the context-only targets, per context: oracle, most_clicked, and oracle_mix (per position
    mix * oracle + (1 - mix) * most_clicked, equal ads merged)."""
    names, K, mix = world.pools.names, world.cfg.n_positions, float(world.cfg.mix_weight)

    def slot(k, ad, p):
        return {"position": k + 1, "ad_id": names[int(ad)], "probability": float(p)}

    def mixed(o, m):
        out = []
        for k in range(K):
            if mix >= 1.0 or o[k] == m[k]:
                out.append(slot(k, o[k], 1.0))
            else:
                out += [slot(k, o[k], mix), slot(k, m[k], 1.0 - mix)]
        return out
    return {"_w_oracle_slots": [[slot(k, a, 1.0) for k, a in enumerate(row)] for row in world.oracle],
            "_w_most_clicked_slots": [[slot(k, a, 1.0) for k, a in enumerate(row)] for row in world.most_clicked],
            "_w_mix_slots": [mixed(o, m) for o, m in zip(world.oracle, world.most_clicked)]}
