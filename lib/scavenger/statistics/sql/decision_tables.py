"""Per-day tables over the joined decisions (scv_joined, clean rows): every target policy in one aggregation each.

Notation: Y_k = pi_k(a_k|x)/mu_k(a_k|x) (1 for a position the row does not hold), W = prod_k Y_k, r the slate
reward (MATH.md "Slate OPE"); q_j = pi(ad at position j | x) for a logged slot's ad (MATH.md "Factored")."""
from __future__ import annotations


def _product(factors, K: int) -> str:
    terms = []
    for f in factors:
        if f == "1":
            continue
        if f == "W":
            terms.append("(" + " * ".join(f"Y_{k}" for k in range(1, K + 1)) + ")")
        elif f.startswith("Y"):
            terms.append(f"Y_{f[1:]}")
        else:
            terms.append(f)
    return " * ".join(terms) if terms else "1D"


def moment_columns(K: int) -> str:
    """The slate moments' sums, generated from their declaration (estimators/slate_moments.py ``moment_terms``), over the
    events with every held propensity (``NOT miss``; ``n_missing_propensity`` counts the others)."""
    from ...estimators.slate_moments import moment_terms

    cols = []
    for alias, agg, factors in moment_terms(K):
        if alias == "n_missing_propensity":
            cols.append("CAST(sum(CASE WHEN miss THEN 1 ELSE 0 END) AS BIGINT) AS n_missing_propensity")
            continue
        prod = _product(factors, K)
        if alias == "n":
            cols.append("CAST(sum(CASE WHEN miss THEN 0 ELSE 1 END) AS BIGINT) AS n")
        elif agg == "sum":
            cols.append(f"sum(CASE WHEN miss THEN NULL ELSE {prod} END) AS {alias}")
        elif agg == "count_pos":
            cols.append(f"CAST(sum(CASE WHEN NOT miss AND {prod} > 0 THEN 1 ELSE 0 END) AS BIGINT) AS {alias}")
        elif agg == "max":
            cols.append(f"max(CASE WHEN miss THEN NULL ELSE {prod} END) AS {alias}")
        else:  # pragma: no cover - the declaration has no other kind
            raise ValueError(f"unknown moment aggregation {agg!r} for {alias}")
    return ",\n  ".join(cols)


def policy_groups(K: int) -> str:
    """(dt, policy_id, logging_policy, base_policy, fold): n_all (events with a decision), n_det (deterministic),
    n_reorder (deterministic re-orderings of the logged ads), s_r_all, s_r2_all, n_partial, and the slate moments.
    Split on the driver into policy_events, base_targets and slate_moments (``statistics/tables.py``)."""
    full = ",".join(str(k) for k in range(1, K + 1))
    return f"""
SELECT dt, policy_id, logging_policy, base_policy, fold,
  count(1) AS n_all,
  CAST(sum(CASE WHEN det THEN 1 ELSE 0 END) AS BIGINT) AS n_det,
  CAST(sum(CASE WHEN det AND tset = lset THEN 1 ELSE 0 END) AS BIGINT) AS n_reorder,
  CAST(sum(CASE WHEN held = '{full}' THEN 0 ELSE 1 END) AS BIGINT) AS n_partial,
  sum(r) AS s_r_all, sum(r * r) AS s_r2_all,
  {moment_columns(K)}
FROM scv_joined WHERE clean
GROUP BY dt, policy_id, logging_policy, base_policy, fold"""


def slate_targets() -> str:
    """(dt, policy_id, held, slate_key) for deterministic targets, keyed by the slate the target shows on the held
    positions: n_target (events), n_match (logged slate = target's), s_r, s_r2 (sums of r, r^2 over matches)."""
    return """
SELECT dt, policy_id, held, tkey AS slate_key, count(1) AS n_target,
  CAST(sum(CASE WHEN tkey = lkey THEN 1 ELSE 0 END) AS BIGINT) AS n_match,
  sum(CASE WHEN tkey = lkey THEN r ELSE 0D END) AS s_r,
  sum(CASE WHEN tkey = lkey THEN r * r ELSE 0D END) AS s_r2
FROM scv_joined WHERE clean AND det
GROUP BY dt, policy_id, held, tkey"""


def _q(j: int) -> str:
    """q_j = pi(the slot's ad at position j | x) (entries with probability > 0)."""
    return (f"CASE WHEN simple THEN CASE WHEN d_a_{j} = s.ad_id AND d_p_{j} > 0 THEN d_p_{j} ELSE 0D END "
            f"ELSE aggregate(filter(dslots, x -> x.position = {j} AND x.ad_id = s.ad_id AND x.probability > 0), "
            f"0D, (acc, x) -> acc + x.probability) END")


def factored(K: int) -> str:
    """(dt, policy_id, ad_id, pos_i) over logged slots with a nonzero reward: s_rp_j = sum r q_j, s_r2p_j =
    sum r^2 q_j, s_r2pp_j_j2 = sum r^2 q_j q_j2 (j <= j2); unpivoted on the driver into the ``factored`` and
    ``factored_sq`` tables (seed 001 section 4.2)."""
    from .logs import slot_structs

    ks = range(1, K + 1)
    qs = ", ".join(f"{_q(j)} AS q_{j}" for j in ks)
    d_cols = ", ".join(f"d_a_{k}, d_p_{k}" for k in ks)
    slots = slot_structs(K)
    sums = [f"sum(rew * q_{j}) AS s_rp_{j}" for j in ks] + [f"sum(rew * rew * q_{j}) AS s_r2p_{j}" for j in ks]
    sums += [f"sum(rew * rew * q_{j} * q_{j2}) AS s_r2pp_{j}_{j2}" for j in ks for j2 in ks if j2 >= j]
    return f"""
SELECT dt, policy_id, ad_id, pos_i, {", ".join(sums)}
FROM (
  SELECT dt, policy_id, s.ad_id AS ad_id, s.position AS pos_i, coalesce(s.reward, 0D) AS rew, {qs}
  FROM (SELECT dt, policy_id, simple, dslots, {d_cols}, explode({slots}) AS s
        FROM scv_joined WHERE clean AND clicked) x
  WHERE s.h AND s.reward <> 0D
) q
GROUP BY dt, policy_id, ad_id, pos_i"""


def target_placements(K: int) -> str:
    """(dt, policy_id, logging_policy, ad_id, pos_j): s_p = sum over events of pi(ad at j | x), the target's
    expected placements (with T_a: its mass on ads never logged; checks b and c: its mass per logging policy).
    Events with the same decision are counted first, so a target that repeats its slates explodes each once."""
    from .decisions import decision_slots

    d_cols = ", ".join(f"d_a_{k}, d_p_{k}" for k in range(1, K + 1))
    keys = f"dt, policy_id, logging_policy, simple, dslots{', ' + d_cols if d_cols else ''}"
    return f"""
SELECT dt, policy_id, logging_policy, x.ad_id AS ad_id, x.position AS pos_j, sum(x.probability * n) AS s_p
FROM (
  SELECT dt, policy_id, logging_policy, n, explode({decision_slots(K)}) AS x
  FROM (SELECT {keys}, count(1) AS n FROM scv_joined WHERE clean GROUP BY {keys}) d
) e
WHERE x.probability > 0
GROUP BY dt, policy_id, logging_policy, x.ad_id, x.position"""
