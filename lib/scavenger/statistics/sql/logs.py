"""Statements over the logs: the one read of a day with every row rule, duplicates, and the clean flat events.

Notation (MATH.md): event t, slot k at position k, ad a_k, logging propensity mu_k, slot reward w_k; the slate
reward r = slate_reward if not null, else the sum of the slot rewards. A row may hold some positions only (h_k says
whether it holds position k): it contributes through the slots it holds.
"""
from __future__ import annotations

from ...checks.rules import LOG_REASONS, RuleConfig, any_flag_sql, codes_sql, flag, flag_columns, log_rules

CONTRACT_COLUMNS = "event_id, event_time, context_id, context, logging_policy, slots, slate_reward, dt"


def events(cfg: RuleConfig) -> str:
    """scv_ev: the conformed rows, a flag per row rule, an id hash (the first 16 hex digits of md5(event_id): equal
    in both engines) and the cross-fitting fold (the parity of its last digit: a fair coin per event, fixed by the
    id)."""
    return f"""
SELECT {CONTRACT_COLUMNS}, _rid, n_slots, substr(h, 1, 16) AS id_hash,
  CASE WHEN instr('13579bdf', substr(h, 16, 1)) > 0 THEN 1 ELSE 0 END AS fold,
  {flag_columns(log_rules(cfg))}
FROM (SELECT scv_logs.*, md5(coalesce(event_id, '')) AS h, coalesce(size(slots), 0) AS n_slots FROM scv_logs) l"""


def duplicates() -> str:
    """scv_dups: the rows whose event_id occurs more than once in these days, ranked within the id (first =
    earliest dt, then event_time, logging_policy, context_id, slate_reward; ties by read order)."""
    return """
SELECT _rid,
  row_number() OVER (PARTITION BY event_id ORDER BY dt ASC NULLS LAST, event_time ASC NULLS LAST,
    logging_policy ASC NULLS LAST, context_id ASC NULLS LAST, slate_reward ASC NULLS LAST, _rid) AS dup_rank
FROM scv_ev
WHERE event_id IN (SELECT event_id FROM scv_ev WHERE event_id IS NOT NULL GROUP BY event_id HAVING count(1) > 1)"""


def prior_hits() -> str:
    """scv_prior_hits: rows whose id hash is in an earlier stored day (scv_prior.id_hash)."""
    return """
SELECT _rid FROM scv_ev
WHERE event_id IS NOT NULL AND id_hash IN (SELECT id_hash FROM scv_prior)"""


def events_view(cfg: RuleConfig, with_prior: bool) -> str:
    """scv_events: scv_ev + DUPLICATE_EVENT_ID (keep_first: every copy after the first; quarantine_all: every
    copy) + ``clean`` (no reason at all)."""
    dup = "d._rid IS NOT NULL AND d.dup_rank > 1" if cfg.duplicates == "keep_first" else "d._rid IS NOT NULL"
    prior_join = "LEFT JOIN scv_prior_hits p ON e._rid = p._rid" if with_prior else ""
    prior = " OR p._rid IS NOT NULL" if with_prior else ""
    flagged = f"({dup}{prior})"
    others = [c for c in LOG_REASONS if c != "DUPLICATE_EVENT_ID"]
    return f"""
SELECT e.*, coalesce({flagged}, false) AS {flag('DUPLICATE_EVENT_ID')},
  NOT ({any_flag_sql(others)} OR coalesce({flagged}, false)) AS clean
FROM scv_ev e LEFT JOIN scv_dups d ON e._rid = d._rid {prior_join}"""


def log_counts(K_cap: int) -> str:
    """Per dt: rows in, rows quarantined, rows per reason, events missing a propensity, and the daily profile the
    great-expectations suite checks (ranges of propensities, rewards, slate sizes), plus K: the largest position
    of a clean row (at most ``K_cap``)."""
    reasons = ",\n  ".join(f"CAST(sum(CASE WHEN {flag(c)} THEN 1 ELSE 0 END) AS BIGINT) AS {c}" for c in LOG_REASONS)
    return f"""
SELECT dt,
  count(1) AS rows,
  CAST(sum(CASE WHEN clean THEN 0 ELSE 1 END) AS BIGINT) AS quarantined,
  {reasons},
  CAST(sum(CASE WHEN size(filter(slots, s -> s.propensity IS NULL)) > 0 THEN 1 ELSE 0 END) AS BIGINT)
    AS null_propensity_events,
  min(array_min(transform(slots, s -> s.propensity))) AS min_propensity,
  max(array_max(transform(slots, s -> s.propensity))) AS max_propensity,
  min(array_min(transform(filter(slots, s -> NOT isnan(s.reward)), s -> s.reward))) AS min_reward,
  max(array_max(transform(filter(slots, s -> NOT isnan(s.reward)), s -> s.reward))) AS max_reward,
  CAST(min(n_slots) AS BIGINT) AS min_slots, CAST(max(n_slots) AS BIGINT) AS max_slots,
  max(CASE WHEN clean THEN array_max(transform(slots, s -> s.position)) END) AS k_max,
  count(DISTINCT CASE WHEN clean THEN logging_policy END) AS logging_policies
FROM scv_events
GROUP BY dt"""


def quarantined(run_id: str) -> str:
    """The quarantined rows: the contract's columns, their reason codes and the run that set them aside."""
    rid = run_id.replace("'", "''")
    return f"""
SELECT event_id, event_time, context_id, context, logging_policy, slots, slate_reward,
  {codes_sql(LOG_REASONS)} AS reason_codes, '{rid}' AS run_id, dt
FROM scv_events WHERE NOT clean"""


def event_ids() -> str:
    """Per day, the id hash of every first copy of an event: later days are checked against it (cross-day
    DUPLICATE_EVENT_ID) without reading this day's logs again."""
    return f"SELECT dt, id_hash FROM scv_events WHERE event_id IS NOT NULL AND NOT {flag('DUPLICATE_EVENT_ID')}"


def _in_order(K: int) -> str:
    """The row holds exactly positions 1..K, in that order (most writers' shape): slot k is element k."""
    return " AND ".join([f"n_slots = {K}"] + [f"try_element_at(slots, {k}).position = {k}" for k in range(1, K + 1)])


def slot_structs(K: int, reward: bool = True) -> str:
    """The held slots of a flat row as an array of structs (position, ad_id, propensity[, reward], h) for an
    explode: built from the slot columns, so no list travels with the rows."""
    parts = []
    for k in range(1, K + 1):
        fields = [f"'position', {k}", f"'ad_id', a_{k}", f"'propensity', mu_{k}"]
        if reward:
            fields.append(f"'reward', coalesce(w_{k}, 0D)")
        fields.append(f"'h', h_{k}")
        parts.append("named_struct(" + ", ".join(fields) + ")")
    return "array(" + ", ".join(parts) + ")"


def _slot(k: int) -> str:
    """The slot at position k: element k when the row is in order, else the element with position k (positions are
    distinct in a clean row)."""
    return (f"CASE WHEN in_order THEN try_element_at(slots, {k}) "
            f"ELSE try_element_at(filter(slots, s -> s.position = {k}), 1) END")


def flat(K: int) -> str:
    """scv_flat_slots, then scv_flat: clean events with slot k as columns (``a_k`` ad, ``mu_k`` propensity,
    ``w_k`` reward, ``h_k`` held) and the per-event values every table reads:
      r      slate reward (slate_reward, else the sum of the held slots' rewards, a null reward counting 0)
      miss   a held slot lacks its propensity (the event cannot enter importance weights)
      lkey   the logged (partial) slate as text 'k:ad|...': the scavenging action
      held   the positions the row holds, e.g. '1,2,3' (a row holding all K positions: the full slate)
      lset   the logged ads, sorted (a target showing the same set re-orders the slate)
      k_held the largest position the row holds"""
    slots = ",\n  ".join(f"{_slot(k)} AS s_{k}" for k in range(1, K + 1))
    return f"""
SELECT dt, event_id, logging_policy, context_id, context, fold, n_slots, slate_reward,
  {slots}
FROM (SELECT scv_events.*, {_in_order(K) if K else "false"} AS in_order FROM scv_events WHERE clean) e"""


def _greatest(terms: list) -> str:
    """greatest(...) of the terms; the term itself when there is one (Spark's greatest needs two arguments)."""
    return f"greatest({', '.join(terms)})" if len(terms) > 1 else (terms[0] if terms else "CAST(NULL AS INT)")


def flat_columns(K: int, keys: bool = True, stratum: str = "context_id") -> str:
    """scv_flat over scv_flat_slots (see :func:`flat`): scalar columns only (every slot of a clean row is one of
    the K slot columns), so the relation the tables read is narrow. ``keys``: the slate key lkey (the direct
    approach's tables need it; building it is the costliest string work of the pass); ``stratum``: the column of
    check e's calibration scope key."""
    ks = range(1, K + 1)
    cols = []
    for k in ks:
        cols += [f"s_{k}.ad_id AS a_{k}", f"s_{k}.propensity AS mu_{k}", f"s_{k}.reward AS w_{k}",
                 f"s_{k} IS NOT NULL AS h_{k}"]
    wsum = " + ".join(f"coalesce(s_{k}.reward, 0D)" for k in ks) or "0D"
    miss = " OR ".join(f"(s_{k} IS NOT NULL AND s_{k}.propensity IS NULL)" for k in ks) or "false"
    nnull = " + ".join(f"CASE WHEN s_{k} IS NOT NULL AND s_{k}.reward IS NULL THEN 1 ELSE 0 END" for k in ks) or "0"
    click = " OR ".join(f"coalesce(s_{k}.reward, 0D) <> 0D" for k in ks) or "false"
    lkey = ", ".join(f"CASE WHEN s_{k} IS NOT NULL THEN concat('{k}:', s_{k}.ad_id) END" for k in ks)
    held = ", ".join(f"CASE WHEN s_{k} IS NOT NULL THEN '{k}' END" for k in ks)
    ads = ", ".join(f"s_{k}.ad_id" for k in ks)
    return f"""
SELECT dt, event_id, logging_policy, context_id, fold, n_slots,
  coalesce(CAST({stratum} AS STRING), '<null>') AS stratum,
  {", ".join(cols)},
  coalesce(slate_reward, {wsum}) AS r,
  {miss} AS miss,
  {nnull} AS n_null_reward,
  {click} AS clicked,
  {f"concat_ws('|', {lkey})" if keys and K else "CAST(NULL AS STRING)"} AS lkey,
  {f"concat_ws(',', {held})" if K else "''"} AS held,
  {f"array_sort(array_compact(array({ads})))" if K else "CAST(array() AS ARRAY<STRING>)"} AS lset,
  {_greatest([f'CASE WHEN s_{k} IS NOT NULL THEN {k} END' for k in ks])} AS k_held
FROM scv_flat_slots"""
