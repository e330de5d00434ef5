"""Statements over the decisions: the one join of a day's decisions to its clean events, with every decision rule.

Per (policy, event): pi_k(a|x) is the target's probability of ad a at position k. For the logged ad a_k of a held
slot k, Y_k = pi_k(a_k|x) / mu_k(a_k|x); for a position the row does not hold, Y_k = 1 (the row says nothing about
that slot: it leaves both W = prod_k Y_k and G = 1 - K + sum_k Y_k as if the slot were not there), so a partial
slate contributes through the slots it holds (seed 002 with a factorized logger; a one-slot row at position p gives
r pi_p(a)/mu_p(a), the per-row inverse-propensity weight).
"""
from __future__ import annotations

from ...checks.rules import (DECISION_KEYED, DECISION_REASONS, RuleConfig, any_flag_sql, codes_sql, decision_rules,
                             element_columns, flag, mask_flags, not_nan, reason_mask, sum_deviation_sql)
from .literals import text


def qkeys() -> str:
    """scv_qkeys: (event_id, dt) of quarantined log rows (usually few): a decision for one is EVENT_QUARANTINED.
    Materialized, like :func:`duplicate_decisions`, so that Spark broadcasts it to the join."""
    return "SELECT DISTINCT event_id, dt FROM scv_events WHERE NOT clean AND event_id IS NOT NULL"


_KEYED = "event_id IS NOT NULL AND dt IS NOT NULL AND policy_id IS NOT NULL"


def duplicate_decision_hashes() -> str:
    """scv_dup_dec_hashes: the hashes of (event_id, dt, policy_id) that occur more than once: every repeated key,
    and keys that only share a hash. Integers grouped instead of three keys (16M decisions on DuckDB: 2.8 s ->
    1.3-1.9 s; Spark the same); :func:`duplicate_decisions` then compares the keys themselves, so either engine's
    ``hash`` gives the same result. Two hashes of the key (its fields in two orders): Spark's ``hash`` has 32 bits,
    so 4M keys already share about 1,900 of them by chance and 32M about 119,000; with 64 bits the table is empty
    when no key repeats and the decisions need no second read (scan.py)."""
    return f"""
SELECT hash(event_id, dt, policy_id) AS hk, hash(policy_id, event_id, dt) AS hk2 FROM scv_dec WHERE {_KEYED}
GROUP BY hash(event_id, dt, policy_id), hash(policy_id, event_id, dt) HAVING count(1) > 1"""


def repeated_hash_count() -> str:
    """How many hashes scv_dup_dec_hashes holds: 0 lets :func:`duplicate_decisions` skip the second read."""
    return "SELECT count(1) AS n FROM scv_dup_dec_hashes"


def duplicate_decisions(repeats: bool = True) -> str:
    """scv_dup_dec: the (event_id, dt, policy_id) keys read more than once (usually none), how often and the first
    row read, counted among the rows whose hash repeats. Materialized on its own: Spark then broadcasts it to the
    join instead of shuffling every decision. ``repeats=False`` (scv_dup_dec_hashes is empty): the same columns
    and no row, without reading the decisions again (Spark reads every decision to test the hash: 8 policies of
    4M events, 11.6 s)."""
    among = "hash(event_id, dt, policy_id) IN (SELECT hk FROM scv_dup_dec_hashes)" if repeats else "false"
    return f"""
SELECT event_id, dt, policy_id, count(1) AS dup_n, min(_rid) AS first_rid
FROM scv_dec WHERE {_KEYED} AND {among}
GROUP BY event_id, dt, policy_id HAVING count(1) > 1"""


def target_prob(pos: str, ad: str) -> str:
    """pi_pos(ad | x): the decision's probability of ``ad`` at position ``pos`` (SQL expressions; a joined row). A
    one-entry-per-position decision (``simple``) holds positions 1..n <= Kw in its columns d_a_k, d_p_k, so the
    wide positions read those (:func:`wide_target_prob`) and a position beyond them has probability 0."""
    return (f"CASE WHEN simple THEN 0D ELSE aggregate(filter(dslots, x -> x.position = {pos} AND x.ad_id = {ad}), "
            f"0D, (acc, x) -> acc + x.probability) END")


def wide_target_prob(k: int) -> str:
    """pi_k(a_k | x) for wide position k (null where the row does not hold k)."""
    lookup = (f"aggregate(filter(dslots, x -> x.position = {k} AND x.ad_id = a_{k}), 0D, "
              f"(acc, x) -> acc + x.probability)")
    return (f"CASE WHEN a_{k} IS NULL THEN NULL WHEN simple THEN CASE WHEN d_a_{k} = a_{k} THEN d_p_{k} ELSE 0D END "
            f"ELSE {lookup} END")


def target_ad(pos, k: int | None = None) -> str:
    """The deterministic target's ad at position ``pos`` (its entry with probability > 0); wide position k of a
    simple decision reads d_a_k."""
    lookup = f"try_element_at(filter(dslots, x -> x.position = {pos} AND x.probability > 0), 1).ad_id"
    simple = f"d_a_{k}" if k is not None else "CAST(NULL AS STRING)"
    return f"CASE WHEN simple THEN {simple} ELSE {lookup} END"


def sorted_entries(array: str) -> str:
    """``array`` of (position, ad_id, probability) entries sorted by position, then ad, then probability, a null
    entry first and a null field before any value, on both engines: inside a struct, Spark's ``sort_array`` orders
    a null field first and DuckDB's ``list_sort`` last (a quarantined decision with a null position listed its
    entries in another order on each). Only an array holding a null is sorted by the explicit key."""
    nulls = (f"size(filter({array}, s -> s IS NULL OR s.position IS NULL OR s.ad_id IS NULL "
             f"OR s.probability IS NULL)) > 0")
    key = ("named_struct('h', s IS NOT NULL, 'hp', s.position IS NOT NULL, 'p', s.position, "
           "'ha', s.ad_id IS NOT NULL, 'a', s.ad_id, 'hq', s.probability IS NOT NULL, 'q', s.probability, 's', s)")
    return (f"CASE WHEN {nulls} THEN transform(sort_array(transform({array}, s -> {key})), srt -> srt.s) "
            f"ELSE sort_array({array}) END")


def joined(cfg: RuleConfig, K: int, Kw: int, rewards: bool = True, ids: bool = False) -> str:
    """scv_joined: every decision row of the day, its rule flags, its event's clean flat columns (left join on
    (event_id, dt): the one join), DUPLICATE_DECISION (rows after the first read of a (policy_id, event_id); all of
    them with quarantine_all) from the repeated keys (scv_dup_dec) joined back, and ``det`` (deterministic: one ad of
    positive probability at each listed position, however its entries split it). Narrow:
    the tables compute pi_k, Y_k and the slate keys from these columns where they need them.

    ``sum_dev`` and ``det`` read the decision alone, so they are computed before the join, beside its row rules:
    on Spark the stage after the join (the join itself, its flags and ``clean``) then stays short enough for
    whole-stage code (spark.sql.codegen.hugeMethodLimit); with them after the join, every joined row ran without
    it (one policy's join 10.8-11.7 s against 7.3-8.2 s, 4M events, K = 3).

    A decision holding one entry per position 1..n, n <= Kw, in order (``simple``, nearly every writer's shape)
    travels as d_a_k, d_p_k (its entries are already sorted), taken from the list before the join, so the join
    carries scalars and not the list (DuckDB, 4M decisions: 2.3 -> 2.0 s); other shapes are sorted by position and
    keep the list ``dslots``, as does every quarantined row (a simple one's rebuilt from its columns).

    The slot rewards w_k travel only when ``rewards`` (a table declared ``slot_rewards`` is made,
    statistics/declarations.py: the ADC-based ones and reorder_pairs); the other tables read the slate reward r
    (DuckDB, 4M decisions: 2.05 -> 1.92 s without them). A clean row's event id travels only with ``ids`` (a table
    declared ``event_ids``: pair_moments, which joins two policies' rows of an event)."""
    ks = range(1, Kw + 1)
    ev_cols = ["logging_policy", "fold", "r", "miss", "n_slots", "xs"]
    ev_cols += [f"{c}_{k}" for k in ks for c in (("a", "mu", "w") if rewards else ("a", "mu"))]
    dup = "k.first_rid <> g._rid" if cfg.duplicates == "keep_first" else "k.dup_n > 1"
    # slots IS NOT NULL: Spark with ANSI off has size(NULL) = -1, which passed a decision without slots as simple
    simple = " AND ".join(["slots IS NOT NULL", f"size(slots) <= {Kw}"]
                          + [f"(size(slots) < {k} OR try_element_at(slots, {k}).position = {k})" for k in ks]) \
        if Kw else "false"
    det_simple = " AND ".join(f"coalesce(d_p_{k}, 1D) = 1D" for k in ks) or "true"
    # no wide position (no clean row): no simple decision, and Spark's greatest needs two arguments
    simple_dev = "greatest(" + ", ".join(f"abs(d_p_{k} - 1D)" for k in ks) + ", 0D)" if Kw else "0D"
    columns = "".join(f"CASE WHEN simple THEN try_element_at(slots, {k}).ad_id END AS d_a_{k}, "
                      f"CASE WHEN simple THEN try_element_at(slots, {k}).probability END AS d_p_{k}, " for k in ks)
    rebuilt = ", ".join(f"named_struct('position', {k}, 'ad_id', d_a_{k}, 'probability', d_p_{k})" for k in ks)
    as_read = f"filter(array({rebuilt}), x -> x.position <= d_n)" if Kw else "dslots"
    keyed = [*DECISION_KEYED, "PROBABILITY_SUM"]    # decided by the join and the sums, not by reason_mask's rules
    # event_id only where the quarantine needs it: the tables read the clean rows by their columns alone; the row
    # rules as one integer (checks.rules.reason_mask), read back as flags by what reads them (:func:`flagged`)
    keep = ["policy_id", "event_id" if ids else "CASE WHEN clean THEN NULL ELSE event_id END AS event_id", "dt",
            "base_policy", "simple",
            "sum_dev", "reasons", *map(flag, keyed), *ev_cols]
    out = keep + ["clean", "det",
                  f"CASE WHEN simple THEN CASE WHEN clean THEN NULL ELSE {as_read} END ELSE dslots END AS dslots"]
    out += [f"d_a_{k}" for k in ks] + [f"d_p_{k}" for k in ks]
    return f"""
WITH d AS (
  SELECT policy_id, event_id, dt, base_policy, _rid, simple, size(slots) AS d_n, {columns}
    CASE WHEN simple THEN NULL ELSE {sorted_entries('slots')} END AS dslots,
    {reason_mask(decision_rules(cfg))} AS reasons
  FROM (SELECT scv_dec.*, {simple} AS simple, {element_columns()} FROM scv_dec) s
), f AS (
  SELECT d.*, CASE WHEN simple THEN {simple_dev} ELSE {sum_deviation_sql('dslots')} END AS sum_dev,
    CASE WHEN simple THEN {det_simple} ELSE {listed_det('dslots')} END AS det
  FROM d
), g AS (
  SELECT f.*, coalesce(sum_dev > {float(cfg.sum_tolerance)!r}, false) AS {flag('PROBABILITY_SUM')}
  FROM f
), j AS (
  SELECT g.*, {", ".join(f"e.{c}" for c in ev_cols)},
    coalesce({dup}, false) AS {flag('DUPLICATE_DECISION')},
    g.event_id IS NOT NULL AND e.event_id IS NULL AND q.event_id IS NULL AS {flag('UNKNOWN_EVENT')},
    e.event_id IS NULL AND q.event_id IS NOT NULL AS {flag('EVENT_QUARANTINED')}
  FROM g LEFT JOIN scv_flat e ON g.event_id = e.event_id AND g.dt = e.dt
  LEFT JOIN scv_qkeys q ON g.event_id = q.event_id AND g.dt = q.dt
  LEFT JOIN scv_dup_dec k ON g.event_id = k.event_id AND g.dt = k.dt AND g.policy_id = k.policy_id
), p AS (
  SELECT j.*, NOT (reasons <> 0 OR {any_flag_sql(keyed)}) AS clean
  FROM j
)
SELECT {", ".join(out)}
FROM p"""


DET_PAIRWISE = 32   # det compares a decision's entries pairwise up to this many (quadratic: 20,000 took 26 s)


def listed_det(entries: str) -> str:
    """``det`` of a listed decision (``entries``): no entry of probability in (0, 1) shares its position with
    another ad of positive probability; pairwise up to DET_PAIRWISE entries, by distinct pairs beyond
    (:func:`_one_ad_per_position`)."""
    return (f"CASE WHEN size(filter({entries}, x -> x.probability > 0 AND x.probability < 1)) = 0 THEN true "
            f"WHEN size({entries}) <= {DET_PAIRWISE} THEN size(filter({entries}, x -> x.probability > 0 "
            f"AND x.probability < 1 AND size(filter({entries}, y -> y.position = x.position AND y.probability > 0 "
            f"AND y.ad_id <> x.ad_id)) > 0)) = 0 "
            f"ELSE {_one_ad_per_position(entries)} END")


def _one_ad_per_position(entries: str) -> str:
    """Each position of ``entries`` holds one ad of positive probability (as many distinct (position, ad) pairs as
    positions), for decisions of more than DET_PAIRWISE entries: sorting, not pairs (a decision of 20,000 entries
    stalled the join). Null fields left out, as the pairwise test leaves them (Spark's array_distinct keeps a null
    where DuckDB's drops it)."""
    held = f"filter({entries}, x -> x.probability > 0 AND x.position IS NOT NULL AND x.ad_id IS NOT NULL)"
    return (f"size(array_distinct(transform({held}, x -> named_struct('p', x.position, 'a', x.ad_id)))) "
            f"= size(array_distinct(transform({held}, x -> x.position)))")


def flagged(cfg: RuleConfig) -> str:
    """scv_joined with a flag column per row rule (read back from ``reasons``), for the counts and the quarantine."""
    return f"(SELECT scv_joined.*, {mask_flags(decision_rules(cfg))} FROM scv_joined)"


def _d_p(Kw: int) -> str:
    return ", ".join(not_nan(f"d_p_{k}") for k in range(1, Kw + 1)) or "CAST(NULL AS DOUBLE)"


def _fold(fn: str, Kw: int) -> str:
    """least/greatest of d_p_1..d_p_Kw; d_p_1 itself for one slot (Spark's least/greatest need two arguments)."""
    return f"{fn}({_d_p(Kw)})" if Kw > 1 else _d_p(Kw)


def decision_slots(Kw: int) -> str:
    """The decision's entries as an array of (position, ad_id, probability) structs: rebuilt from d_a_k, d_p_k
    for a clean one-entry-per-position decision (its sorted entries, and null entries for wide positions it does
    not hold: drop them with ``probability > 0`` or ``ad_id IS NOT NULL``), the stored list otherwise."""
    rebuilt = ", ".join(f"named_struct('position', {k}, 'ad_id', d_a_{k}, 'probability', d_p_{k})"
                        for k in range(1, Kw + 1))
    return f"CASE WHEN dslots IS NULL THEN array({rebuilt}) ELSE dslots END" if Kw else "dslots"


def decision_counts(Kw: int, cfg: RuleConfig = RuleConfig()) -> str:
    """Per dt: rows in, quarantined, rows per reason, the daily profile (probability range, largest deviation of
    a position's probabilities from 1) and the number of target policies."""
    reasons = ",\n  ".join(f"CAST(sum(CASE WHEN {flag(c)} THEN 1 ELSE 0 END) AS BIGINT) AS {c}"
                           for c in DECISION_REASONS)
    p = not_nan("x.probability")     # NaN left out of the ranges (rules.not_nan): PROBABILITY_OUT_OF_RANGE counts it
    return f"""
SELECT dt, count(1) AS rows,
  CAST(sum(CASE WHEN clean THEN 0 ELSE 1 END) AS BIGINT) AS quarantined,
  {reasons},
  min(CASE WHEN dslots IS NULL THEN {_fold('least', Kw)} ELSE array_min(transform(dslots, x -> {p})) END)
    AS min_probability,
  max(CASE WHEN dslots IS NULL THEN {_fold('greatest', Kw)} ELSE array_max(transform(dslots, x -> {p})) END)
    AS max_probability,
  max({not_nan("sum_dev")}) AS max_sum_deviation,
  count(DISTINCT policy_id) AS policies
FROM {flagged(cfg)} j GROUP BY dt"""


def quarantined(run_id: str, cfg: RuleConfig = RuleConfig()) -> str:
    """The quarantined decision rows as read (sorted entries), their reason codes and the run that set them aside."""
    return f"""
SELECT policy_id, event_id, dslots AS slots, base_policy, {codes_sql(DECISION_REASONS)} AS reason_codes,
  {text(run_id)} AS run_id, dt
FROM {flagged(cfg)} j WHERE NOT clean"""


def policy_count() -> str:
    """Distinct target policies in the decisions read (before any join): bounds the cost of what follows, before
    any per-policy row is fetched (a file of millions of policy ids stops here, exit 2)."""
    return "SELECT count(DISTINCT policy_id) AS policies FROM scv_dec"


def decision_policies(cfg: RuleConfig = RuleConfig()) -> str:
    """(dt, policy_id): the decision rows read per target policy, before any join (quarantined ones included):
    which policies have no clean decision at all (every event they decide quarantined), so that they are reported,
    not silently missing. Fetched once :func:`policy_count` is within the limit. A policy id longer than
    ``max_id_length`` is no policy to report: its rows are quarantined as ID_TOO_LONG and counted there."""
    return ("SELECT dt, policy_id, CAST(count(1) AS BIGINT) AS rows FROM scv_dec WHERE policy_id IS NOT NULL "
            f"AND length(policy_id) <= {int(cfg.max_id_length)} GROUP BY dt, policy_id")
