"""The row-level work of ``scavenger train`` as Spark SQL statements (DuckDB runs them through sqlglot).

Relations (names of the engine session): ``tr_logs`` / ``tr_sc_logs`` the conformed logs of the training / scoring
window (``engine.read``), and what the statements below build from them. Nothing row-level reaches the driver:
the learners get the aggregated table (contexts x ads x positions rows) and the distinct contexts.

Exact sums. A sum of doubles depends on the order of its terms, which differs between engines (and between Spark
runs). The learners' sufficient statistics are sums of rewards and of importance weights; they are summed as
DECIMAL(38, 14) (every term rounded once, the same way in both engines; the sum is then exact and
order-independent) and fetched as text, so both engines hand the learners bit-identical inputs, and the same model.
"""
from __future__ import annotations

import numpy as np

EXACT = "DECIMAL(38, 14)"
SLOT_TYPE = "struct<position:int,ad_id:string,probability:double>"


def double(x: float) -> str:
    """A DOUBLE literal that both engines parse to the same value (a bare 0.613 is a DECIMAL in Spark)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def exact_sum(expr: str) -> str:
    return f"CAST(sum(try_cast({expr} AS {EXACT})) AS STRING)"


# The context key's separators and their escapes ('~' first, so that an escape is never read as text): a text holding
# none of them (nearly all ids, keys and values) enters the key as it is, so keys stay readable ('#ctx7|f0=v3').
KEY_ESCAPES = (("~", "~~"), ("|", "~p"), (";", "~s"), ("=", "~e"), ("#", "~h"), ("&", "~a"))
KEY_NULL = "~n"     # a null map or a null value: no escaped text is this ('~' is always followed by ~ p s e h a)


def key_text(value: str) -> str:
    """``value`` with the key's separators escaped (KEY_ESCAPES): the Python twin of :func:`key_text_sql`."""
    for sep, esc in KEY_ESCAPES:
        value = value.replace(sep, esc)
    return value


def key_text_sql(expr: str) -> str:
    """``expr`` (a string, NULL stays NULL) with the key's separators escaped, as :func:`key_text`."""
    for sep, esc in KEY_ESCAPES:
        expr = f"replace({expr}, '{sep}', '{esc}')"
    return expr


def entry_sql(e: str = "e") -> str:
    """One map entry as text: key=value, both escaped, KEY_NULL for a null value ('k=' is the empty value)."""
    return f"concat({key_text_sql(f'{e}.key')}, '=', coalesce({key_text_sql(f'{e}.value')}, '{KEY_NULL}'))"


def ctx_key_sql() -> str:
    """The learners' context key: '#<context_id>' (nothing for a null id: a null id and an empty one differ), '|',
    then the context map's entries sorted by key, as ``entry_sql`` joined by ';' (KEY_NULL for a null map, '' for
    an empty one): '#ctx7|f0=v3;f1=v2'. Ids, keys and values are escaped (KEY_ESCAPES), so a bare '|', ';' or '='
    is always a separator and two different (context_id, context) pairs never share a key, whatever they hold:
    {'b': 'c;page=a'} is '#x|b=c~spage~ea' and {'page': 'a', 'b': 'c'} is '#x|b=c;page=a' (before the escapes both
    were '#x|b=c;page=a', one context with one slate)."""
    entries = f"array_join(transform(array_sort(map_entries(context)), e -> {entry_sql('e')}), ';')"
    return (f"concat(coalesce(concat('#', {key_text_sql('context_id')}), ''), '|', "
            f"CASE WHEN context IS NULL THEN '{KEY_NULL}' ELSE coalesce({entries}, '') END)")


def ctx_key(context_id, context) -> str:
    """The key of :func:`ctx_key_sql` in Python (``context``: a dict, or None): the reference the tests hold both
    engines to."""
    head = "" if context_id is None else "#" + key_text(context_id)
    if context is None:
        return f"{head}|{KEY_NULL}"
    body = ";".join(f"{key_text(k)}={KEY_NULL if v is None else key_text(v)}" for k, v in sorted(context.items()))
    return f"{head}|{body}"


def singles_sql() -> str:
    """The context's entries as text in key order (``entry_sql``, the key's escaping): its "k=v" feature tokens."""
    return f"transform(array_sort(map_entries(context)), e -> {entry_sql('e')})"


def length_flagged(relation: str, rules) -> str:
    """The contract's columns of the conformed logs ``relation`` and ``too_long``: the row holds an id, a context
    key or a value longer than ``rules.max_id_length`` (checks.rules.length_rules: what the evaluate pass
    quarantines as ID_TOO_LONG or CONTEXT_TOO_LONG). Train leaves such rows out and counts them: one 10 MB ad id
    crossed with every context token ran it out of memory."""
    from ..checks.rules import element_columns, length_rules
    from ..statistics.sql.logs import CONTRACT_COLUMNS

    too_long = " OR ".join(f"coalesce({expr}, false)" for _, expr in length_rules(rules, "to_json(context)"))
    return f"""
SELECT {CONTRACT_COLUMNS}, {too_long} AS too_long
FROM (SELECT {relation}.*, {element_columns()} FROM {relation}) l"""


def coef_case(adc: np.ndarray, position: str = "position") -> str:
    """C_position as a CASE over the ADC vector (NULL for a position without an ADC)."""
    whens = " ".join(f"WHEN {i} THEN {double(c)}" for i, c in enumerate(adc, start=1))
    return f"CASE {position} {whens} END"


def slot_rows(adc: np.ndarray, logs: str = "tr_logs") -> str:
    """One row per logged slot: dt, event_id, ctx_key, k (slate size), position, ad_id, propensity, reward, coef."""
    return f"""
SELECT dt, event_id, ctx_key, k, s.position AS position, s.ad_id AS ad_id, s.propensity AS propensity,
  s.reward AS reward, {coef_case(adc, 's.position')} AS coef
FROM (SELECT dt, event_id, {ctx_key_sql()} AS ctx_key, size(slots) AS k, explode(slots) AS s FROM {logs}) x"""


USABLE = "coef IS NOT NULL AND coef > 0 AND reward IS NOT NULL AND NOT isnan(reward) AND ad_id IS NOT NULL"


def slot_counts(slots: str = "tr_slots") -> str:
    """Training counts: events and slots, slots without an ADC, slots without a usable reward."""
    return f"""
SELECT CAST(count(DISTINCT event_id) AS BIGINT) AS events, CAST(count(1) AS BIGINT) AS slots,
  CAST(sum(CASE WHEN coef IS NULL OR coef <= 0 THEN 1 ELSE 0 END) AS BIGINT) AS no_adc,
  CAST(sum(CASE WHEN reward IS NULL OR isnan(reward) THEN 1 ELSE 0 END) AS BIGINT) AS null_reward
FROM {slots}"""


def aggregate(slots: str = "tr_slots") -> str:
    """Sufficient statistics of the usable slots per (ctx_key, ad_id, position): coef, n = impressions, s_r = sum of
    rewards, s_w = sum of r / (C_i mu_i K_t) over slots with a propensity (the importance weights of
    ``cost_sensitive``), n_no_propensity. Every learner's objective is a sum over slots whose terms depend on the
    slot only through (context, ad, position, reward[, weight]), so fitting on these rows is fitting on the slots.
    s_r and s_w come as exact decimal text (module docstring)."""
    ok_p = "propensity IS NOT NULL AND propensity > 0"
    return f"""
SELECT ctx_key, ad_id, position, max(coef) AS coef, CAST(count(1) AS BIGINT) AS n,
  {exact_sum('reward')} AS s_r,
  {exact_sum(f'CASE WHEN {ok_p} THEN reward / (coef * propensity * k) ELSE 0 END')} AS s_w,
  CAST(sum(CASE WHEN {ok_p} THEN 0 ELSE 1 END) AS BIGINT) AS n_no_propensity
FROM {slots}
WHERE {USABLE}
GROUP BY ctx_key, ad_id, position"""


def contexts(logs: str) -> str:
    """The distinct contexts of a window: ctx_key, context_id, singles ("k=v" entries in key order; NULL for a null
    map), n_rows (the window's rows with that context). Only the entries are built here (linear in the map); the
    pairs of ``interactions 2`` are built in ``features``, bounded per context (``max_pair_keys``)."""
    return f"""
SELECT ctx_key, first(context_id) AS context_id, first(singles) AS singles, CAST(count(1) AS BIGINT) AS n_rows
FROM (SELECT {ctx_key_sql()} AS ctx_key, context_id, {singles_sql()} AS singles FROM {logs}) c
GROUP BY ctx_key"""


def score_events(logs: str = "tr_sc_logs") -> str:
    """The events to decide for: one row per (dt, event_id) with its context (a duplicated id keeps one)."""
    return f"""
SELECT dt, event_id, min(ctx_key) AS ctx_key, min(context_id) AS context_id
FROM (SELECT dt, event_id, {ctx_key_sql()} AS ctx_key, context_id FROM {logs} WHERE event_id IS NOT NULL) e
GROUP BY dt, event_id"""


def uniform(seed: int, event: str = "event_id", ad: str = "ad_id") -> str:
    """A seeded uniform in [0, 1) per (event, ad) from md5 (52 bits): the same number in both engines."""
    return (f"CAST(conv(substr(md5(concat_ws('|', '{int(seed)}', 'policies', {event}, {ad})), 1, 13), 16, 10) "
            f"AS DOUBLE) / {double(2.0 ** 52)}")


def decided_union(parts: dict, events: str, cands: str, pids: str) -> str:
    """Every policy's choices (``parts``: policy_id -> relation of per-event choices) plus an empty slate for each
    scored event without any eligible ad, so that every event has a decision."""
    cols = "dt, event_id, slots, n_eligible, n_chosen, n_fallback_chosen, n_replaced"
    from ..statistics.sql.literals import text

    union = [f"SELECT {text(pid)} AS policy_id, {cols} FROM {rel}" for pid, rel in parts.items()]
    union.append(f"""
SELECT p.policy_id, e.dt, e.event_id, CAST(array() AS array<{SLOT_TYPE}>) AS slots, 0 AS n_eligible,
  0 AS n_chosen, 0 AS n_fallback_chosen, 0 AS n_replaced
FROM {events} e CROSS JOIN {pids} p
LEFT JOIN (SELECT DISTINCT dt, event_id FROM {cands}) c ON e.dt = c.dt AND e.event_id = c.event_id
WHERE c.event_id IS NULL""")
    return "\nUNION ALL\n".join(union)


def notes(m: int, decided: str = "tr_decided") -> str:
    """Per-event notes: fewer than m eligible ads, fallback-scored ads chosen, duplicates replaced."""
    return f"""
SELECT policy_id, event_id, n_eligible, n_chosen, n_fallback_chosen, n_replaced, n_chosen < {int(m)} AS fewer_than_m,
  dt
FROM {decided}
WHERE n_chosen < {int(m)} OR n_fallback_chosen > 0 OR n_replaced > 0"""


def policy_counts(m: int, decided: str = "tr_decided") -> str:
    return f"""
SELECT policy_id,
  CAST(sum(CASE WHEN n_eligible > 0 THEN 1 ELSE 0 END) AS BIGINT) AS events,
  CAST(sum(CASE WHEN n_eligible > 0 AND n_chosen < {int(m)} THEN 1 ELSE 0 END) AS BIGINT) AS short,
  CAST(sum(CASE WHEN n_eligible = 0 THEN 1 ELSE 0 END) AS BIGINT) AS empty,
  CAST(sum(n_fallback_chosen) AS BIGINT) AS fallback, CAST(sum(n_replaced) AS BIGINT) AS replaced
FROM {decided} GROUP BY policy_id"""
