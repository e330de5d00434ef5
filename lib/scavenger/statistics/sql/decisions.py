"""Statements over the decisions: the one join of a day's decisions to its clean events, with every decision rule.

Per (policy, event): pi_k(a|x) is the target's probability of ad a at position k. For the logged ad a_k of a held
slot k, Y_k = pi_k(a_k|x) / mu_k(a_k|x); for a position the row does not hold, Y_k = 1 (the row says nothing about
that slot: it leaves both W = prod_k Y_k and G = 1 - K + sum_k Y_k as if the slot were not there), so a partial
slate contributes through the slots it holds (seed 002 with a factorized logger; a one-slot row at position p gives
r pi_p(a)/mu_p(a), the per-row inverse-propensity weight).
"""
from __future__ import annotations

from ...checks.rules import (DECISION_REASONS, RuleConfig, any_flag_sql, codes_sql, decision_rules, flag,
                             flag_columns, sum_deviation_sql)


def qkeys() -> str:
    """scv_qkeys: (event_id, dt) of quarantined log rows (usually few): a decision for one is EVENT_QUARANTINED."""
    return "SELECT DISTINCT event_id, dt FROM scv_events WHERE NOT clean AND event_id IS NOT NULL"


def _target(k: int, K: int) -> dict:
    """Expressions of the target at position k: its probability of the logged ad (pi), its ad when deterministic
    (t). ``simple``: the decision holds one entry per position 1..K (the common shape), read by index."""
    lookup = (f"aggregate(filter(dslots, x -> x.position = {k} AND x.ad_id = a_{k}), 0D, "
              f"(acc, x) -> acc + x.probability)")
    pi = (f"CASE WHEN NOT h_{k} THEN NULL WHEN simple THEN CASE WHEN try_element_at(dslots, {k}).ad_id = a_{k} "
          f"THEN try_element_at(dslots, {k}).probability ELSE 0D END ELSE {lookup} END")
    t = (f"CASE WHEN simple THEN try_element_at(dslots, {k}).ad_id ELSE "
         f"try_element_at(filter(dslots, x -> x.position = {k} AND x.probability > 0), 1).ad_id END")
    return {"pi": pi, "t": t}


def joined(cfg: RuleConfig, K: int) -> str:
    """scv_joined: every decision row of the day, its rule flags, its event's clean flat columns (left join on
    (event_id, dt): the one join), DUPLICATE_DECISION (rows after the first read of a (policy_id, event_id); all of
    them with quarantine_all) from a count of the repeated keys joined back, and the per-(event, policy) values:
    pi_k, Y_k, det (deterministic), tkey (the target's slate on the held positions), tset (its ads)."""
    ks = range(1, K + 1)
    ev_cols = ["logging_policy", "fold", "held", "r", "clicked", "miss", "lkey", "lset"]
    ev_cols += [f"{c}_{k}" for k in ks for c in ("a", "mu", "w", "h")]
    dup = "k.first_rid <> d._rid" if cfg.duplicates == "keep_first" else "k.dup_n > 1"
    simple = " AND ".join([f"size(dslots) = {K}"] + [f"try_element_at(dslots, {k}).position = {k}" for k in ks]) \
        if K else "false"
    targets = {k: _target(k, K) for k in ks}
    pis = "".join(f",\n    {targets[k]['pi']} AS pi_{k}" for k in ks)
    ts = "".join(f",\n    {targets[k]['t']} AS t_{k}" for k in ks)
    ys = "".join(f",\n  CASE WHEN NOT h_{k} THEN 1D ELSE try_divide(pi_{k}, mu_{k}) END AS Y_{k}" for k in ks)
    tkey = ", ".join(f"CASE WHEN h_{k} THEN concat('{k}:', coalesce(t_{k}, '<none>')) END" for k in ks)
    det_simple = " AND ".join(f"try_element_at(dslots, {k}).probability = 1D" for k in ks) or "true"
    simple_dev = "greatest(" + ", ".join(f"abs(try_element_at(dslots, {k}).probability - 1D)" for k in ks) + \
        (", 0D)" if K else "0D)")
    tset_simple = "array_sort(array(" + ", ".join(f"try_element_at(dslots, {k}).ad_id" for k in ks) + "))" \
        if K else "CAST(array() AS ARRAY<STRING>)"
    dec_flags = [flag(c) for c, _ in decision_rules(cfg)]
    keep = ", ".join(["policy_id", "event_id", "dt", "base_policy", "dslots", "simple", "ev_clean", "sum_dev",
                      *dec_flags, flag("DUPLICATE_DECISION"), flag("UNKNOWN_EVENT"), flag("EVENT_QUARANTINED"),
                      flag("PROBABILITY_SUM"), *ev_cols])
    # the narrow result: a one-entry-per-position decision travels as d_a_k, d_p_k; only other shapes keep the list
    out = [c for c in keep.split(", ") if c != "dslots"] + ["clean", *[f"pi_{k}" for k in ks],
                                                            *[f"t_{k}" for k in ks], "det", "tset"]
    out += ["CASE WHEN simple THEN NULL ELSE dslots END AS dslots"]
    out += [f"CASE WHEN simple THEN try_element_at(dslots, {k}).ad_id END AS d_a_{k}" for k in ks]
    out += [f"CASE WHEN simple THEN try_element_at(dslots, {k}).probability END AS d_p_{k}" for k in ks]
    return f"""
WITH d AS (
  SELECT policy_id, event_id, dt, base_policy, _rid, sort_array(slots) AS dslots,
    {flag_columns(decision_rules(cfg))}
  FROM scv_dec
), k AS (
  SELECT event_id, dt, policy_id, count(1) AS dup_n, min(_rid) AS first_rid
  FROM scv_dec WHERE event_id IS NOT NULL AND dt IS NOT NULL AND policy_id IS NOT NULL
  GROUP BY event_id, dt, policy_id HAVING count(1) > 1
), j AS (
  SELECT d.*, {simple} AS simple, e.event_id IS NOT NULL AS ev_clean,
    {", ".join(f"e.{c}" for c in ev_cols)},
    coalesce({dup}, false) AS {flag('DUPLICATE_DECISION')},
    d.event_id IS NOT NULL AND e.event_id IS NULL AND q.event_id IS NULL AS {flag('UNKNOWN_EVENT')},
    e.event_id IS NULL AND q.event_id IS NOT NULL AS {flag('EVENT_QUARANTINED')}
  FROM d LEFT JOIN scv_flat e ON d.event_id = e.event_id AND d.dt = e.dt
  LEFT JOIN scv_qkeys q ON d.event_id = q.event_id AND d.dt = q.dt
  LEFT JOIN k ON d.event_id = k.event_id AND d.dt = k.dt AND d.policy_id = k.policy_id
), f AS (
  SELECT j.*, CASE WHEN simple THEN {simple_dev} ELSE {sum_deviation_sql('dslots')} END AS sum_dev
  FROM j
), g AS (
  SELECT f.*, coalesce(sum_dev > {float(cfg.sum_tolerance)!r}, false) AS {flag('PROBABILITY_SUM')}
  FROM f
), p AS (
  SELECT {keep},
    NOT ({any_flag_sql(DECISION_REASONS)}) AS clean{pis}{ts},
    CASE WHEN simple THEN {det_simple}
         ELSE size(filter(dslots, x -> x.probability > 0 AND x.probability < 1)) = 0 END AS det,
    CASE WHEN simple THEN {tset_simple}
         ELSE array_sort(transform(filter(dslots, x -> x.probability > 0), x -> x.ad_id))
    END AS tset
  FROM g
)
SELECT {", ".join(out)}{ys},
  concat_ws('|', {tkey or "''"}) AS tkey
FROM p"""


def _d_p(K: int) -> str:
    return ", ".join(f"d_p_{k}" for k in range(1, K + 1)) or "CAST(NULL AS DOUBLE)"


def _fold(fn: str, K: int) -> str:
    """least/greatest of d_p_1..d_p_K; d_p_1 itself for one slot (Spark's least/greatest need two arguments)."""
    return f"{fn}({_d_p(K)})" if K > 1 else _d_p(K)


def decision_slots(K: int) -> str:
    """The decision's entries as an array of (position, ad_id, probability) structs: rebuilt from d_a_k, d_p_k
    for a one-entry-per-position decision (exactly its sorted entries), the stored list otherwise."""
    rebuilt = ", ".join(f"named_struct('position', {k}, 'ad_id', d_a_{k}, 'probability', d_p_{k})"
                        for k in range(1, K + 1))
    return f"CASE WHEN simple THEN array({rebuilt}) ELSE dslots END" if K else "dslots"


def decision_counts(K: int) -> str:
    """Per dt: rows in, quarantined, rows per reason, the daily profile (probability range, largest deviation of
    a position's probabilities from 1) and the number of target policies."""
    reasons = ",\n  ".join(f"CAST(sum(CASE WHEN {flag(c)} THEN 1 ELSE 0 END) AS BIGINT) AS {c}"
                           for c in DECISION_REASONS)
    return f"""
SELECT dt, count(1) AS rows,
  CAST(sum(CASE WHEN clean THEN 0 ELSE 1 END) AS BIGINT) AS quarantined,
  {reasons},
  min(CASE WHEN simple THEN {_fold('least', K)} ELSE array_min(transform(dslots, x -> x.probability)) END)
    AS min_probability,
  max(CASE WHEN simple THEN {_fold('greatest', K)} ELSE array_max(transform(dslots, x -> x.probability)) END)
    AS max_probability,
  max(sum_dev) AS max_sum_deviation,
  count(DISTINCT policy_id) AS policies
FROM scv_joined GROUP BY dt"""


def quarantined(run_id: str, K: int) -> str:
    rid = run_id.replace("'", "''")
    return f"""
SELECT policy_id, event_id, {decision_slots(K)} AS slots, base_policy, {codes_sql(DECISION_REASONS)} AS reason_codes,
  '{rid}' AS run_id, dt
FROM scv_joined WHERE NOT clean"""


def policy_count() -> str:
    """Distinct target policies in the decisions read (before any join): bounds the cost of what follows."""
    return "SELECT count(DISTINCT policy_id) AS policies FROM scv_dec"
