"""Statements over the logs: the one read of a day with every row rule, duplicates, and the clean flat events.

Notation (MATH.md): event t, slot k at position k, ad a_k, logging propensity mu_k, slot reward w_k; the slate
reward r = slate_reward if not null, else the sum of the slot rewards. A row may hold some positions only (h_k says
whether it holds position k): it contributes through the slots it holds.
"""
from __future__ import annotations

from ...checks.rules import (LOG_REASONS, RuleConfig, slot_any, codes_sql, flag, element_columns, key_columns,
                             log_rules, mask_flags, not_nan, reason_mask, slot_extreme)
from .literals import text

CONTRACT_COLUMNS = "event_id, event_time, context_id, context, logging_policy, slots, slate_reward, dt"
CONTEXT_MAP = "from_json(context_json, 'map<string,string>')"   # scv_ev's context_json read back as the map


def id_hash_of(hexed: str) -> str:
    """The first 16 digits of the hex text ``hexed`` as a signed 64-bit integer, equal in both engines: the first
    15 as a number in [0, 2^60), less 2^59, times 16, plus the 16th (the range is exactly BIGINT's: no step
    overflows). The event id hash is that of md5(event_id) (ID_HASH); a store's days written before it hold the hex
    text, which this reads as the same integer. An integer, not the text: a window's stored ids are read and matched
    faster (DuckDB, 3M stored ids against a new day: 0.17 -> 0.04 s; a day's 4M ids written: 0.25 -> 0.05 s)."""
    return (f"(CAST(conv(substr({hexed}, 1, 15), 16, 10) AS BIGINT) - 576460752303423488) * 16 "
            f"+ CAST(conv(substr({hexed}, 16, 1), 16, 10) AS BIGINT)")


ID_HASH = id_hash_of("h")   # h = md5(coalesce(event_id, '')) in events()


def events(cfg: RuleConfig) -> str:
    """scv_ev: the conformed rows, a flag per row rule, an id hash (ID_HASH: the first 16 hex digits of
    md5(event_id) as a BIGINT, equal in both engines) and the cross-fitting fold (the parity of the 16th digit: a
    fair coin per event, fixed by the id). The row rules are one integer, ``reasons`` (checks.rules.reason_mask;
    scv_events reads the flags back).
    The context map is kept as its JSON text, ``context_json`` (one-to-one with the map; CONTEXT_MAP reads it
    back): check a's cells group by that text, and a map costs more to hold than the text costs to write (DuckDB,
    4M events: 0.4 s to hold the maps, the text written once instead of in the cells' statement); CONTEXT_TOO_LONG
    reads its length first (checks.rules.length_rules)."""
    columns = CONTRACT_COLUMNS.replace("context,", "context_json,")
    return f"""
SELECT {columns}, _rid, n_slots, {ID_HASH} AS id_hash,
  CASE WHEN instr('13579bdf', substr(h, 16, 1)) > 0 THEN 1 ELSE 0 END AS fold,
  {reason_mask(log_rules(cfg))} AS reasons
FROM (SELECT scv_logs.*, md5(coalesce(event_id, '')) AS h, coalesce(size(slots), 0) AS n_slots, {element_columns()},
        {key_columns()}, to_json(context) AS context_json
      FROM scv_logs) l"""


def duplicate_ids() -> str:
    """scv_dup_ids: the id hashes that occur more than once in these days (usually none): every repeated event_id,
    and now and then two ids that share a hash (:func:`duplicates` ranks within the id itself, so those are no
    copies). Grouped by the 64-bit hash, not the id text (DuckDB, 4M events: 0.47 -> 0.34 s), in the same one
    read of the flagged events. Materialized on its own, so that Spark knows it is small and broadcasts it to
    :func:`duplicates` instead of shuffling every event (4M events: 8.2 s -> 4.4 s)."""
    return "SELECT id_hash FROM scv_ev WHERE event_id IS NOT NULL GROUP BY id_hash HAVING count(1) > 1"


def duplicates() -> str:
    """scv_dups: the rows whose id hash occurs more than once in these days (scv_dup_ids), ranked within their
    event_id (first = earliest dt, then event_time, logging_policy, context_id, slate_reward; ties by read order),
    with how many rows hold that event_id: a rank above 1 is a later copy, a count above 1 any copy."""
    return """
SELECT _rid,
  row_number() OVER (PARTITION BY event_id ORDER BY dt ASC NULLS LAST, event_time ASC NULLS LAST,
    logging_policy ASC NULLS LAST, context_id ASC NULLS LAST, slate_reward ASC NULLS LAST, _rid) AS dup_rank,
  count(1) OVER (PARTITION BY event_id) AS dup_n
FROM scv_ev
WHERE event_id IS NOT NULL AND id_hash IN (SELECT id_hash FROM scv_dup_ids)"""


def prior_hits() -> str:
    """scv_prior_hits: rows whose id hash another day holds (scv_prior.id_hash: the days before this pass, or with
    quarantine_all every other day, statistics/copies.py). The stored hashes (the
    whole window's) are first narrowed to those of this batch's ids, the small side: Spark can then broadcast it
    instead of shuffling every stored id (3 s of a 31-day window of 100k events a day)."""
    return """
SELECT _rid FROM scv_ev
WHERE event_id IS NOT NULL AND id_hash IN (
  SELECT id_hash FROM scv_prior
  WHERE id_hash IN (SELECT id_hash FROM scv_ev WHERE event_id IS NOT NULL))"""


def events_view(cfg: RuleConfig, with_prior: bool) -> str:
    """scv_events: scv_ev + DUPLICATE_EVENT_ID (keep_first: every copy after the first; quarantine_all: every
    copy) + ``clean`` (no reason at all)."""
    dup = "d._rid IS NOT NULL AND d.dup_rank > 1" if cfg.duplicates == "keep_first" else \
        "d._rid IS NOT NULL AND d.dup_n > 1"
    prior_join = "LEFT JOIN scv_prior_hits p ON e._rid = p._rid" if with_prior else ""
    prior = " OR p._rid IS NOT NULL" if with_prior else ""
    flagged = f"({dup}{prior})"
    others = [c for c in LOG_REASONS if c != "DUPLICATE_EVENT_ID"]
    assert [c for c, _ in log_rules(cfg)] == others
    return f"""
SELECT e.*, {mask_flags(log_rules(cfg), "e.reasons")}, coalesce({flagged}, false) AS {flag('DUPLICATE_EVENT_ID')},
  NOT (e.reasons <> 0 OR coalesce({flagged}, false)) AS clean
FROM scv_ev e LEFT JOIN scv_dups d ON e._rid = d._rid {prior_join}"""


def log_counts(K_cap: int) -> str:
    """Per dt: rows in, rows quarantined, rows per reason, events missing a propensity, and the daily profile the
    great-expectations suite checks (ranges of propensities, rewards, the smallest slate; NaN left out of the
    ranges, rules.not_nan, and counted by its own rule), plus K: the largest position of a clean row (at most
    ``K_cap``), and max_slots: the most slots a clean row holds (the intervals' bounds,
    estimators/rows.weight_and_reward_bounds: a quarantined row's slots are no slots a used row holds)."""
    reasons = ",\n  ".join(f"CAST(sum(CASE WHEN {flag(c)} THEN 1 ELSE 0 END) AS BIGINT) AS {c}" for c in LOG_REASONS)
    return f"""
SELECT dt,
  count(1) AS rows,
  CAST(sum(CASE WHEN clean THEN 0 ELSE 1 END) AS BIGINT) AS quarantined,
  {reasons},
  CAST(sum(CASE WHEN {slot_any("slots", "s.propensity IS NULL")} THEN 1 ELSE 0 END) AS BIGINT)
    AS null_propensity_events,
  min({slot_extreme("min", "slots", not_nan("s.propensity"))}) AS min_propensity,
  max({slot_extreme("max", "slots", not_nan("s.propensity"))}) AS max_propensity,
  min({slot_extreme("min", "slots", not_nan("s.reward"))}) AS min_reward,
  max({slot_extreme("max", "slots", not_nan("s.reward"))}) AS max_reward,
  CAST(min(n_slots) AS BIGINT) AS min_slots, CAST(max(CASE WHEN clean THEN n_slots END) AS BIGINT) AS max_slots,
  max(CASE WHEN clean THEN {slot_extreme("max", "slots", "s.position")} END) AS k_max,
  count(DISTINCT CASE WHEN clean THEN logging_policy END) AS logging_policies
FROM (SELECT scv_events.*, {element_columns()} FROM scv_events) e
GROUP BY dt"""


def quarantined(run_id: str) -> str:
    """The quarantined rows: the contract's columns, their reason codes and the run that set them aside (a context
    map that holds a key twice, CONTEXT_DUPLICATE_KEY, as null: no map can hold it)."""
    return f"""
SELECT event_id, event_time, context_id,
  CASE WHEN {flag('CONTEXT_DUPLICATE_KEY')} THEN CAST(NULL AS MAP<STRING, STRING>) ELSE {CONTEXT_MAP} END AS context,
  logging_policy, slots, slate_reward,
  {codes_sql(LOG_REASONS)} AS reason_codes, {text(run_id)} AS run_id, dt
FROM scv_events WHERE NOT clean"""


def event_ids() -> str:
    """Per day, the id hash of every row with an event id: later days are checked against it (cross-day
    DUPLICATE_EVENT_ID) without reading this day's logs again. Copies flagged within the day are kept too: with
    ``duplicates="quarantine_all"`` every copy is flagged, and a later day's copy must still be caught (a repeated
    hash changes no membership)."""
    return "SELECT dt, id_hash FROM scv_ev WHERE event_id IS NOT NULL"


def ahead_ids(relation: str = "scv_ahead_logs") -> str:
    """quarantine_all's look ahead: (dt, id_hash) of every row with an event id in the conformed logs ``relation``
    of the days about to be scanned, the hash as :func:`events` computes it (ID_HASH of md5(event_id)): one column
    of the logs, read before the passes (statistics/copies.read_ahead)."""
    return f"""
SELECT dt, {ID_HASH} AS id_hash
FROM (SELECT dt, md5(event_id) AS h FROM {relation} WHERE event_id IS NOT NULL) l"""


def _in_order(Kw: int) -> str:
    """The row holds positions 1..n_slots in that order with n_slots <= Kw (most writers' shape): slot k is element
    k, and the row has no slot beyond the wide columns."""
    return " AND ".join([f"n_slots <= {Kw}"] + [f"(n_slots < {k} OR try_element_at(slots, {k}).position = {k})"
                                                for k in range(1, Kw + 1)])


SLOT_FIELDS = ("position", "ad_id", "propensity", "reward")


def wide_slot(k: int, reward: bool = True) -> str:
    """The held slot at wide position k as a struct (position, ad_id, propensity[, reward]); null ad: not held. A
    null reward stays null: the slot's reward is unknown (its row has a slate_reward), not a 0 click, so the
    per-slot statistics leave it out (count(s.reward) impressions with a known reward, sums over them)."""
    fields = [f"'position', {k}", f"'ad_id', a_{k}", f"'propensity', mu_{k}"]
    if reward:
        fields.append(f"'reward', w_{k}")
    return "named_struct(" + ", ".join(fields) + ")"


def extra_slot(var: str = "s", reward: bool = True) -> str:
    """An extra slot (position > Kw, from the list ``xs``) as the struct of :func:`wide_slot`."""
    fields = [f"'position', {var}.position", f"'ad_id', {var}.ad_id", f"'propensity', {var}.propensity"]
    if reward:
        fields.append(f"'reward', {var}.reward")
    return "named_struct(" + ", ".join(fields) + ")"


def held_slots(Kw: int, reward: bool = True) -> str:
    """Every slot a flat row holds (wide columns, then the extras), as structs for an explode; an element whose
    ad_id is null is a wide position the row does not hold (filter on ``s.ad_id IS NOT NULL``)."""
    wide = "array(" + ", ".join(wide_slot(k, reward) for k in range(1, Kw + 1)) + ")"
    return (f"CASE WHEN xs IS NULL THEN {wide} "
            f"ELSE concat({wide}, transform(xs, s -> {extra_slot('s', reward)})) END")


HELD = "a_{k} IS NOT NULL"   # a flat row holds wide position k


def held_text(Kw: int, held: str = HELD, xs: str = "xs") -> str:
    """The positions a row holds as text, e.g. '1,2,3' (the stratum of the direct approach's actions). ``held``:
    whether it holds wide position {k}; ``xs``: its extra slots (elements with a ``position``)."""
    wide = ", ".join(f"CASE WHEN {held.format(k=k)} THEN '{k}' END" for k in range(1, Kw + 1))
    extra = f"CASE WHEN {xs} IS NOT NULL THEN array_join(transform({xs}, s -> CAST(s.position AS STRING)), ',') END"
    return f"concat_ws(',', {wide}, {extra})"


NO_AD = "~n"   # the slate key's value for a position a deterministic target leaves empty: no key_ad is this text


def key_ad(ad: str) -> str:
    """An ad id as it enters a slate key: '~' -> '~~' and '|' -> '~p' when it holds either (ids without them, nearly
    all, are kept as they are), so that 'k:ad|...' reads back one way whatever the ids hold ('a|2:b' at 1 and 'c'
    at 2 is not 'a' at 1 and 'b|2:c' at 2), and no id becomes NO_AD."""
    return (f"CASE WHEN instr({ad}, '|') > 0 OR instr({ad}, '~') > 0 "
            f"THEN replace(replace({ad}, '~', '~~'), '|', '~p') ELSE {ad} END")


def slate_key(Kw: int, ad: str = "a_{k}", held: str = HELD, xs: str = "xs", field: str = "ad_id") -> str:
    """A slate on the held positions as text 'k:ad|...' in position order (ads as :func:`key_ad`, NO_AD where
    ``ad`` is null): the scavenging action. ``ad``: the ad at wide position {k} (the logged one by default, or a
    target's); ``xs``/``field``: the extra slots and which of their fields is the ad."""
    wide = ", ".join(f"CASE WHEN {held.format(k=k)} THEN concat('{k}:', "
                     f"coalesce({key_ad(ad.format(k=k))}, '{NO_AD}')) END" for k in range(1, Kw + 1))
    extra = (f"CASE WHEN {xs} IS NOT NULL THEN array_join(transform({xs}, s -> concat(CAST(s.position AS STRING), "
             f"':', coalesce({key_ad(f's.{field}')}, '{NO_AD}'))), '|') END")
    return f"concat_ws('|', {wide}, {extra})"


def logged_set(Kw: int) -> str:
    """The logged ads, sorted (a target showing the same set re-orders the slate)."""
    wide = "array_compact(array(" + ", ".join(f"a_{k}" for k in range(1, Kw + 1)) + "))"
    return (f"CASE WHEN xs IS NULL THEN array_sort({wide}) "
            f"ELSE array_sort(concat({wide}, transform(xs, s -> s.ad_id))) END")


def largest_held(Kw: int) -> str:
    """The largest position a flat row holds."""
    wide = [f"CASE WHEN a_{k} IS NOT NULL THEN {k} END" for k in range(1, Kw + 1)]
    return f"coalesce(array_max(transform(xs, s -> s.position)), {_greatest(wide)})"


def row_positions() -> str:
    """scv_positions: clean rows per largest position held (Kw, the wide part of the flat relation, follows it)."""
    return """
SELECT k_row, count(1) AS n
FROM (SELECT array_max(transform(slots, s -> s.position)) AS k_row FROM scv_events WHERE clean) r
GROUP BY k_row"""


def flat(Kw: int) -> str:
    """scv_flat_slots: clean events with the slots at positions 1..Kw as structs s_k, and ``xs``, the slots beyond
    Kw in position order (null for a row that holds none: nearly every row, see :func:`wide_positions`)."""
    slots = ",\n  ".join(f"CASE WHEN in_order THEN try_element_at(slots, {k}) "
                         f"ELSE try_element_at(filter(slots, s -> s.position = {k}), 1) END AS s_{k}"
                         for k in range(1, Kw + 1))
    xs = (f"CASE WHEN in_order THEN NULL WHEN array_max(transform(slots, s -> s.position)) > {Kw} "
          f"THEN array_sort(filter(slots, s -> s.position > {Kw})) END AS xs")
    return f"""
SELECT dt, event_id, logging_policy, context_id, context_json, fold, n_slots, slate_reward,
  {slots + "," if Kw else ""}
  {xs}
FROM (SELECT scv_events.*, {_in_order(Kw) if Kw else "n_slots = 0"} AS in_order FROM scv_events WHERE clean) e"""


def _greatest(terms: list) -> str:
    """greatest(...) of the terms; the term itself when there is one (Spark's greatest needs two arguments)."""
    return f"greatest({', '.join(terms)})" if len(terms) > 1 else (terms[0] if terms else "CAST(NULL AS INT)")


def flat_columns(Kw: int, stratum: str = "context_id") -> str:
    """scv_flat over scv_flat_slots (see :func:`flat`): narrow scalar columns for the wide positions (``a_k`` ad,
    ``mu_k`` propensity, ``w_k`` reward; a null ``a_k`` means the row does not hold position k: a clean row has no
    null ad), ``xs`` for the rest, and the per-event values every table reads:
      r        slate reward (slate_reward, else the sum of the held slots' rewards, a null reward counting 0)
      miss     a held slot lacks its propensity (the event cannot enter importance weights)
      stratum  check e's calibration scope key (only when it is not context_id)"""
    ks = range(1, Kw + 1)
    cols = []
    for k in ks:
        cols += [f"s_{k}.ad_id AS a_{k}", f"s_{k}.propensity AS mu_{k}", f"s_{k}.reward AS w_{k}"]
    wsum = " + ".join([f"coalesce(s_{k}.reward, 0D)" for k in ks]
                      + ["coalesce(aggregate(xs, 0D, (acc, s) -> acc + coalesce(s.reward, 0D)), 0D)"])
    miss = " OR ".join([f"(s_{k} IS NOT NULL AND s_{k}.propensity IS NULL)" for k in ks]
                       + ["coalesce(size(filter(xs, s -> s.propensity IS NULL)) > 0, false)"])
    extra = "" if stratum == "context_id" else f"coalesce(CAST({stratum} AS STRING), '<null>') AS stratum,\n  "
    return f"""
SELECT dt, event_id, logging_policy, context_id, fold, n_slots,
  {extra}{", ".join(cols) + "," if cols else ""}
  xs,
  coalesce(slate_reward, {wsum}) AS r,
  {miss} AS miss
FROM scv_flat_slots"""
